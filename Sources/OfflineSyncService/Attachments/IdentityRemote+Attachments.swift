import OfflineSync

extension IdentityRemote: AttachmentRemote {
    func attachmentUploadState(_ sha256: String) async throws -> AttachmentUploadState? {
        try await service.attachmentUploadState(claims: claims, hash: sha256)
    }

    func appendAttachment(_ attachment: Attachment, offset: Int64, bytes: [UInt8], complete: Bool) async throws -> AttachmentUploadState {
        if offset == 0, complete, bytes.count <= OfflineSyncService.attachmentPiece, Int64(bytes.count) == attachment.size {
            let state = try await service.storeAttachment(claims: claims, hash: attachment.sha256, bytes: bytes)
            guard state.complete else { throw SyncError(.conflict, "the upload is at offset \(state.offset)") }
            return state
        }
        if offset == 0 {
            let state = try await service.beginAttachmentUpload(claims: claims, hash: attachment.sha256, length: attachment.size)
            if state.complete { return state }
            guard state.offset == 0 else { throw SyncError(.conflict, "the upload is at offset \(state.offset)") }
        }
        var position = offset, start = 0
        // Stored in pieces the size the HTTP routes store, so both hold the same rows.
        while start < bytes.count {
            let end = min(bytes.count, start + OfflineSyncService.attachmentPiece)
            position = try await service.appendAttachment(claims: claims, hash: attachment.sha256, offset: position,
                                                          bytes: Array(bytes[start..<end]))
            start = end
        }
        guard complete else { return AttachmentUploadState(offset: position, complete: false) }
        return try await service.finishAttachmentUpload(claims: claims, hash: attachment.sha256)
    }

    func readAttachment(_ sha256: String, from offset: Int64, _ body: @Sendable ([UInt8]) async throws -> Void) async throws -> Bool {
        try await service.readAttachment(claims: claims, hash: sha256, from: offset) { piece in
            try await body(piece)
            return true
        }
    }
}
