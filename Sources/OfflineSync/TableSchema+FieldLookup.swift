import Foundation

/// A schema's declared fields found by exact name (UTF-8 bytes, not canonical equivalence),
/// derived from the field list. Every written and validated field is looked up here, so
/// it is on the path of every write: with up to ``scannedFields`` fields the names are
/// compared byte by byte (lengths first: most differ there), which costs less than hashing
/// the name — hashing was most of `TableSchema.validate(_:)` and of splitting a row into its
/// columns for the 13-field queue row in `perf` (local-writes-sqlite); past it, a dictionary.
package struct FieldLookup: Hashable, Sendable {
    /// The names' bytes in schema order, when there are few.
    private let names: [[UInt8]]?
    /// Position by name, when there are many.
    private let positions: [ExactString: Int]?
    /// The most fields compared one by one.
    static let scannedFields = 16

    /// The lookup of `fields`; a name declared twice is found at its first position.
    package init(_ fields: [FieldDefinition]) {
        if fields.count <= Self.scannedFields {
            names = fields.map { Array($0.name.utf8) }
            positions = nil
        } else {
            var positions: [ExactString: Int] = [:]
            for (position, field) in fields.enumerated() where positions[ExactString(field.name)] == nil {
                positions[ExactString(field.name)] = position
            }
            names = nil
            self.positions = positions
        }
    }

    /// The position of the field named exactly `name`, or `nil`.
    package func position(of name: String) -> Int? {
        guard let names else { return positions?[ExactString(name)] }
        var name = name
        return name.withUTF8 { bytes in
            names.firstIndex { candidate in
                candidate.count == bytes.count
                    && (bytes.isEmpty || candidate.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 })
            }
        }
    }
}
