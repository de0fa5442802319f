/// What the console keeps across requests on one server (shared by the server's copies): the
/// failed sign-ins it counts in memory, and the revoked sessions it reads from the store.
final class ConsoleState: Sendable {
    let signIns = SignInLimiter()
    let revocations = ConsoleRevocations()
}
