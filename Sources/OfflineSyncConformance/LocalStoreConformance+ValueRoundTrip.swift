import OfflineSync

extension LocalStoreConformance {
    static let valueRoundTripCases: [ConformanceCase] = [
        ConformanceCase("declaredFields") { ctx in
            // One record per sample, the value in the field declared with its type and again in the `any` field.
            var records: [Record] = []
            for (type, values) in ValueFixtures.samplesByType {
                for (index, value) in values.enumerated() {
                    var fields = [type.rawValue: value]
                    fields[FieldType.any.rawValue] = value
                    records.append(Record(id: "\(type.rawValue)-\(index)", fields: fields))
                }
            }
            try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("declared"), records: records)
        },
        ConformanceCase("undeclaredFields") { ctx in
            var records: [Record] = []
            for (type, values) in ValueFixtures.samplesByType {
                for (index, value) in values.enumerated() {
                    records.append(Record(id: "\(type.rawValue)-\(index)", fields: ["u_\(type.rawValue)": value, "other": value]))
                }
            }
            try await RoundTrip.check(ctx, schema: TableSchema("undeclared"), records: records)
        },
        ConformanceCase("mixedDeclaredAndUndeclared") { ctx in
            // Every declared field and an undeclared twin of each, in one record per sample position.
            let count = ValueFixtures.samplesByType.map(\.values.count).max()!
            let records = (0..<count).map { index in
                var fields: [String: Value] = [:]
                for (type, values) in ValueFixtures.samplesByType {
                    let value = values[index % values.count]
                    fields[type.rawValue] = value
                    fields["extra_\(type.rawValue)"] = value
                }
                return Record(id: "row-\(index)", fields: fields)
            }
            try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("mixed"), records: records)
        },
        ConformanceCase("integerExtremes") { ctx in
            let records = ValueFixtures.ints.enumerated().map { index, value in
                Record(id: "i\(index)", fields: ["int": .int(value), "u": .int(value), "any": .int(value)])
            }
            try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("ints"), records: records)
        },
        ConformanceCase("doubleEdgeCases") { ctx in
            let records = ValueFixtures.doubles.enumerated().map { index, value in
                Record(id: "d\(index)", fields: ["double": .double(value), "u": .double(value), "any": .array([.double(value)])])
            }
            let store = try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("doubles"), records: records)
            // Explicitly: negative zero keeps its sign in declared and undeclared fields (a store
            // that turns it into +0.0 also fails the exact comparison above).
            let negativeZero = try await must(await store.read { tx in try tx.record(in: "doubles", id: "d0") }, "reading -0.0")
            for field in ["double", "u"] {
                let d = negativeZero?[field].doubleValue
                try expect(d == 0 && d?.sign == .minus, "field '\(field)' holding -0.0 came back as \(d.map { "\($0)" } ?? "nothing") with sign \(d.map { "\($0.sign)" } ?? "-")")
            }
        },
        ConformanceCase("dateExtremes") { ctx in
            let records = ValueFixtures.dates.enumerated().map { index, ms in
                let date = Value.date(Timestamp(millisecondsSince1970: ms))
                return Record(id: "t\(index)", fields: ["date": date, "u": date, "object": .object(["at": date])])
            }
            try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("dates"), records: records)
        },
        ConformanceCase("nestedValues") { ctx in
            let records = ValueFixtures.nested.enumerated().map { index, value in
                var fields: [String: Value] = ["any": value, "u": value, "wrapped": .array([value, .object(["inner": value])])]
                switch value {
                case .array: fields["array"] = value
                case .object: fields["object"] = value
                default: break
                }
                return Record(id: "n\(index)", fields: fields)
            }
            try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("nested"), records: records)
        },
        ConformanceCase("unicodeStrings") { ctx in
            // Unicode in values (declared, undeclared, nested) and in ids. (Odd field names: see the names group.)
            var records: [Record] = []
            for (index, s) in ValueFixtures.strings.enumerated() {
                records.append(Record(id: "s\(index)", fields: ["string": .string(s), "u": .string(s), "array": .array([.string(s)])]))
                let id = s.replacingNUL()
                if !id.isEmpty, id.utf8.count <= Names.maxIdLength {
                    records.append(Record(id: "id:" + id, fields: ["string": .string(s)]))
                }
            }
            try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("unicode"), records: records)
        },
        ConformanceCase("normalisationDistinct") { ctx in
            // Canonically equivalent strings stay distinct, byte for byte, as ids, field names and values.
            let forms = ["\u{E9}", "e\u{301}"]
            let angstroms = ["\u{C5}", "\u{212B}", "A\u{30A}"]
            var records: [Record] = []
            for (i, form) in (forms + angstroms).enumerated() {
                records.append(Record(id: form, fields: ["string": .string(form), "n": .int(Int64(i))]))
                records.append(Record(id: "field-\(i)", fields: [form: .int(Int64(i)), "string": .string(form)]))
                records.append(Record(id: "object-\(i)", fields: ["object": .object([form: .int(Int64(i))])]))
            }
            let schema = TableSchema("norm", fields: [FieldDefinition("string", .string, indexed: true), FieldDefinition("object", .object)])
            let store = try await RoundTrip.check(ctx, schema: schema, records: records)
            for (i, form) in (forms + angstroms).enumerated() {
                let (matches, count) = try await must(await store.read { tx in
                    (try tx.records(in: "norm", matching: Query(Field("string") == .string(form))),
                     try tx.count(in: "norm", matching: .compare(SystemField.id, .equal, .string(form))))
                }, "querying string == \(Render.string(form))")
                let expected = records.filter { $0["string"] == .string(form) }.sorted { Value.utf8Less($0.id, $1.id) }
                try expectRecords(matches, expected, "string == \(Render.string(form)) must match only the same bytes")
                try expectEqual(count, 1, "count of id == \(Render.string(form))")
                let byField = try await must(await store.read { tx in
                    try tx.records(in: "norm", matching: Query(.not(.isNull(form))))
                }, "querying field \(Render.string(form)) is not null")
                try expectEqual(byField.map(\.id), ["field-\(i)"], "records having field \(Render.string(form))")
            }
        },
        ConformanceCase("largeValues") { ctx in
            let blob = Value.bytes(ValueFixtures.megabyteBytes)
            let text = Value.string(ValueFixtures.megabyteString)
            let records = [
                Record(id: "blob", fields: ["bytes": blob, "u": blob]),
                Record(id: "text", fields: ["string": text, "u": text]),
                Record(id: "nested", fields: ["array": .array([blob, text]), "any": .object(["blob": blob])]),
            ]
            try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("large"), records: records)
        },
        ConformanceCase("systemProperties") { ctx in
            let records = [
                Record(id: "plain", fields: ["string": "x"]),
                Record(id: "synced", fields: ["int": 1], version: "AAAAAAAAB9E=", updatedAt: Timestamp(millisecondsSince1970: 1_700_000_000_123)),
                Record(id: "tombstone", version: "W/\"2\"", updatedAt: Timestamp(millisecondsSince1970: 1), deleted: true),
                Record(id: "deletedNoVersion", fields: ["u": "kept"], deleted: true),
                Record(id: "emptyVersion", version: ""),
                Record(id: "odd", fields: ["u": .null], version: "v\u{0}é😀 '\"; --", updatedAt: Timestamp(millisecondsSince1970: -62_135_596_800_000)),
                Record(id: "extremes", version: String(repeating: "v", count: 1000), updatedAt: Timestamp(millisecondsSince1970: .max)),
                Record(id: "min", updatedAt: Timestamp(millisecondsSince1970: .min)),
                Record(id: "zero", updatedAt: Timestamp(millisecondsSince1970: 0)),
            ]
            let store = try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("system"), records: records)
            // A replaced record takes the new system properties, including cleared ones.
            let cleared = Record(id: "synced", fields: ["int": 2])
            try await must(await store.write { tx in try tx.upsert(cleared, in: "system") }, "replacing a synced record")
            let back = try await must(await store.read { tx in try tx.record(in: "system", id: "synced") }, "reading it back")
            try expectRecord(back, cleared, "replacing a record clears its version and updatedAt")
        },
        ConformanceCase("nanRefused") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(ValueFixtures.declaredSchema("nan")), "defining the table")
            let nans: [(String, Record)] = [
                ("declared double", Record(id: "a", fields: ["double": .double(.nan)])),
                ("undeclared field", Record(id: "b", fields: ["u": .double(.nan)])),
                ("any field", Record(id: "c", fields: ["any": .double(.nan)])),
                ("nested in an array", Record(id: "d", fields: ["array": .array([1.0, .double(.nan)])])),
                ("nested in an undeclared object", Record(id: "e", fields: ["u": .object(["k": .array([.double(-.nan)])])])),
                ("signalling NaN", Record(id: "f", fields: ["double": .double(.signalingNaN)])),
            ]
            for (what, record) in nans {
                try await expectThrows(.invalidValue, "upserting a NaN in a \(what)") {
                    try await store.write { tx in try tx.upsert(record, in: "nan") }
                }
            }
            // Caught inside a transaction, the refused write leaves nothing while the rest commits.
            let caught = try await must(await store.write { tx -> String? in
                var code: String?
                do { try tx.upsert(Record(id: "g", fields: ["double": .double(.nan)]), in: "nan") } catch let error as SyncError {
                    code = error.code.description
                }
                try tx.upsert(Record(id: "ok", fields: ["double": 1.5]), in: "nan")
                return code
            }, "a transaction catching the NaN error")
            try expectEqual(caught, SyncError.Code.invalidValue.description, "error code of a NaN upsert caught inside the transaction")
            let (all, count) = try await must(await store.read { tx in
                (try tx.records(in: "nan", matching: .all), try tx.count(in: "nan", matching: .all))
            }, "reading after the refused writes")
            try expectRecords(all, [Record(id: "ok", fields: ["double": 1.5])], "only the valid record is stored")
            try expectEqual(count, 1, "count after the refused writes")
        },
        ConformanceCase("nullIsMissing") { ctx in
            let store = try await ctx.open()
            try await must(await store.defineTable(ValueFixtures.declaredSchema("nulls")), "defining the table")
            let written = Record(id: "r", fields: ["string": .null, "u": .null, "int": 1, "array": [.null]])
            try expectEqual(written.fields.count, 2, "Record drops top-level null fields")
            try await must(await store.write { tx in try tx.upsert(written, in: "nulls") }, "writing")
            let (back, nullCount, missingCount) = try await must(await store.read { tx in
                (try tx.record(in: "nulls", id: "r"),
                 try tx.count(in: "nulls", matching: .and([.isNull("string"), .isNull("u"), .isNull("never")])),
                 try tx.count(in: "nulls", matching: .not(.isNull("int"))))
            }, "reading")
            try expectRecord(back, Record(id: "r", fields: ["int": 1, "array": [.null]]), "a record written with null fields")
            try expectEqual(back?.fields.count, 2, "number of fields read back")
            try expectEqual(nullCount, 1, "null and never-written fields match isNull")
            try expectEqual(missingCount, 1, "a present field does not match isNull")
        },
        ConformanceCase("emptyValues") { ctx in
            let empties: [String: Value] = ["string": "", "bytes": .bytes([]), "array": [], "object": [:], "any": ""]
            let records = [
                Record(id: "declared", fields: empties),
                Record(id: "undeclared", fields: Dictionary(uniqueKeysWithValues: empties.map { ("u_\($0.key)", $0.value) })),
            ]
            let store = try await RoundTrip.check(ctx, schema: ValueFixtures.declaredSchema("empties"), records: records)
            let nulls = try await must(await store.read { tx in
                try ["string", "bytes", "array", "object", "u_string", "u_bytes"].map { try tx.count(in: "empties", matching: .isNull($0)) }
            }, "counting nulls")
            try expectEqual(nulls, [1, 1, 1, 1, 1, 1], "empty values are not null (per field, the other record lacks it)")
        },
    ]
}

/// Writes records, reads them back by id and by query, and (for persistent stores) again
/// after reopening, demanding exact equality.
enum RoundTrip {
    @discardableResult
    static func check(_ ctx: CaseContext, schema: TableSchema, records: [Record],
                      file: String = #fileID, line: Int = #line) async throws -> any LocalStore {
        var store = try await ctx.open(file: file, line: line)
        try await must(await store.defineTable(schema), "defining table \(Render.string(schema.name))", file: file, line: line)
        try await must(await store.write { tx in
            for record in records { try tx.upsert(record, in: schema.name) }
        }, "writing \(records.count) records", file: file, line: line)
        try await verify(store, table: schema.name, records: records, when: "", file: file, line: line)
        if ctx.capabilities.persistent {
            store = try await ctx.reopen(store, file: file, line: line)
            try await verify(store, table: schema.name, records: records, when: " after reopening", file: file, line: line)
        }
        return store
    }

    static func verify(_ store: any LocalStore, table: String, records: [Record], when: String,
                       file: String = #fileID, line: Int = #line) async throws {
        let ids = records.map(\.id)
        let (byId, all) = try await must(await store.read { tx in
            (try ids.map { try tx.record(in: table, id: $0) }, try tx.records(in: table, matching: .all))
        }, "reading back\(when)", file: file, line: line)
        for (record, read) in zip(records, byId) {
            try expectRecord(read, record, "record(in:id:)\(when)", file: file, line: line)
        }
        let expected = records.sorted { Value.utf8Less($0.id, $1.id) }
        try expectRecords(all, expected, "records(matching: .all)\(when)", file: file, line: line)
    }
}

extension String {
    /// The string with NUL characters replaced by `U+2400` (ids may not contain NUL).
    func replacingNUL() -> String {
        String(String.UnicodeScalarView(unicodeScalars.map { $0.value == 0 ? "\u{2400}" : $0 }))
    }
}
