import Foundation
import HTTPClient
import HTTPServer
import PhotoFixture
import Postgres
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The whole app on a real server (port 0, loopback) over a fresh migrated database.
final class TestApp {
    let pool: PostgresPool
    let app: App
    let server: HTTPServer
    let fixture: PhotoFixture
    let workersRunning: Bool
    var port: Int { server.port }

    /// `workers`: run the album workers (off by default, so tests that compare table contents
    /// before and after a request see no background writes).
    /// `databaseConnections`: the pool, and with it the handler slots, as `virtual-tourist serve`
    /// sizes them (`AppSettings.handlerSlots`).
    init(workers: Bool = false, fixture options: PhotoFixture.Options = PhotoFixture.Options(), database: String? = nil,
         databaseConnections: Int = 8,
         configure: (inout AppSettings) -> Void = { _ in }, server configureServer: (inout ServerConfiguration) -> Void = { _ in }) throws {
        let url = try database ?? TestDatabase.migrated("app")
        pool = PostgresPool(url: url, maxConnections: databaseConnections)
        fixture = try PhotoFixture(options: options)
        var settings = AppSettings()
        settings.publicDirectory = TestApp.repositoryRoot + "/Public"
        settings.migrationsDirectory = TestApp.repositoryRoot + "/migrations"
        settings.photoProvider = "fixture"
        settings.flickrAPIURL = fixture.apiURL
        settings.commonsAPIURL = fixture.baseURL + "/w/api.php"
        settings.workers.sweepSeconds = 0.5
        settings.workers.retryBaseSeconds = 0
        settings.workers.maxAttempts = 3
        // A provider outage is waited out for seconds, not hours (ProviderOutageTests scales them).
        settings.workers.providerOutageHorizon = 2
        settings.workers.outageBackoffFirst = 0.2
        settings.workers.outageBackoffMax = 0.5
        settings.httpClient.totalTimeout = 5
        // Each app its own store, so one test's sweep never sees another's blobs.
        settings.photoStore = TestApp.scratchDirectory("photos")
        settings.uploadSpool = TestApp.scratchDirectory("uploads")
        // Tests run the store's upkeep themselves (PhotoCollector), at the moment they choose.
        settings.photoStoreUpkeepDelay = 3600
        // Tests sign up many people; the invite and closed modes have their own (SignUpModeTests).
        settings.signUp = .open
        configure(&settings)
        app = App(pool: pool, settings: settings)
        workersRunning = workers
        if workers { try app.startBackgroundWork() }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.errorPage = App.errorPage
        configuration.accessLog = nil
        // The tests' client opens a connection a request where a browser keeps a few: on a fast
        // machine a busy test passed NEW_CONNECTIONS_PER_SECOND (100 a second after 500) and its
        // 503s were taken for the app's. That limit has tests of its own (HTTPServerTests, and
        // AdminCommandTests through the binary); a test that wants it sets it again.
        configuration.newConnectionsPerSecond = 0
        configuration.handlerConcurrency = settings.handlerSlots(databaseConnections: databaseConnections)
        configureServer(&configuration)
        app.attach(to: &configuration)
        server = HTTPServer(configuration: configuration, handler: app.handler)
        app.attach(server: server)
        try server.start()
    }

    deinit {
        if workersRunning { app.stopBackgroundWork() }
        app.mailSender?.stop()
        server.shutdown(gracePeriod: 1)
        fixture.stop()
        pool.close()
    }

    /// A fresh directory under TEST_SCRATCH (or the temporary directory).
    static func scratchDirectory(_ name: String) -> String {
        let base = ProcessInfo.processInfo.environment["TEST_SCRATCH"].flatMap { $0.isEmpty ? nil : $0 } ?? NSTemporaryDirectory()
        return base + "/\(name)-\(UUID().uuidString.prefix(8))"
    }

    static var repositoryRoot: String {
        // Tests/VirtualTouristTests/Support/TestApp.swift
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    func browser() -> Browser { Browser(port: port) }

    /// A browser signed in as a new person.
    func signedUp(email: String = "ann-\(UUID().uuidString.prefix(6))@example.org", name: String = "Ann",
                  password: String = "correct horse battery") throws -> Browser {
        let browser = browser()
        let form = try browser.get("/sign-up")
        var fields = [("_csrf", form.csrfToken ?? ""), ("email", email), ("display_name", name),
                      ("password", password), ("password_confirmation", password)]
        // The first account of an instance that is not open needs the setup code its start logs.
        if form.body.contains("id=\"sign-up-first\""), let code = try app.accounts.setupCode(mode: app.signUpMode) {
            fields.append(("invite", code))
        }
        let page = try browser.post("/sign-up", form: fields)
        guard page.status == 303 else { throw Browser.Failure(description: "sign-up failed: \(page)") }
        return browser
    }

    func count(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> Int {
        try pool.query(sql, parameters)[0].decode(at: 0)
    }

    /// How many distinct blobs rows name (originals and thumbnails): what the collector keeps.
    func namedBlobCount() throws -> Int {
        try count("""
            SELECT count(*) FROM (SELECT hash FROM photos UNION SELECT thumb_256 FROM photos WHERE thumb_256 IS NOT NULL
                                  UNION SELECT thumb_512 FROM photos WHERE thumb_512 IS NOT NULL) AS blobs
            """)
    }

    /// A fingerprint of every row of every table but schema_migrations, to prove a refused request
    /// changed nothing.
    func fingerprint() throws -> String {
        let tables = try pool.query("""
            SELECT table_name::text AS name FROM information_schema.tables
            WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'
            ORDER BY table_name
            """).map { try $0.decode("name", as: String.self) }
        var parts: [String] = []
        for table in tables {
            let quoted = PostgresConnection.quoteIdentifier(table)
            let digest: String = try pool.query(
                "SELECT coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') AS d FROM \(quoted) t"
            )[0].decode("d")
            parts.append("\(table)=\(digest)")
        }
        return parts.joined(separator: " ")
    }
}

extension HTTPClient {
    /// A client that may reach `origin` on loopback, as an operator-configured origin may (the
    /// address guard refuses internal addresses for every origin nobody configured).
    static func trusting(_ origin: String) -> HTTPClient {
        var options = HTTPClient.Options()
        options.internalOrigins = [origin]
        return HTTPClient(options: options)
    }
}

extension Browser.Page {
    /// The request's database round trips, from Server-Timing (AppSettings.serverTiming).
    var roundTrips: Int? {
        header("Server-Timing")?.firstMatch(of: /db;desc="round trips";dur=(\d+)/).flatMap { Int($0.1) }
    }
}
