import Foundation
import OfflineSync
import Testing

// MARK: - Fixtures

private enum Priority: String, Codable, Sendable, Equatable {
    case low, high
}

private enum Shape: Codable, Sendable, Equatable {
    case circle(radius: Double)
    case rect(width: Int, height: Int)
    case labeled(String, Int)
    case none
}

private struct Address: Codable, Sendable, Equatable {
    var street: String
    var zip: Int?
}

/// A model holding every supported kind of property.
private struct Everything: SyncModel, Equatable {
    static let tableName = "everything"
    var id: String
    var bool: Bool
    var int: Int
    var int8: Int8
    var int16: Int16
    var int32: Int32
    var int64Min: Int64
    var int64Max: Int64
    var uint: UInt
    var uint8: UInt8
    var uint16: UInt16
    var uint32: UInt32
    var uint64: UInt64
    var float: Float
    var double: Double
    var negativeZero: Double
    var infinity: Double
    var string: String
    var data: Data
    var byteArray: [UInt8]
    var date: Date
    var timestamp: Timestamp
    var url: URL
    var uuid: UUID
    var priority: Priority
    var address: Address
    var addresses: [Address]
    var optionalNil: String?
    var optionalSome: String?
    var optionalInts: [Int?]
    var tags: [String: Int]
    var intKeyed: [Int: String]
    var enumKeyed: [Priority: Int]
    var matrix: [[Int]]
    var shape: Shape
    var shapes: [Shape]
    var extra: [String: Value]
    var maybeValue: Value?

    static let sample = Everything(
        id: "item-1",
        bool: true,
        int: -42,
        int8: .min,
        int16: .max,
        int32: .min,
        int64Min: .min,
        int64Max: .max,
        uint: 7,
        uint8: .max,
        uint16: .max,
        uint32: .max,
        uint64: UInt64(Int64.max),
        float: 1.5,
        double: 0.1,
        negativeZero: -0.0,
        infinity: .infinity,
        string: "héllo \u{1F30D}",
        data: Data([0, 1, 2, 255]),
        byteArray: [9, 8, 7],
        date: Date(timeIntervalSince1970: 1_700_000_000.123),
        timestamp: Timestamp(millisecondsSince1970: -86_400_001),
        url: URL(string: "https://example.com/a%20b?q=1#frag")!,
        uuid: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
        priority: .high,
        address: Address(street: "Main St", zip: nil),
        addresses: [Address(street: "A", zip: 1), Address(street: "B", zip: nil)],
        optionalNil: nil,
        optionalSome: "present",
        optionalInts: [1, nil, 3],
        tags: ["a": 1, "b": 2],
        intKeyed: [1: "one", -2: "minus two"],
        enumKeyed: [.low: 1],
        matrix: [[1, 2], [], [3]],
        shape: .circle(radius: 2.5),
        shapes: [.rect(width: 2, height: 3), .labeled("x", 4), .none],
        extra: [
            "n": .null, "b": .bool(false), "i": .int(.min), "d": .double(-0.0), "s": .string("s"),
            "bytes": .bytes([1, 2]), "date": .date(Timestamp(millisecondsSince1970: 5)),
            "list": [.int(1), .null, .string("x")], "obj": ["k": .double(2.5)],
        ],
        maybeValue: nil
    )
}

private struct Synced: SyncModel, Equatable {
    static let tableName = "synced"
    var id: String
    var title: String
    var version: String?
    var updatedAt: Date?
    var deleted: Bool
}

private struct SyncedWithTimestamp: SyncModel, Equatable {
    static let tableName = "synced"
    var id: String
    var version: String?
    var updatedAt: Timestamp?
}

private struct Plain: SyncModel, Equatable {
    static let tableName = "plain"
    var id: String
    var title: String
}

private struct Counter: Codable, Equatable {
    var id: String
    var count: Int
}

private struct Small: Codable, Equatable {
    var id: String
    var small: UInt8
}

private struct IntegerId: Codable {
    var id: Int
    var name: String
}

private struct NoId: Codable {
    var name: String
}

private struct Numbers: Codable, Equatable {
    var id: String
    var double: Double
    var float: Float
    var int: Int
}

private struct ListModel: Codable, Equatable {
    var id: String
    var addresses: [Address]
}

private struct Unsigned: Codable {
    var id: String
    var values: [UInt64]
}

private struct Secret: Codable {
    var id: String
    var pin: UInt64
}

/// Exercises every container kind by hand: nested keyed and unkeyed containers from keyed
/// and unkeyed parents, superEncoder/superDecoder (default and keyed), and single values.
private struct HandWritten: Codable, Equatable {
    var id: String
    var point: (x: Int, y: Int)
    var pairs: [[String]]
    var parent: String
    var custom: String
    var trailing: [Int]

    enum CodingKeys: String, CodingKey { case id, point, pairs, custom, list }
    enum PointKeys: String, CodingKey { case x, y }

    init(id: String, point: (x: Int, y: Int), pairs: [[String]], parent: String, custom: String, trailing: [Int]) {
        (self.id, self.point, self.pairs, self.parent, self.custom, self.trailing) = (id, point, pairs, parent, custom, trailing)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        var point = container.nestedContainer(keyedBy: PointKeys.self, forKey: .point)
        try point.encode(self.point.x, forKey: .x)
        try point.encode(self.point.y, forKey: .y)
        var pairs = container.nestedUnkeyedContainer(forKey: .pairs)
        for pair in self.pairs {
            var inner = pairs.nestedUnkeyedContainer()
            for item in pair { try inner.encode(item) }
        }
        var parent = container.superEncoder().singleValueContainer()
        try parent.encode(self.parent)
        var custom = container.superEncoder(forKey: .custom).singleValueContainer()
        try custom.encode(self.custom)
        var list = container.nestedUnkeyedContainer(forKey: .list)
        var keyed = list.nestedContainer(keyedBy: PointKeys.self)
        try keyed.encode(self.point.x, forKey: .x)
        var superValue = list.superEncoder().singleValueContainer()
        try superValue.encode(trailing)
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        let point = try container.nestedContainer(keyedBy: PointKeys.self, forKey: .point)
        self.point = (try point.decode(Int.self, forKey: .x), try point.decode(Int.self, forKey: .y))
        var pairs = try container.nestedUnkeyedContainer(forKey: .pairs)
        var decodedPairs: [[String]] = []
        while !pairs.isAtEnd {
            var inner = try pairs.nestedUnkeyedContainer()
            var items: [String] = []
            while !inner.isAtEnd { items.append(try inner.decode(String.self)) }
            decodedPairs.append(items)
        }
        self.pairs = decodedPairs
        parent = try container.superDecoder().singleValueContainer().decode(String.self)
        custom = try container.superDecoder(forKey: .custom).singleValueContainer().decode(String.self)
        var list = try container.nestedUnkeyedContainer(forKey: .list)
        let keyed = try list.nestedContainer(keyedBy: PointKeys.self)
        _ = try keyed.decode(Int.self, forKey: .x)
        trailing = try list.superDecoder().singleValueContainer().decode([Int].self)
        #expect(list.isAtEnd)
    }

    static func == (lhs: HandWritten, rhs: HandWritten) -> Bool {
        lhs.id == rhs.id && lhs.point == rhs.point && lhs.pairs == rhs.pairs && lhs.parent == rhs.parent
            && lhs.custom == rhs.custom && lhs.trailing == rhs.trailing
    }
}

/// Decodes three integers from an array.
private struct Triple: Codable {
    var values: (Int, Int, Int)
    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        values = (try container.decode(Int.self), try container.decode(Int.self), try container.decode(Int.self))
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(values.0)
        try container.encode(values.1)
        try container.encode(values.2)
    }
}

private struct TripleHolder: Codable {
    var id: String
    var triple: Triple
}

private class Animal: Codable {
    var name: String
    init(name: String) { self.name = name }
}

private final class Dog: Animal {
    var goodBoy: Bool
    init(name: String, goodBoy: Bool) {
        self.goodBoy = goodBoy
        super.init(name: name)
    }
    enum CodingKeys: String, CodingKey { case goodBoy }
    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        goodBoy = try container.decode(Bool.self, forKey: .goodBoy)
        try super.init(from: container.superDecoder())
    }
    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(goodBoy, forKey: .goodBoy)
        try super.encode(to: container.superEncoder())
    }
}

private struct Kennel: Codable {
    var id: String
    var dog: Dog
}

private let userInfoKey = CodingUserInfoKey(rawValue: "test.prefix")!

private struct UsesUserInfo: Codable, Equatable {
    var id: String
    var name: String
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode((encoder.userInfo[userInfoKey] as? String ?? "") + name, forKey: .name)
    }
    enum CodingKeys: String, CodingKey { case id, name }
}

// MARK: - Helpers

/// Runs `body`, expecting an `EncodingError.invalidValue`, and returns its context.
private func expectInvalidValue(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> EncodingError.Context? {
    do {
        try body()
        Issue.record("expected an EncodingError", sourceLocation: sourceLocation)
    } catch EncodingError.invalidValue(let value, let context) {
        #expect(value is RecordEncoder.RedactedValue, "the payload must not carry the value", sourceLocation: sourceLocation)
        return context
    } catch {
        Issue.record("expected EncodingError.invalidValue, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// Runs `body` and returns the `DecodingError` it throws.
private func decodingError(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> DecodingError? {
    do {
        try body()
        Issue.record("expected a DecodingError", sourceLocation: sourceLocation)
    } catch let error as DecodingError {
        return error
    } catch {
        Issue.record("expected a DecodingError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

private func path(_ keys: [any CodingKey]) -> [String] { keys.map(\.stringValue) }

private func context(of error: DecodingError?) -> DecodingError.Context? {
    switch error {
    case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?, .keyNotFound(_, let context)?,
        .dataCorrupted(let context)?:
        return context
    default:
        return nil
    }
}

// MARK: - Tests

@Suite("RecordEncoder / RecordDecoder")
struct RecordCoderTests {
    let encoder = RecordEncoder()
    let decoder = RecordDecoder()

    @Test func roundTripsEveryKindExactly() throws {
        let record = try encoder.encode(Everything.sample)
        let decoded = try decoder.decode(Everything.self, from: record)
        #expect(decoded == Everything.sample)
        #expect(decoded.negativeZero.sign == .minus)
        // Encoding the decoded model gives the very same record.
        #expect(try encoder.encode(decoded) == record)
    }

    @Test func mapsEachSwiftTypeToItsValueKind() throws {
        let record = try encoder.encode(Everything.sample)
        #expect(record.id == "item-1")
        #expect(record.version == nil && record.updatedAt == nil && record.deleted == false)
        #expect(record["bool"] == .bool(true))
        #expect(record["int"] == .int(-42))
        #expect(record["int8"] == .int(Int64(Int8.min)))
        #expect(record["int64Min"] == .int(.min))
        #expect(record["int64Max"] == .int(.max))
        #expect(record["uint8"] == .int(255))
        #expect(record["uint64"] == .int(.max))
        #expect(record["float"] == .double(1.5))
        #expect(record["double"] == .double(0.1))
        #expect(record["negativeZero"] == .double(-0.0))
        #expect(record["string"] == .string("héllo \u{1F30D}"))
        #expect(record["data"] == .bytes([0, 1, 2, 255]))
        #expect(record["byteArray"] == [.int(9), .int(8), .int(7)])
        #expect(record["date"] == .date(Timestamp(millisecondsSince1970: 1_700_000_000_123)))
        #expect(record["timestamp"] == .date(Timestamp(millisecondsSince1970: -86_400_001)))
        #expect(record["url"] == .string("https://example.com/a%20b?q=1#frag"))
        #expect(record["uuid"] == .string("E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(record["priority"] == .string("high"))
        #expect(record["address"] == .object(["street": .string("Main St")]))
        #expect(record["addresses"] == [["street": "A", "zip": 1], ["street": "B"]])
        #expect(record.fields["optionalNil"] == nil, "a nil optional is an absent field")
        #expect(record["optionalSome"] == .string("present"))
        #expect(record["optionalInts"] == [.int(1), .null, .int(3)])
        #expect(record["tags"] == ["a": 1, "b": 2])
        #expect(record["intKeyed"] == ["1": "one", "-2": "minus two"])
        // Keys that are neither String nor Int encode as alternating key/value arrays, as in Codable.
        #expect(record["enumKeyed"] == [.string("low"), .int(1)])
        #expect(record["matrix"] == [[1, 2], [], [3]])
        #expect(record["shape"] == ["circle": ["radius": 2.5]])
        #expect(record["shapes"] == [["rect": ["width": 2, "height": 3]], ["labeled": ["_0": "x", "_1": 4]], ["none": [:]]])
        #expect(record["extra"] == .object(Everything.sample.extra), "a Value passes through unchanged")
        #expect(record.fields["maybeValue"] == nil)
        #expect(record.fields["id"] == nil)
    }

    @Test func decodesNullAsNilForOptionals() throws {
        let record = Record(id: "a", fields: [
            "addresses": [["street": "S", "zip": .null]],
        ])
        let model = try decoder.decode(ListModel.self, from: record)
        #expect(model.addresses == [Address(street: "S", zip: nil)])
    }

    @Test func keepsDatesToTheMillisecond() throws {
        struct Dated: Codable, Equatable { var id: String; var at: Date }
        // Dates made from whole milliseconds come back exactly, however the Double rounds.
        var generator = SystemRandomNumberGenerator()
        var samples: [Int64] = [0, -1, 1, 999, -999, 1_700_000_000_123, 51_170_807_709, 4_351_515_550_157, -3_725_539_292_489]
        for _ in 0..<2_000 { samples.append(Int64.random(in: -5_000_000_000_000...5_000_000_000_000, using: &generator)) }
        for ms in samples {
            let date = Timestamp(millisecondsSince1970: ms).date
            let record = try encoder.encode(Dated(id: "d", at: date))
            #expect(record["at"] == .date(Timestamp(millisecondsSince1970: ms)))
            #expect(try decoder.decode(Dated.self, from: record).at == date)
        }
        // The sub-millisecond part is dropped (rounded towards the past).
        let fine = try encoder.encode(Dated(id: "d", at: Date(timeIntervalSince1970: 1.234_56)))
        #expect(fine["at"] == .date(Timestamp(millisecondsSince1970: 1_234)))
        let before = try encoder.encode(Dated(id: "d", at: Date(timeIntervalSince1970: -0.000_4)))
        #expect(before["at"] == .date(Timestamp(millisecondsSince1970: -1)))
        // A date outside the Timestamp range is refused, not trapped on.
        let context = expectInvalidValue { _ = try encoder.encode(Dated(id: "d", at: Date(timeIntervalSince1970: 1e300))) }
        #expect(path(context?.codingPath ?? []) == ["at"])
    }

    @Test func mapsSystemProperties() throws {
        let updatedAt = Timestamp(millisecondsSince1970: 1_700_000_000_456)
        let model = Synced(id: "s1", title: "hello", version: "v7", updatedAt: updatedAt.date, deleted: true)
        let record = try encoder.encode(model)
        #expect(record == Record(id: "s1", fields: ["title": "hello"], version: "v7", updatedAt: updatedAt, deleted: true))
        #expect(try decoder.decode(Synced.self, from: record) == model)

        // Absent system properties: nil / false.
        let fresh = try encoder.encode(Synced(id: "s2", title: "t", version: nil, updatedAt: nil, deleted: false))
        #expect(fresh == Record(id: "s2", fields: ["title": "t"]))
        #expect(try decoder.decode(Synced.self, from: fresh) == Synced(id: "s2", title: "t", version: nil, updatedAt: nil, deleted: false))

        // Timestamp works as well as Date.
        let stamped = Record(id: "s3", version: "v1", updatedAt: updatedAt)
        #expect(try decoder.decode(SyncedWithTimestamp.self, from: stamped) == SyncedWithTimestamp(id: "s3", version: "v1", updatedAt: updatedAt))
        #expect(try encoder.encode(SyncedWithTimestamp(id: "s3", version: "v1", updatedAt: updatedAt)) == stamped)

        // A model that does not declare them ignores them on decode and leaves them unset on encode.
        let plain = try decoder.decode(Plain.self, from: record)
        #expect(plain == Plain(id: "s1", title: "hello"))
        #expect(try encoder.encode(plain) == Record(id: "s1", fields: ["title": "hello"]))
    }

    @Test func rejectsSystemPropertiesOfTheWrongType() throws {
        struct BadVersion: Codable { var id: String; var version: Int }
        struct BadUpdatedAt: Codable { var id: String; var updatedAt: String }
        struct BadDeleted: Codable { var id: String; var deleted: Int }
        #expect(path(expectInvalidValue { _ = try encoder.encode(BadVersion(id: "a", version: 3)) }?.codingPath ?? []) == ["version"])
        #expect(path(expectInvalidValue { _ = try encoder.encode(BadUpdatedAt(id: "a", updatedAt: "x")) }?.codingPath ?? []) == ["updatedAt"])
        #expect(path(expectInvalidValue { _ = try encoder.encode(BadDeleted(id: "a", deleted: 1)) }?.codingPath ?? []) == ["deleted"])
    }

    @Test func encodingRequiresAStringOrIntegerId() throws {
        // An integer id is kept as its digits, and read back as the integer.
        let numbered = try encoder.encode(IntegerId(id: 12_345, name: "x"))
        #expect(numbered == Record(id: "12345", fields: ["name": "x"]))
        #expect(try decoder.decode(IntegerId.self, from: numbered).id == 12_345)

        struct DoubleId: Codable { var id: Double }
        let notString = expectInvalidValue { _ = try encoder.encode(DoubleId(id: 1.25)) }
        #expect(path(notString?.codingPath ?? []) == ["id"])
        #expect(notString?.debugDescription.contains("String") == true)
        #expect(notString?.debugDescription.contains("1.25") == false)

        let missing = expectInvalidValue { _ = try encoder.encode(NoId(name: "x")) }
        #expect(missing?.codingPath.isEmpty == true)
        #expect(missing?.debugDescription.contains("'id'") == true)

        // The top level must be an object.
        #expect(expectInvalidValue { _ = try encoder.encode("just a string") }?.codingPath.isEmpty == true)
        #expect(expectInvalidValue { _ = try encoder.encode([1, 2, 3]) }?.codingPath.isEmpty == true)
    }

    @Test func decodingRequiresAStringIdForAStringProperty() throws {
        let error = decodingError { _ = try decoder.decode(IntegerId.self, from: Record(id: "abc", fields: ["name": "x"])) }
        guard case .typeMismatch(let type, let context)? = error else {
            Issue.record("expected typeMismatch, got \(String(describing: error))")
            return
        }
        #expect(ObjectIdentifier(type) == ObjectIdentifier(Int.self))
        #expect(path(context.codingPath) == ["id"])
    }

    @Test func rejectsInvalidFieldNames() throws {
        struct ShoutedId: Codable { var id: String; var ID: String }
        let context = expectInvalidValue { _ = try encoder.encode(ShoutedId(id: "a", ID: "b")) }
        #expect(path(context?.codingPath ?? []) == ["ID"])
        #expect((context?.underlyingError as? SyncError)?.code == .invalidName)
    }

    @Test func refusesIntegersOutsideInt64() throws {
        let context = expectInvalidValue { _ = try encoder.encode(Unsigned(id: "u", values: [1, UInt64(Int64.max) + 1])) }
        #expect(path(context?.codingPath ?? []) == ["values", "Index 1"])

        let secret = expectInvalidValue { _ = try encoder.encode(Secret(id: "s", pin: .max)) }
        #expect(path(secret?.codingPath ?? []) == ["pin"])
        #expect(secret?.debugDescription.contains("UInt64") == true)
        do {
            _ = try encoder.encode(Secret(id: "s", pin: .max))
        } catch {
            #expect(!String(describing: error).contains("18446744073709551615"), "errors never print field values")
            #expect(!String(reflecting: error).contains("18446744073709551615"))
        }
    }

    @Test func refusesNaN() throws {
        struct Measured: Codable { var id: String; var value: Double; var values: [Float]; var raw: Value }
        #expect(path(expectInvalidValue { _ = try encoder.encode(Measured(id: "m", value: .nan, values: [], raw: .null)) }?.codingPath ?? []) == ["value"])
        #expect(path(expectInvalidValue { _ = try encoder.encode(Measured(id: "m", value: 0, values: [1, .nan], raw: .null)) }?.codingPath ?? []) == ["values", "Index 1"])
        #expect(path(expectInvalidValue { _ = try encoder.encode(Measured(id: "m", value: 0, values: [], raw: [.double(.nan)])) }?.codingPath ?? []) == ["raw"])
    }

    @Test func typeMismatchNamesTheKindsNotTheValue() throws {
        let record = Record(id: "c", fields: ["count": "top secret"])
        let error = decodingError { _ = try decoder.decode(Counter.self, from: record) }
        guard case .typeMismatch(let type, let context)? = error else {
            Issue.record("expected typeMismatch, got \(String(describing: error))")
            return
        }
        #expect(ObjectIdentifier(type) == ObjectIdentifier(Int.self))
        #expect(path(context.codingPath) == ["count"])
        #expect(context.debugDescription.contains("string"))
        #expect(!context.debugDescription.contains("top secret"))
        #expect(!String(reflecting: error!).contains("top secret"))
    }

    @Test func typeMismatchDeepInsideArrays() throws {
        let record = Record(id: "l", fields: ["addresses": [["street": "A"], ["street": 5]]])
        let error = decodingError { _ = try decoder.decode(ListModel.self, from: record) }
        guard case .typeMismatch(let type, let context)? = error else {
            Issue.record("expected typeMismatch, got \(String(describing: error))")
            return
        }
        #expect(ObjectIdentifier(type) == ObjectIdentifier(String.self))
        #expect(path(context.codingPath) == ["addresses", "Index 1", "street"])

        // A container of the wrong kind is a type mismatch too.
        let notAnArray = decodingError { _ = try decoder.decode(ListModel.self, from: Record(id: "l", fields: ["addresses": ["street": "A"]])) }
        guard case .typeMismatch(_, let arrayContext)? = notAnArray else {
            Issue.record("expected typeMismatch, got \(String(describing: notAnArray))")
            return
        }
        #expect(path(arrayContext.codingPath) == ["addresses"])
    }

    @Test func overflowIsDataCorrupted() throws {
        for stored: Value in [300, -1, .int(.max), 1.5, 1e30, .double(.infinity)] {
            let error = decodingError { _ = try decoder.decode(Small.self, from: Record(id: "s", fields: ["small": stored])) }
            guard case .dataCorrupted(let context)? = error else {
                Issue.record("expected dataCorrupted for a \(stored.kind), got \(String(describing: error))")
                continue
            }
            #expect(path(context.codingPath) == ["small"])
            #expect(context.debugDescription.contains("UInt8"))
        }
        // In range, whole doubles and ints are fine.
        #expect(try decoder.decode(Small.self, from: Record(id: "s", fields: ["small": 255])).small == 255)
        #expect(try decoder.decode(Small.self, from: Record(id: "s", fields: ["small": 7.0])).small == 7)
    }

    @Test func missingKeyIsKeyNotFound() throws {
        let error = decodingError { _ = try decoder.decode(Counter.self, from: Record(id: "c")) }
        guard case .keyNotFound(let key, let context)? = error else {
            Issue.record("expected keyNotFound, got \(String(describing: error))")
            return
        }
        #expect(key.stringValue == "count")
        #expect(context.codingPath.isEmpty)

        let nested = decodingError { _ = try decoder.decode(ListModel.self, from: Record(id: "l", fields: ["addresses": [["zip": 1]]])) }
        guard case .keyNotFound(let nestedKey, let nestedContext)? = nested else {
            Issue.record("expected keyNotFound, got \(String(describing: nested))")
            return
        }
        #expect(nestedKey.stringValue == "street")
        #expect(path(nestedContext.codingPath) == ["addresses", "Index 0"])
    }

    @Test func nullForARequiredValueIsValueNotFound() throws {
        let error = decodingError { _ = try decoder.decode(ListModel.self, from: Record(id: "l", fields: ["addresses": [["street": .null]]])) }
        guard case .valueNotFound(let type, let context)? = error else {
            Issue.record("expected valueNotFound, got \(String(describing: error))")
            return
        }
        #expect(ObjectIdentifier(type) == ObjectIdentifier(String.self))
        #expect(path(context.codingPath) == ["addresses", "Index 0", "street"])
    }

    @Test func numericConversionsAreExactOrRefused() throws {
        let fromInts = try decoder.decode(Numbers.self, from: Record(id: "n", fields: ["double": 3, "float": -2, "int": 4.0]))
        #expect(fromInts == Numbers(id: "n", double: 3, float: -2, int: 4))

        let inexactDouble = decodingError {
            _ = try decoder.decode(Numbers.self, from: Record(id: "n", fields: ["double": .int(1 << 53 + 1), "float": 0, "int": 0]))
        }
        #expect(path(context(of: inexactDouble)?.codingPath ?? []) == ["double"])
        if case .dataCorrupted? = inexactDouble {} else { Issue.record("expected dataCorrupted, got \(String(describing: inexactDouble))") }

        let floatOverflow = decodingError {
            _ = try decoder.decode(Numbers.self, from: Record(id: "n", fields: ["double": 0, "float": 1e300, "int": 0]))
        }
        if case .dataCorrupted(let context)? = floatOverflow { #expect(path(context.codingPath) == ["float"]) } else {
            Issue.record("expected dataCorrupted, got \(String(describing: floatOverflow))")
        }

        let fraction = decodingError {
            _ = try decoder.decode(Numbers.self, from: Record(id: "n", fields: ["double": 0, "float": 0, "int": 4.5]))
        }
        if case .dataCorrupted(let context)? = fraction { #expect(path(context.codingPath) == ["int"]) } else {
            Issue.record("expected dataCorrupted, got \(String(describing: fraction))")
        }

        let boolAsInt = decodingError {
            _ = try decoder.decode(Numbers.self, from: Record(id: "n", fields: ["double": 0, "float": 0, "int": true]))
        }
        if case .typeMismatch? = boolAsInt {} else { Issue.record("expected typeMismatch, got \(String(describing: boolAsInt))") }
    }

    @Test func stringForms() throws {
        struct Links: Codable { var id: String; var url: URL; var uuid: UUID }
        let bad = decodingError { _ = try decoder.decode(Links.self, from: Record(id: "l", fields: ["url": "https://x", "uuid": "not-a-uuid"])) }
        if case .dataCorrupted(let context)? = bad {
            #expect(path(context.codingPath) == ["uuid"])
            #expect(!context.debugDescription.contains("not-a-uuid"))
        } else {
            Issue.record("expected dataCorrupted, got \(String(describing: bad))")
        }
    }

    @Test func bytesDecodeIntoByteArrays() throws {
        struct Blob: Codable, Equatable { var id: String; var raw: [UInt8]; var data: Data }
        let record = Record(id: "b", fields: ["raw": .bytes([1, 2, 3]), "data": .bytes([4])])
        #expect(try decoder.decode(Blob.self, from: record) == Blob(id: "b", raw: [1, 2, 3], data: Data([4])))
        let encoded = try encoder.encode(Blob(id: "b", raw: [1, 2, 3], data: Data([4])))
        #expect(encoded["raw"] == [1, 2, 3])
        #expect(try decoder.decode(Blob.self, from: encoded).raw == [1, 2, 3])
        let notBytes = decodingError { _ = try decoder.decode(Blob.self, from: Record(id: "b", fields: ["raw": [], "data": "x"])) }
        if case .typeMismatch(let type, let context)? = notBytes {
            #expect(ObjectIdentifier(type) == ObjectIdentifier(Data.self))
            #expect(path(context.codingPath) == ["data"])
        } else {
            Issue.record("expected typeMismatch, got \(String(describing: notBytes))")
        }
    }

    @Test func valueDictionaryFieldRoundTrips() throws {
        struct Loose: SyncModel, Equatable { static let tableName = "loose"; var id: String; var properties: [String: Value]; var any: Value }
        let properties: [String: Value] = [
            "when": .date(Timestamp(millisecondsSince1970: 12)), "blob": .bytes([0xFF]), "big": .int(.max),
            "half": 0.5, "nested": ["list": [1, "two", .null]], "none": .null,
        ]
        let model = Loose(id: "x", properties: properties, any: .bytes([7]))
        let record = try encoder.encode(model)
        #expect(record["properties"] == .object(properties))
        #expect(record["any"] == .bytes([7]))
        #expect(try decoder.decode(Loose.self, from: record) == model)

        // A whole record can be read as one Value, system properties included.
        let whole = try decoder.decode([String: Value].self, from: Record(id: "r", fields: ["a": 1], version: "v"))
        #expect(whole == ["id": "r", "a": 1, "version": "v", "deleted": false])
        // And a dictionary of values encodes straight into a record.
        #expect(try encoder.encode(["id": "r", "a": 1] as [String: Value]) == Record(id: "r", fields: ["a": 1]))
    }

    @Test func enumWithAssociatedValuesUsesNestedContainers() throws {
        struct Drawing: SyncModel, Equatable { static let tableName = "drawings"; var id: String; var shape: Shape; var shapes: [Shape] }
        let model = Drawing(id: "d", shape: .labeled("tag", 2), shapes: [.circle(radius: 1), .none, .rect(width: 3, height: 4)])
        let record = try encoder.encode(model)
        #expect(record["shape"] == ["labeled": ["_0": "tag", "_1": 2]])
        #expect(record["shapes"] == [["circle": ["radius": 1.0]], ["none": [:]], ["rect": ["width": 3, "height": 4]]])
        #expect(try decoder.decode(Drawing.self, from: record) == model)

        let unknownCase = decodingError { _ = try decoder.decode(Drawing.self, from: Record(id: "d", fields: ["shape": ["triangle": [:]], "shapes": []])) }
        #expect(unknownCase != nil)
    }

    @Test func handWrittenContainersAndSuperEncoders() throws {
        let model = HandWritten(id: "h", point: (3, -4), pairs: [["a", "b"], []], parent: "p", custom: "c", trailing: [9, 8])
        let record = try encoder.encode(model)
        #expect(record.fields == [
            "point": ["x": 3, "y": -4],
            "pairs": [["a", "b"], []],
            "super": "p",
            "custom": "c",
            "list": [["x": 3], [9, 8]],
        ])
        #expect(try decoder.decode(HandWritten.self, from: record) == model)
    }

    @Test func classInheritanceThroughSuperEncoder() throws {
        let record = try encoder.encode(Kennel(id: "k", dog: Dog(name: "Rex", goodBoy: true)))
        #expect(record["dog"] == ["goodBoy": true, "super": ["name": "Rex"]])
        let kennel = try decoder.decode(Kennel.self, from: record)
        #expect(kennel.dog.name == "Rex" && kennel.dog.goodBoy)
    }

    @Test func unkeyedContainerAtEndIsValueNotFound() throws {
        let error = decodingError { _ = try decoder.decode(TripleHolder.self, from: Record(id: "t", fields: ["triple": [1, 2]])) }
        guard case .valueNotFound(_, let context)? = error else {
            Issue.record("expected valueNotFound, got \(String(describing: error))")
            return
        }
        #expect(path(context.codingPath) == ["triple", "Index 2"])
    }

    @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
    @Test func wideIntegersWithinInt64() throws {
        struct Wide: Codable, Equatable { var id: String; var signed: Int128; var unsigned: UInt128 }
        let record = try encoder.encode(Wide(id: "w", signed: Int128(Int64.min), unsigned: 5))
        #expect(record["signed"] == .int(.min))
        #expect(try decoder.decode(Wide.self, from: record) == Wide(id: "w", signed: Int128(Int64.min), unsigned: 5))
        let context = expectInvalidValue { _ = try encoder.encode(Wide(id: "w", signed: Int128(Int64.max) + 1, unsigned: 0)) }
        #expect(path(context?.codingPath ?? []) == ["signed"])
    }

    @Test func userInfoReachesTheValues() throws {
        var encoder = RecordEncoder()
        encoder.userInfo[userInfoKey] = "pre-"
        #expect(try encoder.encode(UsesUserInfo(id: "u", name: "x"))["name"] == "pre-x")
    }

    @Test func valueUsesNaturalShapesWithOtherCoders() throws {
        let value: Value = ["a": [1, 2.5, "s", true, .null]]
        let json = try JSONEncoder().encode(value)
        #expect(try JSONDecoder().decode(Value.self, from: json) == value)
    }
}
