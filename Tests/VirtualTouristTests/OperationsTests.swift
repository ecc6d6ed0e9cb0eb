import Foundation
import HTTPServer
import PhotoFixture
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
#if canImport(Glibc)
import Glibc
#endif

/// What an administrator relies on: health, readiness, metrics, several instances on one
/// database, backups.
@Suite struct OperationsTests {
    @Test func healthReadinessAndMetrics() throws {
        let app = try TestApp(workers: true) { $0.metricsToken = "s3cret" }
        let browser = try app.signedUp()
        #expect(try browser.get("/healthz").body == "ok")
        let ready = try browser.get("/readyz")
        #expect(ready.status == 200)
        #expect(ready.body == "ready")
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        _ = try browser.get("/no-such-page")
        let metrics = try browser.get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        for series in ["vt_http_requests_total{status=\"200\"}", "vt_http_requests_total{status=\"404\"}",
                       "vt_http_request_duration_seconds_bucket{le=\"+Inf\"}", "vt_http_open_connections",
                       "vt_db_pool_connections{state=\"in_use\"}", "vt_db_pool_waiting", "vt_album_jobs{state=\"done\"} 1",
                       "vt_photo_downloads_total{result=\"ok\"} 30"] {
            #expect(metrics.body.contains(series), "\(series) missing")
        }
        // A migration not yet applied: not ready.
        try app.pool.query("DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)")
        #expect(try browser.get("/readyz").status == 503)
    }

    @Test func metricsAreForLocalAddressesOrTheToken() {
        for local in ["127.0.0.1", "::1", "10.1.2.3", "172.18.0.5", "192.168.1.9", "::ffff:127.0.0.1", "fd00::1"] {
            #expect(Metrics.isLocal(local), "\(local)")
        }
        for remote in ["8.8.8.8", "172.32.0.1", "2001:db8::1", "::ffff:1.2.3.4"] {
            #expect(!Metrics.isLocal(remote), "\(remote)")
        }
    }

    @Test func retentionPurgesOldPhotosOnly() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        try app.pool.query("UPDATE photos SET created_at = now() - interval '40 days' WHERE position < 12")
        #expect(PhotoRetention(pool: app.pool, days: 30).purge() == 12)
        #expect(PhotoRetention(pool: app.pool, days: 30).purge() == 0)
        #expect(try app.count("SELECT count(*) FROM photos") == 18)
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test func twoInstancesShareSessionsAndProcessEveryAlbumOnce() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let fixture = try PhotoFixture()
        defer { fixture.stop() }
        let database = try TestDatabase.migrated("two")
        let pool = PostgresPool(url: database, maxConnections: 2)
        defer { pool.close() }
        let log = NSTemporaryDirectory() + "vt-two-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let ports = [Self.freePort(), Self.freePort()]
        let instances = try ports.map { port in
            var environment = ProcessTests.environment(database: database, fixture: fixture)
            environment["PORT"] = String(port)
            environment["WORKERS"] = "2"
            return try ChildProcess([ProcessTests.binary, "serve"], environment: environment, logPath: log)
        }
        defer { instances.forEach { $0.kill(SIGTERM) } }
        for port in ports {
            #expect(eventually(timeout: 20) { (try? Browser(port: port).get("/readyz").status) == 200 })
        }
        // Signed up on A, the same session works on B.
        let onA = Browser(port: ports[0])
        let form = try onA.get("/sign-up")
        _ = try onA.post("/sign-up", form: [("_csrf", form.csrfToken ?? ""), ("email", "both@example.org"), ("display_name", "Both"),
                                            ("password", "a long password"), ("password_confirmation", "a long password")])
        let onB = Browser(port: ports[1])
        for (name, value) in onA.cookies { onB.setCookie(name, value) }
        let page = try onB.get("/")
        #expect(page.status == 200)
        #expect(page.body.contains("Both"))
        // Twenty albums, asked for on both instances: each is searched and downloaded exactly once.
        let token = try #require(page.csrfToken)
        for i in 0..<20 {
            let browser = i % 2 == 0 ? onA : onB
            let created = try browser.post("/pins", form: [("_csrf", token), ("lat", String(10 + Double(i))), ("lon", "20")],
                                           headers: [("Accept", "application/json")])
            #expect(created.status == 201)
        }
        let done = eventually(timeout: 60) {
            (try? pool.query("SELECT count(*) AS n FROM pins WHERE status = 'ready'")[0].decode("n", as: Int.self)) == 20
        }
        #expect(done, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        #expect(fixture.searchCount == 20)
        #expect(fixture.imageCount == 20 * 30)
        #expect(try pool.query("SELECT count(*) AS n FROM photos WHERE status = 'ready'")[0].decode("n", as: Int.self) == 600)
    }

    @Test func aBackupRestoresIntoAFreshDatabaseAndServesEverything() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp(email: "kept@example.org", password: "a long password")
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.count("ready") == 30)

        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let bin = "/usr/lib/postgresql/\(versions.compactMap(Int.init).max() ?? 15)/bin"
        let dump = NSTemporaryDirectory() + "vt-\(UUID().uuidString).dump"
        defer { try? FileManager.default.removeItem(atPath: dump) }
        let dumped = try runProcess([bin + "/pg_dump", "-Fc", "-f", dump, "--dbname", app.pool.url])
        #expect(dumped.status == 0, "\(dumped.output)")
        let restoredURL = try TestDatabase.create("restored")
        let restored = try runProcess([bin + "/pg_restore", "--no-owner", "--dbname", restoredURL, dump])
        #expect(restored.status == 0, "\(restored.output)")

        // The photo store is restored alongside (docs/admin.md, Backups): the same directory here.
        let photos = (app.app.albums.photos as! FileStore).root
        let second = try TestApp(database: restoredURL) { $0.photoStore = photos }
        let visitor = second.browser()
        let form = try visitor.get("/sign-in")
        #expect(try visitor.post("/sign-in", form: [("_csrf", form.csrfToken ?? ""), ("email", "kept@example.org"),
                                                    ("password", "a long password")]).status == 303)
        let map = try visitor.get("/")
        #expect(map.body.contains("Kyoto"))
        let state = try AlbumTests.state(visitor, pin: pin)
        #expect(state.count("ready") == 30)
        let image = try visitor.get("/photos/\(state.ids[0])")
        #expect(image.status == 200)
        #expect(image.header("Content-Type") == "image/jpeg")
    }
}
