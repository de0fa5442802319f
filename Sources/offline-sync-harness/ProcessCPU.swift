import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// CPU time other processes on this machine have used, read from `/proc`: what a workload
/// cost the servers it drove, beside what it cost the generator (``MeasuredWindows``).
enum ProcessCPU {
    /// User and system CPU seconds process `pid` has used so far, every thread, and with
    /// `children` those of its children that have exited and been waited for; `nil` when it
    /// cannot be read (gone, or not on this machine's `/proc`).
    static func seconds(of pid: Int32, children: Bool = false) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15,
        // the waited-for children's cutime 16, cstime 17.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 15, let user = Double(fields[11]), let system = Double(fields[12]),
              let childUser = Double(fields[13]), let childSystem = Double(fields[14]) else { return nil }
        return (user + system + (children ? childUser + childSystem : 0)) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU seconds the PostgreSQL server at `url` has used so far: its processes are those
    /// whose working directory is its data directory (the postmaster, with the backends that
    /// have exited, and every backend). `nil` when the server is not on this machine or the role may
    /// not read `data_directory`.
    static func postgres(_ url: String) -> Double? {
        guard let directory = (try? RawPostgreSQL(url).rows("SHOW data_directory").first?.first) ?? nil else { return nil }
        var total = 0.0, found = false
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.allSatisfy(\.isNumber) {
            guard let pid = Int32(entry), (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(entry)/cwd")) == directory,
                  let seconds = seconds(of: pid, children: true) else { continue }
            total += seconds
            found = true
        }
        return found ? total : nil
    }
}
