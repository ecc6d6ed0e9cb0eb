import HTTPServer
import AlbumWing
import Domain

/// Each person's last map page, rendered and gzipped, served again while nothing on it has changed.
///
/// The map page is what people come back to after every album, and rendering it takes six
/// statements, the page's HTML and its gzip. Whether anything it shows changed
/// is one number: the person's map version (migration 0097), moved on by triggers on pins and on
/// the photo counts — so also by an administrator's SQL — and returned by the session's own
/// statement. A page is kept under the version read in the same snapshot as its pins
/// (`PinStore.mapPage`), so the key names exactly what the page shows, and never without a version
/// row (migration 0119 puts back a row deleted under a person who still exists). It is reused only
/// when that version, the saved region, the list page and the session's chrome (CSRF token, name,
/// email) are all what it was rendered with, and never when the page carries a flash message. A
/// hit whose session SessionCache keeps costs no round trip and is answered on the event loop
/// (`MapRoutes.keptMapPage`); otherwise it costs the session's round trip.
///
/// Bounded: at most `maxBytes` of HTML and gzip together (16 MB: a club of 200 at about 25 KB a
/// page is 5 MB), the least recently used page dropped first (a BoundedCache by person). Per process: with several instances
/// each keeps its own, and the version in the database keeps them all right.
final class MapPageCache: Sendable {
    struct Key: Equatable, Sendable {
        let version: Int64
        let region: MapRegion
        let page: Int
        let csrfToken: String
        let user: User
        /// The map shown and the switcher's maps: a page kept for one map is never another's, and
        /// a renamed or joined map changes the header.
        let map: MapAccess
        let mapsJSON: String?

        init(version: Int64, region: MapRegion, page: Int, csrfToken: String, user: User, map: MapAccess? = nil, mapsJSON: String? = nil) {
            (self.version, self.region, self.page, self.csrfToken, self.user) = (version, region, page, csrfToken, user)
            self.map = map ?? .own(user)
            self.mapsJSON = mapsJSON
        }
    }

    private struct Entry: Sendable {
        let key: Key
        let html: [UInt8]
        var gzip: [UInt8]?
        var bytes: Int { html.count + (gzip?.count ?? 0) }
    }

    let maxBytes: Int
    /// By user id: a person's newer page replaces their older one.
    private let pages: BoundedCache<Int64, Entry>

    init(maxBytes: Int = 16 << 20) {
        self.maxBytes = maxBytes
        pages = BoundedCache(maxCost: maxBytes, cost: { $0.bytes })
    }

    /// The kept page for `key`, gzipped when the request accepts it; nil when there is none, or
    /// when its gzip is not kept yet and `compress` is false (an event loop never compresses).
    func response(for key: Key, acceptsGzip: Bool, compress: Bool = true) -> HTTPResponse? {
        guard let found = pages.get(key.user.id), found.key == key else { return nil }
        guard acceptsGzip else { return Self.response(found.html, gzipped: false) }
        if let gzip = found.gzip { return Self.response(gzip, gzipped: true) }
        guard compress else { return nil }
        // Kept plain only (the first visit did not accept gzip): compressed once, then kept too.
        guard let gzip = Compression.gzip(found.html) else { return Self.response(found.html, gzipped: false) }
        pages.update(key.user.id) { entry in
            if entry.key == key, entry.gzip == nil { entry.gzip = gzip }
        }
        return Self.response(gzip, gzipped: true)
    }

    /// Keeps a freshly rendered page (and its gzip when the request wanted one) and returns the
    /// response to send.
    func keep(_ html: [UInt8], for key: Key, acceptsGzip: Bool) -> HTTPResponse {
        let gzip = acceptsGzip ? Compression.gzip(html) : nil
        let entry = Entry(key: key, html: html, gzip: gzip)
        if entry.bytes <= maxBytes / 8 { pages.put(key.user.id, entry) }
        return gzip.map { Self.response($0, gzipped: true) } ?? Self.response(html, gzipped: false)
    }

    var count: Int { pages.count }
    var bytes: Int { pages.totalCost }

    private static func response(_ body: [UInt8], gzipped: Bool) -> HTTPResponse {
        var response = HTTPResponse(status: .ok, headers: ["Content-Type": "text/html; charset=utf-8"], body: body)
        if gzipped {
            response.headers.set("Content-Encoding", "gzip")
            response.headers.add("Vary", "Accept-Encoding")
        }
        return response
    }
}
