import OfflineSync

/// Odd and hostile table and field names. A store either keeps a name fully usable or
/// refuses it with ``SyncError/Code/invalidName``; names marked `mustRefuse` break a core
/// rule (``Names``) and every store refuses them.
struct NameSample: Sendable {
    let label: String
    let name: String
    let mustRefuse: Bool

    init(_ label: String, _ name: String, mustRefuse: Bool = false) {
        self.label = label
        self.name = name
        self.mustRefuse = mustRefuse
    }

    init(_ name: String) { self.init(Render.string(name), name) }
}

enum NameFixtures {
    /// Names odd in any store: quoting, SQL, paths, Unicode, length limits.
    static let odd: [NameSample] = [
        NameSample("a\"b"), NameSample("x'y"), NameSample("\"; DROP TABLE t; --"), NameSample("'); DROP TABLE t; --"),
        NameSample("with space"), NameSample(" leading and trailing "), NameSample("ünïcödé"), NameSample("日本語"),
        NameSample("emoji😀"), NameSample("[brackets]"), NameSample("back`tick"), NameSample("a.b"), NameSample("main.t"),
        NameSample("t;"), NameSample("--"), NameSample("/* c */"), NameSample("%"), NameSample("_"), NameSample("?"),
        NameSample("$1"), NameSample(":name"), NameSample("@p"), NameSample("back\\slash"), NameSample("a/b"),
        NameSample("../escape"), NameSample(".."), NameSample("."), NameSample("CON"), NameSample("select"),
        NameSample("table"), NameSample("order"), NameSample("sqlite_master"), NameSample("sqlite_sequence"),
        NameSample("rowid"), NameSample("_rowid_"), NameSample("oid"), NameSample("1abc"), NameSample("0"),
        NameSample("e\u{301}"), NameSample("\u{E9}"), NameSample("\u{202E}rtl"), NameSample("zero\u{200B}width"),
        NameSample("128 ASCII bytes", String(repeating: "n", count: 128)),
        NameSample("128 UTF-8 bytes ending in a 2-byte character", String(repeating: "n", count: 126) + "é"),
        NameSample("128 UTF-8 bytes of 4-byte characters", String(repeating: "😀", count: 32)),
    ]

    /// Names every store refuses, whatever it is.
    static let invalid: [NameSample] = [
        NameSample("empty", "", mustRefuse: true),
        NameSample("129 ASCII bytes", String(repeating: "n", count: 129), mustRefuse: true),
        NameSample("129 UTF-8 bytes in 128 characters", String(repeating: "n", count: 127) + "é", mustRefuse: true),
        NameSample("NUL inside", "a\u{0}b", mustRefuse: true),
        NameSample("newline", "a\nb", mustRefuse: true),
        NameSample("tab", "tab\there", mustRefuse: true),
        NameSample("DEL", "del\u{7F}", mustRefuse: true),
        NameSample("escape", "\u{1B}[0m", mustRefuse: true),
        NameSample("carriage return", "cr\r", mustRefuse: true),
    ]

    /// Field names that collide with system properties (any case) or adapters' own columns.
    static let fieldOnly: [NameSample] = [
        NameSample("id", "id", mustRefuse: true), NameSample("ID", "ID", mustRefuse: true), NameSample("Id", "Id", mustRefuse: true),
        NameSample("version", "version", mustRefuse: true), NameSample("VERSION", "VERSION", mustRefuse: true),
        NameSample("updatedAt", "updatedAt", mustRefuse: true), NameSample("updatedat", "updatedat", mustRefuse: true),
        NameSample("deleted", "deleted", mustRefuse: true), NameSample("Deleted", "Deleted", mustRefuse: true),
        NameSample("_id"), NameSample("updated_at"), NameSample("__fields"), NameSample("__extra"), NameSample("__data"),
        NameSample("_undeclared"), NameSample("fields"), NameSample("data"), NameSample("json"), NameSample("value"),
        NameSample("key"), NameSample("ID_"), NameSample("x-y"),
    ]

    static let tableNames = odd + invalid
    static let fieldNames = odd + invalid + fieldOnly
}
