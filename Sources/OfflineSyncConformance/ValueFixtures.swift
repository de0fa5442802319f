import OfflineSync

/// Edge values of every kind, shared by the groups.
enum ValueFixtures {
    static let ints: [Int64] = [
        0, -1, 1, .min, .max, .min + 1, .max - 1,
        9_007_199_254_740_993, -9_007_199_254_740_993, // 2^53 + 1: not representable as a double
        4_294_967_296, -2_147_483_649,
    ]

    static let doubles: [Double] = [
        -0.0, 0.0, .infinity, -.infinity, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
        .leastNonzeroMagnitude, -.leastNonzeroMagnitude, .leastNormalMagnitude, .ulpOfOne,
        0.1, .pi, 1.0, -1.5, 1e300, -1e-300, 9_007_199_254_740_992.0, 123_456_789.123_456_789,
        Double(bitPattern: 0x3FF0_0000_0000_0001), // 1 + ulp: needs all 17 significant digits
    ]

    static let dates: [Int64] = [
        0, -1, 1, -86_400_000, 1_700_000_000_123,
        -62_135_596_800_000, // 0001-01-01T00:00:00Z
        253_402_300_799_999, // 9999-12-31T23:59:59.999Z
        8_640_000_000_000_000, -8_640_000_000_000_000, // JavaScript's Date range
        .max, .min,
    ]

    static let strings: [String] = [
        "", " ", "a", "A", "hello, world",
        "emoji 😀👍🏽👨‍👩‍👧‍👦🇫🇷",
        "e\u{301}", "\u{E9}", // é decomposed and precomposed
        "\u{212B}", "\u{C5}", "A\u{30A}", // Å three ways
        "שלום עולם", "مرحبا بالعالم", "abc\u{202E}def\u{202C}", // right-to-left text and an override
        "a\u{0}b", "\u{0}", "\u{0}\u{0}trailing", // NUL inside values is allowed
        "tab\tnewline\ncarriage\r\u{1B}[31m",
        "日本語テキスト", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\u{10FFFF}", "\u{FEFF}bom", "zero\u{200B}width",
        "'; DROP TABLE t; --", "quote\"s 'and' `ticks`", "back\\slash", "%_*?[]", "trailing space ",
        String(repeating: "long ", count: 400),
    ]

    static let bytes: [[UInt8]] = [
        [], [0], [0, 0, 0], [255], Array(0...255), [0xC3, 0x28], [0xEF, 0xBB, 0xBF],
        Array("SQLite format 3\u{0}".utf8), Array(repeating: 0xAB, count: 4096),
    ]

    static let nested: [Value] = [
        .array([]), .object([:]), .array([.null]), .object(["k": .null]), .object(["": 1]),
        .array([1, "two", 3.0, true, .bytes([0, 1]), .date(Timestamp(millisecondsSince1970: -5)), [], [:], .null]),
        .object(["int": 1, "double": 1.0, "string": "1", "bool": true, "null": .null, "array": [1, [2, [3]]]]),
        .array([.double(-0.0), .double(.infinity), .double(-.infinity), .double(.leastNonzeroMagnitude)]),
        .array([.int(.min), .int(.max), .int(0)]),
        .object(["\u{E9}": "precomposed key"]), .object(["e\u{301}": "decomposed key"]),
        .object(["a\u{0}b": "NUL in key", "日本": "語", "😀": .array(["x"]), "Key": 1, "key": 2]),
        .array([.string("a\u{0}b"), .string("e\u{301}"), .string("")]),
        deepArray(64), deepObject(64),
        .array((0..<1000).map { Value.int(Int64($0) * 7919 - 3_000_000) }),
        .object(Dictionary(uniqueKeysWithValues: (0..<100).map { ("field\($0)", Value.int(Int64($0))) })),
    ]

    static func deepArray(_ depth: Int) -> Value {
        (0..<depth).reduce(Value.string("bottom")) { inner, level in .array([.int(Int64(level)), inner]) }
    }

    static func deepObject(_ depth: Int) -> Value {
        (0..<depth).reduce(Value.string("bottom")) { inner, level in .object(["level\(level)": inner, "n": .int(Int64(level))]) }
    }

    /// 1 MiB of bytes covering every byte value.
    static let megabyteBytes: [UInt8] = (0..<1_048_576).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ ($0 >> 8)) }
    /// A string of a little over 1 MiB of UTF-8 mixing 1-, 2-, 3- and 4-byte characters and NUL.
    static let megabyteString: String = String(repeating: "aé日😀\u{0}", count: 95_326)

    /// Samples for each declared field type.
    static let samplesByType: [(type: FieldType, values: [Value])] = [
        (.bool, [.bool(true), .bool(false)]),
        (.int, ints.map(Value.int)),
        (.double, doubles.map(Value.double)),
        (.string, strings.map(Value.string)),
        (.bytes, bytes.map(Value.bytes)),
        (.date, dates.map { .date(Timestamp(millisecondsSince1970: $0)) }),
        (.array, nested.filter { $0.arrayValue != nil }),
        (.object, nested.filter { $0.objectValue != nil }),
        (.any, nested + [.int(.min), .double(-0.0), .string("e\u{301}"), .bytes([]), .bool(false), .date(Timestamp(millisecondsSince1970: -1))]),
    ]

    /// The schema with one declared field per type, each named after its type.
    static func declaredSchema(_ name: String) -> TableSchema {
        TableSchema(name, fields: FieldType.allCases.map { FieldDefinition($0.rawValue, $0) })
    }
}
