import OfflineSync
import OfflineSyncService

/// The shared-lists rules the shared-data tests use (Docs/SyncRules.md's first example
/// without roles): a list's owner and members read it, members read and write its todos,
/// members and the member named read its membership rows, and a list's owner adds members.
/// With `ownerReadsMembers` the owner also reads its lists' membership rows; without it, a
/// membership its owner adds is a row the owner may write but not read back.
package func sharedListsRules(ownerReadsMembers: Bool) -> SyncRules {
    let memberRead = [Grant(.member("list_members", key: "list_id", roles: nil)), Grant(.identityField("user_id"))]
    return SyncRules(
        memberships: ["list_members": Membership(table: "list_members", member: "user_id", group: "list_id")],
        tables: [
            "lists": TableRules(read: [Grant(.owner), Grant(.member("list_members", key: SystemField.id, roles: nil))],
                                write: [Grant(.owner)]),
            "todos": TableRules(read: [Grant(.member("list_members", key: "list_id", roles: nil))],
                                write: [Grant(.member("list_members", key: "list_id", roles: nil))]),
            "list_members": TableRules(read: memberRead + (ownerReadsMembers ? [Grant(.ownerOf("lists", key: "list_id"))] : []),
                                       write: [Grant(.ownerOf("lists", key: "list_id"))]),
        ])
}
