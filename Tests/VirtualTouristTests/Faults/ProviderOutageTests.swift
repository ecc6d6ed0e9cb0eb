import Foundation
import PhotoFixture
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The photo provider down for minutes (docs/providers.md, "Errors"): albums dropped meanwhile
/// wait it out and complete by themselves; only past the outage horizon does one fail, with a
/// Retry button. The fixture's switches make the outage (setSearchFault); the app's time is
/// scaled 1:100 through its settings — the first wait 0.02 s for 2 s, at most 6 s for 600 s —
/// so three seconds here are five minutes of the real service's outage, and no test sleeps minutes.
@Suite(.tags(.fault)) struct ProviderOutageTests {
    static let scale = 100.0

    static func app(horizon: Double = 3600, fixture: PhotoFixture.Options = PhotoFixture.Options()) throws -> TestApp {
        try TestApp(workers: true, fixture: fixture) { settings in
            let real = AlbumWorkers.Settings()
            settings.workers.outageBackoffFirst = real.outageBackoffFirst / scale
            settings.workers.outageBackoffMax = real.outageBackoffMax / scale
            settings.workers.providerOutageHorizon = horizon
        }
    }

    static func banner(_ page: String) -> String? {
        page.firstMatch(of: /<p class="banner waiting">([^<]*)<\/p>/).map { String($0.1) }
    }

    /// Three albums dropped a second apart while the fixture answers `fault` to every search,
    /// for `seconds` (× 100 in the real service's time); then the fixture answers again.
    static func ridesOut(_ fault: PhotoFixture.SearchFault, seconds: Double = 3, expectBanner: String) throws {
        let app = try Self.app()
        let browser = try app.signedUp()
        app.fixture.setSearchFault(fault)
        let started = Date()
        var pins: [Int] = []
        var banners: Set<String> = []
        var retryButtons = 0
        for index in 0..<3 {
            pins.append(try AlbumTests.dropPin(browser, lat: 35 + Double(index), lon: 135))
            let until = started.addingTimeInterval(Double(index + 1) * seconds / 3)
            while Date() < until {
                for pin in pins {
                    let page = try browser.get("/pins/\(pin)").body
                    if let text = Self.banner(page) { banners.insert(text) }
                    if page.contains(">Retry</button>") { retryButtons += 1 }
                }
                usleep(100_000)
            }
        }
        let during = try pins.map { try AlbumTests.state(browser, pin: $0).status }
        let failedSearches = app.fixture.searchCount
        app.fixture.setSearchFault(.none)
        let recovered = Date()
        var albums: [AlbumTests.AlbumState] = []
        var times: [Double] = []
        for pin in pins {
            albums.append(try AlbumTests.settled(browser, pin: pin, timeout: 30))
            times.append(Date().timeIntervalSince(recovered))
        }
        let attempts = try app.count("SELECT coalesce(max(attempts), 0) FROM album_jobs")
        print("""
            \(fault) for \(String(format: "%.1f", seconds)) s (\(fault == .tooManyRequests ? "Retry-After taken as sent" : "\(Int(seconds * scale / 60)) min at the real pace")): \
            \(failedSearches) searches refused, albums meanwhile \(during); after it: \(albums.map(\.status)), \
            \(albums.map { $0.count("ready") }) photos ready, complete \(times.map { String(format: "%.1f s", $0) }) after \
            the provider came back; \(retryButtons) Retry buttons shown, \
            attempts used \(attempts); banners \(banners.sorted())
            """)
        #expect(during.allSatisfy { $0 == "downloading" })
        #expect(albums.allSatisfy { $0.status == "ready" && $0.count("ready") == 30 })
        #expect(retryButtons == 0)
        #expect(banners.contains { $0.hasPrefix(expectBanner) && $0.hasSuffix(" UTC.") }, "\(banners)")
        // Several waits each (the 429's budget pause serializes them: at least one per album).
        #expect(failedSearches >= (fault == .tooManyRequests ? 3 : 6))
    }

    /// The photos' host down while the search answers: 503 with Retry-After, then connections cut
    /// mid-image, then every image served again. The album waits with its photos pending (its
    /// banner says when it looks again), no photo fails, and it completes by itself.
    @Test func theImageHostDownThenBackEveryPhotoArrives() throws {
        let app = try Self.app()
        let browser = try app.signedUp()
        app.fixture.setImageFault(.unavailable(retryAfter: 1))
        let pin = try AlbumTests.dropPin(browser)
        var banners: Set<String> = []
        var failedMeanwhile = 0
        func watch(for seconds: Double) throws {
            let until = Date(timeIntervalSinceNow: seconds)
            while Date() < until {
                let page = try browser.get("/pins/\(pin)").body
                if let text = Self.banner(page) { banners.insert(text) }
                failedMeanwhile = max(failedMeanwhile, try AlbumTests.state(browser, pin: pin).count("failed"))
                usleep(100_000)
            }
        }
        try watch(for: 3)
        app.fixture.setImageFault(.truncated)
        try watch(for: 3)
        let during = try AlbumTests.state(browser, pin: pin)
        let refused = app.fixture.imageCount
        app.fixture.setImageFault(.none)
        let recovered = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 60)
        let attempts = try app.count("SELECT max(attempts) FROM album_jobs")
        print("""
            image host down 6 s (503 Retry-After 1, then cut connections): \(refused) image requests refused, album meanwhile \(during.status) \
            with \(during.count("ready")) ready, \(failedMeanwhile) failed; after it: \(album.status), \(album.count("ready")) ready, \
            \(album.count("failed")) failed, complete \(String(format: "%.1f", Date().timeIntervalSince(recovered))) s after the host came back; \
            attempts used \(attempts); banners \(banners.sorted())
            """)
        #expect(during.status == "downloading")
        #expect(failedMeanwhile == 0)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        #expect(attempts == 1, "waits for the host use no attempt")
        #expect(banners.contains { $0.hasSuffix(" UTC.") }, "\(banners)")
    }

    @Test func flickr201ForFiveMinutesThenEveryAlbumCompletes() throws {
        try Self.ridesOut(.apiUnavailable, expectBanner: "Flickr is unavailable; trying again at ")
    }

    @Test func http503ForFiveMinutesThenEveryAlbumCompletes() throws {
        try Self.ridesOut(.serviceUnavailable, expectBanner: "Flickr is unavailable; trying again at ")
    }

    /// 429 with Retry-After: 1 is a named wait, taken as it is (not scaled).
    @Test func http429WithRetryAfterForFiveSecondsThenEveryAlbumCompletes() throws {
        try Self.ridesOut(.tooManyRequests, seconds: 5, expectBanner: "Waiting for Flickr: it asked us to slow down; resumes at ")
    }

    /// Nothing answers at the provider's address at all (the fixture stopped), then it is back on
    /// the same port.
    @Test func connectionsRefusedForFiveMinutesThenTheAlbumCompletes() throws {
        let probe = try PhotoFixture()
        var options = PhotoFixture.Options()
        options.port = probe.port
        probe.stop()
        let app = try Self.app(fixture: options)
        let browser = try app.signedUp()
        app.fixture.stop()
        let started = Date()
        let pin = try AlbumTests.dropPin(browser)
        usleep(3_000_000)
        let during = try AlbumTests.state(browser, pin: pin).status
        let banner = Self.banner(try browser.get("/pins/\(pin)").body)
        let revived = try PhotoFixture(options: options)
        defer { revived.stop() }
        let recovered = Date()
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 30)
        print("""
            connections refused for \(String(format: "%.1f", recovered.timeIntervalSince(started))) s: album \(during) meanwhile \
            (\(banner ?? "no banner")); then \(album.status) with \(album.count("ready")) photos, \
            \(String(format: "%.1f", Date().timeIntervalSince(recovered))) s after the provider came back
            """)
        #expect(during == "downloading")
        #expect(banner?.hasPrefix("Flickr is unavailable; trying again at ") == true)
        #expect(album.status == "ready" && album.count("ready") == 30)
    }

    /// Past the horizon the album gives up with a fixed phrase and a Retry button: by then a
    /// person's press is what can change the outcome, and it does once the service is back.
    @Test func anOutageLongerThanTheHorizonFailsWithRetryThatWorksLater() throws {
        let app = try Self.app(horizon: 1.5)
        let browser = try app.signedUp()
        app.fixture.setSearchFault(.apiUnavailable)
        let started = Date()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 20)
        let gaveUp = Date().timeIntervalSince(started)
        let page = try browser.get("/pins/\(pin)").body
        print("201 past a horizon of 1.5 s: \(album.status) after \(String(format: "%.1f", gaveUp)) s and \(app.fixture.searchCount) searches: \(album.error ?? "")")
        #expect(album.status == "failed")
        #expect(album.error == "Flickr is unavailable right now. Please try again later.")
        #expect(gaveUp >= 1.5)
        #expect(page.contains(">Retry</button>"))
        app.fixture.setSearchFault(.none)
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        _ = try browser.post("/pins/\(pin)/retry", form: [("_csrf", token)])
        let retried = try AlbumTests.settled(browser, pin: pin)
        #expect(retried.status == "ready" && retried.count("ready") == 30)
    }
}
