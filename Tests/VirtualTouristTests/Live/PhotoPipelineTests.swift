import Foundation
import HTTPClient
import HTTPServer
import PhotoFixture
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Issue 12: the server fetches only from the provider's image hosts and never from its own
/// network; licences as Flickr states them; warm connections.
@Suite struct PhotoPipelineTests {
    /// A listener on loopback that counts every connection made to it: the place a hostile
    /// provider's addresses point at. Zero means nothing reached it.
    final class Canary {
        final class Count: Sendable { let value = Mutex(0) }
        let servers: [HTTPServer]
        private let count = Count()
        var requests: Int { count.value.withLock { $0 } }
        var port: Int { servers[0].port }
        var hits: Int { servers.reduce(0) { $0 + $1.acceptedConnections } }

        init() throws {
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.accessLog = nil
            var router = Router()
            let count = count
            router.get("/*") { _ in count.value.withLock { $0 += 1 }; return .text("canary") }
            let v4 = HTTPServer(configuration: configuration, handler: router)
            try v4.start()
            var servers = [v4]
            // The same port on ::1, so [::1] addresses would land too (when the host has IPv6).
            configuration.host = "::1"
            configuration.port = v4.port
            let v6 = HTTPServer(configuration: configuration, handler: router)
            if (try? v6.start()) != nil { servers.append(v6) }
            self.servers = servers
        }

        deinit { servers.forEach { $0.shutdown(gracePeriod: 0.2) } }
    }

    // MARK: Host policies
    // HostPolicy's rules, the address guard and the client's refusals have tests of their own
    // (Tests/HTTPClientTests); these say which hosts each provider declares.

    @Test func hostPoliciesAdmitOnlyTheirHosts() {
        let flickr = FlickrProvider(apiKey: "k", client: HTTPClient()).imageHosts
        #expect(flickr.admits("https://live.staticflickr.com/65535/1_abc_z.jpg"))
        #expect(flickr.admits("https://farm66.staticflickr.com/1/2_b.jpg"))
        #expect(!flickr.admits("http://live.staticflickr.com/1.jpg"))            // https only
        let commons = CommonsProvider(client: HTTPClient()).imageHosts
        #expect(commons.admits("https://upload.wikimedia.org/wikipedia/commons/thumb/a/ab/X.jpg/960px-X.jpg"))
        #expect(!commons.admits("https://commons.wikimedia.org/wiki/File:X.jpg"))
        let fixture = FlickrProvider(apiKey: "k", apiURL: "http://127.0.0.1:9999/services/rest/", client: HTTPClient()).imageHosts
        #expect(fixture.admits("http://127.0.0.1:9999/photos/1_z.jpg"))
        #expect(!fixture.admits("http://127.0.0.1:9998/photos/1_z.jpg"))
        #expect(!fixture.admits("https://127.0.0.1:9999/photos/1_z.jpg"))
        #expect(!fixture.admits("http://localhost:9999/photos/1_z.jpg"))
    }

    /// A hostile provider: its first photos point into loopback, the private network, the cloud
    /// metadata address, other schemes, or redirect there. None is fetched or shown; the good
    /// photos of the same page arrive; the picker shows only the good ones.
    @Test func aHostileProviderCannotMakeTheServerFetchFromItsOwnNetwork() throws {
        let canary = try Canary()
        var options = PhotoFixture.Options()
        options.hostileCanaryPort = canary.port
        let app = try TestApp(workers: true, fixture: options)
        let hostile = PhotoFixture.hostileAddresses(canaryPort: canary.port, origin: app.fixture.baseURL, id: 0).count
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.photos.count == 30 - hostile)
        #expect(album.count("ready") == 30 - hostile)
        #expect(album.count("failed") == 0)  // dropped, never a broken tile
        // Every row left is a ready photo (the hostile ones were dropped), and a ready row keeps no image URL.
        #expect(try app.count("SELECT count(*) FROM photos") == 30 - hostile)
        #expect(try app.count("SELECT count(*) FROM photos WHERE status <> 'ready' OR remote_url IS NOT NULL") == 0)

        let picker = try browser.get("/pins/\(pin)/picker?page=1")
        #expect(picker.status == 200)
        // Only addresses on the image hosts are shown. The one whose address is on the fixture's own
        // origin stays (its redirect is only seen when fetched: the worker refuses it, a browser
        // previewing it fetches on its own network, not the server's).
        #expect(picker.body.components(separatedBy: "<li class=\"pick").count - 1 == 30 - hostile + 1)
        #expect(picker.body.contains("Hostile photo 1-9"))  // the redirecting one
        for index in [1, 2, 3, 4, 5, 6, 7, 8, 10, 11] { #expect(!picker.body.contains("Hostile photo 1-\(index)<")) }
        #expect(!picker.body.contains(":\(canary.port)/"))
        #expect(canary.hits == 0)
        #expect(canary.requests == 0)
    }

    /// The redirect case on its own: the allowed host answers 302 into loopback. Followed by
    /// curl, it would be fetched; checked hop by hop, it is refused before any connection.
    @Test func aRedirectOutOfTheImageHostsIsRefused() throws {
        let canary = try Canary()
        var options = PhotoFixture.Options()
        options.hostileCanaryPort = canary.port
        let fixture = try PhotoFixture(options: options)
        defer { fixture.stop() }
        var clientOptions = HTTPClient.Options()
        clientOptions.internalOrigins = [fixture.baseURL]
        let client = HTTPClient(options: clientOptions)
        let hosts = HostPolicy.sameOrigin(as: fixture.apiURL)
        #expect {
            _ = try client.get(fixture.baseURL + "/hostile-redirect/1", hosts: hosts)
        } throws: { error in
            guard case HTTPClientError.refused(let reason) = error else { return false }
            return reason.contains("redirect")
        }
        #expect(canary.hits == 0)
    }

    // MARK: Licences

    @Test func licencesAreCreditedAsFlickrStatesThem() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.count("ready") == 30)

        // The list came from licenses.getInfo and is cached in PostgreSQL.
        let stored = try app.pool.query("SELECT code, name, url FROM provider_licenses WHERE provider = 'flickr'")
        #expect(stored.count == PhotoFixture.licenses.count)
        // Every licence of the fixture's photos (ids 0–17) is credited by its listed name; 17 is unknown.
        let rows = try app.pool.query("""
            SELECT ph.remote_id, \(AlbumStore.licenseColumns) FROM photos ph LEFT JOIN photo_licenses l ON l.id = ph.license_id WHERE ph.pin_id = $1
            """, [pin])
        var seen = Set<String>()
        for row in rows {
            let id = Int(try row.decode("remote_id", as: String.self))!
            let license: String = try row.decode("license")
            let url: String? = try row.decode("license_url")
            if let listed = PhotoFixture.licenses.first(where: { $0.id == id % 18 }) {
                #expect(license == listed.name)
                #expect(url == listed.url)
            } else {
                #expect(license == "see the photo page")
                #expect(url == nil)
            }
            seen.insert(license)
        }
        #expect(seen.contains("CC BY 4.0"))
        #expect(!seen.contains("All rights reserved"))  // the old guess

        // The album's credit lines and the photo page use the same names; the page links the deed.
        let byFour = try #require(try app.pool.query("""
            SELECT ph.id FROM photos ph JOIN photo_licenses l ON l.id = ph.license_id WHERE ph.pin_id = $1 AND l.name = 'CC BY 4.0' LIMIT 1
            """, [pin]).first?.decode("id", as: Int.self))
        let view = try browser.get("/photos/\(byFour)/view")
        #expect(view.body.contains(#"<a href="https://creativecommons.org/licenses/by/4.0/" rel="license noopener noreferrer">CC BY 4.0</a>"#))
        #expect(view.body.contains("https://www.flickr.com/photos/"))
        let albumPage = try browser.get("/pins/\(pin)")
        #expect(albumPage.body.contains("· CC BY 4.0"))
        #expect(albumPage.body.contains("· see the photo page"))
        let picker = try browser.get("/pins/\(pin)/picker")
        #expect(picker.status == 200)
    }

    @Test func unknownOrMissingLicencesAreNeverGuessed() throws {
        let page = PhotoSearchPage(photos: [
            RemotePhoto(provider: "flickr", remoteID: "1", title: "", ownerName: "", license: "All rights reserved", pageURL: nil,
                        imageURL: "https://live.staticflickr.com/1.jpg", thumbnailURL: "https://live.staticflickr.com/1.jpg",
                        dateTaken: nil, licenseCode: "11"),
            RemotePhoto(provider: "flickr", remoteID: "2", title: "", ownerName: "", license: "All rights reserved", pageURL: nil,
                        imageURL: "https://live.staticflickr.com/2.jpg", thumbnailURL: "https://live.staticflickr.com/2.jpg",
                        dateTaken: nil, licenseCode: "99"),
            RemotePhoto(provider: "flickr", remoteID: "3", title: "", ownerName: "", license: "All rights reserved", pageURL: nil,
                        imageURL: "https://live.staticflickr.com/3.jpg", thumbnailURL: "https://live.staticflickr.com/3.jpg",
                        dateTaken: nil, licenseCode: nil),
        ], page: 1, pages: 1, total: 3)
        let pool = PostgresPool(url: try TestDatabase.migrated("licences"), maxConnections: 2)
        defer { pool.close() }
        let store = LicenseStore(pool: pool) { ["11": .init(name: "CC BY 4.0", url: "https://creativecommons.org/licenses/by/4.0/")] }
        let credited = store.credit(page).photos.map(\.license)
        #expect(credited == ["CC BY 4.0", "see the photo page", "see the photo page"])
        // A provider that cannot be reached: no list, no guesses.
        let failing = LicenseStore(pool: PostgresPool(url: try TestDatabase.migrated("nolicences"), maxConnections: 1)) {
            throw PhotoProviderError.transport("down")
        }
        #expect(failing.credit(page).photos.map(\.license) == Array(repeating: "see the photo page", count: 3))
        // Cached in PostgreSQL: another instance reads it without asking Flickr; a day later (here a
        // fifth of a second) the list is fetched again.
        let calls = Mutex(0)
        let shared = try TestDatabase.migrated("sharedlicences")
        func counting(maxAge: Double) -> LicenseStore {
            LicenseStore(pool: PostgresPool(url: shared, maxConnections: 1), maxAge: maxAge) {
                calls.withLock { $0 += 1 }
                return ["11": .init(name: "CC BY 4.0", url: nil)]
            }
        }
        // (An hour's age for the hits, so a slow machine cannot turn one into a miss; a tenth of a
        // second, then three tenths of waiting, for the miss.)
        let first = counting(maxAge: 3600)
        #expect(first.licenses().count == 1)
        #expect(first.licenses().count == 1)
        #expect(calls.withLock { $0 } == 1)
        #expect(counting(maxAge: 3600).licenses()["11"]?.name == "CC BY 4.0")
        #expect(calls.withLock { $0 } == 1)
        let later = counting(maxAge: 0.1)
        usleep(300_000)
        #expect(later.licenses().count == 1)
        #expect(calls.withLock { $0 } == 2)
        // The answer as Flickr sends it: numeric ids, the CC 4.0 family included.
        let parsed = try FlickrProvider.parseLicenses(Array(PhotoFixture.licensesAnswer.utf8))
        #expect(parsed.count == 17)
        #expect(parsed["11"] == LicenseStore.License(name: "CC BY 4.0", url: "https://creativecommons.org/licenses/by/4.0/"))
        #expect(parsed["16"]?.name == "CC BY-NC-ND 4.0")
    }

    // MARK: Warm connections

    /// An album of 30 from one host opens at most the per-host cap of connections, and a second
    /// album opens none: both reuse the shared cache.
    @Test func albumsReuseWarmConnections() throws {
        var options = PhotoFixture.Options()
        options.connectLatency = 0.05
        let cap = 6
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.httpClient.perHostConcurrency = cap
        }
        let browser = try app.signedUp()
        let first = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(first.count("ready") == 30)
        let afterFirst = app.fixture.connectionCount
        #expect(afterFirst <= cap)
        let second = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser, lat: 48.85, lon: 2.35))
        #expect(second.count("ready") == 30)
        #expect(app.fixture.connectionCount == afterFirst)
        #expect(app.fixture.imageCount == 60)
    }

    /// The old client (one connection per request) for comparison: the test above can fail.
    @Test func withoutReuseEveryRequestIsANewConnection() throws {
        let app = try TestApp(workers: true) { settings in
            settings.httpClient.reuseConnections = false
        }
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        #expect(app.fixture.connectionCount >= 31)
    }

    // MARK: Commons etiquette and the default provider

    @Test func commonsIdsAreStableAndTheUserAgentNamesTheOperator() {
        #expect(CommonsProvider.remoteID(pageID: 42, title: "File:A.jpg") == "42")
        #expect(CommonsProvider.remoteID(pageID: nil, title: "File:A.jpg") == "File:A.jpg")
        let agent = App.userAgent(base: "VirtualTourist/1.0", publicURL: "https://photos.example.org", contact: "ops@example.org")
        #expect(agent == "VirtualTourist/1.0 (instance: https://photos.example.org; ops@example.org)")
        #expect(App.userAgent(base: "VirtualTourist/1.0", publicURL: nil, contact: nil) == "VirtualTourist/1.0")
    }
}
