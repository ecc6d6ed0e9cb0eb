#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import Synchronization

/// Serves the files under one folder (the app's Public/) for GET and HEAD.
///
/// A request can only ever reach a regular file inside the root: the path is decoded segment by
/// segment (an encoded slash or NUL is refused, "." and ".." and hidden names are refused), and the
/// resolved real path, symlinks followed, must still lie under the root's real path.
///
/// Files up to 1 MiB are kept in memory with their gzip form, keyed by size and mtime, so a changed
/// file is picked up on the next request (one stat per request). JavaScript and CSS are served
/// without their comments (CommentStripping).
public final class StaticFiles: HTTPHandler {
    public let root: String
    public let cacheControl: String
    private let cache = Mutex<[String: CachedFile]>([:])
    private static let maxCachedFileBytes = 1024 * 1024
    private static let maxCacheBytes = 32 * 1024 * 1024

    private struct CachedFile {
        let size: Int
        let mtime: Int
        let mtimeNanos: Int
        let body: [UInt8]
        var gzipped: [UInt8]??
    }

    /// `root` must exist; it is resolved once to its real path.
    public init(root: String, cacheControl: String = "public, max-age=300") {
        var resolved = [CChar](repeating: 0, count: Int(PATH_MAX))
        if realpath(root, &resolved) != nil {
            self.root = string(fromCString: resolved)
        } else {
            self.root = root
        }
        self.cacheControl = cacheControl
    }

    public func handle(_ request: HTTPRequest) throws -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            throw HTTPError(.methodNotAllowed, "Files can only be read.", headers: ["Allow": "GET, HEAD"])
        }
        guard let relative = Self.safeRelativePath(request.path) else { throw HTTPError.notFound }
        var path = relative.isEmpty ? root : root + "/" + relative
        var info = stat()
        guard stat(path, &info) == 0 else { throw HTTPError.notFound }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            path += "/index.html"
            guard stat(path, &info) == 0 else { throw HTTPError.notFound }
        }
        guard (info.st_mode & S_IFMT) == S_IFREG, isInsideRoot(path) else { throw HTTPError.notFound }

        let size = Int(info.st_size)
        let mtime = Int(info.st_mtim.tv_sec)
        let mtimeNanos = Int(info.st_mtim.tv_nsec)
        // Size and modification time identify the content well enough for a strong validator here:
        // files are replaced by deploys, not edited within the same nanosecond.
        let tag = "\(String(size, radix: 16))-\(String(mtime, radix: 16))\(String(mtimeNanos, radix: 16))"
        let contentType = Self.contentType(for: path)
        let compressible = Compression.isCompressible(contentType) && size >= Compression.minimumSize
        let wantsGzip = compressible && Self.acceptsGzip(request.headers)
        let etag = wantsGzip ? "\"\(tag)-gz\"" : "\"\(tag)\""

        var headers: HTTPHeaders = [
            "Content-Type": contentType,
            "ETag": etag,
            "Last-Modified": HTTPDate.format(mtime),
            "Cache-Control": cacheControl,
        ]
        if compressible { headers.add("Vary", "Accept-Encoding") }

        // RFC 9110 §13.2.2: If-None-Match wins over If-Modified-Since when both are present.
        if let inm = request.headers["If-None-Match"] {
            if Self.etagMatches(inm, etag) { return HTTPResponse(status: .notModified, headers: headers) }
        } else if let ims = request.headers["If-Modified-Since"], let since = HTTPDate.parse(ims), mtime <= since {
            return HTTPResponse(status: .notModified, headers: headers)
        }

        let body = try contents(of: path, size: size, mtime: mtime, mtimeNanos: mtimeNanos, gzip: wantsGzip)
        if body.gzipped { headers.add("Content-Encoding", "gzip") }
        else if wantsGzip { headers.set("ETag", "\"\(tag)\"") }
        return HTTPResponse(status: .ok, headers: headers, body: body.bytes)
    }

    private func contents(of path: String, size: Int, mtime: Int, mtimeNanos: Int, gzip: Bool) throws -> (bytes: [UInt8], gzipped: Bool) {
        let contentType = Self.contentType(for: path)
        if size > Self.maxCachedFileBytes {
            return (CommentStripping.served(try Self.read(path, size: size), contentType: contentType), false)
        }
        let cached = cache.withLock { c -> CachedFile? in
            guard let f = c[path], f.size == size, f.mtime == mtime, f.mtimeNanos == mtimeNanos else { return nil }
            return f
        }
        var file: CachedFile
        if let cached {
            file = cached
        } else {
            file = CachedFile(size: size, mtime: mtime, mtimeNanos: mtimeNanos, body: CommentStripping.served(try Self.read(path, size: size), contentType: contentType), gzipped: nil)
        }
        if gzip, file.gzipped == nil {
            let compressed = Gzip.compress(file.body)
            // Keep the gzip form only when it saves something worth a header.
            file.gzipped = .some(compressed.flatMap { $0.count < file.body.count - 64 ? $0 : nil })
        }
        if cached == nil || (gzip && cached?.gzipped == nil) {
            cache.withLock { c in
                let total = c.values.reduce(0) { $0 + $1.body.count + (($1.gzipped ?? nil)?.count ?? 0) }
                if total > Self.maxCacheBytes { c.removeAll() }
                c[path] = file
            }
        }
        if gzip, let compressed = file.gzipped ?? nil { return (compressed, true) }
        return (file.body, false)
    }

    private static func read(_ path: String, size: Int) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HTTPError.notFound }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: size)
        var offset = 0
        while offset < size {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + offset, size - offset, off_t(offset)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            offset += n
        }
        if offset < size { bytes.removeSubrange(offset...) }
        return bytes
    }

    private func isInsideRoot(_ path: String) -> Bool {
        var resolved = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard realpath(path, &resolved) != nil else { return false }
        let real = string(fromCString: resolved)
        return real.hasPrefix(root + "/")
    }

    /// The request path as a relative file path, or nil when it could escape the root or names a
    /// hidden file. Each segment is decoded on its own, so "%2F" can never become a separator.
    static func safeRelativePath(_ path: String) -> String? {
        var segments: [String] = []
        for raw in path.split(separator: "/", omittingEmptySubsequences: true) {
            guard let segment = FormDecoding.percentDecode(raw) else { return nil }
            if segment.isEmpty || segment.hasPrefix(".") { return nil }
            if segment.contains("/") || segment.contains("\\") || segment.contains("\0") { return nil }
            segments.append(segment)
        }
        return segments.joined(separator: "/")
    }

    static func acceptsGzip(_ headers: HTTPHeaders) -> Bool {
        for value in headers.values("Accept-Encoding") {
            for item in value.split(separator: ",") {
                let parts = item.split(separator: ";").map { $0.trimmingASCIIWhitespace() }
                guard let coding = parts.first, coding.equalsIgnoringASCIICase("gzip") else { continue }
                // RFC 9110 §12.4.2: q=0 means "not acceptable".
                let q = parts.dropFirst().first { $0.lowercased().hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) }
                return (q ?? 1) > 0
            }
        }
        return false
    }

    static func etagMatches(_ header: String, _ etag: String) -> Bool {
        if header.trimmingASCIIWhitespace() == "*" { return true }
        // Weak comparison (RFC 9110 §13.1.2): W/ prefixes are ignored.
        func strip(_ s: Substring) -> Substring { s.hasPrefix("W/") ? s.dropFirst(2) : s }
        return header.split(separator: ",").contains { strip($0.trimmingASCIIWhitespace()) == strip(Substring(etag)) }
    }

    static let types: [String: String] = [
        "html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8",
        "js": "application/javascript; charset=utf-8", "mjs": "application/javascript; charset=utf-8",
        "json": "application/json", "geojson": "application/geo+json", "txt": "text/plain; charset=utf-8",
        "md": "text/plain; charset=utf-8", "svg": "image/svg+xml", "png": "image/png", "jpg": "image/jpeg",
        "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp", "ico": "image/x-icon",
        "woff2": "font/woff2", "webmanifest": "application/manifest+json", "bin": "application/octet-stream",
    ]

    static func contentType(for path: String) -> String {
        let name = path.split(separator: "/").last ?? ""
        guard let dot = name.lastIndex(of: ".") else { return "application/octet-stream" }
        return types[name[name.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }
}
