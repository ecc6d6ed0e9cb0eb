#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

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

    deinit { close(descriptor) }
}
