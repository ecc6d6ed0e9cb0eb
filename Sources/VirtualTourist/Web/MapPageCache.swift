import HTTPServer
import Synchronization

/// Each person's last map page, rendered and gzipped, served again while nothing on it has changed.
///
/// The map page is what people come back to after every album, and rendering it was a pipeline of
/// six statements, the page's HTML and its gzip on every visit. Whether anything it shows changed
/// is one number: the person's map version (migration 0097), moved on by triggers on pins and on
/// the photo counts — so also by an administrator's SQL — and returned by the session's own
/// statement. A page is reused only when that version, the saved region, the list page and the
/// session's chrome (CSRF token, name, email) are all what it was rendered with, and never when
/// the page carries a flash message. A hit costs the session's round trip and a copy.
///
/// Bounded: at most `maxBytes` of HTML and gzip together (16 MB: a club of 200 at about 25 KB a
/// page is 5 MB), the least recently used page dropped first. Per process: with several instances
/// each keeps its own, and the version in the database keeps them all right.
final class MapPageCache: Sendable {
    struct Key: Equatable, Sendable {
        let version: Int64
        let region: MapRegion
        let page: Int
        let csrfToken: String
        let user: User
    }

    private struct Entry {
        let key: Key
        let html: [UInt8]
        var gzip: [UInt8]?
        var used: UInt64
        var bytes: Int { html.count + (gzip?.count ?? 0) }
    }

    private struct State {
        var pages: [Int64: Entry] = [:]
        var bytes = 0
        var clock: UInt64 = 0
    }

    let maxBytes: Int
    private let state = Mutex(State())

    init(maxBytes: Int = 16 << 20) {
        self.maxBytes = maxBytes
    }

    /// The kept page for `key`, gzipped when the request accepts it; nil when there is none.
    func response(for key: Key, acceptsGzip: Bool) -> HTTPResponse? {
        let found = state.withLock { state -> Entry? in
            guard var entry = state.pages[key.user.id], entry.key == key else { return nil }
            state.clock += 1
            entry.used = state.clock
            state.pages[key.user.id] = entry
            return entry
        }
        guard let found else { return nil }
        guard acceptsGzip else { return Self.response(found.html, gzipped: false) }
        if let gzip = found.gzip { return Self.response(gzip, gzipped: true) }
        // Kept plain only (the first visit did not accept gzip): compressed once, then kept too.
        guard let gzip = Compression.gzip(found.html) else { return Self.response(found.html, gzipped: false) }
        state.withLock { state in
            guard var entry = state.pages[key.user.id], entry.key == key, entry.gzip == nil else { return }
            entry.gzip = gzip
            state.pages[key.user.id] = entry
            state.bytes += gzip.count
            Self.evict(&state, maxBytes: maxBytes)
        }
        return Self.response(gzip, gzipped: true)
    }

    /// Keeps a freshly rendered page (and its gzip when the request wanted one) and returns the
    /// response to send.
    func keep(_ html: [UInt8], for key: Key, acceptsGzip: Bool) -> HTTPResponse {
        let gzip = acceptsGzip ? Compression.gzip(html) : nil
        let entry = Entry(key: key, html: html, gzip: gzip, used: 0)
        if entry.bytes <= maxBytes / 8 {
            state.withLock { state in
                state.clock += 1
                var entry = entry
                entry.used = state.clock
                if let old = state.pages.updateValue(entry, forKey: key.user.id) { state.bytes -= old.bytes }
                state.bytes += entry.bytes
                Self.evict(&state, maxBytes: maxBytes)
            }
        }
        return gzip.map { Self.response($0, gzipped: true) } ?? Self.response(html, gzipped: false)
    }

    var count: Int { state.withLock { $0.pages.count } }
    var bytes: Int { state.withLock { $0.bytes } }

    private static func evict(_ state: inout State, maxBytes: Int) {
        while state.bytes > maxBytes, let oldest = state.pages.min(by: { $0.value.used < $1.value.used }) {
            state.bytes -= oldest.value.bytes
            state.pages.removeValue(forKey: oldest.key)
        }
    }

    private static func response(_ body: [UInt8], gzipped: Bool) -> HTTPResponse {
        var response = HTTPResponse(status: .ok, headers: ["Content-Type": "text/html; charset=utf-8"], body: body)
        if gzipped {
            response.headers.set("Content-Encoding", "gzip")
            response.headers.add("Vary", "Accept-Encoding")
        }
        return response
    }
}
