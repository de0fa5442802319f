import OfflineSync
import Yams

/// What the server's YAML documents (the sync rules, the issuers) share: errors that start
/// `<source>:<line>:` and name the problem, and the few shapes a document is made of.
protocol YAMLReading {
    /// The document's name in messages (its path, or a label).
    var source: String { get }
}

extension YAMLReading {
    /// Composes `yaml` into a node tree; throws ``SyncError/Code/invalidConfiguration`` with
    /// the line of a syntax error or a duplicated key, or for an empty document.
    static func compose(yaml: String, source: String, what: String) throws -> Node {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw syntaxError(error, source: source, yaml: yaml)
        }
        guard let root else { throw SyncError(.invalidConfiguration, "\(source): \(what) is empty") }
        return root
    }

    /// A Yams error as a message that names the line.
    static func syntaxError(_ error: YamlError, source: String, yaml: String) -> SyncError {
        switch error {
        case let .scanner(_, problem, mark, _), let .parser(_, problem, mark, _), let .composer(_, problem, mark, _):
            return SyncError(.invalidConfiguration, "\(source):\(mark.line): not valid YAML: \(problem)")
        case let .duplicatedKeysInMapping(duplicates, context):
            // Yams marks the mapping; the line to fix is the key's second appearance in it.
            let line = duplicates.first.flatMap { secondLine(of: $0, after: context.mark.line, in: yaml) } ?? context.mark.line
            return SyncError(.invalidConfiguration, "\(source):\(line): a key appears twice: \(duplicates.joined(separator: ", "))")
        default:
            return SyncError(.invalidConfiguration, "\(source): not valid YAML")
        }
    }

    /// The line (1-based) where `key` starts a line as a mapping key for the second time
    /// from line `start` on.
    static func secondLine(of key: String, after start: Int, in yaml: String) -> Int? {
        var seen = 0
        for (index, line) in yaml.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where index + 1 >= start {
            let trimmed = line.drop { $0 == " " || $0 == "-" }
            guard trimmed.hasPrefix(key), trimmed.dropFirst(key.count).drop(while: { $0 == " " }).first == ":" else { continue }
            seen += 1
            if seen == 2 { return index + 1 }
        }
        return nil
    }

    func fail(_ node: Node, _ message: String) -> SyncError {
        SyncError(.invalidConfiguration, "\(source):\(node.mark?.line ?? 1): \(message)")
    }

    /// The mapping's entries by key, refusing keys outside `allowed` and non-string keys.
    func entries(_ node: Node, _ what: String, allowed: Set<String>? = nil) throws -> [(key: String, keyNode: Node, value: Node)] {
        guard let mapping = node.mapping else { throw fail(node, "\(what) must be a mapping of keys to values") }
        var seen = Set<String>()
        return try mapping.map { pair in
            guard let key = pair.key.scalar?.string else { throw fail(pair.key, "a key in \(what) must be a plain name") }
            if let allowed, !allowed.contains(key) {
                throw fail(pair.key, "unknown key '\(key)' in \(what); expected one of \(allowed.sorted().joined(separator: ", "))")
            }
            guard seen.insert(key).inserted else { throw fail(pair.key, "'\(key)' appears twice in \(what)") }
            return (key, pair.key, pair.value)
        }
    }

    func string(_ node: Node, _ what: String) throws -> String {
        guard let scalar = node.scalar, !scalar.string.isEmpty else { throw fail(node, "\(what) must be a non-empty name") }
        return scalar.string
    }

    /// A string or a list of strings.
    func strings(_ node: Node, _ what: String) throws -> [String] {
        if node.scalar != nil { return [try string(node, what)] }
        guard let sequence = node.sequence else { throw fail(node, "\(what) must be a name or a list of names") }
        let values = try sequence.map { try string($0, what) }
        guard !values.isEmpty else { throw fail(node, "\(what) must name at least one value") }
        return values
    }

}
