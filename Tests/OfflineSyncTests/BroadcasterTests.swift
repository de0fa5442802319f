import OfflineSync
import Testing

@Suite("Broadcaster: the one fan-out")
struct BroadcasterTests {
    @Test("a subscriber hears its topic only, in publication order")
    func topics() async {
        let broadcaster = Broadcaster<String, Int>(bufferingPolicy: .unbounded)
        var alice = broadcaster.subscribe(to: "alice").makeAsyncIterator()
        var bob = broadcaster.subscribe(to: "bob").makeAsyncIterator()
        broadcaster.publish(1, to: "bob")
        broadcaster.publish(2, to: "alice")
        broadcaster.publish(3, to: "alice")
        #expect(await alice.next() == 2)
        #expect(await alice.next() == 3)
        #expect(await bob.next() == 1)
        #expect(broadcaster.subscriptionCount == 2)
    }

    @Test("a replaying broadcaster starts each new stream with the latest element; unchanged values are not published")
    func replay() async {
        let broadcaster = Broadcaster<SingleTopic, Bool>(bufferingPolicy: .bufferingNewest(1), replaysLatest: true)
        #expect(broadcaster.latest == nil)
        broadcaster.publish(true)
        var early = broadcaster.subscribe().makeAsyncIterator()
        #expect(await early.next() == true)
        #expect(broadcaster.publishIfChanged(true, to: .all) == false)
        #expect(broadcaster.publishIfChanged(false, to: .all) == true)
        #expect(await early.next() == false)
        var late = broadcaster.subscribe().makeAsyncIterator()
        #expect(await late.next() == false)
        #expect(broadcaster.latest == false)
    }

    @Test("finishing ends every stream, and streams opened afterwards end at once")
    func finish() async {
        let broadcaster = Broadcaster<SingleTopic, Int>(bufferingPolicy: .unbounded)
        var open = broadcaster.subscribe().makeAsyncIterator()
        broadcaster.publish(7)
        broadcaster.finish()
        #expect(await open.next() == 7)
        #expect(await open.next() == nil)
        var late = broadcaster.subscribe().makeAsyncIterator()
        #expect(await late.next() == nil)
        #expect(broadcaster.subscriptionCount == 0)
    }

    @Test("a consumer that stops listening is unsubscribed")
    func unsubscribe() async {
        let broadcaster = Broadcaster<String, Int>(bufferingPolicy: .unbounded)
        let stream = broadcaster.subscribe(to: "alice")
        #expect(broadcaster.subscriptionCount == 1)
        let listening = Task { for await _ in stream {} }
        listening.cancel()
        await listening.value
        #expect(broadcaster.subscriptionCount == 0)
    }
}

@Suite("CompositeKey: ids made of several strings")
struct CompositeKeyTests {
    @Test("the two stored layouts are exactly as before")
    func layouts() {
        #expect(CompositeKey.slashed("alice", last: "item-1") == "5:alice/item-1")
        #expect(CompositeKey.slashed("alice", "prefs", last: "theme") == "5:alice/5:prefs/theme")
        #expect(CompositeKey.slashed("é😀", last: "") == "6:é😀/")
        #expect(CompositeKey.slashed(String(repeating: "x", count: 300), last: "é") == "300:" + String(repeating: "x", count: 300) + "/é")
        #expect(CompositeKey.packed("pool", "id") == "4:pool2:id")
        #expect(CompositeKey.packed("é", last: "x") == "2:éx")
    }

    @Test("no choice of parts makes two ids equal")
    func unambiguous() {
        #expect(CompositeKey.slashed("a/b", last: "c") != CompositeKey.slashed("a", last: "b/c"))
        #expect(CompositeKey.packed("1:a", last: "") != CompositeKey.packed("1", last: ":a"))
    }

    @Test("unpack reads the leading parts back and refuses what is not in the form")
    func unpack() throws {
        let key = CompositeKey.packed("identity", "pool", "é/😀", last: "42")
        let (parts, rest) = try #require(CompositeKey.unpack(Substring(key), count: 3))
        #expect(parts == ["identity", "pool", "é/😀"])
        #expect(rest == "42")
        #expect(CompositeKey.unpack("x:abc", count: 1) == nil)
        #expect(CompositeKey.unpack("9:abc", count: 1) == nil)
        #expect(CompositeKey.unpack("0:", count: 1) == nil)
    }
}
