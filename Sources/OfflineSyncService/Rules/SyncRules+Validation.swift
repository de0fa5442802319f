import OfflineSync

extension SyncRules {
    /// One thing wrong with a rules document: where (a path such as `tables.todos.read[1]`)
    /// and what.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// The part of the document at fault: `memberships.<name>`, `tables.<table>`,
        /// `tables.<table>.read[<n>]` or `tables.<table>.write[<n>]`.
        public var path: String
        /// What is wrong, for a person to fix.
        public var message: String

        public var description: String { "\(path): \(message)" }
    }

    /// Checks the rules; throws ``SyncError/Code/invalidConfiguration`` naming the first
    /// problem (see ``problems()``).
    public func validate() throws {
        if let first = problems().first { throw SyncError(.invalidConfiguration, "invalid sync rules: \(first)") }
    }

    /// Everything wrong with the rules, in document order (memberships by name, then tables
    /// by name): names that no table or field may have, a membership held in a table the
    /// rules do not name, a grant that refers to an unknown membership or table, roles asked
    /// of a membership without a role field, a write grant for no operation, a condition
    /// that accepts nothing.
    public func problems() -> [Problem] {
        var problems: [Problem] = []
        func check(_ path: String, _ body: () throws -> Void) {
            do { try body() } catch let error as SyncError {
                problems.append(Problem(path: path, message: error.message))
            } catch {
                problems.append(Problem(path: path, message: "\(error)"))
            }
        }
        for name in memberships.keys.sorted(by: Value.utf8Less) {
            let membership = memberships[name]!, path = "memberships.\(name)"
            check(path) { try Self.validateFields([membership.member, membership.group] + (membership.role.map { [$0] } ?? [])) }
            if tables[membership.table] == nil {
                problems.append(Problem(path: path, message: "its table '\(membership.table)' has no rules; name it under tables"))
            }
            if Set([membership.member, membership.group, membership.role].compactMap { $0 }).count != (membership.role == nil ? 2 : 3) {
                problems.append(Problem(path: path, message: "member, group and role must be different fields"))
            }
        }
        for table in tables.keys.sorted(by: Value.utf8Less) {
            let rules = tables[table]!
            check("tables.\(table)") { try Names.validateAppTable(table) }
            for (section, grants) in [("read", rules.read), ("write", rules.write)] {
                for (index, grant) in grants.enumerated() {
                    let path = "tables.\(table).\(section)[\(index)]"
                    problems += grantProblems(grant, isWrite: section == "write").map { Problem(path: path, message: $0) }
                }
            }
        }
        return problems
    }

    private func grantProblems(_ grant: Grant, isWrite: Bool) -> [String] {
        var problems: [String] = []
        func field(_ name: String) {
            do { try Self.validateFields([name]) } catch let error as SyncError { problems.append(error.message) } catch {}
        }
        switch grant.kind {
        case .owner, .everyone:
            break
        case .identityField(let name):
            field(name)
        case let .member(name, key, roles):
            if key != SystemField.id { field(key) }
            if let membership = memberships[name] {
                if roles != nil, membership.role == nil {
                    problems.append("membership '\(name)' has no role field, so it cannot require roles")
                }
                if let roles, roles.isEmpty { problems.append("roles must name at least one role") }
            } else {
                problems.append("membership '\(name)' is not declared under memberships")
            }
        case let .ownerOf(table, key):
            if key != SystemField.id { field(key) }
            if tables[table] == nil, defaultAccess == .deny {
                problems.append("table '\(table)' has no rules, so no one owns its rows")
            }
        }
        for condition in grant.conditions {
            if condition.claim.isEmpty { problems.append("a condition needs a claim's name") }
            if condition.values.isEmpty { problems.append("the condition on claim '\(condition.claim)' accepts no value") }
        }
        if isWrite, grant.operations.isEmpty { problems.append("a write grant must allow at least one of insert, update, delete") }
        return problems
    }

    /// Field names a grant may use: the row's id, or a name any field may have.
    private static func validateFields(_ names: [String]) throws {
        for name in names where name != SystemField.id {
            try Names.validateField(name)
            if name.hasPrefix(Names.reservedPrefix) {
                throw SyncError(.invalidName, "field name '\(name)' uses the reserved prefix '\(Names.reservedPrefix)'")
            }
        }
    }
}
