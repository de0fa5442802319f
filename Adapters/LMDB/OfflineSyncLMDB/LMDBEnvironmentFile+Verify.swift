import Foundation
import OfflineSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A structural check of every page of a `data.mdb` that LMDB would follow, run when an
/// existing environment is opened: LMDB itself trusts its pages (a zeroed or overwritten page
/// reached by a cursor trips an assertion that aborts the process), so a damaged file must be
/// refused before LMDB reads it.
///
/// From the newest meta page it walks the free-page tree and the main tree, and through them
/// every named database and every `MDB_DUPSORT` value tree, reading pages with `pread` (never
/// through a memory map, so a page past the end of the file is an error, not a signal). Each
/// page must lie inside the file, carry its own page number, be reached once, have a valid
/// kind and bounds, and hold nodes that fit inside it; overflow pages must fit in the file;
/// the free list must name pages inside the file that no tree uses. Keys must be in the
/// order of their tree's comparator — strictly increasing within a page, and between the
/// separators of the branch above — and so must the values of an `MDB_DUPSORT` key (every
/// tree this store creates compares bytes; trees with integer or reversed comparators, like
/// LMDB's free list, are not checked). A flipped bit inside an index key almost always puts
/// it out of order, so it is caught here, where no query would have missed it. Like SQLite's
/// `PRAGMA quick_check`, it reads every page once and does not look inside values, which
/// LMDB does not checksum: the store's records carry their own CRC-32C for that.
struct LMDBPageVerifier {
    /// LMDB's page flags.
    static let branch: UInt16 = 0x01, leaf: UInt16 = 0x02, overflow: UInt16 = 0x04, meta: UInt16 = 0x08
    static let leaf2: UInt16 = 0x20, subPage: UInt16 = 0x40
    /// LMDB's node flags.
    static let bigData: UInt16 = 0x01, subData: UInt16 = 0x02, dupData: UInt16 = 0x04
    static let header = 16, nodeHeader = 8, databaseRecordSize = 48, invalidPage = UInt64.max
    /// LMDB's database flags that replace the byte-wise comparator of keys or of values.
    static let reverseKey: UInt16 = 0x02, dupSort: UInt16 = 0x04, integerKey: UInt16 = 0x08
    static let integerDup: UInt16 = 0x20, reverseDup: UInt16 = 0x40

    /// How a tree orders its keys, as far as the walk checks it.
    struct Order {
        /// Keys compare byte-wise (LMDB's default comparator), so their order is checked.
        var keysByBytes: Bool
        /// The tree is `MDB_DUPSORT` with byte-wise values, so each key's values are checked too.
        var valuesByBytes: Bool

        /// The order of a database with LMDB's `flags` (`md_flags`).
        init(flags: UInt16) {
            keysByBytes = flags & (LMDBPageVerifier.reverseKey | LMDBPageVerifier.integerKey) == 0
            valuesByBytes = flags & LMDBPageVerifier.dupSort != 0 && flags & (LMDBPageVerifier.integerDup | LMDBPageVerifier.reverseDup) == 0
        }

        /// A tree of one key's values: its keys are those values.
        init(valuesOf parent: Order) {
            keysByBytes = parent.valuesByBytes
            valuesByBytes = false
        }
    }

    /// The keys a subtree's keys must lie within: at least `lower`, below `upper`.
    struct Bounds {
        var lower: ArraySlice<UInt8>?
        var upper: ArraySlice<UInt8>?
        static let none = Bounds(lower: nil, upper: nil)
    }
    static let maximumDepth = 64

    let fd: Int32
    let path: String
    let pageSize: Int
    let lastPage: UInt64
    private var visited: [UInt64]
    private var freePages: [UInt64] = []

    /// Checks the file at `path`; throws ``SyncError/Code/corrupted`` naming the first fault.
    static func verify(_ path: String) throws {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw SyncError(.storageFailure, "cannot read '\(path)': errno \(errno)") }
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: LMDBEnvironmentFile.metaEnd)
        guard pread(fd, &head, head.count, 0) == head.count else { throw corrupted(path, "its first meta page cannot be read") }
        let pageSize = Int(LMDBEnvironmentFile.load32(head, LMDBEnvironmentFile.pageSizeOffset))
        var metas: [(txn: UInt64, last: UInt64, free: UInt64, main: UInt64, freeFlags: UInt16, mainFlags: UInt16)] = []
        for number in 0..<2 {
            var page = [UInt8](repeating: 0, count: LMDBEnvironmentFile.metaEnd)
            guard pread(fd, &page, page.count, off_t(number * pageSize)) == page.count else { continue }
            guard LMDBEnvironmentFile.load64(page, 0) == UInt64(number), LMDBEnvironmentFile.load16(page, 10) & meta != 0,
                  LMDBEnvironmentFile.load32(page, LMDBEnvironmentFile.magicOffset) == LMDBEnvironmentFile.magic else { continue }
            // A database record's flags sit 4 bytes into it, its root 40 bytes in.
            metas.append((LMDBEnvironmentFile.load64(page, LMDBEnvironmentFile.txnIDOffset), LMDBEnvironmentFile.load64(page, LMDBEnvironmentFile.lastPageOffset),
                          LMDBEnvironmentFile.load64(page, LMDBEnvironmentFile.freeRootOffset), LMDBEnvironmentFile.load64(page, LMDBEnvironmentFile.mainRootOffset),
                          LMDBEnvironmentFile.load16(page, LMDBEnvironmentFile.freeRootOffset - 36), LMDBEnvironmentFile.load16(page, LMDBEnvironmentFile.mainRootOffset - 36)))
        }
        // LMDB reads through the meta page with the higher transaction id.
        guard let newest = metas.max(by: { $0.txn < $1.txn }) else { throw corrupted(path, "it has no valid meta page") }
        var verifier = LMDBPageVerifier(fd: fd, path: path, pageSize: pageSize, lastPage: newest.last,
                                    visited: [UInt64](repeating: 0, count: Int(newest.last / 64) + 1))
        try verifier.walk(newest.free, depth: 0, freeList: true, order: Order(flags: newest.freeFlags), bounds: .none)
        try verifier.walk(newest.main, depth: 0, freeList: false, order: Order(flags: newest.mainFlags), bounds: .none)
        for page in verifier.freePages {
            guard page <= newest.last else { throw corrupted(path, "its free list names page \(page), past the last page \(newest.last)") }
            if verifier.isVisited(page) { throw corrupted(path, "its free list names page \(page), which a tree uses") }
        }
    }

    private init(fd: Int32, path: String, pageSize: Int, lastPage: UInt64, visited: [UInt64]) {
        self.fd = fd
        self.path = path
        self.pageSize = pageSize
        self.lastPage = lastPage
        self.visited = visited
    }

    private func isVisited(_ page: UInt64) -> Bool { visited[Int(page / 64)] & (1 << (page % 64)) != 0 }

    /// Marks `page` as used by a tree; throws if it is outside the data pages or already used.
    private mutating func claim(_ page: UInt64) throws {
        guard page >= 2, page <= lastPage else { throw Self.corrupted(path, "a tree points to page \(page), outside pages 2…\(lastPage)") }
        guard !isVisited(page) else { throw Self.corrupted(path, "page \(page) is reached twice") }
        visited[Int(page / 64)] |= 1 << (page % 64)
    }

    private func read(_ page: UInt64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: pageSize)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, pageSize, off_t(page) * off_t(pageSize)) }
        guard count == pageSize else { throw Self.corrupted(path, "page \(page) lies past the end of the file") }
        return bytes
    }

    /// Walks the tree whose root is `root`, whose keys are ordered by `order` and lie within `bounds`.
    private mutating func walk(_ root: UInt64, depth: Int, freeList: Bool, order: Order, bounds: Bounds) throws {
        if root == Self.invalidPage { return }
        guard depth < Self.maximumDepth else { throw Self.corrupted(path, "its trees are deeper than \(Self.maximumDepth) levels") }
        try claim(root)
        let page = try read(root)
        guard LMDBEnvironmentFile.load64(page, 0) == root else { throw Self.corrupted(path, "page \(root) carries the number \(LMDBEnvironmentFile.load64(page, 0))") }
        let flags = LMDBEnvironmentFile.load16(page, 10)
        let kind = flags & (Self.branch | Self.leaf | Self.overflow | Self.meta)
        guard kind == Self.branch || kind == Self.leaf else {
            throw Self.corrupted(path, "page \(root) has the flags \(flags), not those of a branch or leaf page")
        }
        if flags & Self.leaf2 != 0 {
            // Fixed-size keys packed after the header (MDB_DUPFIXED; this store creates none).
            let keySize = Int(LMDBEnvironmentFile.load16(page, 8)), keys = try Self.keyCount(page, 0, pageSize, path: path, page: root)
            guard keySize > 0, Self.header + keys * keySize <= pageSize else { throw Self.corrupted(path, "page \(root) holds keys past its end") }
            return
        }
        let nodes = try Self.nodes(page, base: 0, size: pageSize, path: path, page: root)
        var keys: [ArraySlice<UInt8>] = []
        keys.reserveCapacity(nodes.count)
        for node in nodes {
            let keySize = Int(LMDBEnvironmentFile.load16(page, node + 6))
            guard node + Self.nodeHeader + keySize <= pageSize else { throw Self.corrupted(path, "a node of page \(root) ends past the page") }
            keys.append(page[(node + Self.nodeHeader)..<(node + Self.nodeHeader + keySize)])
        }
        // A branch page's first key is never compared: its child holds everything below the second.
        if order.keysByBytes { try checkOrder(keys, from: kind == Self.branch ? 1 : 0, within: bounds, page: root) }
        for (position, node) in nodes.enumerated() {
            let nodeFlags = LMDBEnvironmentFile.load16(page, node + 4), keySize = Int(LMDBEnvironmentFile.load16(page, node + 6))
            if kind == Self.branch {
                let child = UInt64(LMDBEnvironmentFile.load16(page, node)) | UInt64(LMDBEnvironmentFile.load16(page, node + 2)) << 16 | UInt64(nodeFlags) << 32
                let childBounds = Bounds(lower: position == 0 ? bounds.lower : keys[position],
                                         upper: position + 1 < keys.count ? keys[position + 1] : bounds.upper)
                try walk(child, depth: depth + 1, freeList: freeList, order: order, bounds: childBounds)
                continue
            }
            let dataSize = Int(LMDBEnvironmentFile.load16(page, node)) | Int(LMDBEnvironmentFile.load16(page, node + 2)) << 16
            let data = node + Self.nodeHeader + keySize
            let stored = nodeFlags & Self.bigData != 0 ? 8 : dataSize
            guard data + stored <= pageSize else { throw Self.corrupted(path, "a node of page \(root) ends past the page") }
            if nodeFlags & Self.bigData != 0 {
                let pages = try overflowPages(LMDBEnvironmentFile.load64(page, data), dataSize: dataSize)
                if freeList {
                    let run = try (0..<pages).flatMap { try read(LMDBEnvironmentFile.load64(page, data) + $0) }
                    try collectFree(run, at: Self.header, size: dataSize)
                }
            } else if nodeFlags & Self.subData != 0 {
                guard dataSize == Self.databaseRecordSize else { throw Self.corrupted(path, "a database record in page \(root) has \(dataSize) bytes") }
                // A named database (its own flags), or the tree of one key's many values.
                let subOrder = nodeFlags & Self.dupData != 0 ? Order(valuesOf: order) : Order(flags: LMDBEnvironmentFile.load16(page, data + 4))
                try walk(LMDBEnvironmentFile.load64(page, data + 40), depth: 0, freeList: false, order: subOrder, bounds: .none)
            } else if nodeFlags & Self.dupData != 0 {
                // The values of one key, inline as a sub-page.
                guard dataSize >= Self.header else { throw Self.corrupted(path, "a sub-page in page \(root) is too short") }
                guard LMDBEnvironmentFile.load16(page, data + 10) & Self.leaf != 0 else { throw Self.corrupted(path, "a sub-page in page \(root) is not a leaf") }
                if LMDBEnvironmentFile.load16(page, data + 10) & Self.leaf2 == 0 {
                    var values: [ArraySlice<UInt8>] = []
                    for sub in try Self.nodes(page, base: data, size: dataSize, path: path, page: root) {
                        let end = sub + Self.nodeHeader + Int(LMDBEnvironmentFile.load16(page, sub + 6))
                        guard end <= data + dataSize else {
                            throw Self.corrupted(path, "a sub-page node in page \(root) ends past its sub-page")
                        }
                        values.append(page[(sub + Self.nodeHeader)..<end])
                    }
                    if order.valuesByBytes { try checkOrder(values, from: 0, within: .none, page: root) }
                }
            } else if freeList {
                try collectFree(page, at: data, size: dataSize)
            }
        }
    }

    /// Throws unless `keys[from...]` increase strictly, byte-wise (LMDB's default comparator:
    /// `memcmp`, then the shorter first), at least `bounds.lower` and below `bounds.upper`.
    private func checkOrder(_ keys: [ArraySlice<UInt8>], from first: Int, within bounds: Bounds, page: UInt64) throws {
        guard first < keys.count else { return }
        if let lower = bounds.lower, keys[first].lexicographicallyPrecedes(lower) {
            throw Self.corrupted(path, "a key of page \(page) sorts before the separator that leads to it")
        }
        for i in (first + 1)..<keys.count where !keys[i - 1].lexicographicallyPrecedes(keys[i]) {
            throw Self.corrupted(path, "the keys of page \(page) are out of order")
        }
        if let upper = bounds.upper, !keys[keys.count - 1].lexicographicallyPrecedes(upper) {
            throw Self.corrupted(path, "a key of page \(page) sorts after the separator that follows it")
        }
    }

    /// The free list's values: a count, then that many page numbers.
    private mutating func collectFree(_ bytes: [UInt8], at offset: Int, size: Int) throws {
        guard size >= 8, offset + size <= bytes.count else { throw Self.corrupted(path, "a free-list entry is malformed") }
        let count = LMDBEnvironmentFile.load64(bytes, offset)
        guard count <= UInt64(size / 8 - 1) else { throw Self.corrupted(path, "a free-list entry counts \(count) pages in \(size) bytes") }
        for i in 0..<Int(count) { freePages.append(LMDBEnvironmentFile.load64(bytes, offset + 8 + 8 * i)) }
    }

    /// Checks the run of overflow pages starting at `first` that holds `dataSize` bytes, and
    /// returns its length in pages.
    private mutating func overflowPages(_ first: UInt64, dataSize: Int) throws -> UInt64 {
        guard first >= 2, first <= lastPage else { throw Self.corrupted(path, "a value points to page \(first), outside the file's pages") }
        let page = try read(first)
        guard LMDBEnvironmentFile.load64(page, 0) == first, LMDBEnvironmentFile.load16(page, 10) & Self.overflow != 0 else {
            throw Self.corrupted(path, "page \(first) is not the overflow page a value points to")
        }
        let count = UInt64(LMDBEnvironmentFile.load32(page, 12))
        guard count >= 1, first + count - 1 <= lastPage, UInt64(dataSize) <= count * UInt64(pageSize) - UInt64(Self.header) else {
            throw Self.corrupted(path, "the overflow pages at \(first) do not fit the file or their value")
        }
        for number in first..<(first + count) { try claim(number) }
        return count
    }

    /// The offsets of the nodes of the (sub-)page at `base`, each checked to start inside it.
    private static func nodes(_ page: [UInt8], base: Int, size: Int, path: String, page number: UInt64) throws -> [Int] {
        let count = try keyCount(page, base, size, path: path, page: number)
        let upper = Int(LMDBEnvironmentFile.load16(page, base + 14))
        return try (0..<count).map { i in
            let offset = Int(LMDBEnvironmentFile.load16(page, base + header + 2 * i))
            guard offset >= upper, offset + nodeHeader <= size else { throw corrupted(path, "a node pointer of page \(number) lies outside its nodes") }
            return base + offset
        }
    }

    private static func keyCount(_ page: [UInt8], _ base: Int, _ size: Int, path: String, page number: UInt64) throws -> Int {
        let lower = Int(LMDBEnvironmentFile.load16(page, base + 12)), upper = Int(LMDBEnvironmentFile.load16(page, base + 14))
        guard lower >= header, lower <= upper, upper <= size, (lower - header) % 2 == 0 else {
            throw corrupted(path, "page \(number) has invalid bounds (\(lower), \(upper))")
        }
        return (lower - header) / 2
    }

    private static func corrupted(_ path: String, _ fault: String) -> SyncError {
        SyncError(.corrupted, "'\(path)' is a damaged LMDB data file: \(fault)")
    }
}
