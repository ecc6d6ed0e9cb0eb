#if canImport(Glibc)
import Glibc
#endif
import HTTPServer

/// File-store blobs kept open for GET /photos/:id, by path: a thumbnail is opened once per
/// `lifetime`, not once per request (open, fstat and close were half the route's system calls;
/// nginx's open_file_cache does the same). A blob never changes under its name (the name is its
/// SHA-256), so a kept descriptor always has the right bytes; `lifetime` bounds how long one keeps
/// a swept blob's disk space after the collector unlinked it. Responses share a descriptor safely:
/// sendfile is given its own offset, and the last reference closes it (FileBody).
package final class OpenBlobs: Sendable {
    private struct Entry: Sendable {
        package let file: FileBody
        package let expires: ContinuousClock.Instant
    }

    package let lifetime: Duration
    private let files: BoundedCache<String, Entry>

    package init(maxCount: Int = 256, lifetime: Duration = .seconds(10)) {
        self.lifetime = lifetime
        files = BoundedCache(maxCount: maxCount)
    }

    /// The open file at `path` when one is kept and its bytes are all in the page cache: one
    /// system call that asks the cache alone (cachestat), so the event loop may ask, and sendfile
    /// then cannot wait for a file system that stopped answering. Nil otherwise: the caller opens
    /// it with `file(at:)` where it may block.
    package func kept(at path: String) -> FileBody? {
        guard let entry = files.get(path), entry.expires > .now, entry.file.isCached else { return nil }
        return entry.file
    }

    /// The open file at `path`, kept or opened now, its bytes read into the page cache; nil when
    /// there is no regular file there, or it cannot be read (errno says why). Opening and reading
    /// may block as long as the file system does: not on an event loop (a handler slot, under the
    /// store's read deadline).
    package func file(at path: String) -> FileBody? {
        let now = ContinuousClock.now
        if let entry = files.get(path), entry.expires > now {
            guard entry.file.warm() else { return nil }
            return entry.file
        }
        guard let file = FileBody(path: path), file.warm() else {
            let code = errno
            files.remove(path)
            errno = code
            return nil
        }
        files.put(path, Entry(file: file, expires: now + lifetime))
        return file
    }

    /// One per process: paths are absolute in practice and name their store, so stores share it.
    package static let shared = OpenBlobs()
}
