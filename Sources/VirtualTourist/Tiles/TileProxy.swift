import Foundation
import HTTPClient
import HTTPServer
import Log
import Synchronization
import Waiting

/// Raster tiles from an upstream tile server (TILE_URL), fetched by the server through libcurl and
/// kept in a disk cache, so browsers never talk to the upstream (it learns nothing about who looks
/// where, and the CSP stays 'self'). Follows the OpenStreetMap tile usage policy's asks: a
/// User-Agent naming the instance and a contact, the upstream's caching headers honoured (with a
/// week when it sends none), and one upstream fetch for any number of concurrent requests of a tile.
final class TileProxy: TileSource {
    let template: String
    let info: TileInfo
    let cache: TileDiskCache
    private let client: HTTPClient
    private let flights = Mutex<[String: Flight]>([:])
    /// Upstream requests made (for tests and /metrics-style checks).
    let upstreamFetches = Atomic<Int>(0)
    static let log = Logger(label: "tile-proxy")
    /// When the upstream sends no freshness: the OSM policy asks for at least 7 days.
    static let defaultFreshness: TimeInterval = 7 * 86400
    /// Each miss is a request to someone else's server: only for people signed in (TileRoutes).
    var needsSignIn: Bool { true }

    init(settings: AppSettings) throws {
        template = settings.tileURL
        guard template.contains("{z}"), template.contains("{x}"), template.contains("{y}"),
              let scheme = URL(string: Self.url(template, 0, 0, 0))?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw TileProxyError("TILE_URL must be an http(s) URL with {z}, {x} and {y}")
        }
        let lower = template.lowercased()
        let format = lower.contains(".jpg") || lower.contains(".jpeg") ? "jpg" : lower.contains(".webp") ? "webp" : "png"
        info = TileInfo(format: format, minzoom: 0, maxzoom: 19, bounds: [-180, -85.0511, 180, 85.0511],
                        attribution: settings.tileAttribution, tileSize: 256)
        var options = settings.httpClient
        options.totalTimeout = min(options.totalTimeout, 15)
        options.maxResponseBytes = 4 * 1024 * 1024
        // Identify the instance and how to reach its operator (tile usage policies require it).
        var agent = "VirtualTourist/1.0 tile proxy"
        var parts: [String] = []
        if let site = settings.publicURL, !site.isEmpty { parts.append("instance: \(site)") }
        // TILE_CONTACT, or else the operator's CONTACT_EMAIL the photo providers get.
        let contact = settings.tileContact.isEmpty ? (settings.contactEmail ?? "") : settings.tileContact
        if !contact.isEmpty { parts.append("contact: \(contact)") }
        if !parts.isEmpty { agent += " (\(parts.joined(separator: "; ")))" }
        options.userAgent = agent
        // The operator named this upstream, so it may be on loopback or the LAN (the address guard
        // refuses internal addresses for every origin nobody configured).
        options.internalOrigins += [Self.url(template, 0, 0, 0)]
        client = HTTPClient(options: options)
        cache = try TileDiskCache(directory: settings.tileCacheDirectory, capacity: settings.tileCacheBytes)
    }

    static func url(_ template: String, _ z: Int, _ x: Int, _ y: Int) -> String {
        template.replacingOccurrences(of: "{z}", with: String(z))
            .replacingOccurrences(of: "{x}", with: String(x))
            .replacingOccurrences(of: "{y}", with: String(y))
            .replacingOccurrences(of: "{s}", with: ["a", "b", "c"][(x + y) % 3])
            .replacingOccurrences(of: "{r}", with: "")
    }

    func response(z: Int, x: Int, y: Int, request: HTTPRequest) throws -> HTTPResponse {
        guard z <= info.maxzoom else { return TileSources.notFound() }
        let key = "\(z)/\(x)/\(y)"
        let cached = cache.read(key)
        if let cached, cached.isFresh { return serve(cached, request) }
        switch fetchOnce(key: key, z: z, x: x, y: y, stale: cached) {
        case .tile(let tile): return serve(tile, request)
        case .notFound: return TileSources.notFound()
        case .failed(let why):
            // An old copy beats no map; the browser tries again soon.
            if let cached { return serve(cached, request, maxAge: 60) }
            var response = HTTPResponse(status: HTTPStatus(502), body: Array("the tile server did not answer: \(why)\n".utf8))
            response.headers.set("Content-Type", "text/plain; charset=utf-8")
            response.headers.set("Cache-Control", "no-store")
            return response
        }
    }

    func serve(_ tile: CachedTile, _ request: HTTPRequest, maxAge: Int? = nil) -> HTTPResponse {
        var response = TileSources.matches(request, etag: tile.etag) ? HTTPResponse(status: .notModified)
            : HTTPResponse(status: .ok, body: tile.bytes)
        if response.status.code == 200 { response.headers.set("Content-Type", tile.contentType) }
        response.headers.set("ETag", tile.etag)
        let remaining = maxAge ?? max(60, Int(tile.expires.timeIntervalSinceNow))
        // private: the route needs a session, so shared caches must not hand it to others.
        response.headers.set("Cache-Control", "private, max-age=\(remaining)")
        return response
    }

    enum Outcome: Sendable { case tile(CachedTile), notFound, failed(String) }

    /// One fetch per tile at a time: the first request fetches, the others wait for its outcome.
    final class Flight: Sendable {
        let outcome = Waitable<Outcome?>(nil)
    }

    func fetchOnce(key: String, z: Int, x: Int, y: Int, stale: CachedTile?) -> Outcome {
        let (flight, leader) = flights.withLock { flights -> (Flight, Bool) in
            if let existing = flights[key] { return (existing, false) }
            let flight = Flight()
            flights[key] = flight
            return (flight, true)
        }
        if !leader {
            let wait = Duration.seconds(client.options.totalTimeout + client.options.connectTimeout + 1)
            return flight.outcome.wait(for: { $0 }, timeout: wait) ?? .failed("timed out waiting for the tile server")
        }
        let outcome = fetch(key: key, z: z, x: x, y: y, stale: stale)
        flights.withLock { $0[key] = nil }
        flight.outcome.change { $0 = outcome }
        return outcome
    }

    func fetch(key: String, z: Int, x: Int, y: Int, stale: CachedTile?) -> Outcome {
        var headers: [String: String] = [:]
        if let upstreamTag = stale?.upstreamETag { headers["If-None-Match"] = upstreamTag }
        if let modified = stale?.lastModified { headers["If-Modified-Since"] = modified }
        upstreamFetches.add(1, ordering: .relaxed)
        let url = Self.url(template, z, x, y)
        let response: HTTPClientResponse
        do {
            response = try client.get(url, headers: headers)
        } catch {
            // Troubleshooting: tile z/x/y: …
            Self.log.warning("tile \(key): \(error)")
            return .failed("\(error)")
        }
        let freshness = Self.freshness(response.headers)
        switch response.status {
        case 200:
            let type = response.headers["content-type"]?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            guard type.hasPrefix("image/"), !response.body.isEmpty else { return .failed("not an image (\(type))") }
            let tile = CachedTile(bytes: response.body, contentType: type, expires: Date().addingTimeInterval(freshness.seconds),
                                  upstreamETag: response.headers["etag"], lastModified: response.headers["last-modified"])
            if freshness.store { cache.write(key, tile) }
            return .tile(tile)
        case 304:
            guard let stale else { return .failed("304 without a cached copy") }
            let refreshed = CachedTile(bytes: stale.bytes, contentType: stale.contentType, expires: Date().addingTimeInterval(freshness.seconds),
                                       upstreamETag: response.headers["etag"] ?? stale.upstreamETag, lastModified: stale.lastModified)
            if freshness.store { cache.write(key, refreshed) }
            return .tile(refreshed)
        case 404, 410:
            return .notFound
        default:
            // Troubleshooting: the tile server answered
            Self.log.warning("tile \(key): the tile server answered \(response.status)")
            return .failed("status \(response.status)")
        }
    }

    /// RFC 9111: no-store forbids keeping it; s-maxage, then max-age, then Expires − Date give the
    /// lifetime; with none of them, a week.
    static func freshness(_ headers: [String: String]) -> (seconds: TimeInterval, store: Bool) {
        var maxAge: TimeInterval?, sharedMaxAge: TimeInterval?, store = true
        for directive in (headers["cache-control"] ?? "").lowercased().split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            switch parts[0] {
            case "no-store", "private": store = false
            case "no-cache": maxAge = 0
            case "max-age": if parts.count == 2, let n = Double(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))), n >= 0 { maxAge = min(n, 365 * 86400) }
            case "s-maxage": if parts.count == 2, let n = Double(parts[1]), n >= 0 { sharedMaxAge = min(n, 365 * 86400) }
            default: break
            }
        }
        if let seconds = sharedMaxAge ?? maxAge { return (seconds, store) }
        if let expires = headers["expires"].flatMap(HTTPDate.parse) {
            let now = headers["date"].flatMap(HTTPDate.parse) ?? Int(Date().timeIntervalSince1970)
            return (TimeInterval(max(0, expires - now)), store)
        }
        return (defaultFreshness, store)
    }
}

struct TileProxyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct CachedTile: Sendable {
    let bytes: [UInt8]
    let contentType: String
    let expires: Date
    let upstreamETag: String?
    let lastModified: String?

    var isFresh: Bool { expires > Date() }
    /// Our own strong ETag: the bytes' hash, so a revalidated but unchanged tile keeps its tag.
    var etag: String {
        var hash = FNV1a()
        hash.add(bytes)
        return "\"t\(String(hash.value, radix: 36))\""
    }
}

/// Upstream tiles on disk: DIR/z/x/y, each file one line of JSON (type, expiry, validators) and
/// then the image. A directory rather than PostgreSQL: tiles are read far more often than written,
/// the kernel's page cache serves hot ones without a database connection (handler threads are as
/// many as pool connections), and they stay out of database backups. Instances share it by mounting
/// one volume (docker-compose does); writes go to a temporary name and are renamed into place, so a
/// reader in any instance sees a whole file or none. Least recently used tiles go first once the
/// cap is passed: use refreshes a file's modification time, which every instance and a restart see.
final class TileDiskCache: Sendable {
    let directory: String
    let capacity: Int
    private struct State { var bytes = 0; var files = 0; var sinceScan = 0 }
    private let state = Mutex(State())

    init(directory: String, capacity: Int) throws {
        self.directory = directory
        self.capacity = max(1, capacity)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let scanned = scan()
        state.withLock { $0.bytes = scanned.reduce(0) { $0 + $1.size }; $0.files = scanned.count }
    }

    var totalBytes: Int { state.withLock { $0.bytes } }

    func path(_ key: String) -> String { "\(directory)/\(key)" }

    func read(_ key: String) -> CachedTile? {
        let file = path(key)
        guard let data = FileManager.default.contents(atPath: file), let newline = data.firstIndex(of: 0x0a),
              let meta = try? JSONDecoder().decode(Meta.self, from: data[data.startIndex..<newline]) else { return nil }
        // Recently used: keep the file young, but write its time at most once a minute.
        var st = stat()
        if stat(file, &st) == 0, time(nil) - st.st_mtim.tv_sec > 60 { utime(file, nil) }
        return CachedTile(bytes: [UInt8](data[(newline + 1)...]), contentType: meta.type, expires: Date(timeIntervalSince1970: meta.expires),
                          upstreamETag: meta.etag, lastModified: meta.modified)
    }

    func write(_ key: String, _ tile: CachedTile) {
        let file = path(key)
        let meta = Meta(type: tile.contentType, expires: tile.expires.timeIntervalSince1970, etag: tile.upstreamETag, modified: tile.lastModified)
        guard var data = try? JSONEncoder().encode(meta) else { return }
        data.append(0x0a)
        data.append(contentsOf: tile.bytes)
        let folder = (file as NSString).deletingLastPathComponent
        let temporary = "\(directory)/.tmp-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: temporary))
            var old = stat()
            let replaced = stat(file, &old) == 0 ? Int(old.st_size) : 0
            guard rename(temporary, file) == 0 else { unlink(temporary); return }
            let over = state.withLock { s -> Bool in
                s.bytes += data.count - replaced
                if replaced == 0 { s.files += 1 }
                return s.bytes > capacity
            }
            if over { evict() }
        } catch {
            unlink(temporary)
            // Troubleshooting: cannot write the tile cache at
            TileProxy.log.warning("cannot write the tile cache at \(folder): \(error)")
        }
    }

    /// Down to 90 % of the cap, oldest first. The disk is scanned again, so what other instances
    /// wrote counts too.
    func evict() {
        var files = scan().sorted { $0.used < $1.used }
        var total = files.reduce(0) { $0 + $1.size }
        let target = capacity / 10 * 9
        var removed = 0
        while total > target, !files.isEmpty {
            let oldest = files.removeFirst()
            if unlink(oldest.path) == 0 { total -= oldest.size; removed += 1 }
        }
        state.withLock { $0.bytes = total; $0.files = files.count }
        TileProxy.log.info("tile cache over its cap: removed \(removed) least recently used tiles")
    }

    private func scan() -> [(path: String, size: Int, used: Int)] {
        var out: [(String, Int, Int)] = []
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return [] }
        while let relative = walker.nextObject() as? String {
            let full = "\(directory)/\(relative)"
            var st = stat()
            guard stat(full, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            if relative.hasPrefix(".tmp-") || relative.contains("/.tmp-") {
                // Left by a crash mid-write more than a minute ago.
                if time(nil) - st.st_mtim.tv_sec > 60 { unlink(full) }
                continue
            }
            out.append((full, Int(st.st_size), Int(st.st_mtim.tv_sec) * 1_000_000_000 + Int(st.st_mtim.tv_nsec)))
        }
        return out
    }

    struct Meta: Codable {
        let type: String
        let expires: Double
        let etag: String?
        let modified: String?
    }
}
