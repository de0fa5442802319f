import Foundation

extension SyncContext {
    // MARK: Attachments

    /// Stores `bytes` as an attachment on this device and returns its reference, to be
    /// written into a record (``Attachment/value``, or an `Attachment` property of a model).
    ///
    /// The bytes are durable when this returns. Writing the reference into a record queues
    /// the upload in the record's own transaction; the record's change is pushed only after
    /// the bytes are on the server. An attachment never written into a record is removed when
    /// a later context opens the store.
    public func addAttachment(_ bytes: some Collection<UInt8> & Sendable, contentType: String,
                              fileName: String? = nil) async throws -> Attachment {
        let files = try attachmentFiles()
        try options.attachments.check(size: Int64(bytes.count))
        return try await stage(in: files, contentType: contentType, fileName: fileName) { append in
            try Array(bytes).withUnsafeBytes { try append($0) }
        }
    }

    /// Stores the file at `url` as an attachment, reading it in chunks (a file of any size
    /// is never held in memory). See ``addAttachment(_:contentType:fileName:)``.
    public func addAttachment(contentsOf url: URL, contentType: String, fileName: String? = nil) async throws -> Attachment {
        let files = try attachmentFiles()
        guard let handle = FileHandle(forReadingAtPath: url.path) else {
            throw SyncError(.notFound, "no readable file at \(url.path)")
        }
        defer { try? handle.close() }
        if let size = try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64 {
            try options.attachments.check(size: size)
        }
        return try await stage(in: files, contentType: contentType, fileName: fileName) { append in
            while true {
                let chunk = try handle.read(upToCount: AttachmentTransfer.chunkSize) ?? Data()
                if chunk.isEmpty { return }
                try chunk.withUnsafeBytes { try append($0) }
            }
        }
    }

    /// Writes what `fill` appends to a new file, off the cooperative pool, hashing it as it
    /// goes, and gives the file its hash's name; a failure leaves no file.
    private func stage(in files: any AttachmentFileStore, contentType: String, fileName: String?,
                       _ fill: @escaping @Sendable (_ append: (UnsafeRawBufferPointer) throws -> Void) throws -> Void) async throws -> Attachment {
        try await FileWork.run {
            let staging = AttachmentStaging(try files.makeWriter())
            do {
                try fill { buffer in try staging.append(buffer) }
                return try self.commitStaged(try staging.finish(), hasher: staging.hasher, contentType: contentType, fileName: fileName)
            } catch {
                staging.cancel()
                throw error
            }
        }
    }

    private func commitStaged(_ writer: any AttachmentFileWriter, hasher: AttachmentHasher, contentType: String,
                              fileName: String?) throws -> Attachment {
        let attachment = try Attachment(sha256: hasher.finish(), size: hasher.count, contentType: contentType, fileName: fileName)
        try options.attachments.check(size: attachment.size)
        try writer.commit(as: attachment.sha256)
        return attachment
    }

    /// Where an attachment's bytes are for this device, or `nil` when no local record
    /// references it (an attachment added but not yet written into a record included).
    public func attachmentState(_ attachment: Attachment) async throws -> AttachmentState? {
        try await store.read { txn in try AttachmentRow.find(txn, id: attachment.sha256)?.attachmentState }
    }

    /// The attachment's bytes, checked against its hash before any is returned: from this
    /// device, or fetched from the remote on first access (concurrent callers share one
    /// download; an interrupted one resumes with a range) and kept.
    ///
    /// A file stored here whose bytes no longer match is removed, reported with
    /// ``SyncError/Code/attachmentDamaged``, and fetched again by the next call. A file not
    /// here that cannot be fetched now (offline, the remote silent) throws
    /// ``SyncError/Code/attachmentUnavailable``; one the remote has not for this identity,
    /// ``SyncError/Code/attachmentMissing``.
    public func attachmentData(_ attachment: Attachment) async throws -> Data {
        let files = try attachmentFiles()
        let fetched = try await ensureLocal(attachment, files: files)
        let data = try await FileWork.run {
            try Self.removingDamaged(attachment, in: files) { try Self.verifiedContents(of: attachment, in: files, check: !fetched) }
        }
        // A download noted its use already.
        if !fetched { try await touch(attachment) }
        return data
    }

    /// The attachment as a file on this device (fetched first when it is not here), checked
    /// against its hash: a URL to hand to another API. Do not change the file. A store that
    /// seals its files (the encrypted file) has no plain file to give: use
    /// ``attachmentData(_:)``; this throws ``SyncError/Code/unsupported``.
    public func attachmentFileURL(_ attachment: Attachment) async throws -> URL {
        let files = try attachmentFiles()
        // A file just fetched was checked as it arrived, and its download noted the use.
        let fetched = try await ensureLocal(attachment, files: files)
        if !fetched {
            _ = try await FileWork.run {
                try Self.removingDamaged(attachment, in: files) { try Self.verifiedContents(of: attachment, in: files, keep: false) }
            }
        }
        guard let url = files.plainFileURL(for: attachment.sha256) else {
            throw SyncError(.unsupported, "this store seals its attachment files; read the bytes with attachmentData")
        }
        if !fetched { try await touch(attachment) }
        return url
    }

    /// Fetches the attachment unless a file of its size is here. Returns whether it fetched
    /// (the bytes were checked against the hash as they arrived).
    @discardableResult
    private func ensureLocal(_ attachment: Attachment, files: any AttachmentFileStore) async throws -> Bool {
        let size = try await FileWork.run {
            try Self.removingDamaged(attachment, in: files) { try files.size(of: attachment.sha256) }
        }
        if size == attachment.size { return false }
        if size != nil { try? await FileWork.run { try files.remove(attachment.sha256) } }
        try await download(attachment, files: files)
        // The budget is kept after every download, never at the cost of the file just fetched.
        _ = try? await evictAttachments(keeping: attachment.sha256)
        return true
    }

    /// Runs `body`, removing the attachment's file when it finds the file damaged.
    static func removingDamaged<T>(_ attachment: Attachment, in files: any AttachmentFileStore, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SyncError where error.code == .attachmentDamaged {
            try? files.remove(attachment.sha256)
            throw error
        }
    }

    /// Reads a stored file whole, checking size and hash (``SyncError/Code/attachmentDamaged``
    /// when they do not match; the size alone without `check`, for a file checked as it was
    /// just written).
    static func verifiedContents(of attachment: Attachment, in files: any AttachmentFileStore, keep: Bool = true,
                                 check: Bool = true) throws -> Data {
        let reader = try files.reader(for: attachment.sha256)
        var data = Data(capacity: keep ? Int(reader.size) : 0)
        var hasher = AttachmentHasher()
        var offset: Int64 = 0
        while offset < reader.size {
            let chunk = try reader.read(at: offset, count: AttachmentTransfer.chunkSize)
            if chunk.isEmpty { break }
            if check { hasher.update(chunk) }
            if keep { data.append(contentsOf: chunk) }
            offset += Int64(chunk.count)
        }
        guard offset == attachment.size, !check || hasher.finish() == attachment.sha256 else {
            throw SyncError(.attachmentDamaged, "the stored copy of attachment \(attachment.sha256.prefix(12))… does not match its hash; it has been removed")
        }
        return data
    }

    /// Notes a read by the app, for the cache budget's least-recently-used order.
    private func touch(_ attachment: Attachment) async throws {
        _ = try await observer.write { txn in
            guard var row = try AttachmentRow.find(txn, id: attachment.sha256) else { return }
            row.lastUsed = Timestamp.now().millisecondsSince1970
            try row.save(txn)
        }
    }

    /// The store's attachment files, or ``SyncError/Code/unsupported`` when it keeps none.
    func attachmentFiles() throws -> any AttachmentFileStore {
        guard let files = store.attachmentFiles else {
            throw SyncError(.unsupported, "this local store keeps no attachment files")
        }
        return files
    }

    /// Removes what a crash or an unused staging left: temporary files, and stored files no
    /// `__attachments` row names that are older than ``AttachmentOptions/orphanGrace`` (a
    /// younger one may be another process's attachment on its way into a record).
    func removeOrphanedAttachments() async throws {
        guard let files = store.attachmentFiles else { return }
        try await FileWork.run { try files.removeLeftovers() }
        let stored = try await FileWork.run { try files.files() }
        guard !stored.isEmpty else { return }
        let known = try await store.read { txn in
            Set(try txn.records(in: AttachmentRow.table, matching: Query(Field(SystemField.id).isIn(stored.map { .string($0.sha256) }))).map(\.id))
        }
        let cutoff = Timestamp.now().millisecondsSince1970 - Int64(options.attachments.orphanGrace.components.seconds * 1000)
        for file in stored where !known.contains(file.sha256) && file.modified.millisecondsSince1970 < cutoff {
            try await FileWork.run { try files.remove(file.sha256) }
        }
    }
}

/// Sizes of the pieces attachments are read, written and sent in.
package enum AttachmentTransfer {
    /// Bytes read or written at a time (1 MiB).
    package static let chunkSize = 1 << 20
}

/// Runs blocking file work on a dispatch thread, off Swift's cooperative pool.
enum FileWork {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
