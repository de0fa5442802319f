import Foundation
import OfflineSync
import OfflineSyncServer
import OfflineSyncService
import OfflineSyncTestSupport
import Testing

@Suite("Token claims: roles travel in the server's tokens, for sync rules")
struct TokenClaimsTests {
    static let secret = Array("a token secret of at least thirty-two bytes".utf8)

    @Test("a token carries its identity and roles; one minted without roles has no roles claim")
    func rolesRoundTrip() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let admin = try await authority.mint(identity: "alice", roles: ["admin", "editor"])
        #expect(try await authority.claims(fromToken: admin) == Claims(identity: "alice", roles: ["admin", "editor"]))
        #expect(try await authority.identity(fromToken: admin) == "alice")
        let plain = try await authority.mint(identity: "bob")
        #expect(try await authority.claims(fromToken: plain) == Claims(identity: "bob"))
        let payload = try #require(Data(base64URL: String(plain.split(separator: ".")[1])))
        #expect(!String(decoding: payload, as: UTF8.self).contains("roles"))
    }

    @Test("a role that is empty, too long or holds a control character is refused when minting", arguments: ["", String(repeating: "r", count: 129), "ad\u{0}min", "line\nbreak"])
    func badRolesAreRefused(role: String) async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        #expect(await syncErrorCode { _ = try await authority.mint(identity: "alice", roles: [role]) } == .invalidValue)
    }

    @Test("more than 64 roles are refused")
    func tooManyRoles() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let roles = Set((0..<65).map { "role\($0)" })
        #expect(await syncErrorCode { _ = try await authority.mint(identity: "alice", roles: roles) } == .invalidValue)
    }

    @Test("conditions test the claims: roles, the identity, and claims a token does not carry")
    func conditionsHold() {
        let claims = Claims(identity: "alice", roles: ["editor"], values: ["tenant": ["acme"]])
        #expect(Condition(claim: "roles", values: ["admin", "editor"]).holds(for: claims))
        #expect(!Condition(claim: "roles", values: ["admin"]).holds(for: claims))
        #expect(Condition(claim: "sub", values: ["alice"]).holds(for: claims))
        #expect(Condition(claim: "tenant", values: ["acme"]).holds(for: claims))
        #expect(!Condition(claim: "region", values: ["eu"]).holds(for: claims))
    }
}

private extension Data {
    init?(base64URL text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }
}
