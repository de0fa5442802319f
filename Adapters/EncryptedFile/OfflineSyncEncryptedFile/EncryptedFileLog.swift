import Foundation
import OfflineSync

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One open file descriptor with positioned reads and writes, used only on the store's queue.
/// Errors name the file and the system error, never data.
final class EncryptedFileLog {
    let path: String
    private(set) var fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit { close() }

    /// Opens an existing file for reading and writing (nothing is written until asked) and
    /// takes an exclusive advisory lock on it. Returns `nil` if the file does not exist.
    static func openExisting(_ path: String) throws -> EncryptedFileLog? {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw failure("cannot open", path)
        }
        let file = EncryptedFileLog(path: path, fd: fd)
        try file.lock()
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure("cannot stat", path) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw SyncError(.notADatabase, "\(path) is not a regular file")
        }
        return file
    }

    /// Creates a new file (failing if it exists), readable and writable by the owner only,
    /// and locks it.
    static func create(_ path: String) throws -> EncryptedFileLog {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("cannot create", path) }
        let file = EncryptedFileLog(path: path, fd: fd)
        try file.lock()
        return file
    }

    /// Takes the exclusive lock, or throws ``SyncError/Code/busy`` when another open file holds
    /// it. A lock held only for an instant is waited for, up to 200 ms: a child process being
    /// spawned anywhere in this process holds a copy of every descriptor (and so of this one's
    /// lock, after a close that should have released it) until it closes them before `exec`.
    /// Runs on the store's own queue, never on Swift's cooperative pool.
    private func lock() throws {
        var tries = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            guard code == EWOULDBLOCK else { throw EncryptedFileLog.failure("cannot lock", path, code) }
            tries += 1
            guard tries <= 20 else { throw SyncError(.busy, "\(path) is open in another store instance or process") }
            usleep(10_000)
        }
    }

    /// The file's current length.
    func size() throws -> UInt64 {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw EncryptedFileLog.failure("cannot stat", path) }
        return UInt64(info.st_size)
    }

    /// Reads exactly `count` bytes at `offset` (the caller checked they exist).
    func read(_ count: Int, at offset: UInt64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        try bytes.withUnsafeMutableBytes { buffer in
            while done < count {
                let n = pread(fd, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw EncryptedFileLog.failure("cannot read", path)
                }
                if n == 0 { throw SyncError(.corrupted, "\(path) ended while reading (it changed while being opened)") }
                done += n
            }
        }
        return bytes
    }

    /// Writes all of `bytes` at `offset`.
    func write(_ bytes: [UInt8], at offset: UInt64) throws {
        var done = 0
        try bytes.withUnsafeBytes { buffer in
            while done < buffer.count {
                let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw EncryptedFileLog.failure("cannot write", path)
                }
                done += n
            }
        }
    }

    /// Flushes written data (and the file's length) to stable storage.
    func sync() throws {
        #if canImport(Darwin)
        let result = fcntl(fd, F_FULLFSYNC)
        #else
        let result = fdatasync(fd)
        #endif
        guard result == 0 else { throw EncryptedFileLog.failure("cannot sync", path) }
    }

    /// Cuts the file to `length` bytes.
    func truncate(to length: UInt64) throws {
        guard ftruncate(fd, off_t(length)) == 0 else { throw EncryptedFileLog.failure("cannot truncate", path) }
    }

    /// Closes the descriptor (and releases the lock); later calls do nothing.
    func close() {
        if fd >= 0 {
            _ = systemClose(fd)
            fd = -1
        }
    }

    /// Atomically replaces `target` with `source`, then syncs the directory so the rename
    /// itself is durable.
    static func replace(_ target: String, with source: String) throws {
        guard rename(source, target) == 0 else { throw failure("cannot rename onto", target) }
        let directory = (target as NSString).deletingLastPathComponent
        let dirFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_CLOEXEC)
        guard dirFD >= 0 else { throw failure("cannot open the directory of", target) }
        defer { _ = systemClose(dirFD) }
        guard fsync(dirFD) == 0 else { throw failure("cannot sync the directory of", target) }
    }

    /// Removes a file if it exists.
    static func remove(_ path: String) {
        _ = unlink(path)
    }

    static func failure(_ what: String, _ path: String, _ code: Int32 = errno) -> SyncError {
        SyncError(.storageFailure, "\(what) \(path): \(String(cString: strerror(code)))")
    }
}

private func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #elseif canImport(Musl)
    return Musl.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}
