import Foundation
import PhotoFixture
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Answers the real Flickr and Commons gave other clients (Tests/Fixtures/recorded, SOURCES.md),
/// replayed to the app through the fixture: what the album, the photo page and the credit line
/// show, and what the app sent.
@Suite struct RecordedAnswerTests {
    static let flickrDir = "flickr/"
    static let commonsDir = "commons/"

    static func app(flickr recorded: Recorded? = nil, commons: Recorded? = nil) throws -> TestApp {
        var options = PhotoFixture.Options()
        options.rules.recordedFlickrSearch = recorded
        options.rules.recordedCommonsImageInfo = commons
        return try TestApp(workers: true, fixture: options) { if commons != nil { $0.photoProvider = "commons" } }
    }

    static func photoPage(_ browser: Browser, _ album: AlbumTests.AlbumState, _ index: Int) throws -> String {
        try browser.get("/photos/\(album.ids[index])/view").body
    }

    static func lastError(_ app: TestApp) throws -> String {
        try app.pool.query("SELECT last_error FROM album_jobs ORDER BY id DESC LIMIT 1")[0].decode("last_error", as: String?.self) ?? ""
    }

    // MARK: Flickr

    /// flickr.people.getPublicPhotos of a real account (10 photos, licence 0, dates to the second),
    /// in the JSON form photos.search answers with.
    @Test func aRealFlickrPhotoListMakesAnAlbumWithItsCredits() throws {
        let answers = try RecordedAnswers.cassette(Self.flickrDir + "test_get_public_photos_by_user.yml")
        let list = try #require(answers.first { $0.body.contains("<photos ") })
        let app = try Self.app(flickr: Recorded(body: RecordedAnswers.flickrJSON(fromXML: list.body), contentType: "application/json",
                                                imageHosts: ["https://live.staticflickr.com"]))
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 10)
        let grid = try browser.get("/pins/\(pin)").body
        #expect(grid.contains("<span class=\"credit\">George · All Rights Reserved</span>"))
        let page = try Self.photoPage(browser, album, 0)
        #expect(page.contains("<h1>Guess where</h1>"))
        #expect(page.contains("<dt>By</dt><dd>George</dd>"))
        #expect(page.contains("rel=\"license noopener noreferrer\">All Rights Reserved</a></dd>"))
        #expect(page.contains("<dt>Taken</dt><dd>2024-04-07 16:09:01</dd>"))
        #expect(page.contains("href=\"https://www.flickr.com/photos/34427469121@N01/53637883806\""))
        #expect(try Self.photoPage(browser, album, 1).contains("<h1>Day Out: Maritime Museum &amp; Lifeboats</h1>"))

        // What the app sent: a limiting agent, the sort, the radius, 30 a page; and it fetched url_m (500 px).
        let search = try #require(app.fixture.requests.first { $0.query["method"] == "flickr.photos.search" })
        #expect(search.query["min_upload_date"] == "1072915200")
        #expect(search.query["sort"] == "interestingness-desc")
        #expect(search.query["radius"] == "5" && search.query["radius_units"] == "km")
        #expect(search.query["per_page"] == "30" && search.query["page"] == "1")
        #expect(search.userAgent?.hasPrefix("VirtualTourist/") == true)
        let images = app.fixture.requests.filter { $0.path.hasPrefix("/recorded/") }.map(\.path)
        #expect(images.count == 10)
        #expect(images.contains("/recorded/live.staticflickr.com/65535/53637883806_ff06bb5c65.jpg"))
    }

    /// flickr.photos.getInfo answers: one date unknown (Flickr filled in the upload time), one known to
    /// the year only, licence 7.
    @Test func flickrDatesSayNoMoreThanFlickrKnows() throws {
        func entry(_ file: String) throws -> [String: String] {
            let answers = try RecordedAnswers.cassette(Self.flickrDir + file)
            let info = try #require(answers.first { $0.body.contains("<dates ") }?.body)
            let sizes = try #require(answers.first { $0.body.contains("<sizes") }?.body)
            return RecordedAnswers.flickrSearchEntry(getInfo: info, sizes: sizes)
        }
        let unknown = try entry("TestGetSinglePhoto.test_sets_date_unknown_on_date_taken[25868667441].yml")
        let year = try entry("TestGetSinglePhoto.test_sets_granularity_on_date_taken.yml")
        #expect(unknown["datetakenunknown"] == "1" && unknown["datetaken"] == "2016-03-21 16:15:39")
        #expect(year["datetakengranularity"] == "6" && year["license"] == "7")
        let body = try JSONSerialization.data(withJSONObject: ["photos": ["page": 1, "pages": 1, "perpage": 30, "total": "2",
                                                                           "photo": [unknown, year]], "stat": "ok"])
        let app = try Self.app(flickr: Recorded(body: Array(body), contentType: "application/json", imageHosts: ["https://live.staticflickr.com"]))
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.count("ready") == 2)
        let first = try Self.photoPage(browser, album, 0), second = try Self.photoPage(browser, album, 1)
        #expect(first.contains("<dt>Taken</dt><dd>date unknown</dd>"))  // before: "Taken 2016-03-21 16:15:39", the upload time
        #expect(first.contains("rel=\"license noopener noreferrer\">All Rights Reserved</a></dd>"))
        #expect(second.contains("<dt>Taken</dt><dd>1950</dd>"))  // before: 1950-01-01 00:00:00
        #expect(second.contains("rel=\"license noopener noreferrer\">No known copyright restrictions</a></dd>"))
        #expect(second.contains("<dt>By</dt><dd>The National Archives UK</dd>"))
    }

    /// Code 201 in XML, as Flickr sent it five times running: a service outage, waited out up to
    /// the horizon (2 s in tests), then a fixed phrase.
    @Test func flickrCode201InXMLIsAnOutageNotAnUnreadableAnswer() throws {
        let answer = try #require(try RecordedAnswers.cassette(Self.flickrDir + "test_a_persistent_error_201_is_raised.yml").first)
        #expect(answer.contentType.hasPrefix("text/xml"))
        let app = try Self.app(flickr: Recorded(body: Array(answer.body.utf8), contentType: answer.contentType))
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "failed")
        #expect(album.error == "Flickr is unavailable right now. Please try again later.")
        #expect(app.fixture.searchCount >= 3)  // asked again until the horizon
        let page = try browser.get("/pins/\(pin)").body
        #expect(page.contains(">Retry</button>") && !page.contains("Sorry"))
        #expect(try Self.lastError(app).contains("201: Sorry, the Flickr API service is not currently available."))
    }

    @Test func flickrInvalidKeyInXMLFailsAtOnceWithoutRetry() throws {
        let answer = try #require(try RecordedAnswers.cassette(Self.flickrDir + "test_it_throws_if_bad_auth.yml").first)
        let app = try Self.app(flickr: Recorded(body: Array(answer.body.utf8), contentType: answer.contentType))
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "failed")
        #expect(album.error == "The administrator must set a valid Flickr API key.")
        #expect(app.fixture.searchCount == 1)
        #expect(!(try browser.get("/pins/\(pin)").body.contains(">Retry</button>")))
        #expect(try browser.get("/readyz").body.contains("invalid Flickr API key"))
    }

    /// Half a JSON answer served as text/xml: unreadable, so retried like an outage.
    @Test func aBrokenFlickrAnswerIsRetriedAndNeverQuoted() throws {
        let answer = try #require(try RecordedAnswers.cassette(Self.flickrDir + "test_retries_invalid_xml_error.yml").first)
        #expect(answer.body.hasSuffix("},"))
        let app = try Self.app(flickr: Recorded(body: Array(answer.body.utf8), contentType: answer.contentType))
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "failed")
        #expect(album.error == "Flickr is unavailable right now. Please try again later.")
        #expect(app.fixture.searchCount == 3)
        #expect(!(try browser.get("/pins/\(pin)").body.contains("JSON")))
    }

    // MARK: Wikimedia Commons

    /// imageinfo without thumburl (as the Wikipedia app recorded it): small originals as they are,
    /// the 1024 px one and the SVG as 960 px thumbnails built at a standard step.
    @Test func commonsFilesWithoutThumburlAreShownAtStandardSteps() throws {
        let recorded = try RecordedAnswers.bytes(Self.commonsDir + "gallery_collection_with_thumbs.json")
        let app = try Self.app(commons: Recorded(body: recorded, contentType: "application/json; charset=utf-8",
                                                 imageHosts: ["https://upload.wikimedia.org"]))
        let browser = try app.signedUp()
        let album = try AlbumTests.settled(browser, pin: try AlbumTests.dropPin(browser))
        #expect(album.status == "ready")
        #expect(album.count("ready") == 4)  // before: 3 (the SVG was dropped) with every original fetched
        let images = app.fixture.requests.filter { $0.path.hasPrefix("/recorded/") }.map(\.path)
        #expect(images.contains("/recorded/upload.wikimedia.org/wikipedia/commons/0/06/William_Henry_Bury.jpg"))
        #expect(images.contains { $0.hasSuffix("/thumb/f/f9/Castle_Street%2C_Dundee.jpg/960px-Castle_Street%2C_Dundee.jpg") }, "\(images)")
        #expect(images.contains("/recorded/upload.wikimedia.org/wikipedia/en/thumb/e/e7/Cscr-featured.svg/960px-Cscr-featured.svg.png"))
        #expect(!images.contains("/recorded/upload.wikimedia.org/wikipedia/commons/f/f9/Castle_Street%2C_Dundee.jpg"))
        #expect(app.fixture.refusedThumbnails == 0)
        let page = try Self.photoPage(browser, album, 2)
        #expect(page.contains("<h1>Castle Street, Dundee</h1>"))
        #expect(page.contains("<dt>Licence</dt><dd>see the file page</dd>"))
        #expect(page.contains("href=\"https://commons.wikimedia.org/wiki/File:Castle_Street,_Dundee.jpg\""))

        let info = try #require(app.fixture.requests.first { $0.query["prop"] == "imageinfo" })
        #expect(info.query["iiurlwidth"] == "960")
        #expect(info.query["iiprop"] == "url|size|mime|extmetadata")
        #expect(info.query["maxlag"] == "5")
        #expect(info.userAgent?.hasPrefix("VirtualTourist/") == true)
    }

    /// Answers with neither thumburl nor url (no iiprop=url), and extmetadata only: nothing can be
    /// downloaded, so nothing is shown and nothing is guessed.
    @Test(arguments: ["gallery_collection_no_thumbs.json", "image_license.json"])
    func commonsFilesWithoutAnyAddressAreSkipped(file: String) throws {
        let app = try Self.app(commons: Recorded(body: try RecordedAnswers.bytes(Self.commonsDir + file),
                                                 contentType: "application/json; charset=utf-8", imageHosts: ["https://upload.wikimedia.org"]))
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "empty")
        #expect(try browser.get("/pins/\(pin)").body.contains("No photos found"))
        #expect(app.fixture.requests.filter { $0.path.hasPrefix("/recorded/") }.isEmpty)
    }

    /// The `error` form of a MediaWiki answer: refused, said in a fixed phrase, never quoted.
    @Test func aMediaWikiErrorIsAFixedPhraseNotItsInfo() throws {
        let app = try Self.app(commons: Recorded(body: try RecordedAnswers.bytes(Self.commonsDir + "api_error.json"),
                                                 contentType: "application/json; charset=utf-8"))
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "failed")
        #expect(album.error == "Wikimedia Commons could not answer this search. Please try again later.")
        let page = try browser.get("/pins/\(pin)").body
        #expect(!page.contains("Unrecognized value") && page.contains(">Retry</button>"))
        #expect(try Self.lastError(app).contains("unknown_action"))
    }

    /// Both error forms, and the parts of a Flickr answer that are read without guessing.
    @Test func errorFormsLicencesAndDates() throws {
        let old = try #require(try JSONSerialization.jsonObject(with: Data(try RecordedAnswers.bytes(Self.commonsDir + "api_error.json"))) as? [String: Any])
        #expect(CommonsProvider.apiError(old)?.code == "unknown_action")
        let modern: [String: Any] = ["errors": [["code": "maxlag", "text": "Waiting for 10.64.48.35: 7 seconds lagged.", "module": "main"]]]
        #expect(CommonsProvider.apiError(modern)?.code == "maxlag")
        #expect(CommonsProvider.apiError(["batchcomplete": true]) == nil)

        #expect(FlickrCredits.licence(nil, names: FlickrProvider.knownLicenseName) == "see the photo page")
        #expect(FlickrCredits.licence("", names: FlickrProvider.knownLicenseName) == "see the photo page")
        #expect(FlickrCredits.licence("99", names: FlickrProvider.knownLicenseName) == "see the photo page")
        #expect(FlickrCredits.licence("0", names: FlickrProvider.knownLicenseName) == "All rights reserved")
        #expect(FlickrCredits.licence(4, names: FlickrProvider.knownLicenseName) == "CC BY 2.0")
        #expect(FlickrCredits.taken("2011-03-01 00:00:00", granularity: "4", unknown: "0") == "March 2011")
        #expect(FlickrCredits.taken("2011-01-01 00:00:00", granularity: 6, unknown: 0) == "2011")
        #expect(FlickrCredits.taken("2011-01-01 00:00:00", granularity: "8", unknown: nil) == "circa 2011")
        #expect(FlickrCredits.taken("2015-03-29 06:02:30", granularity: "0", unknown: "1") == nil)
        #expect(FlickrCredits.taken("2015-03-29 06:02:30", granularity: 0, unknown: "0") == "2015-03-29 06:02:30")
        #expect(ProviderCall.retryAfter("120") == 120)
        #expect(ProviderCall.retryAfter("0") == 1)
        #expect(ProviderCall.retryAfter("soon") == nil)
        #expect(CommonsProvider.thumbURL(original: "https://upload.wikimedia.org/wikipedia/commons/a/ab/X.jpg", width: 330, mime: "image/jpeg")
                    == "https://upload.wikimedia.org/wikipedia/commons/thumb/a/ab/X.jpg/330px-X.jpg")
        #expect(CommonsProvider.thumbURL(original: "https://example.org/X.jpg", width: 330, mime: "image/jpeg") == nil)
    }
}
