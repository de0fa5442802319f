/// A file that travels with a record: immutable, named by the SHA-256 of its bytes.
///
/// A record holds an attachment as an ordinary field whose value is an object of this
/// shape (as every store, the binary wire and the Datasync tables API carry it; the native
/// JSON API, `/v1/push` and `/v1/pull`, escapes keys that start with `$` and writes the first
/// key `"$$attachment"`: Docs/Attachments.md, "The reference on each API"):
///
/// ```json
/// {"$attachment": "<64 lowercase hex digits>", "size": 1234, "contentType": "image/jpeg", "fileName": "a.jpg"}
/// ```
///
/// `fileName` is optional. An object with the `$attachment` key and any other shape is not
/// a valid value: a write holding one fails with ``SyncError/Code/invalidValue``. Models use
/// `Attachment` as a property type; its `Codable` form is that object.
///
/// Create one with ``SyncContext/addAttachment(_:contentType:fileName:)`` (or its file
/// variant), which stores the bytes locally; write it into a record to have the bytes
/// uploaded before the record's change is pushed.
public struct Attachment: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The SHA-256 of the bytes, as 64 lowercase hexadecimal digits.
    public let sha256: String
    /// The number of bytes.
    public let size: Int64
    /// The media type the app gave (for example `image/jpeg`); not checked against the bytes.
    public let contentType: String
    /// The file name the app gave, if any: a label, never a path on any device.
    public let fileName: String?

    /// The object key that marks an attachment reference.
    public static let marker = "$attachment"

    /// Creates a reference. Throws ``SyncError/Code/invalidValue`` when the hash is not 64
    /// lowercase hexadecimal digits or the size is negative.
    public init(sha256: String, size: Int64, contentType: String, fileName: String? = nil) throws {
        guard Attachment.isHash(sha256) else {
            throw SyncError(.invalidValue, "an attachment's sha256 must be 64 lowercase hexadecimal digits")
        }
        guard size >= 0 else { throw SyncError(.invalidValue, "an attachment's size cannot be negative") }
        self.sha256 = sha256
        self.size = size
        self.contentType = contentType
        self.fileName = fileName
    }

    /// The field value a record stores.
    public var value: Value {
        var object: [String: Value] = [Attachment.marker: .string(sha256), "size": .int(size), "contentType": .string(contentType)]
        if let fileName { object["fileName"] = .string(fileName) }
        return .object(object)
    }

    /// Reads a reference from a field value: `nil` when the value is not an object with the
    /// `$attachment` key; ``SyncError/Code/invalidValue`` when it has the key but not the shape.
    public init?(value: Value) throws {
        guard case .object(let object) = value, let marker = object[Attachment.marker] else { return nil }
        guard case .string(let hash) = marker, case .int(let size)? = object["size"],
              case .string(let contentType)? = object["contentType"] else {
            throw SyncError(.invalidValue, "an attachment reference needs '$attachment' (a hash), 'size' (an integer) and 'contentType' (a string)")
        }
        var fileName: String?
        switch object["fileName"] {
        case nil: fileName = nil
        case .string(let name)?: fileName = name
        default: throw SyncError(.invalidValue, "an attachment reference's 'fileName' must be a string")
        }
        let allowed = object["fileName"] == nil ? 3 : 4
        guard object.count == allowed else {
            throw SyncError(.invalidValue, "an attachment reference has only '$attachment', 'size', 'contentType' and 'fileName'")
        }
        try self.init(sha256: hash, size: size, contentType: contentType, fileName: fileName)
    }

    /// Every attachment a record references, at any depth of its fields, each hash once.
    /// Throws ``SyncError/Code/invalidValue`` for a malformed reference.
    public static func references(in record: Record) throws -> [Attachment] {
        try references(in: record.fields)
    }

    /// The attachments a record with these fields references (as the record's own
    /// overload finds them), for a caller that has the fields without a record: the server,
    /// for each pushed item.
    package static func references(in fields: [String: Value]) throws -> [Attachment] {
        let (found, malformed) = scan(fields)
        if let first = malformed.first { throw first }
        return found
    }

    /// Every well-formed reference in the fields, each hash once, and the errors of the
    /// malformed ones, which hide none of the others: what a pull and the cache sweep read,
    /// where one bad reference from the remote must not cost a good one its row or its file.
    package static func scan(_ fields: [String: Value]) -> (references: [Attachment], malformed: [SyncError]) {
        var found: [Attachment] = [], malformed: [SyncError] = []
        for value in fields.values where value.mayHoldAttachment {
            collect(value, into: &found, malformed: &malformed)
        }
        guard found.count > 1 else { return (found, malformed) }
        var seen = Set<String>()
        return (found.filter { seen.insert($0.sha256).inserted }, malformed)
    }

    private static func collect(_ value: Value, into found: inout [Attachment], malformed: inout [SyncError]) {
        switch value {
        case .object(let object):
            do {
                if let attachment = try Attachment(value: value) { found.append(attachment); return }
            } catch {
                malformed.append(error as? SyncError ?? SyncError(.invalidValue, "a malformed attachment reference"))
                return
            }
            for item in object.values where item.mayHoldAttachment { collect(item, into: &found, malformed: &malformed) }
        case .array(let items):
            for item in items where item.mayHoldAttachment { collect(item, into: &found, malformed: &malformed) }
        default: break
        }
    }

    /// Whether `text` is 64 lowercase hexadecimal digits.
    public static func isHash(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }
    }

    /// `sha256 (size bytes, contentType)`.
    public var description: String { "\(sha256.prefix(12))… (\(size) bytes, \(contentType))" }

    private enum CodingKeys: String, CodingKey {
        case sha256 = "$attachment", size, contentType, fileName
    }

    /// Decodes the object form, checking the hash and size as ``init(sha256:size:contentType:fileName:)`` does.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(sha256: try container.decode(String.self, forKey: .sha256),
                      size: try container.decode(Int64.self, forKey: .size),
                      contentType: try container.decode(String.self, forKey: .contentType),
                      fileName: try container.decodeIfPresent(String.self, forKey: .fileName))
    }

    /// Encodes the object form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sha256, forKey: .sha256)
        try container.encode(size, forKey: .size)
        try container.encode(contentType, forKey: .contentType)
        try container.encodeIfPresent(fileName, forKey: .fileName)
    }
}

extension Value {
    /// Whether the value is an object or an array, the only kinds that can hold an attachment.
    package var mayHoldAttachment: Bool {
        switch self {
        case .object, .array: return true
        default: return false
        }
    }
}
