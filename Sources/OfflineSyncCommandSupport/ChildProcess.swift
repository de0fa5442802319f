import COfflineSyncSystem
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`, for the tools and tests that run our own
/// executables (a server, a probe, a second writer).
///
/// Not Foundation's `Process`: on Linux, Swift 6.3's `Process.run()` lists `/proc/self/fd`
/// to close inherited descriptors and copies each entry's whole 256-byte name, reading past
/// the directory buffer; now and then that crashes the *parent* in `memcpy`
/// (swift-corelibs-foundation, fixed upstream in PR #5472, after 6.3). Here the child inherits
/// no descriptor but its standard three, and the parent lists nothing: on Linux the child
/// closes every descriptor above standard error itself (glibc's
/// `posix_spawn_file_actions_addclosefrom_np`, 2.34 and later; without it, spawning throws
/// `ENOSYS`); on Apple platforms the spawn sets `POSIX_SPAWN_CLOEXEC_DEFAULT`, so the child
/// keeps only the descriptors its file actions name. It starts with no blocked signals and
/// every signal at its default action.
///
/// The member names follow `Process` where they mean the same. Every method is safe from any
/// thread; ``waitUntilExit()`` blocks its thread, so async code calls it off Swift's
/// cooperative pool.
package final class ChildProcess: Sendable {
    /// What a child's standard input or output is connected to.
    package enum Stream: Sendable {
        /// The same descriptor as this process's.
        case inherit
        /// `/dev/null`.
        case null
        /// A pipe whose other end is this object's ``standardInput`` or ``standardOutput``.
        case pipe
    }

    /// How the child ended, once it has.
    private enum Ending: Sendable {
        case exited(Int32)
        case signalled(Int32)
    }

    /// The child's process id.
    package let processIdentifier: pid_t
    /// The writing end of the child's standard input, when it was started with `.pipe`.
    package let standardInput: FileHandle?
    /// The reading end of the child's standard output (and of its standard error, when that
    /// was merged into it), when it was started with `.pipe`.
    package let standardOutput: FileHandle?
    /// Set once the child has been reaped (by whichever call saw the exit first).
    private let ending = Mutex<Ending?>(nil)

    /// Starts `executable` (a path, not searched for) with `arguments` and exactly
    /// `environment`. With `mergeStandardError`, the child's standard error goes where its
    /// standard output goes; otherwise it is this process's. Throws when the spawn fails
    /// (the executable is missing or not executable).
    package init(executable: String, arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
                 standardInput input: Stream = .null, standardOutput output: Stream = .inherit,
                 mergeStandardError: Bool = false) throws {
        var toClose: [Int32] = []
        defer { toClose.forEach { _ = close($0) } }
        // glibc's spawn objects are structs initialised in place; Darwin's are opaque pointers
        // (`void *`) that the `_init` calls allocate.
        #if os(Linux)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t? = nil
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }

        var inputHandle: FileHandle?
        var outputHandle: FileHandle?
        switch input {
        case .inherit: break
        case .null:
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .pipe:
            let (read, write) = try Self.makePipe()
            toClose.append(read)
            inputHandle = FileHandle(fileDescriptor: write, closeOnDealloc: true)
            posix_spawn_file_actions_adddup2(&actions, read, 0)
        }
        switch output {
        case .inherit:
            if mergeStandardError { posix_spawn_file_actions_adddup2(&actions, 1, 2) }
        case .null:
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            if mergeStandardError { posix_spawn_file_actions_adddup2(&actions, 1, 2) }
        case .pipe:
            let (read, write) = try Self.makePipe()
            toClose.append(write)
            outputHandle = FileHandle(fileDescriptor: read, closeOnDealloc: true)
            posix_spawn_file_actions_adddup2(&actions, write, 1)
            if mergeStandardError { posix_spawn_file_actions_adddup2(&actions, write, 2) }
        }
        #if os(Linux)
        // The child closes every descriptor above standard error, after the actions above.
        let closing = osync_spawn_close_from(&actions, 3)
        guard closing == 0 else { throw POSIXError(POSIXErrorCode(rawValue: closing) ?? .ENOSYS) }
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        var attributes = posix_spawnattr_t()
        #else
        // With POSIX_SPAWN_CLOEXEC_DEFAULT the child keeps only the descriptors a file action
        // names: those set above, and each standard one it shares with this process (no action
        // above sets it), named here when it is open (inheriting a closed one fails with EBADF).
        let shared: [Int32?] = [input == .inherit ? 0 : nil, output == .inherit ? 1 : nil, mergeStandardError ? nil : 2]
        for case let descriptor? in shared where fcntl(descriptor, F_GETFD) != -1 {
            let inheriting = posix_spawn_file_actions_addinherit_np(&actions, descriptor)
            guard inheriting == 0 else { throw POSIXError(POSIXErrorCode(rawValue: inheriting) ?? .EINVAL) }
        }
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_CLOEXEC_DEFAULT
        var attributes: posix_spawnattr_t? = nil
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard status == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO, userInfo: [NSFilePathErrorKey: executable])
        }
        processIdentifier = pid
        standardInput = inputHandle
        standardOutput = outputHandle
    }

    /// A pipe whose two ends are closed on `exec` (the child gets copies through `dup2`).
    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard osync_pipe_cloexec(&fds) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return (fds[0], fds[1])
    }

    /// Sends `number` to the child, unless it has already been reaped (its pid may then
    /// belong to another process).
    package func signal(_ number: Int32) {
        ending.withLock { ending in
            if ending == nil { _ = kill(processIdentifier, number) }
        }
    }

    /// Sends SIGTERM.
    package func terminate() { signal(SIGTERM) }

    /// Whether the child has not exited yet. Does not block.
    package var isRunning: Bool { !reap(blocking: false) }

    /// Blocks until the child has exited.
    package func waitUntilExit() { _ = reap(blocking: true) }

    /// The exit status, or the number of the signal that ended the child (see
    /// ``exitedBySignal``); waits for the exit.
    package var terminationStatus: Int32 {
        waitUntilExit()
        switch ending.withLock({ $0 }) {
        case .exited(let status)?, .signalled(let status)?: return status
        case nil: return -1
        }
    }

    /// Whether a signal ended the child; waits for the exit.
    package var exitedBySignal: Bool {
        waitUntilExit()
        if case .signalled? = ending.withLock({ $0 }) { return true }
        return false
    }

    /// Whether the child has exited; with `blocking`, waits until it has. The wait itself
    /// (`waitid` with `WNOWAIT`) leaves the child unreaped, so several threads may wait at
    /// once; reaping happens under the lock, once.
    private func reap(blocking: Bool) -> Bool {
        if ending.withLock({ $0 != nil }) { return true }
        var info = siginfo_t()
        while true {
            // Zeroed before each wait: with WNOHANG and nothing to report, Darwin's waitid leaves
            // `info` as it was, so a pid of 0 afterwards is the only portable "not yet".
            info = siginfo_t()
            let result = waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT | (blocking ? 0 : WNOHANG))
            if result == 0 { break }
            if errno == EINTR { continue }
            // ECHILD: another waiter reaped it meanwhile.
            return ending.withLock { $0 != nil }
        }
        if !blocking && Self.reportedProcess(info) == 0 { return false }
        return ending.withLock { ending in
            if ending != nil { return true }
            var status: Int32 = 0
            guard waitpid(processIdentifier, &status, WNOHANG) == processIdentifier else { return false }
            let signalNumber = status & 0x7f
            ending = signalNumber == 0 ? .exited((status >> 8) & 0xff) : .signalled(signalNumber)
            return true
        }
    }

    /// The pid a `waitid` filled `info` with: glibc's `siginfo_t` keeps it in a union (its
    /// `si_pid` is a C macro Swift cannot see), Darwin's in a plain field.
    private static func reportedProcess(_ info: siginfo_t) -> pid_t {
        #if os(Linux)
        return info._sifields._sigchld.si_pid
        #else
        return info.si_pid
        #endif
    }

    deinit {
        // Reap a child that has exited, so it does not linger as a zombie; one that is still
        // running is left running (the owner decides when a child ends).
        _ = reap(blocking: false)
    }
}
