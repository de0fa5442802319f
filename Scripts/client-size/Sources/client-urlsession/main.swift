import ClientSizeProbe
import OfflineSyncURLSession

try await runProbe(CommandLine.arguments) { server, token in URLSessionRemoteStore(baseURL: server, token: { token }) }
