import Hummingbird
import OfflineSync
import OfflineSyncServer
import OfflineSyncWire
import Testing

/// The server's error answers and the clients' reading of them share one code type.
@Suite("API errors: typed codes")
struct APIErrorCodeTests {
    // Against the code before: `APIError` took any string, and the client matched its own
    // literals; a code spelled differently on either side went unnoticed.
    @Test("every WireErrorCode round-trips through an APIError's body and the parser the clients use, byte for byte as before")
    func everyCodeRoundTrips() throws {
        for code in WireErrorCode.all {
            let error = APIError(.badRequest, code, "the reason")
            // The body's bytes are what the server always sent for this code.
            #expect(String(decoding: error.body, as: UTF8.self)
                    == #"{"error":{"code":""# + code.rawValue + #"","message":"the reason"}}"#)
            let read = try #require(WireErrorBody(json: try OfflineSyncWire.JSON.parse(error.body)))
            #expect(read.code == code)
            #expect(read.rawCode == code.rawValue)
            #expect(read.message == "the reason")
        }
    }
}
