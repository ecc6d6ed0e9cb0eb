import Foundation
import HTTPServer
#if canImport(Glibc)
import Glibc
#endif

/// Where photo bytes live: content-addressed blobs named by their SHA-256 (hex). Rows in `photos`
/// keep the hash; the same bytes are stored once however many rows name them.
public protocol PhotoStore: Sendable {
    /// Stores the bytes (or refreshes the blob's age when already stored) and returns their hash.
    func put(_ bytes: [UInt8]) throws -> String
    /// Stores part of an upload's file (its hash known) without reading it into memory, as put
    /// does; returns the hash.
    func put(_ file: BlobFile) throws -> String
    /// Refreshes a stored blob's age as a put of its bytes would, without the bytes; false when
    /// there is no such blob (then the caller puts the bytes).
    func refresh(_ hash: String) throws -> Bool
    /// The bytes of a blob; nil when there is none.
    func get(_ hash: String) throws -> [UInt8]?
    /// Every blob with its last write (the collector's grace period counts from it).
    func list() throws -> [(hash: String, modified: Date)]
    /// Removes a blob unless it was written after `olderThan`: a put meanwhile wins over the sweep.
    func delete(_ hash: String, ifNotModifiedSince olderThan: Date) throws -> Bool
    /// Why the store cannot take writes now, or nil (/readyz).
    func problem() -> String?
    /// The store itself, under any wrapper (StoreBreaker): what routes ask to reach the file
    /// store's files directly.
    var base: any PhotoStore { get }
}

public struct PhotoStoreError: Error, CustomStringConvertible {
    public let description: String
    /// The store could not be reached or refused the request (an object store that is down,
    /// wrong credentials): /photos/:id answers 503 rather than 500.
    public var unavailable = false
    /// The store is down rather than refusing this request: it could not be reached, failed on
    /// its side (5xx), or has no room left. Albums keep such photos pending and wait for the
    /// store (AlbumWorkers) instead of failing them.
    public var outage = false
    /// An outage of writes only: the store still reads (a full disk or quota, a file system
    /// remounted read-only), so photos are still served.
    public var writesOnly = false
    /// Set when the breaker refused the call without asking the store (StoreBreaker): seconds
    /// until it tries the store again, for Retry-After.
    public var retryAfter: Int?

    public init(description: String, unavailable: Bool = false, outage: Bool = false, writesOnly: Bool = false, retryAfter: Int? = nil) {
        self.description = description
        self.unavailable = unavailable || outage
        self.outage = outage
        self.writesOnly = outage && writesOnly
        self.retryAfter = retryAfter
    }

    /// Errors of the file system rather than of one file: a full disk or quota, an I/O error (a
    /// failing disk, a shut-down file system), a file system remounted read-only (ext4 does so
    /// after an error), permissions lost on the directory. Each ends when the operator fixes the
    /// disk, so albums wait for it.
    package static let outageErrors: Set<Int32> = [ENOSPC, EDQUOT, EIO, EROFS, EACCES]

    package static func file(_ text: String, errno code: Int32) -> PhotoStoreError {
        PhotoStoreError(description: "\(text): \(String(cString: strerror(code)))", outage: outageErrors.contains(code),
                        writesOnly: [ENOSPC, EDQUOT, EROFS].contains(code))
    }

    /// A call the breaker refused: the store is known to be down.
    package static func refused(retryAfter: Int, reason: String?) -> PhotoStoreError {
        PhotoStoreError(description: "the photo store is skipped for \(retryAfter) s after an outage (\(reason ?? "no answer"))",
                        outage: true, retryAfter: retryAfter)
    }
}

/// Bytes of an uploaded file, where they lie: `count` bytes from `offset` of a spooled body (held
/// here, so its descriptor stays open while any store reads it, a call past its deadline too).
public struct BlobFile: Sendable {
    public let body: SpooledBody
    public let offset: Int
    public let count: Int
    /// Their SHA-256, the blob's name.
    public let hash: String

    public init(body: SpooledBody, offset: Int, count: Int, hash: String) {
        (self.body, self.offset, self.count, self.hash) = (body, offset, count, hash)
    }

    /// Bytes held in memory (a test's, a tool's), spooled to the system's temporary folder as an
    /// upload's are.
    public static func holding(_ bytes: [UInt8]) throws -> BlobFile {
        BlobFile(body: try SpooledBody.holding(bytes, directory: NSTemporaryDirectory()), offset: 0, count: bytes.count, hash: SHA256.hex(bytes))
    }

    /// Them where they lie, mapped (the decoders read them so), from index 0.
    public func withMapped<T>(_ read: (UnsafeBufferPointer<UInt8>) throws -> T) throws -> T {
        // Checked here, not by the slice: a release build would not check it there.
        guard offset >= 0, count >= 0, offset + count <= body.count else { throw Self.unreadable("it is shorter than its part") }
        return try body.withMapped { try read(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + count)]).assumingMemoryBound(to: UInt8.self)) }
    }

    /// The upload's own file could not be read: that upload's failure, never the photo store's
    /// outage (which would stop serving everyone's photos for a while).
    static func unreadable(_ reason: String) -> PhotoStoreError {
        PhotoStoreError(description: "an upload's spooled file could not be read: \(reason)", unavailable: true)
    }

    /// Reads them in pieces of at most `piece` bytes, in order, each handed to `take`.
    package func pieces(of piece: Int = 1 << 20, _ take: (UnsafeRawBufferPointer) throws -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 16)
        defer { buffer.deallocate() }
        var done = 0
        while done < count {
            let n = pread(body.descriptor, buffer.baseAddress!, min(piece, count - done), off_t(offset + done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Self.unreadable(n == 0 ? "it ended \(count - done) bytes early" : String(cString: strerror(errno))) }
            try take(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            done += n
        }
    }
}

extension PhotoStore {
    public func problem() -> String? { nil }
    /// A store of no file of its own (a test's): the bytes read, then put.
    public func put(_ file: BlobFile) throws -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(file.count)
        try file.pieces { bytes.append(contentsOf: $0) }
        return try put(bytes)
    }
    public var base: any PhotoStore { self }
}

/// A hash as the store accepts it: exactly 64 lowercase hex digits, so it can never name a path
/// outside the store.
package func isPhotoHash(_ text: String) -> Bool {
    text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
}

/// Blobs as files under a directory, fanned out as ab/cd/abcd… so no directory grows past 65,536
/// entries. A write is a temp file in the target directory, fsync, rename, fsync of the directory:
/// a crash leaves either the whole file or none (and a stray temp file the collector removes).
///
/// put and delete take a lock file (shared for put, exclusive for delete) around "touch or create"
/// and "check age, unlink": a sweep that decided a blob was unreferenced can then never remove it
/// after a put refreshed it, whichever process either runs in.
public struct FileStore: PhotoStore {
    public let root: String

    /// Directories are made on the first write, so a store that is only read never creates one.
    public init(root: String) {
        self.root = root
    }

    package func path(_ hash: String) -> (directory: String, file: String) {
        let utf8 = Array(hash.utf8)
        let directory = root + "/" + String(decoding: utf8[0..<2], as: UTF8.self) + "/" + String(decoding: utf8[2..<4], as: UTF8.self)
        return (directory, directory + "/" + hash)
    }

    public func put(_ bytes: [UInt8]) throws -> String {
        let hash = SHA256.hex(bytes)
        try write(hash) { fd in
            bytes.withUnsafeBytes { Self.writeAll(fd, $0) }
        }
        return hash
    }

    /// The upload's bytes copied file to file by the kernel (sendfile(2), which takes a regular
    /// file as its target since Linux 2.6.33), never through this process's memory.
    public func put(_ file: BlobFile) throws -> String {
        // A failure to read the upload's file is that upload's, not the store's (`unreadable`).
        var source: PhotoStoreError?
        do {
            try write(file.hash) { fd in
                var from = off_t(file.offset), left = file.count
                while left > 0 {
                    let n = sendfile(fd, file.body.descriptor, &from, min(left, 1 << 30))
                    if n > 0 { left -= n; continue }
                    if n < 0 && errno == EINTR { continue }
                    // Short, or failed: the rest read and written a piece at a time, which works
                    // where sendfile cannot write (ENOSYS, EINVAL) and tells which side failed: a
                    // read that fails is the upload's, a write that fails is the store's.
                    var failure: Int32 = 0
                    do {
                        try BlobFile(body: file.body, offset: Int(from), count: left, hash: file.hash).pieces { piece in
                            failure = Self.writeAll(fd, piece)
                            if failure != 0 { throw PhotoStoreError.file("cannot write", errno: failure) }
                        }
                    } catch let error as PhotoStoreError where failure == 0 {
                        source = error
                        return EIO
                    } catch {
                        return failure
                    }
                    return 0
                }
                return 0
            }
        } catch {
            throw source ?? error
        }
        return file.hash
    }

    /// write() until all is written: 0, or the errno.
    private static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Int32 {
        var written = 0
        while written < raw.count {
            let n = Glibc.write(fd, raw.baseAddress! + written, raw.count - written)
            if n < 0 { if errno == EINTR { continue }; return errno }
            written += n
        }
        return 0
    }

    /// A blob named `hash` written by `fill` (0, or the errno it failed with), unless it is
    /// stored already.
    private func write(_ hash: String, _ fill: (Int32) -> Int32) throws {
        let (directory, file) = path(hash)
        try withLock(LOCK_SH) {
            // Already stored: only its age is refreshed, so a sweep running now keeps it.
            if utimensat(AT_FDCWD, file, nil, 0) == 0 { return }
            let temporary = directory + "/.tmp-" + UUID().uuidString
            var fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd < 0 && errno == ENOENT {
                // The first blob of its directory: made then, not looked up again in every put.
                try Self.makeDirectories(directory)
                fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            }
            guard fd >= 0 else { throw PhotoStoreError.file("cannot create \(temporary)", errno: errno) }
            var failure = fill(fd)
            if failure == 0 && fsync(fd) != 0 { failure = errno }
            close(fd)
            if failure == 0 && rename(temporary, file) != 0 { failure = errno }
            guard failure == 0 else {
                unlink(temporary)
                throw PhotoStoreError.file("cannot write \(file)", errno: failure)
            }
            // The rename is durable only once the directory entry is.
            let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if directoryFD >= 0 { fsync(directoryFD); close(directoryFD) }
        }
    }

    /// mkdir -p with the errno kept (a full disk is an outage, not a broken store).
    package static func makeDirectories(_ path: String) throws {
        var built = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o755) != 0 && errno != EEXIST { throw PhotoStoreError.file("cannot create \(built)", errno: errno) }
        }
    }

    /// A store whose directory cannot be written, or whose disk is full.
    public func problem() -> String? {
        var info = statvfs()
        guard statvfs(root, &info) == 0 else { return nil }  // made on the first write
        if access(root, W_OK) != 0 { return "the photo store \(root) cannot be written: \(String(cString: strerror(errno)))" }
        if UInt64(info.f_bavail) * UInt64(info.f_frsize) < 1 << 20 { return "the photo store \(root) is full (under 1 MB free)" }
        return nil
    }

    public func refresh(_ hash: String) throws -> Bool {
        guard isPhotoHash(hash) else { return false }
        let file = path(hash).file
        return try withLock(LOCK_SH) { utimensat(AT_FDCWD, file, nil, 0) == 0 }
    }

    /// Read with open/read rather than FileManager, whose nil cannot tell a missing blob from a
    /// disk that fails (EIO is an outage, ENOENT is not).
    public func get(_ hash: String) throws -> [UInt8]? {
        guard isPhotoHash(hash) else { return nil }
        let file = path(hash).file
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw PhotoStoreError.file("cannot open \(file)", errno: errno)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0 { if errno == EINTR { continue }; throw PhotoStoreError.file("cannot read \(file)", errno: errno) }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    public func list() throws -> [(hash: String, modified: Date)] {
        var result: [(hash: String, modified: Date)] = []
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
        while let relative = enumerator.nextObject() as? String {
            let name = (relative as NSString).lastPathComponent
            let full = root + "/" + relative
            var info = stat()
            guard stat(full, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
            if isPhotoHash(name) {
                result.append((name, modified))
            } else if name.hasPrefix(".tmp-") {
                // A write that died halfway; a live one is far younger than an hour.
                if modified < Date().addingTimeInterval(-3600) { unlink(full) }
            }
        }
        return result
    }

    public func delete(_ hash: String, ifNotModifiedSince olderThan: Date) throws -> Bool {
        guard isPhotoHash(hash) else { return false }
        let file = path(hash).file
        return try withLock(LOCK_EX) {
            var info = stat()
            guard stat(file, &info) == 0 else { return false }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
            guard modified < olderThan else { return false }
            return unlink(file) == 0
        }
    }

    private func withLock<T>(_ operation: Int32, _ body: () throws -> T) throws -> T {
        var fd = open(root + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        if fd < 0 && errno == ENOENT {
            try Self.makeDirectories(root)
            fd = open(root + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { throw PhotoStoreError.file("cannot open \(root)/.lock", errno: errno) }
        defer { close(fd) }
        while flock(fd, operation) != 0 {
            guard errno == EINTR else { throw PhotoStoreError.file("cannot lock \(root)/.lock", errno: errno) }
        }
        return try body()
    }
}
