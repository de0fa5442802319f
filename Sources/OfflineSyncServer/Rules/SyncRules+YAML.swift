import Foundation
import OfflineSync
import OfflineSyncService
import Yams

extension SyncRules {
    /// Reads a rules document (Docs/SyncRules.md). Throws
    /// ``SyncError/Code/invalidConfiguration`` for anything it cannot use — bad YAML, an
    /// unknown key, a wrong kind of value, a reference to nothing — with a message that
    /// starts `<source>:<line>:` and names the problem.
    public init(yaml: String, source: String = "rules") throws {
        let root = try RulesReader.compose(yaml: yaml, source: source, what: "the rules document")
        var reader = RulesReader(source: source)
        self = try reader.document(root)
        if let problem = problems().first {
            throw SyncError(.invalidConfiguration, "\(source):\(reader.line(of: problem.path)): \(problem)")
        }
    }

    /// Reads the rules document at `path` (see ``init(yaml:source:)``); the messages name the file.
    public init(contentsOfFile path: String) throws {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw SyncError(.invalidConfiguration, "cannot read the rules file \(path)")
        }
        try self.init(yaml: text, source: path)
    }
}

/// Walks a rules document's nodes, remembering the line of each part so that problems
/// found later (``SyncRules/problems()``) can name it too.
private struct RulesReader: YAMLReading {
    let source: String
    /// The line of each path ``SyncRules/Problem`` uses.
    private var lines: [String: Int] = [:]

    init(source: String) { self.source = source }

    /// The line of `path`, or of the nearest part that contains it.
    func line(of path: String) -> Int {
        var path = path
        while !path.isEmpty {
            if let line = lines[path] { return line }
            if let cut = path.lastIndex(where: { $0 == "." || $0 == "[" }) { path = String(path[..<cut]) } else { break }
        }
        return 1
    }

    // MARK: The document

    mutating func document(_ root: Node) throws -> SyncRules {
        var rules = SyncRules()
        var sawVersion = false
        for (key, keyNode, value) in try entries(root, "the rules document", allowed: ["version", "default", "memberships", "tables"]) {
            switch key {
            case "version":
                guard value.scalar?.string == "1" else { throw fail(value, "version must be 1 (the only version of the rules language)") }
                sawVersion = true
            case "default":
                let word = try string(value, "default")
                guard let access = SyncRules.DefaultAccess(rawValue: word) else {
                    throw fail(value, "default must be 'owner' (tables not named are owner-only) or 'deny'")
                }
                rules.defaultAccess = access
            case "memberships":
                for (name, nameNode, body) in try entries(value, "memberships") {
                    lines["memberships.\(name)"] = nameNode.mark?.line
                    rules.memberships[name] = try membership(body, name: name)
                }
            case "tables":
                for (table, tableNode, body) in try entries(value, "tables") {
                    lines["tables.\(table)"] = tableNode.mark?.line
                    rules.tables[table] = try tableRules(body, table: table, at: tableNode)
                }
            default:
                throw fail(keyNode, "unknown key '\(key)'")
            }
        }
        guard sawVersion else { throw fail(root, "the rules document must start with 'version: 1'") }
        return rules
    }

    private func membership(_ node: Node, name: String) throws -> Membership {
        var table: String?, member: String?, group: String?, role: String?
        let what = "membership '\(name)'"
        for (key, _, value) in try entries(node, what, allowed: ["table", "member", "group", "role"]) {
            let text = try string(value, "\(key) of \(what)")
            switch key {
            case "table": table = text
            case "member": member = text
            case "group": group = text
            default: role = text
            }
        }
        guard let table, let member, let group else { throw fail(node, "\(what) needs table, member and group") }
        return Membership(table: table, member: member, group: group, role: role)
    }

    private mutating func tableRules(_ node: Node, table: String, at nameNode: Node) throws -> TableRules {
        var read: [Grant]?, write: [Grant]?
        for (key, _, value) in try entries(node, "table '\(table)'", allowed: ["read", "write"]) {
            let grants = try self.grants(value, path: "tables.\(table).\(key)", isWrite: key == "write")
            if key == "read" { read = grants } else { write = grants }
        }
        guard let read, let write else {
            throw fail(nameNode, "table '\(table)' needs both read and write (an empty list: no one)")
        }
        return TableRules(read: read, write: write)
    }

    // MARK: Grants

    private mutating func grants(_ node: Node, path: String, isWrite: Bool) throws -> [Grant] {
        if node.scalar != nil { return [try grant(node, path: path + "[0]", isWrite: isWrite)] }
        guard let sequence = node.sequence else { throw fail(node, "\(path) must be a grant or a list of grants") }
        return try sequence.enumerated().map { index, item in try grant(item, path: "\(path)[\(index)]", isWrite: isWrite) }
    }

    private static let kinds = ["owner", "everyone", "identity", "member", "owner_of"]

    private mutating func grant(_ node: Node, path: String, isWrite: Bool) throws -> Grant {
        lines[path] = node.mark?.line
        if let word = node.scalar?.string {
            switch word {
            case "owner": return Grant(.owner)
            case "everyone": return Grant(.everyone)
            default: throw fail(node, "unknown grant '\(word)'; a bare grant is 'owner' or 'everyone'")
            }
        }
        var allowed: Set<String> = Set(Self.kinds).union(["key", "roles", "when"])
        if isWrite { allowed.insert("ops") }
        let fields = try entries(node, "a grant", allowed: allowed)
        let kinds = fields.filter { Self.kinds.contains($0.key) }
        guard kinds.count == 1, let kind = kinds.first else {
            throw fail(node, "a grant names exactly one of \(Self.kinds.joined(separator: ", "))")
        }
        var values: [String: Node] = [:]
        for field in fields { values[field.key] = field.value }
        func key() throws -> String {
            guard let node = values["key"] else { throw fail(kind.keyNode, "'\(kind.key)' needs a key: the row's field to match") }
            return try string(node, "key")
        }
        if values["roles"] != nil, kind.key != "member" { throw fail(kind.keyNode, "only a member grant may require roles") }
        if values["key"] != nil, kind.key != "member", kind.key != "owner_of" { throw fail(kind.keyNode, "'\(kind.key)' takes no key") }
        let grantKind: Grant.Kind
        switch kind.key {
        case "owner", "everyone":
            guard kind.value.scalar?.string == "true" else { throw fail(kind.value, "write '\(kind.key): true'") }
            grantKind = kind.key == "owner" ? .owner : .everyone
        case "identity":
            grantKind = .identityField(try string(kind.value, "identity (the field holding the caller's identity)"))
        case "member":
            let roles = try values["roles"].map { try strings($0, "roles") }
            grantKind = .member(try string(kind.value, "member (a membership's name)"), key: try key(), roles: roles)
        default:
            grantKind = .ownerOf(try string(kind.value, "owner_of (a table's name)"), key: try key())
        }
        let conditions = try values["when"].map(self.conditions) ?? []
        var operations = Grant.allOperations
        if let ops = values["ops"] {
            operations = []
            for word in try strings(ops, "ops") {
                guard let operation = OperationKind(rawValue: word) else {
                    throw fail(ops, "unknown operation '\(word)'; ops are insert, update, delete")
                }
                operations.insert(operation)
            }
        }
        return Grant(grantKind, when: conditions, operations: operations)
    }

    private func conditions(_ node: Node) throws -> [Condition] {
        try entries(node, "when").map { claim, _, value in Condition(claim: claim, values: try strings(value, "the claim '\(claim)'")) }
    }
}
