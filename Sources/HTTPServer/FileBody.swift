#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import CEpoll

/// An open file sent as a response body with sendfile(2): the kernel copies the bytes from the
/// page cache to the socket, never through user space. The body owns its descriptor and closes it
/// when the last reference goes, so a transfer that ends early (the client left, the server shut
/// down, a HEAD or a 304 that never sends it) closes it as surely as one that finishes.
public final class FileBody: Sendable {
    public let descriptor: Int32
    /// Bytes to send, from offset 0: the file's size when it was opened.
    public let count: Int

    /// Opens a regular file for reading; nil when there is none (or it is not a regular file).
    public init?(path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            return nil
        }
        descriptor = fd
        count = Int(info.st_size)
    }

    /// Whether all its bytes are in the page cache, so that sendfile cannot wait for the disk (or
    /// for a network file system that stopped answering): true only when the kernel says so.
    /// Asks the cache alone, never the file system: an event loop may ask.
    public var isCached: Bool { cepoll_file_cached(descriptor, Int64(count)) == 1 }

    /// Reads the file through the page cache unless it is there already, so that sending it does
    /// not wait for the file system: for a thread that may block (a handler slot, under the photo
    /// store's read deadline), never an event loop. False when a read failed.
    public func warm() -> Bool {
        if isCached { return true }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var offset = 0
        while offset < count {
            let n = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, min($0.count, count - offset), off_t(offset)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n == 0 }
            offset += n
        }
        return true
    }

    deinit { close(descriptor) }
}
