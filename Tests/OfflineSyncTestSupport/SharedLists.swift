import OfflineSync
import OfflineSyncService

/// The shared-lists rules the shared-data tests use (Docs/SyncRules.md's first example
/// without roles): a list's owner and members read it, members read and write its todos,
/// members and the member named read its membership rows, and a list's owner adds members.
/// With `ownerReadsMembers` the owner also reads its lists' membership rows; without it, a
/// membership its owner adds is a row the owner may write but not read back.
package func sharedListsRules(ownerReadsMembers: Bool) -> SyncRules {
    let memberRead = [Grant(.member("list_members", key: "list_id", roles: nil)), Grant(.identityField("user_id"))]
    return SyncRules(
        memberships: ["list_members": Membership(table: "list_members", member: "user_id", group: "list_id")],
        tables: [
            "lists": TableRules(read: [Grant(.owner), Grant(.member("list_members", key: SystemField.id, roles: nil))],
                                write: [Grant(.owner)]),
            "todos": TableRules(read: [Grant(.member("list_members", key: "list_id", roles: nil))],
                                write: [Grant(.member("list_members", key: "list_id", roles: nil))]),
            "list_members": TableRules(read: memberRead + (ownerReadsMembers ? [Grant(.ownerOf("lists", key: "list_id"))] : []),
                                       write: [Grant(.ownerOf("lists", key: "list_id"))]),
        ])
}

/// The tables of the shared-lists rules.
package let sharedListsTables = ["lists", "list_members", "todos"]

/// What the shared-lists rules let `identity` read, computed
/// straight from the server's stored rows: a second, independent statement of the rules, by
/// table and id, in the form a client stores (no server columns, no tombstones).
/// With `includingTombstones`, deleted rows the identity may read are counted too (as the
/// service serves them: a tombstone is judged by the grants, as stored).
package func sharedListsOracle(serverStore: any LocalStore, identity: String, includingTombstones: Bool = false,
                               ownerReadsMembers: Bool = false) async throws -> [String: [String: Record]] {
    let stored = try await serverStore.read { txn -> [String: [Record]] in
        var all: [String: [Record]] = [:]
        let defined = Set(try txn.tables().map(\.name))
        for table in sharedListsTables where defined.contains(table) {
            all[table] = try txn.records(in: table, matching: .all)
        }
        return all
    }
    let all = includingTombstones ? stored : stored.mapValues { $0.filter { !$0.deleted } }
    let memberships = (stored["list_members"] ?? []).filter { !$0.deleted }.compactMap { row -> (String, String)? in
        guard let list = row["list_id"].stringValue, let user = row["user_id"].stringValue else { return nil }
        return (list, user)
    }
    let mine = Set(memberships.filter { $0.1 == identity }.map(\.0))
    let owned = Set((stored["lists"] ?? []).filter { !$0.deleted && $0["__owner"].stringValue == identity }.map(\.id))
    func publicCopy(_ row: Record) -> Record {
        Record(id: row.id, fields: row.fields.filter { !$0.key.hasPrefix("__") }, version: row.version, updatedAt: row.updatedAt)
    }
    var view: [String: [String: Record]] = [:]
    for (table, rows) in all {
        let visible = rows.filter { row in
            switch table {
            case "lists": return row["__owner"].stringValue == identity || mine.contains(row.id)
            case "todos": return row["list_id"].stringValue.map(mine.contains) ?? false
            default:
                let list = row["list_id"].stringValue
                return row["user_id"].stringValue == identity || (list.map(mine.contains) ?? false)
                    || (ownerReadsMembers && (list.map(owned.contains) ?? false))
            }
        }
        if !visible.isEmpty { view[table] = Dictionary(uniqueKeysWithValues: visible.map { ($0.id, publicCopy($0)) }) }
    }
    return view
}

/// A client's shared-lists tables, in the oracle's form.
package func sharedListsLocalView(_ context: SyncContext) async throws -> [String: [String: Record]] {
    var view: [String: [String: Record]] = [:]
    for table in sharedListsTables {
        let rows = try await context.table(table).query()
        if !rows.isEmpty { view[table] = Dictionary(uniqueKeysWithValues: rows.map { ($0.id, $0) }) }
    }
    return view
}

/// One random step of a client in the shared-lists differential tests: create a list (with
/// the creator's membership), try to add a member (only a list's owner may), delete a
/// membership it sees (refused unless it owns the list), add a todo to any list (refused
/// unless a member), edit a todo it sees — or, for the sixth roll, nothing: returns `false`
/// then, and the caller syncs and checks.
package func sharedListsRandomStep<G: RandomNumberGenerator>(_ client: SyncContext, who: String, identities: [String], step: Int,
                                                             lists: inout [String], random: inout G,
                                                             trace: Bool = false) async throws -> Bool {
    let action = random.next() % 6
    if trace { print("step \(step): \(who) action \(action)") }
    switch action {
    case 0:
        let id = "L\(step)"
        _ = try await client.table("lists").insert(Record(id: id, fields: ["name": .string("list \(step)")]))
        _ = try await client.table("list_members").insert(Record(id: "m-\(id)-\(who)", fields: ["list_id": .string(id), "user_id": .string(who)]))
        lists.append(id)
    case 1 where !lists.isEmpty:
        let list = lists[Int(random.next() % UInt64(lists.count))]
        let member = identities[Int(random.next() % UInt64(identities.count))]
        let id = "m-\(list)-\(member)"
        if trace { print("  add \(id)") }
        if try await client.table("list_members").get(id) == nil {
            _ = try await client.table("list_members").insert(Record(id: id, fields: ["list_id": .string(list), "user_id": .string(member)]))
        }
    case 2:
        if let row = try await client.table("list_members").query().randomElement(using: &random) {
            if trace { print("  delete \(row.id)") }
            try await client.table("list_members").delete(id: row.id)
        }
    case 3 where !lists.isEmpty:
        let list = lists[Int(random.next() % UInt64(lists.count))]
        _ = try await client.table("todos").insert(Record(id: "t\(step)", fields: ["list_id": .string(list), "title": .string("todo \(step)")]))
    case 4:
        if var row = try await client.table("todos").query().randomElement(using: &random) {
            row.fields["title"] = .string("edited \(step) by \(who)")
            _ = try await client.table("todos").update(row)
        }
    case 5:
        return false
    default:
        break
    }
    return true
}

/// The shared-lists tests' sync: pushes and dismisses every refusal or failure (the app's
/// choice here: the server's state wins, whatever the policy kept) until none is left — an
/// operation queued behind a dismissed one is sent only by the next push — then pulls every
/// table incrementally.
@discardableResult
package func sharedListsSync(_ context: SyncContext) async throws -> [PullSummary] {
    for _ in 0..<5 {
        _ = try await context.push()
        let errors = try await context.operationErrors()
        if errors.isEmpty { break }
        for error in errors { try await context.resolve(error, with: .discard) }
    }
    var summaries: [PullSummary] = []
    for table in sharedListsTables { summaries.append(try await context.pull(table, queryId: table)) }
    return summaries
}
