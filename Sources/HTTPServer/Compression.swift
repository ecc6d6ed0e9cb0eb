import CZlib
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// gzip for responses built in memory (pages, JSON), as a middleware: text of 1 KiB or more is
/// compressed when the request accepts gzip (RFC 9110 §12.5.3), and every such response says
/// `Vary: Accept-Encoding` so a cache never hands the compressed form to a client that did not ask.
///
/// The level is 1: on the pages people open most it costs a fraction of level 6's CPU for a few
/// more bytes, and the server's CPU is what is scarce. The largest answers (a thousand pins)
/// would save more at level 6, but they are rare and already many times smaller than plain
/// (`script/bench app` prints the figures per level; docs/performance.md, "Pages and the map").
public struct Compression: Middleware {
    public static let minimumSize = 1024
    public let level: Int32

    public init(level: Int32 = 1) { self.level = level }

    public func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
        var response = try next(request)
        Self.compress(&response, for: request, level: level)
        return response
    }

    public static func compress(_ response: inout HTTPResponse, for request: HTTPRequest, level: Int32 = 1) {
        // A 304 names the representation the client holds: the gzip form when that is what it sent.
        if response.status == .notModified, let etag = response.headers["ETag"], !etag.hasPrefix("W/"),
           let ifNoneMatch = request.headers["If-None-Match"], ETag.mentionsGzipVariant(ifNoneMatch, of: etag) {
            response.headers.set("ETag", ETag.gzipVariant(of: etag))
            return
        }
        guard case .bytes(let body) = response.body, body.count >= minimumSize,
              response.headers["Content-Encoding"] == nil,
              let type = response.headers["Content-Type"], isCompressible(type) else { return }
        if !response.headers.values("Vary").contains(where: { $0.lowercased().contains("accept-encoding") }) {
            response.headers.add("Vary", "Accept-Encoding")
        }
        guard acceptsGzip(request.headers["Accept-Encoding"]), let compressed = gzip(body, level: level) else { return }
        response.body = .bytes(compressed)
        response.headers.set("Content-Encoding", "gzip")
        // A strong validator names one representation (RFC 9110 §8.8.3): the gzip form gets its own.
        if let etag = response.headers["ETag"], etag.hasSuffix("\""), !etag.hasPrefix("W/") {
            response.headers.set("ETag", ETag.gzipVariant(of: etag))
        }
    }

    /// The gzip form of `body` at `level`, for a handler that keeps what it serves (the map page
    /// cache); nil when it would not be smaller. A response carrying it sets Content-Encoding, so
    /// the middleware leaves it alone.
    public static func gzip(_ body: [UInt8], level: Int32 = 1) -> [UInt8]? {
        guard body.count >= minimumSize, let compressed = Deflater.forThisThread(level: level).gzip(body),
              compressed.count < body.count else { return nil }
        return compressed
    }

    /// Text worth compressing: `text/*`, JSON, JavaScript, XML, and every structured-syntax type
    /// built on JSON or XML (`+json`, `+xml`, RFC 6839): GeoJSON, GPX and KML exports, SVG, the
    /// web manifest. Images, zips and fonts are compressed already.
    public static func isCompressible(_ contentType: String) -> Bool {
        let type = (contentType.split(separator: ";", maxSplits: 1).first ?? "").trimmingSpaces().lowercased()
        return type.hasPrefix("text/") || type == "application/json" || type == "application/javascript"
            || type == "application/xml" || type.hasSuffix("+json") || type.hasSuffix("+xml")
    }

    /// True when Accept-Encoding lists gzip (or *) without q=0.
    public static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        for item in header.split(separator: ",") {
            let parts = item.split(separator: ";")
            let coding = parts[0].trimmingSpaces().lowercased()
            guard coding == "gzip" || coding == "x-gzip" || coding == "*" else { continue }
            let refused = parts.dropFirst().contains { parameter in
                let p = parameter.trimmingSpaces().lowercased()
                return p.hasPrefix("q=") && (Double(p.dropFirst(2)) ?? 1) == 0
            }
            if !refused { return true }
        }
        return false
    }
}

/// One zlib stream per handler thread, reset between responses: deflateInit allocates about 256 KiB
/// of window and hash tables, which per response cost more than compressing a small page.
final class Deflater {
    private var stream = z_stream()
    let level: Int32
    private let ready: Bool

    private init(level: Int32) {
        self.level = level
        // windowBits 15 + 16: a gzip wrapper (RFC 1952) instead of zlib's.
        ready = deflateInit2_(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
                              ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
    }

    deinit { if ready { deflateEnd(&stream) } }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in if let pointer { Unmanaged<Deflater>.fromOpaque(pointer).release() } }
        return key
    }()

    static func forThisThread(level: Int32) -> Deflater {
        if let pointer = pthread_getspecific(key) {
            let deflater = Unmanaged<Deflater>.fromOpaque(pointer).takeUnretainedValue()
            if deflater.level == level { return deflater }
            Unmanaged<Deflater>.fromOpaque(pointer).release()
        }
        let deflater = Deflater(level: level)
        pthread_setspecific(key, Unmanaged.passRetained(deflater).toOpaque())
        return deflater
    }

    func gzip(_ input: [UInt8]) -> [UInt8]? {
        guard ready, deflateReset(&stream) == Z_OK else { return nil }
        let bound = Int(deflateBound(&stream, uLong(input.count)))
        let output = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            let status: Int32 = input.withUnsafeBufferPointer { inBuf in
                stream.next_in = UnsafeMutablePointer(mutating: inBuf.baseAddress)
                stream.avail_in = uInt(inBuf.count)
                stream.next_out = buffer.baseAddress
                stream.avail_out = uInt(bound)
                return deflate(&stream, Z_FINISH)
            }
            count = status == Z_STREAM_END ? Int(stream.total_out) : 0
        }
        return output.isEmpty ? nil : output
    }
}

/// Entity tags (RFC 9110 §8.8.3) for responses whose validator is computed from their content.
public enum ETag {
    /// A strong tag from the bytes: CRC-32 and Adler-32 (zlib, hardware-assisted) with the length.
    public static func of(_ bytes: [UInt8]) -> String {
        let (crc, adler) = bytes.withUnsafeBufferPointer { buffer in
            (CZlib.crc32(0, buffer.baseAddress, uInt(buffer.count)), CZlib.adler32(1, buffer.baseAddress, uInt(buffer.count)))
        }
        return "\"\(String(crc, radix: 16))\(String(adler, radix: 16))-\(String(bytes.count, radix: 16))\""
    }

    static func gzipVariant(of etag: String) -> String { String(etag.dropLast()) + "-gz\"" }

    /// If-None-Match (§13.1.2) against a tag: `*`, or any listed tag equal by the weak comparison
    /// (a GET may use it), counting the gzip form of the same content as equal. Over the bytes,
    /// making no String: the photo route's 304 asks on every request.
    public static func matches(_ ifNoneMatch: String?, _ etag: String) -> Bool {
        guard var list = ifNoneMatch else { return false }
        var etag = etag
        return list.withUTF8 { list in etag.withUTF8 { etag in matches(list, etag) } }
    }

    private static func matches(_ list: UnsafeBufferPointer<UInt8>, _ etag: UnsafeBufferPointer<UInt8>) -> Bool {
        var bare = etag[...]
        if bare.starts(with: weakPrefix) { bare = bare.dropFirst(2) }
        var start = 0
        while start < list.count {
            var end = start
            while end < list.count && list[end] != UInt8(ascii: ",") { end += 1 }
            var tag = list[start..<end]
            start = end + 1
            guard !tag.isEmpty else { continue }
            while let first = tag.first, first == 0x20 || first == 0x09 { tag = tag.dropFirst() }
            while let last = tag.last, last == 0x20 || last == 0x09 { tag = tag.dropLast() }
            if tag.count == 1 && tag.first == UInt8(ascii: "*") { return true }
            if tag.starts(with: weakPrefix) { tag = tag.dropFirst(2) }
            if tag.elementsEqual(bare) || isGzipVariant(tag, stem: bare.dropLast()) { return true }
        }
        return false
    }

    /// Whether If-None-Match mentions the gzip form of `etag` anywhere (the 304's own tag is then
    /// that form). A byte search: this runs on every photo 304, and String.contains goes through
    /// generic text search.
    static func mentionsGzipVariant(_ ifNoneMatch: String, of etag: String) -> Bool {
        var list = ifNoneMatch, etag = etag
        return list.withUTF8 { list in
            etag.withUTF8 { etag in
                let stem = etag.dropLast()
                let length = stem.count + gzipSuffix.count
                guard list.count >= length else { return false }
                for at in 0...(list.count - length) where isGzipVariant(list[at..<(at + length)], stem: stem) {
                    return true
                }
                return false
            }
        }
    }

    /// `tag` is a tag whose last byte (the closing quote) is replaced by `-gz"`: `stem`, then `-gz"`.
    private static func isGzipVariant(_ tag: Slice<UnsafeBufferPointer<UInt8>>, stem: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        tag.count == stem.count + gzipSuffix.count && tag.prefix(stem.count).elementsEqual(stem)
            && tag.suffix(gzipSuffix.count).elementsEqual(gzipSuffix)
    }

    private static let weakPrefix: [UInt8] = Array("W/".utf8)
    private static let gzipSuffix: [UInt8] = Array("-gz\"".utf8)

    /// 304 Not Modified for a request whose If-None-Match names this content, else the response as it is.
    public static func conditional(_ request: HTTPRequest, _ response: HTTPResponse) -> HTTPResponse {
        guard case .bytes(let body) = response.body, response.status == .ok else { return response }
        let etag = response.headers["ETag"] ?? of(body)
        var response = response
        response.headers.set("ETag", etag)
        if matches(request.headers["If-None-Match"], etag) {
            return HTTPResponse(status: .notModified, headers: response.headers)
        }
        return response
    }
}

extension Substring.UTF8View {
    /// Without spaces and tabs at either end, as a view of the same bytes (no copy).
    public func trimmingSpaces() -> Substring.UTF8View {
        var start = startIndex, end = endIndex
        while start < end, self[start] == 0x20 || self[start] == 0x09 { start = index(after: start) }
        while end > start {
            let last = index(before: end)
            guard self[last] == 0x20 || self[last] == 0x09 else { break }
            end = last
        }
        return self[start..<end]
    }
}

extension Substring {
    /// Without spaces and tabs at either end. By UTF-8 index, then one copy: it runs on every
    /// request (Cookies.parse) and every If-None-Match, where a String built from a reversed view
    /// goes character by character through generic code.
    public func trimmingSpaces() -> String {
        String(Substring(utf8.trimmingSpaces()))
    }
}
