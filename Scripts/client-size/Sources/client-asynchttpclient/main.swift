import ClientSizeProbe
import OfflineSyncHTTP

try await runProbe(CommandLine.arguments) { server, token in HTTPRemoteStore(baseURL: server, token: { token }) }
