import Foundation
import HTTPClient
import HTTPServer
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// /tiles over real HTTP: from PMTiles archives, and through the caching proxy against a loopback
/// tile server.
@Suite struct TileRouteTests {
    static let fixtures = PMTilesTests.fixtures

    func get(_ app: TestApp, _ path: String, _ headers: [String: String] = [:], as person: Browser? = nil) throws -> HTTPClientResponse {
        var headers = headers
        if let person { headers["Cookie"] = person.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
        return try HTTPClient.trusting("http://127.0.0.1:\(app.port)").get("http://127.0.0.1:\(app.port)\(path)", headers: headers)
    }

    @Test func servesAVectorArchiveWithETagsGzipAndItsInfo() throws {
        let app = try TestApp { $0.tilesFile = "\(Self.fixtures)/naples.pmtiles" }
        let archive = try PMTilesArchive(path: "\(Self.fixtures)/naples.pmtiles")
        let page = try app.signedUp().get("/")
        #expect(page.body.contains("data-tile-url=\"/tiles/{z}/{x}/{y}\""))
        #expect(page.body.contains("Natural Earth · GeoNames (synthetic roads)"))   // the archive's attribution, tags dropped
        // Images come from our own origin only.
        let csp = try #require(page.header("Content-Security-Policy"))
        #expect(csp.contains("img-src 'self' data: blob:") && !csp.contains("tile"))

        let info = try JSONDecoder().decode(TileInfo.self, from: Data(try get(app, "/tiles.json").body))
        #expect(info == TileInfo(format: "mvt", minzoom: 0, maxzoom: 14, bounds: [14.05, 40.7, 14.5, 41.0],
                                 attribution: "Natural Earth · GeoNames (synthetic roads)", tileSize: 512))

        // curl asks for gzip and decodes it: the body is the plain tile, sent compressed.
        let tile = try get(app, "/tiles/14/8841/6151")
        let stored = try #require(try archive.tile(z: 14, x: 8841, y: 6151))
        #expect(tile.status == 200)
        #expect(tile.headers["content-type"] == "application/vnd.mapbox-vector-tile")
        #expect(tile.headers["content-encoding"] == "gzip")
        #expect(tile.headers["cache-control"] == "public, max-age=86400")
        #expect(tile.body == Gzip.decompress(stored.bytes))
        let etag = try #require(tile.headers["etag"])
        #expect(etag.hasPrefix("\"") && !etag.hasPrefix("W/"))
        let again = try get(app, "/tiles/14/8841/6151", ["If-None-Match": etag])
        #expect(again.status == 304 && again.body.isEmpty)
        // A client that cannot take gzip gets the plain tile.
        let raw = try Browser(port: app.port).get("/tiles/0/0/0", headers: [("Accept-Encoding", "identity")])
        #expect(raw.status == 200 && raw.header("Content-Encoding") == nil && raw.header("Vary") == "Accept-Encoding")

        for path in ["/tiles/15/0/0", "/tiles/1/2/0", "/tiles/a/b/c", "/tiles/-1/0/0", "/tiles/99/0/0", "/tiles/0/0/0.png", "/tiles/14/0/0"] {
            #expect(try get(app, path).status == 404, "\(path)")
        }
    }

    @Test func servesEveryTileOfARasterArchiveExactly() throws {
        let app = try TestApp { $0.tilesFile = "\(Self.fixtures)/usgs-mt-whitney-z8-15-webp.pmtiles" }
        let manifest = try PMTilesTests().manifest("usgs-mt-whitney-z8-15-webp")
        for t in manifest {
            let tile = try get(app, "/tiles/\(t.z)/\(t.x)/\(t.y)")
            #expect(tile.status == 200 && tile.headers["content-type"] == "image/webp" && tile.headers["content-encoding"] == nil)
            #expect(tile.body.count == t.length && PMTilesTests().fnv(tile.body) == t.hash)
        }
        let info = try JSONDecoder().decode(TileInfo.self, from: Data(try get(app, "/tiles.json").body))
        #expect(info.format == "webp" && info.tileSize == 512 && info.minzoom == 8 && info.maxzoom == 15)
    }

    /// A broken TILES_FILE is reported at start-up and everything else keeps working, on the built-in map.
    @Test func aBrokenArchiveLeavesTheBuiltInMap() throws {
        let dir = ProcessInfo.processInfo.environment["TEST_SCRATCH"] ?? NSTemporaryDirectory()
        let path = "\(dir)/broken-\(UUID().uuidString.prefix(6)).pmtiles"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(Self.fixtures)/stamen-toner-z0-3.pmtiles")))
        bytes[7] = 2
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let app = try TestApp { $0.tilesFile = path }
        #expect(app.app.tiles == nil)
        #expect(try get(app, "/healthz").status == 200)
        #expect(try get(app, "/tiles/0/0/0").status == 404)
        #expect(try get(app, "/tiles.json").status == 404)
        let page = try app.signedUp().get("/")
        #expect(page.status == 200 && page.body.contains("data-tile-url=\"none\""))
    }

    // ----- the proxy -----

    @Test func fiftyConcurrentRequestsMakeOneUpstreamFetch() throws {
        let upstream = try TileFixture(delay: 0.4)
        let app = try TestApp { upstream.configure(&$0) }
        let cookie = try app.signedUp().cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        // Signed out: no tile, and no request upstream in anyone's name.
        #expect(try get(app, "/tiles/5/17/11").url.contains("/sign-in"))
        #expect(upstream.count("/5/17/11.png") == 0)
        let bodies = Mutex<[Int: [UInt8]]>([:])
        let done = DispatchGroup()
        let port = app.port
        for i in 0..<50 {
            done.enter()
            Thread {
                let response = try? HTTPClient.trusting("http://127.0.0.1:\(port)").get("http://127.0.0.1:\(port)/tiles/5/17/11", headers: ["Cookie": cookie])
                bodies.withLock { $0[i] = response?.status == 200 ? response?.body : [] }
                done.leave()
            }.start()
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        let results = bodies.withLock { $0 }
        #expect(results.count == 50)
        #expect(results.values.allSatisfy { $0 == TileFixture.tile("5/17/11") })
        #expect(upstream.count("/5/17/11.png") == 1)
        // It identified the instance and its operator.
        #expect(upstream.knobs.userAgent.withLock { $0 } == "VirtualTourist/1.0 tile proxy (instance: https://tourist.example.org; contact: maps@example.org)")
    }

    @Test func theCacheSurvivesARestartAndHonoursFreshness() throws {
        let upstream = try TileFixture()
        let cacheDir = upstream.cacheDirectory
        do {
            let app = try TestApp { upstream.configure(&$0) }
            let person = try app.signedUp()
            let first = try get(app, "/tiles/3/4/2", as: person)
            #expect(first.status == 200 && first.headers["cache-control"]?.hasPrefix("private, max-age=") == true)
            _ = try get(app, "/tiles/3/4/2", as: person)
            #expect(upstream.count("/3/4/2.png") == 1)
        }
        // A new app (a restart, or another instance on the same volume) finds it on disk.
        let app = try TestApp { upstream.configure(&$0, cacheDirectory: cacheDir) }
        let person = try app.signedUp()
        let again = try get(app, "/tiles/3/4/2", as: person)
        #expect(again.status == 200 && again.body == TileFixture.tile("3/4/2"))
        #expect(upstream.count("/3/4/2.png") == 1)
        // max-age=0 upstream: every use revalidates (If-None-Match → 304), the bytes come from the cache.
        upstream.knobs.cacheControl.withLock { $0 = "max-age=0" }
        _ = try get(app, "/tiles/3/4/3", as: person)
        let revalidated = try get(app, "/tiles/3/4/3", as: person)
        #expect(revalidated.status == 200 && revalidated.body == TileFixture.tile("3/4/3"))
        #expect(upstream.count("/3/4/3.png") == 2 && upstream.knobs.notModified.withLock { $0 } == 1)
        // no-store: served, never kept.
        upstream.knobs.cacheControl.withLock { $0 = "no-store" }
        _ = try get(app, "/tiles/3/5/3", as: person)
        _ = try get(app, "/tiles/3/5/3", as: person)
        #expect(upstream.count("/3/5/3.png") == 2)
    }

    @Test func theCacheStaysUnderItsCapDroppingTheLeastRecentlyUsed() throws {
        let upstream = try TileFixture()
        // Tiles are about 4 KB with their metadata line: a 20 KB cap holds four or five.
        let app = try TestApp { upstream.configure(&$0); $0.tileCacheBytes = 20_000 }
        let person = try app.signedUp()
        let proxy = try #require(app.app.tiles as? TileProxy)
        for x in 0..<12 {
            #expect(try get(app, "/tiles/4/\(x)/1", as: person).status == 200)
            #expect(proxy.cache.totalBytes <= 20_000)
        }
        let onDisk = try FileManager.default.subpathsOfDirectory(atPath: upstream.cacheDirectory)
            .map { "\(upstream.cacheDirectory)/\($0)" }
            .filter { (try? FileManager.default.attributesOfItem(atPath: $0)[.type] as? FileAttributeType) == .typeRegular }
        let total = try onDisk.reduce(0) { $0 + ((try FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int) ?? 0) }
        #expect(total <= 20_000 && onDisk.count >= 3)
        #expect(FileManager.default.fileExists(atPath: "\(upstream.cacheDirectory)/4/11/1"))   // the newest stays
        #expect(!FileManager.default.fileExists(atPath: "\(upstream.cacheDirectory)/4/0/1"))   // the oldest went
    }

    /// Upstream failures: 404 stays 404, errors and timeouts are 502 — the map draws its built-in
    /// basemap beneath (the browser journey checks the picture).
    @Test func upstreamFailuresAreAnsweredPlainly() throws {
        let upstream = try TileFixture(slowPath: "/6/1/1.png")
        let app = try TestApp { upstream.configure(&$0); $0.httpClient.totalTimeout = 1 }
        let person = try app.signedUp()
        upstream.knobs.status.withLock { $0 = 404 }
        #expect(try get(app, "/tiles/6/0/0", as: person).status == 404)
        upstream.knobs.status.withLock { $0 = 500 }
        let failed = try get(app, "/tiles/6/0/1", as: person)
        #expect(failed.status == 502 && failed.headers["cache-control"] == "no-store")
        upstream.knobs.status.withLock { $0 = 200 }
        let started = Date()
        #expect(try get(app, "/tiles/6/1/1", as: person).status == 502)
        #expect(Date().timeIntervalSince(started) < 4)
        // Nothing was cached from the failures; the next good answer is.
        #expect(try get(app, "/tiles/6/0/1", as: person).status == 200)
        #expect(try get(app, "/tiles/20/0/0", as: person).status == 404)   // past the proxy's zoom range: no upstream request
        #expect(upstream.count("/20/0/0.png") == 0)
    }
}

/// A raster tile server on loopback: /z/x/y.png answers a few KB of bytes unique to the tile
/// (as image/png), with knobs for status, delay, Cache-Control and a path that never answers in time.
final class TileFixture: Sendable {
    final class Knobs: Sendable {
        let counts = Mutex<[String: Int]>([:])
        let status = Mutex(200)
        let cacheControl = Mutex("max-age=604800")
        let userAgent = Mutex("")
        let notModified = Mutex(0)
    }
    let server: HTTPServer
    let knobs = Knobs()
    let cacheDirectory: String

    init(delay: Double = 0, slowPath: String? = nil) throws {
        let k = knobs
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.accessLog = nil
        server = HTTPServer(configuration: configuration, handler: ClosureHandler { request in
            k.counts.withLock { $0[request.path, default: 0] += 1 }
            k.userAgent.withLock { $0 = request.headers["User-Agent"] ?? "" }
            if delay > 0 { Thread.sleep(forTimeInterval: delay) }
            if request.path == slowPath { Thread.sleep(forTimeInterval: 3) }
            let code = k.status.withLock { $0 }
            guard code == 200 else { return HTTPResponse(status: HTTPStatus(code), body: Array("no".utf8)) }
            let key = String(request.path.dropFirst().dropLast(4))
            let etag = "\"up-\(key)\""
            if request.headers["If-None-Match"] == etag {
                k.notModified.withLock { $0 += 1 }
                return HTTPResponse(status: .notModified, headers: ["ETag": etag, "Cache-Control": k.cacheControl.withLock { $0 }])
            }
            return HTTPResponse(status: .ok, headers: ["Content-Type": "image/png", "ETag": etag, "Cache-Control": k.cacheControl.withLock { $0 }],
                                body: TileFixture.tile(key))
        })
        try server.start()
        let dir = ProcessInfo.processInfo.environment["TEST_SCRATCH"] ?? NSTemporaryDirectory()
        cacheDirectory = "\(dir)/tile-cache-\(UUID().uuidString.prefix(8))"
    }

    deinit { server.shutdown(gracePeriod: 1) }

    static func tile(_ key: String) -> [UInt8] { Array(String(repeating: "tile \(key) ", count: 4000 / (key.count + 6)).utf8) }

    func count(_ path: String) -> Int { knobs.counts.withLock { $0[path] ?? 0 } }

    func configure(_ settings: inout AppSettings, cacheDirectory: String? = nil) {
        settings.tileURL = "http://127.0.0.1:\(server.port)/{z}/{x}/{y}.png"
        settings.tileCacheDirectory = cacheDirectory ?? self.cacheDirectory
        settings.publicURL = "https://tourist.example.org"
        settings.tileContact = "maps@example.org"
    }
}
