import OfflineSync
import OfflineSyncService
import OfflineSyncWire

extension FuzzTarget {
    /// The native protocol's bodies, JSON and binary, as the server reads a client's and the
    /// client reads the server's.
    static let wireTargets: [FuzzTarget] = [
        FuzzTarget("json", "any JSON document, as every JSON body is read first (OfflineSyncWire.JSON)") { input throws(FuzzFinding) in
            guard let document = try refusing("JSON.parse", { try JSON.parse(input) }) else { return }
            try checkJSONRoundTrip(document)
        },
        FuzzTarget("native-push", "POST /v1/push: a JSON body with an `operations` array, each read by Wire.operation") { input throws(FuzzFinding) in
            guard let body = try refusing("JSON.parse", { try JSON.parse(input) }),
                  case .object = body, case .array(let items)? = body["operations"] else { return }
            guard let operations = try refusing("Wire.operation", {
                try items.enumerated().map { try Wire.operation($1, path: "operations[\($0)]") }
            }) else { return }
            for operation in operations {
                let again = try refusing("Wire.operation of its own output", { try Wire.operation(Wire.json(operation)) })
                try expect(again == operation, "an operation does not read back as written: \(operation) became \(String(describing: again))")
            }
        },
        FuzzTarget("native-pull", "POST /v1/pull and /v2/pull: a JSON body read by Wire.pullRequest") { input throws(FuzzFinding) in
            guard let body = try refusing("JSON.parse", { try JSON.parse(input) }),
                  let request = try refusing("Wire.pullRequest", { try Wire.pullRequest(body) }) else { return }
            let again = try refusing("Wire.pullRequest of its own output", { try Wire.pullRequest(Wire.json(request)) })
            try expect(again == request, "a pull request does not read back as written: \(request) became \(String(describing: again))")
        },
        FuzzTarget("native-pull-page", "a /v1/pull answer as the client reads it: JSON read by Wire.pullPage") { input throws(FuzzFinding) in
            guard let body = try refusing("JSON.parse", { try JSON.parse(input) }),
                  let page = try refusing("Wire.pullPage", { try Wire.pullPage(body) }) else { return }
            let again = try refusing("Wire.pullPage of its own output", { try Wire.pullPage(Wire.json(page)) })
            try expect(again == page, "a pull page does not read back as written: \(page) became \(String(describing: again))")
        },
        FuzzTarget("binary-push", "POST /v2/push: PushBatch's binary operations, decoded with room for the server's fields") { input throws(FuzzFinding) in
            guard let operations = try refusing("PushBatch.decodeOperations", {
                try input.withUnsafeBytes { try PushBatch.decodeOperations($0, reservingExtraFields: OfflineSyncService.fieldsAddedToPushedItems) }
            }) else { return }
            let bytes = PushBatch.encode(operations: operations)
            let again = try refusing("PushBatch.decodeOperations of its own output", { try bytes.withUnsafeBytes { try PushBatch.decodeOperations($0) } })
            try expect(again == operations, "a binary push does not read back as written")
        },
        FuzzTarget("binary-push-answer", "a /v2/push answer as the client reads it: PushBatch.decodeResults for a fixed batch") { input throws(FuzzFinding) in
            guard let results = try refusing("PushBatch.decodeResults", {
                try input.withUnsafeBytes { try PushBatch.decodeResults($0, answering: answeredBatch) }
            }) else { return }
            try expect(results.count == answeredBatch.count, "an answer of \(results.count) results was accepted for \(answeredBatch.count) operations")
            let bytes = PushBatch.encode(results: results, answering: answeredBatch)
            let again = try refusing("PushBatch.decodeResults of its own output", {
                try bytes.withUnsafeBytes { try PushBatch.decodeResults($0, answering: answeredBatch) }
            })
            try expect(again == results, "a binary push answer does not read back as written")
        },
        FuzzTarget("page-stream", "a /v2/pull answer as the client reads it: PageStreamDecoder fed in two slices") { input throws(FuzzFinding) in
            // The first byte chooses where the rest is cut, as the network may cut it.
            guard let first = input.first else { return }
            let stream = Array(input.dropFirst())
            let cut = stream.isEmpty ? 0 : Int(first) % (stream.count + 1)
            var decoder = PageStreamDecoder(maxFrameBytes: 1 << 20)
            var frames: [PageStream.Frame] = []
            let completed = try refusing("PageStreamDecoder", { () throws -> Bool in
                for slice in [stream[..<cut], stream[cut...]] {
                    Array(slice).withUnsafeBytes { decoder.append($0) }
                    while let frame = try decoder.next() { frames.append(frame) }
                }
                return true
            }) ?? false
            guard completed else { return }
            // What was read, written again, reads back the same.
            var out = PageStream.header
            for frame in frames {
                switch frame {
                case .page(let page): PageStream.write(page, into: &out)
                case .end: PageStream.writeEnd(into: &out)
                case .failure(let status, let error, let message): PageStream.writeFailure(status: status, error: error, message: message, into: &out)
                }
            }
            var again = PageStreamDecoder(maxFrameBytes: 1 << 20)
            let reread = try refusing("PageStreamDecoder of its own output", { () throws -> [PageStream.Frame] in
                out.withUnsafeBytes { again.append($0) }
                var frames: [PageStream.Frame] = []
                while let frame = try again.next() { frames.append(frame) }
                return frames
            })
            try expect(reread == frames, "a page stream does not read back as written")
        },
    ]

    /// The batch the push-answer target's answers answer: an insert, an update and a delete.
    static let answeredBatch: [PushOperation] = [
        PushOperation(id: "op-1", table: "todos", itemId: "a", kind: .insert,
                      item: Record(id: "a", fields: ["title": .string("milk"), "done": .bool(false)]), baseVersion: nil),
        PushOperation(id: "op-2", table: "todos", itemId: "b", kind: .update,
                      item: Record(id: "b", fields: ["title": .string("eggs"), "count": .int(12)]), baseVersion: "3"),
        PushOperation(id: "op-3", table: "todos", itemId: "c", kind: .delete, item: nil, baseVersion: "7"),
    ]

    /// Throws unless `document`, written and parsed again, is the same document.
    static func checkJSONRoundTrip(_ document: JSON) throws(FuzzFinding) {
        var out: [UInt8] = []
        document.write(into: &out)
        let again = try refusing("JSON.parse of its own output", { try JSON.parse(out) })
        try expect(again == document, "a JSON document does not read back as written: \(text(out))")
    }
}
