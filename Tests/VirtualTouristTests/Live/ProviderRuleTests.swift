import Foundation
import HTTPClient
import PhotoFixture
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// One test per rule the real services keep and the fixture now keeps too (docs/providers.md): the
/// fixture shows the rule, the app keeps it.
@Suite struct ProviderRuleTests {
    static func getJSON(_ url: String) throws -> [String: Any] {
        let response = try HTTPClient.trusting(url).get(url)
        return try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }

    static func photoIDs(_ answer: [String: Any]) -> [String] {
        ((answer["photos"] as? [String: Any])?["photo"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    static func searches(_ fixture: PhotoFixture) -> [LoggedRequest] {
        fixture.requests.filter { $0.query["method"] == "flickr.photos.search" }
    }

    // MARK: Flickr

    @Test func aFlickrGeoSearchWithoutALimitingAgentOnlySeesTheLast12Hours() throws {
        let app = try TestApp(workers: true)
        let search = app.fixture.apiURL + "?method=flickr.photos.search&api_key=k&lat=35.0&lon=135.7&radius=5&per_page=30&format=json&nojsoncallback=1"
        #expect(Self.photoIDs(try Self.getJSON(search)).count == 2)
        #expect(Self.photoIDs(try Self.getJSON(search + "&min_upload_date=1075939200")).count == 30)

        // The app names a limiting agent, so a pin gets a full album.
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 30)
        let sent = try #require(Self.searches(app.fixture).last)
        #expect(sent.query["min_upload_date"] != nil || sent.query["min_taken_date"] != nil, "\(sent.query)")
        #expect(Self.searches(app.fixture).filter { $0.query["api_key"] != "k" }.count == 1)  // one call per album
    }

    @Test func flickrRepeatsItselfPastTheFirst4000ResultsAndTheAppStaysInside() throws {
        var options = PhotoFixture.Options()
        options.pages = 400
        let app = try TestApp(fixture: options)
        let base = app.fixture.apiURL + "?method=flickr.photos.search&api_key=k&lat=35.0&lon=135.7&per_page=30&min_upload_date=1&format=json&nojsoncallback=1"
        let first = Self.photoIDs(try Self.getJSON(base + "&page=1"))
        #expect(Self.photoIDs(try Self.getJSON(base + "&page=200")) == first)
        #expect(Self.photoIDs(try Self.getJSON(base + "&page=133")) != first)

        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let picker = try browser.get("/pins/\(pin)/picker?page=200")
        #expect(picker.body.contains("Page 133 of 133"), "\(picker.body.prefix(0))")
        let sentByTheApp = Self.searches(app.fixture).filter { $0.query["api_key"] != "k" }
        #expect(!sentByTheApp.isEmpty)
        #expect(sentByTheApp.allSatisfy { (Int($0.query["page"] ?? "1") ?? 1) <= 133 })
    }

    @Test func flickrCode201IsRetriedAndTheAlbumCompletes() throws {
        var options = PhotoFixture.Options()
        options.failFirstSearches = 2
        options.firstSearchesFault = .apiUnavailable
        let app = try TestApp(workers: true, fixture: options)
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        #expect(app.fixture.searchCount == 3)
    }

    /// While an outage is retried the album says when, in a fixed phrase, not the service's words.
    @Test func anOutageIsRetriedWithTheTimeItResumesOnThePage() throws {
        var options = PhotoFixture.Options()
        options.failFirstSearches = 1
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.workers.outageBackoffFirst = 2
            settings.workers.providerOutageHorizon = 60
        }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        var banner = ""
        let album = try AlbumTests.settled(browser, pin: pin) {
            if banner.isEmpty, let page = try? browser.get("/pins/\(pin)").body,
               let match = page.firstMatch(of: /<p class="banner waiting">([^<]*)<\/p>/) { banner = String(match.1) }
        }
        #expect(album.status == "ready")
        #expect(banner.hasPrefix("Flickr is unavailable; trying again at ") && banner.hasSuffix(" UTC."), "\(banner)")
        #expect(try AlbumTests.state(browser, pin: pin).photos.count == 30)
        #expect(!(try browser.get("/pins/\(pin)").body.contains("banner waiting")))  // cleared once the search went through
    }

    @Test func flickrXMLErrorAnswersAreReadForTheirCode() throws {
        var options = PhotoFixture.Options()
        options.failFirstSearches = 1
        options.firstSearchesFault = .xmlUnavailable
        let app = try TestApp(workers: true, fixture: options)
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")  // 105 is "service currently unavailable": retried

        app.fixture.setSearchFault(.xmlInvalidKey)
        let before = app.fixture.searchCount
        let pin = try AlbumTests.dropPin(browser, lat: 48.8566, lon: 2.3522)
        let failed = try AlbumTests.settled(browser, pin: pin)
        #expect(failed.status == "failed")
        #expect(app.fixture.searchCount - before == 1)  // 100 is a bad key: not retried
        let page = try browser.get("/pins/\(pin)").body
        #expect(page.contains("The administrator must set a valid Flickr API key"))
        #expect(!page.contains("/retry\""), "no Retry button for a key only the administrator can fix")
    }

    // MARK: Wikimedia Commons

    @Test func commonsRefusesThumbnailWidthsOffTheStandardSteps() throws {
        let app = try TestApp(workers: true) { $0.photoProvider = "commons" }
        let thumb = app.fixture.baseURL + "/wikipedia/commons/thumb/1/11/Fixture_1000-1.jpg/"
        #expect(try HTTPClient.trusting(thumb).get(thumb + "640px-Fixture_1000-1.jpg").status == 429)
        #expect(try HTTPClient.trusting(thumb).get(thumb + "960px-Fixture_1000-1.jpg").status == 200)
        let refusedBefore = app.fixture.refusedThumbnails

        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")
        let widths = app.fixture.requests.compactMap { $0.query["iiurlwidth"] }
        #expect(!widths.isEmpty)
        #expect(widths.allSatisfy { ProviderRules.thumbnailSteps.contains(Int($0) ?? 0) }, "\(widths)")
        #expect(app.fixture.refusedThumbnails == refusedBefore)
    }

    @Test func commonsAnswersWithoutThumburlNeverFetchALargeOriginal() throws {
        let app = try TestApp(workers: true) { $0.photoProvider = "commons" }
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")
        #expect(app.fixture.largeOriginalDownloads == 0)
        #expect(album.count("failed") == 0)
        #expect(album.count("ready") >= 26)
        #expect(app.fixture.requests.filter { $0.path == "/w/api.php" }.count == 2)  // two calls per album
    }

    @Test func commons429WithRetryAfterDelaysTheAlbumByAboutThatLong() throws {
        var options = PhotoFixture.Options()
        options.rules.commonsRateLimitedRequests = 1
        options.rules.commonsRetryAfter = 3
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.photoProvider = "commons"
            settings.workers.providerOutageHorizon = 60  // a named wait longer than the tests' 2 s
        }
        let browser = try app.signedUp()
        let started = Date()
        let pin = try AlbumTests.dropPin(browser)
        var sawWaiting = false
        let album = try AlbumTests.settled(browser, pin: pin) {
            if !sawWaiting, (try? browser.get("/pins/\(pin)").body.contains("Waiting for Wikimedia Commons")) == true { sawWaiting = true }
        }
        let elapsed = Date().timeIntervalSince(started)
        #expect(album.status == "ready")
        #expect(album.count("ready") >= 26)
        #expect(elapsed >= 2.9 && elapsed < 8, "\(elapsed)")
        #expect(sawWaiting)
    }

    @Test func commonsBackgroundCallsSendMaxlagAndWaitOutTheLag() throws {
        var options = PhotoFixture.Options()
        options.rules.commonsLaggedRequests = 1
        options.rules.commonsRetryAfter = 1
        let app = try TestApp(workers: true, fixture: options) { $0.photoProvider = "commons" }
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")
        let api = app.fixture.requests.filter { $0.path == "/w/api.php" }
        #expect(api.first?.query["maxlag"] == "5", "\(api.first?.query ?? [:])")
        #expect(api.count >= 3)  // the lagged answer was asked again
    }
}
