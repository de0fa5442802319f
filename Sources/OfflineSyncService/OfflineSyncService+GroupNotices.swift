import OfflineSync
import OfflineSyncStoreKit

// Notifications for large groups. A write to a small group tells each member (its own log
// changed, and the push reports it); a write to a large group is logged once and reported
// once, as the group (`PushReport.groupsChanged`). A notification connection therefore
// listens to its identity and to the large groups whose logs its pulls read, and re-reads
// those groups when the push reports the identity as regrouped.

extension OfflineSyncService {
    /// The large groups whose logs the caller's pulls read, each with the shared tables it
    /// reads through that group: those whose `member` grant through the group's membership
    /// admits the caller's role in the group, under conditions its claims meet. Reads one
    /// reach row per large group the caller is in, and nothing per member.
    public func groupSubscriptions(claims: Claims) async throws -> [GroupKey: Set<String>] {
        if sharedTables.isEmpty { return [:] }
        return try await store.read { txn in
            var subscriptions: [GroupKey: Set<String>] = [:]
            let marked = try ReachRow.all(txn, Query(ReachRow.field(.identity) == .string(claims.identity.text)
                && ReachRow.field(.marked) == true))
            for reach in marked {
                guard case let .member(name, _)? = Group(key: reach.group), let membership = self.rules.memberships[name] else {
                    continue
                }
                let spans = try Spans(reach.spans)
                guard spans.isOpen else { continue }
                let role = spans.openRole
                for table in self.memberDependents(of: name) {
                    let admitted = self.rules.rules(for: table)?.read.contains { grant in
                        guard case let .member(grantName, _, roles) = grant.kind, grantName == name,
                              grant.conditions.allSatisfy({ $0.holds(for: claims) }) else { return false }
                        guard let roles, membership.role != nil else { return true }
                        return role.map(roles.contains) ?? false
                    } ?? false
                    if admitted { subscriptions[reach.group, default: []].insert(table) }
                }
            }
            return subscriptions
        }
    }
}
