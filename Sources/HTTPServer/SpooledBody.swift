#if canImport(Glibc)
import Glibc
#endif

/// A large upload's body on disk as it arrives (HTTPLimits.Upload.spooled): the server never holds
/// a photo's bytes whole in memory, however many arrive at once. The file is unlinked as soon as
/// it is made, so it goes when the request does (its deinit closes it), and a crash leaves nothing
/// behind. The parser appends to it on its event loop (writes into the page cache); once the
/// request reaches its handler the body no longer changes, and is read with `read` (a small
/// part), `withMapped` (scanned in place) or through `descriptor` (the photo store copies from
/// it in the kernel).
public final class SpooledBody: @unchecked Sendable {
    // @unchecked: `count` changes only while the parser owns the request, before any handler sees it.
    public let descriptor: Int32
    public private(set) var count = 0
    let directory: String

    /// A new empty file in `directory`.
    public init(directory: String) throws(HTTPParseError) {
        // O_CLOEXEC from the start: a child spawned meanwhile (the HEIF decoder) must not inherit it.
        // O_TMPFILE first: a file with no name at all (on NFS an unlinked open file is renamed
        // .nfsXXXX and outlives a crash); a named file unlinked at once where it is not supported.
        var fd = open(directory, Self.temporaryFile | O_RDWR | O_CLOEXEC, 0o600)
        for _ in 0..<8 where fd < 0 {
            let path = directory + "/.tmp-upload-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd >= 0 { unlink(path) } else if errno != EEXIST { break }
        }
        guard fd >= 0 else { throw Self.refusal(errno, directory: directory) }
        descriptor = fd
        self.directory = directory
    }

    /// A body the server kept in memory, spooled after all (a request made by a test).
    public static func holding(_ bytes: [UInt8], directory: String) throws(HTTPParseError) -> SpooledBody {
        let body = try SpooledBody(directory: directory)
        try body.append(bytes[...])
        return body
    }

    deinit { close(descriptor) }

    /// Linux's O_TMPFILE (__O_TMPFILE | O_DIRECTORY), which Glibc's module does not export.
    static let temporaryFile: Int32 = 0o20000000 | O_DIRECTORY

    func append(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) {
        var failure: Int32 = 0
        bytes.withUnsafeBytes { raw in
            var written = 0
            while written < raw.count {
                let n = pwrite(descriptor, raw.baseAddress! + written, raw.count - written, off_t(count + written))
                if n < 0 { if errno == EINTR { continue }; failure = errno; return }
                written += n
            }
        }
        guard failure == 0 else { throw Self.refusal(failure, directory: directory) }
        count += bytes.count
    }

    /// Bytes `range` of the body (a form's field, a part's head): clamped to the body.
    public func read(_ range: Range<Int>) -> [UInt8] {
        let lower = max(0, min(range.lowerBound, count)), upper = max(lower, min(range.upperBound, count))
        var out = [UInt8](repeating: 0, count: upper - lower)
        var done = 0
        out.withUnsafeMutableBytes { raw in
            while done < raw.count {
                let n = pread(descriptor, raw.baseAddress! + done, raw.count - done, off_t(lower + done))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }
                done += n
            }
        }
        return Array(out.prefix(done))
    }

    /// The body mapped read-only for `body`: its pages come from the file as they are read and
    /// are the kernel's to drop again, never the heap's.
    public func withMapped<T>(_ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        guard count > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        guard let address = mmap(nil, count, PROT_READ, MAP_SHARED, descriptor, 0), address != MAP_FAILED else {
            throw HTTPParseError(.serviceUnavailable, "the server could not read the upload back (\(String(cString: strerror(errno)))); send it again in a moment",
                                 retryAfter: 5)
        }
        defer { munmap(address, count) }
        return try body(UnsafeRawBufferPointer(start: address, count: count))
    }

    /// Refused for the disk: 503, for a moment (a full disk is the operator's to mend), and said
    /// in the log, where the operator looks.
    static func refusal(_ code: Int32, directory: String) -> HTTPParseError {
        // Troubleshooting: upload spool
        serverLogger.warning("upload spool \(directory): \(String(cString: strerror(code))); uploads of photos answer 503 until it can be written")
        let why = code == ENOSPC || code == EDQUOT ? "has no room to receive uploads right now" : "cannot receive uploads right now"
        return HTTPParseError(.serviceUnavailable, "the server \(why) (\(String(cString: strerror(code))))", retryAfter: 30)
    }
}
