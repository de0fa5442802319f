/// Models to records and back for the typed API, with every failure a ``SyncError``: the
/// app handles one error type, and the message names the model and the field.
enum ModelCoding {
    /// `record` as a `Model`. Throws ``SyncError/Code/typeMismatch`` naming the model, the
    /// field and what did not fit; the `DecodingError` is kept as ``SyncError/underlying``.
    static func decode<Model: SyncModel>(_ type: Model.Type, from record: Record, decoder: RecordDecoder = RecordDecoder()) throws -> Model {
        do {
            return try decoder.decode(Model.self, from: record)
        } catch let error as DecodingError {
            throw SyncError(.typeMismatch, "a '\(Model.tableName)' record does not decode as \(Model.self): \(describe(error))",
                            underlying: error)
        }
    }

    /// `model` as a record. Throws ``SyncError/Code/invalidValue`` naming the model and the
    /// field; the `EncodingError` is kept as ``SyncError/underlying``. Errors the encoder
    /// throws as ``SyncError`` already (a value no store can keep) pass through.
    static func encode<Model: SyncModel>(_ model: Model) throws -> Record {
        let record: Record
        do {
            record = try RecordEncoder().encode(model)
        } catch let error as EncodingError {
            throw SyncError(.invalidValue, "\(Model.self) does not encode as a record: \(describe(error))", underlying: error)
        }
        // Lookups by id use `recordId`: an id that encodes otherwise could never be found.
        guard record.id == model.id.recordId else {
            throw SyncError(.invalidValue, "\(Model.self): field 'id' encodes as '\(record.id)' but its recordId is '\(model.id.recordId)'")
        }
        return record
    }

    /// The field and the reason, from the error's coding path and description.
    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, let context):
            return "field '\(path(context.codingPath + [key]))' is missing"
        case .valueNotFound(_, let context), .typeMismatch(_, let context), .dataCorrupted(let context):
            return "field '\(path(context.codingPath))': \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    static func describe(_ error: EncodingError) -> String {
        switch error {
        case .invalidValue(_, let context):
            return "field '\(path(context.codingPath))': \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.isEmpty ? "(the record)" : keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
}
