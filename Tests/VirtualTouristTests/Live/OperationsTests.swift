import Foundation
import HTTPServer
import PhotoFixture
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
#if canImport(Glibc)
import Glibc
@testable import AlbumWing
@testable import Domain
#endif

/// What an administrator relies on: health, readiness, metrics, several instances on one
/// database, backups.
@Suite(.tags(.slow)) struct OperationsTests {
    @Test func healthReadinessAndMetrics() throws {
        let app = try TestApp(workers: true) { $0.metricsToken = "s3cret" }
        let browser = try app.signedUp()
        #expect(try browser.get("/healthz").body == "ok \(Version.number)")
        let ready = try browser.get("/readyz")
        #expect(ready.status == 200)
        #expect(ready.body == "ready")
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        _ = try browser.get("/no-such-page")
        let metrics = try browser.get("/metrics", headers: [("Authorization", "Bearer s3cret")])
        #expect(metrics.status == 200)
        #expect(metrics.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        #expect(metrics.body.contains("vt_build_info{version=\"\(Version.number)\"} 1"))
        for series in ["vt_http_requests_total{status=\"200\"}", "vt_http_requests_total{status=\"404\"}",
                       "vt_http_request_duration_seconds_bucket{le=\"+Inf\"}", "vt_http_open_connections",
                       "vt_db_pool_connections{state=\"in_use\"}", "vt_db_pool_waiting", "vt_album_jobs{state=\"done\"} 1",
                       "vt_photo_downloads_total{result=\"ok\"} 30", "vt_photo_store_available 1",
                       "vt_photo_store_breaker{state=\"closed\"} 1", "vt_photo_store_refused_total 0"] {
            #expect(metrics.body.contains(series), "\(series) missing")
        }
        // A migration not yet applied: not ready.
        try app.pool.query("DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)")
        #expect(try browser.get("/readyz").status == 503)
    }

    /// Behind a reverse proxy every request comes from a local address, so the public port never
    /// trusts one: /metrics there needs the token (compared in constant time); the metrics port
    /// needs none.
    @Test func metricsNeedTheTokenOnThePublicPort() throws {
        let app = try TestApp { $0.metricsToken = "s3cret" }
        let loopback = app.browser()
        #expect(try loopback.get("/metrics").status == 404)
        #expect(try loopback.get("/metrics", headers: [("Authorization", "Bearer s3cre")]).status == 404)
        #expect(try loopback.get("/metrics", headers: [("Authorization", "Bearer s3cret!")]).status == 404)
        #expect(try loopback.get("/metrics", headers: [("Authorization", "Bearer s3cret")]).status == 200)
        let tokenless = try TestApp()
        #expect(try tokenless.browser().get("/metrics").status == 404)
        #expect(try tokenless.browser().get("/metrics", headers: [("Authorization", "Bearer ")]).status == 404)

        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.accessLog = nil
        let metricsServer = HTTPServer(configuration: configuration, handler: tokenless.app.metricsHandler(pool: tokenless.pool))
        try metricsServer.start()
        defer { metricsServer.shutdown(gracePeriod: 1) }
        let scrape = try Browser(port: metricsServer.port).get("/metrics")
        #expect(scrape.status == 200)
        #expect(scrape.body.contains("vt_http_open_connections"))
        #expect(try Browser(port: metricsServer.port).get("/").status == 404)
    }

    /// script/backup records each backup it kept in the backups table; /metrics shows the newest's
    /// time, for an alert on its age (docs/admin.md, Backups), over the metrics port's loopback.
    @Test func metricsShowTheLastGoodBackup() throws {
        let app = try TestApp()
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.accessLog = nil
        let metricsServer = HTTPServer(configuration: configuration, handler: app.app.metricsHandler(pool: app.pool))
        try metricsServer.start()
        defer { metricsServer.shutdown(gracePeriod: 1) }
        let none = try Browser(port: metricsServer.port).get("/metrics")
        #expect(none.body.contains("\nvt_backup_last_success_timestamp_seconds 0\n"))
        #expect(none.body.contains("# TYPE vt_backup_last_success_timestamp_seconds gauge\n"))
        // What script/backup inserts, older first.
        try app.pool.query("""
            INSERT INTO backups (finished_at, name, seconds, photos_named, photos_missing, photos_copied) VALUES
                (to_timestamp(1795000000.75), 'virtual-tourist-20261112T081320Z', 12, 30, 0, true),
                (to_timestamp(1795086400.25), 'virtual-tourist-20261113T081320Z', 14, 31, 2, true)
            """)
        let scrape = try Browser(port: metricsServer.port).get("/metrics")
        #expect(scrape.status == 200)
        #expect(scrape.body.contains("\nvt_backup_last_success_timestamp_seconds 1795086400\n"), "\(scrape.body)")
        #expect(scrape.body.contains("\nvt_backup_last_photos_missing 2\n"))
    }

    @Test func retentionPurgesOldPhotosOnly() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        _ = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        try app.pool.query("UPDATE photos SET created_at = now() - interval '40 days' WHERE position < 12")
        #expect(Housekeeping(pool: app.pool, photoDays: 30).purgePhotos() == 12)
        #expect(Housekeeping(pool: app.pool, photoDays: 30).purgePhotos() == 0)
        #expect(try app.count("SELECT count(*) FROM photos") == 18)
        // The largest PHOTO_RETENTION_DAYS the binary takes still reaches SQL as a number of days.
        try app.pool.query("UPDATE photos SET created_at = now() - make_interval(days => 36501) WHERE position = 12")
        #expect(Housekeeping(pool: app.pool, photoDays: 36_500).purgePhotos() == 1)
        #expect(try app.count("SELECT count(*) FROM photos") == 17)
    }

    /// Finished jobs leave the queue's table after JOB_RETENTION_DAYS; live and recent ones stay.
    @Test func finishedJobsArePrunedAfterTheirRetention() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        _ = try AlbumTests.settled(browser, pin: pin)
        for _ in 0..<3 {
            _ = try browser.post("/pins/\(pin)/collection", form: [("_csrf", try browser.get("/").csrfToken ?? "")])
            _ = try AlbumTests.settled(browser, pin: pin)
        }
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE state = 'done'") == 4)
        try app.pool.query("UPDATE album_jobs SET finished_at = now() - interval '8 days' WHERE id IN (SELECT id FROM album_jobs ORDER BY id LIMIT 3)")
        #expect(Housekeeping(pool: app.pool, photoDays: 0, jobDays: 7).pruneJobs() == 3)
        #expect(Housekeeping(pool: app.pool, photoDays: 0, jobDays: 7).pruneJobs() == 0)
        #expect(try app.count("SELECT count(*) FROM album_jobs") == 1)
        #expect(Housekeeping(pool: app.pool, photoDays: 0, jobDays: 0).pruneJobs() == 0)
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

        // Live updates cross instances: a page watching an album on B hears of a photo removed on A
        // (through PostgreSQL's NOTIFY, which both instances LISTEN to).
        let pinID: Int64 = try pool.query("SELECT min(id) AS id FROM pins")[0].decode("id")
        let photoID: Int64 = try pool.query("SELECT min(id) AS id FROM photos WHERE pin_id = $1", [pinID])[0].decode("id")
        let stream = try connectLoopback(port: ports[1], receiveTimeout: 10)
        defer { close(stream) }
        let cookie = onA.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let request = Array("GET /pins/\(pinID)/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nCookie: \(cookie)\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(stream, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var heard = ""
        func changes() -> Int { heard.components(separatedBy: "event: change").count - 1 }
        func listen(until wanted: Int) {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while changes() < wanted {
                let n = recv(stream, &buffer, buffer.count, 0)
                if n <= 0 { return }
                heard += String(decoding: buffer.prefix(n), as: UTF8.self)
            }
        }
        listen(until: 1)  // the catch-up event every stream starts with
        #expect(changes() == 1)
        let removed = try onA.request("DELETE", "/photos/\(photoID)", headers: [("X-CSRF-Token", token)])
        #expect(removed.status == 204)
        listen(until: 2)
        #expect(changes() >= 2, "B's stream did not hear A's change: \(heard)")

        // The provider's call budget is one, in PostgreSQL, drawn by both instances.
        let budgets = try pool.query("SELECT count(*) AS n, min(capacity - tokens) AS used FROM provider_budgets")[0]
        #expect(try budgets.decode("n", as: Int.self) == 1)
        #expect(try budgets.decode("used", as: Double.self) > 5)
    }

    @Test func aBackupRestoresIntoAFreshDatabaseAndServesEverything() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp(email: "kept@example.org", password: "a long password")
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.count("ready") == 30)

        let bin = try TemporaryCluster.binDirectory()
        let dump = NSTemporaryDirectory() + "vt-\(UUID().uuidString).dump"
        defer { try? FileManager.default.removeItem(atPath: dump) }
        let dumped = try runProcess([bin + "/pg_dump", "-Fc", "-f", dump, "--dbname", app.pool.url])
        #expect(dumped.status == 0, "\(dumped.output)")
        let restoredURL = try TestDatabase.create("restored")
        let restored = try runProcess([bin + "/pg_restore", "--no-owner", "--dbname", restoredURL, dump])
        #expect(restored.status == 0, "\(restored.output)")

        // The photo store is restored alongside (docs/admin.md, Backups): the same directory here.
        let photos = (app.app.albums.photos.base as! FileStore).root
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
