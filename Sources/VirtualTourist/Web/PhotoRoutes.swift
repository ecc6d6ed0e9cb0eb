#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import Log
import AlbumWing

private let photoBytesLogger = Logger(label: "photo-store")

/// GET /photos/:id: a photo's bytes, on the path an album page takes thirty times at once
/// (docs/architecture.md, "Photos on the hot path"). With the session and the photo in
/// PhotoAccess it costs no round trip and the file goes out with sendfile; otherwise the one
/// statement it needs fills the cache for the next time.
extension WebPipeline {
    mutating func addPhotoBytesRoute(albums: AlbumStore) {
        let access = albums.access
        let breaker = albums.photos as? StoreBreaker
        signedInCached("/photos/:id", cached: { request, grant, mayBlock in
            guard let access, let id = Self.pinID(request) else { throw HTTPError.notFound }
            // The store is known to be down: answered on the event loop, no slot, no store call.
            if let seconds = breaker?.refusal() { return Self.storeUnavailable(retryAfter: seconds) }
            let width = Self.photoWidth(request)
            if case .allowed(let photo) = access.photo(id, for: grant) {
                // Inline only from the file store, and only a blob it has open: another store's
                // get is a network call, an open may hang with the file system.
                guard mayBlock || albums.photos.base is FileStore else { return nil }
                return try Self.photoResponse(request, photo, width: width, store: albums.photos, mayBlock: mayBlock)
            }
            guard mayBlock else { return nil }
            let mark = access.mark()
            switch try albums.accessPhoto(id, userID: grant.userID) {
            case nil:
                throw HTTPError.notFound
            case .stored(let photo)?:
                guard grant.pinID == nil || grant.pinID == photo.pinID else { throw HTTPError.notFound }
                access.remember(photos: [(id, photo)], since: mark)
                return try Self.photoResponse(request, photo, width: width, store: albums.photos, mayBlock: true)
            case .inRow(let bytes, let contentType, let pinID)?:
                // Not yet moved to the store, so never cached.
                guard grant.pinID == nil || grant.pinID == pinID else { throw HTTPError.notFound }
                return Self.rowPhotoResponse(request, bytes: bytes, contentType: contentType)
            }
        }) { context in
            guard let id = Self.pinID(context.request) else { throw HTTPError.notFound }
            if let seconds = breaker?.refusal() { return Self.storeUnavailable(retryAfter: seconds) }
            let width = Self.photoWidth(context.request)
            let mark = access?.mark()
            switch try albums.accessPhoto(id, userID: context.map.forReading) {
            case nil:
                throw HTTPError.notFound
            case .stored(let photo)?:
                if let access, let mark { access.remember(photos: [(id, photo)], since: mark) }
                return try Self.photoResponse(context.request, photo, width: width, store: albums.photos, mayBlock: true)!  // never nil where it may block
            case .inRow(let bytes, let contentType, _)?:
                return Self.rowPhotoResponse(context.request, bytes: bytes, contentType: contentType)
            }
        }
    }

    /// A photo whose bytes are still in its row (not yet moved to the store): the original at every
    /// width, its ETag the bytes' SHA-256 as the store would name them.
    static func rowPhotoResponse(_ request: HTTPRequest, bytes: [UInt8], contentType: String) -> HTTPResponse {
        let etag = "\"\(SHA256.hex(bytes))\""
        if ETag.matches(request.headers["If-None-Match"], etag) {
            return HTTPResponse(status: .notModified, headers: ["ETag": etag, "Cache-Control": photoCaching])
        }
        return HTTPResponse(status: .ok, headers: ["ETag": etag, "Cache-Control": photoCaching, "Content-Type": contentType], body: bytes)
    }

    /// Stored bytes never change under an id (a new collection makes new rows), and the ETag is
    /// their SHA-256: strong, and a year of private caching.
    static let photoCaching = "private, max-age=31536000, immutable"

    /// ?w=: a thumbnail width. Parsed into a range, then the nearest width there is (ties go to the
    /// larger); anything unparsable is the original.
    static func photoWidth(_ request: HTTPRequest) -> Int? {
        request.queryValue("w").flatMap { Int($0) }.map { requested in
            let clamped = min(max(requested, 1), 100_000)
            return Thumbnailer.widths.min { abs($0 - clamped) < abs($1 - clamped) || (abs($0 - clamped) == abs($1 - clamped) && $0 > $1) }!
        }
    }

    /// A 304 when the browser has these bytes (no file opened); else the blob: an open file sent
    /// with sendfile from the file store, the bytes from any other store. Nil when the blob is a
    /// file not kept open and `mayBlock` is false: it is opened on a handler slot, as a read of
    /// the store through the breaker (its deadline too), since a file system that stops answering
    /// (NFS, FUSE) holds `open` for as long as it likes, and an event loop must never wait.
    static func photoResponse(_ request: HTTPRequest, _ photo: PhotoAccess.Photo, width: Int?, store: any PhotoStore,
                              mayBlock: Bool) throws -> HTTPResponse? {
        let blob = photo.blob(width: width)
        let etag = "\"\(blob.hash)\""
        if ETag.matches(request.headers["If-None-Match"], etag) {
            return HTTPResponse(status: .notModified, headers: ["ETag": etag, "Cache-Control": photoCaching])
        }
        let headers: HTTPHeaders = ["ETag": etag, "Cache-Control": photoCaching, "Content-Type": blob.contentType]
        let breaker = store as? StoreBreaker
        if let files = store.base as? FileStore {
            guard isPhotoHash(blob.hash) else { throw PhotoStoreError(description: "blob \(blob.hash) is not a blob's name") }
            let path = files.path(blob.hash).file
            if let file = OpenBlobs.shared.kept(at: path) { return HTTPResponse(status: .ok, headers: headers, body: .file(file)) }
            guard mayBlock else { return nil }
            let open: () throws -> FileBody? = {
                guard let file = OpenBlobs.shared.file(at: path) else {
                    let code = errno
                    if code == ENOENT || code == ENOTDIR { return nil }
                    // A disk that fails (EIO) or lost its permissions: an outage, as a get's.
                    throw PhotoStoreError.file("cannot open \(path)", errno: code)
                }
                return file
            }
            do {
                guard let file = try breaker.map({ try $0.call(.read, open) }) ?? open() else {
                    throw PhotoStoreError(description: "blob \(blob.hash) is missing from the store")
                }
                return HTTPResponse(status: .ok, headers: headers, body: .file(file))
            } catch let error as PhotoStoreError where error.outage {
                // Troubleshooting: photo not served
                if error.retryAfter == nil { photoBytesLogger.warning("photo not served: \(error)") }
                return storeUnavailable(retryAfter: error.retryAfter ?? breaker?.refusal() ?? 10)
            }
        }
        do {
            guard let bytes = try store.get(blob.hash) else {
                throw PhotoStoreError(description: "blob \(blob.hash) is missing from the store")
            }
            return HTTPResponse(status: .ok, headers: headers, body: bytes)
        } catch let error as PhotoStoreError where error.unavailable {
            // The object store is down or refuses us: this image fails with a 503 the browser
            // may retry; the page and every other route carry on. Refusals by the breaker are
            // counted in /metrics, not logged one by one.
            // Troubleshooting: photo not served
            if error.retryAfter == nil { photoBytesLogger.warning("photo not served: \(error)") }
            return storeUnavailable(retryAfter: error.retryAfter ?? breaker?.refusal() ?? 10)
        }
    }

    /// A photo the store cannot give now (a member's or a share link's visitor's): the page and
    /// every other route carry on, and the browser may ask again after `retryAfter` seconds.
    static func storeUnavailable(retryAfter seconds: Int) -> HTTPResponse {
        var response = HTTPResponse.text("This photo cannot be loaded right now. Please try again in a moment.", status: .serviceUnavailable)
        response.waitFor(.seconds(seconds))
        return response
    }
}
