import Foundation
import HTTPClient
import PhotoFixture
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// An album of an era (a place through time): the When form, Flickr's taken-date bounds against
/// the fixture's dated photos, Commons read within its window, and the era kept by New Collection.
@Suite(.tags(.slow)) struct AlbumEraTests {
    static let lat = 35.0116, lon = 135.7681

    /// The fixture's photos of the pin's place taken in `era`, as Flickr's search pages them
    /// (30 a page, in the unfiltered order), by remote id.
    static func flickrPage(_ page: Int, era: Era, pages: Int = PhotoFixture.Options().pages) -> [String] {
        let place = PhotoFixture.placeNumber(lat: lat, lon: lon)
        let low = "\(era.from)-01-01 00:00:00", high = "\(era.to)-12-31 23:59:59"
        // What Flickr answers (an unknown date is matched by the upload time in its place) …
        let matching = (1...pages).flatMap { p in (0..<30).map { place * 1_000_000 + p * 1000 + $0 } }.filter { id in
            let date = FixtureDate.of(id: id)
            return low <= date.datetaken && date.datetaken <= high
        }
        // … and what the app keeps of it.
        return matching.dropFirst((page - 1) * 30).prefix(30).filter { FixtureDate.of(id: $0).year.map(era.contains) ?? false }.map(String.init)
    }

    static func shown(_ app: TestApp, pin: Int) throws -> (ids: [String], taken: [String?], era: [Int?]) {
        let rows = try app.pool.query("""
            SELECT ph.remote_id, ph.date_taken, p.era_from::int, p.era_to::int FROM pins p
            LEFT JOIN photos ph ON ph.pin_id = p.id AND ph.generation = p.generation
            WHERE p.id = $1 ORDER BY ph.position
            """, [pin])
        let first = try #require(rows.first)
        return (try rows.compactMap { try $0.decode("remote_id", as: String?.self) }, try rows.map { try $0.decode("date_taken") },
                [try first.decode("era_from"), try first.decode("era_to")])
    }

    @Test func anEraAlbumHoldsOnlyPhotosTakenThenAndNewCollectionKeepsIt() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        #expect(try AlbumTests.settled(browser, pin: pin).status == "ready")

        // The form, without JavaScript: a select of decades and a range of years, posted with the token.
        let page = try browser.get("/pins/\(pin)")
        #expect(page.body.contains("<form method=\"post\" action=\"/pins/\(pin)/collection\" class=\"album-era\" id=\"era-form\">"))
        #expect(page.body.contains("<option value=\"any\" selected>Any time</option>"))
        #expect(page.body.contains("<option value=\"1850s\">1850s</option>") && page.body.contains("<option value=\"1950s\">1950s</option>"))
        let token = try #require(page.csrfToken)
        let chosen = try browser.post("/pins/\(pin)/collection", form: [("_csrf", token), ("when", "1950s"), ("from", ""), ("to", "")])
        #expect(chosen.status == 303 && chosen.header("Location") == "/pins/\(pin)", "\(chosen)")
        #expect(try AlbumTests.settled(browser, pin: pin).status == "ready")
        let fifties = Era.decade(1950)!
        var album = try Self.shown(app, pin: pin)
        #expect(album.era == [1950, 1959])
        #expect(!album.ids.isEmpty && album.ids == Self.flickrPage(1, era: fifties), "exactly the fixture's first page of the 1950s")
        for taken in album.taken { #expect(taken?.contains("195") == true, "\(taken ?? "no date")") }
        let shownPage = try browser.get("/pins/\(pin)").body
        #expect(shownPage.contains("<option value=\"1950s\" selected>1950s</option>") && shownPage.contains("taken in the 1950s"))

        // New Collection keeps the era: the next page of the 1950s.
        #expect(try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)]).status == 303)
        #expect(try AlbumTests.settled(browser, pin: pin).status != "downloading")
        album = try Self.shown(app, pin: pin)
        #expect(album.era == [1950, 1959])
        #expect(album.ids == Self.flickrPage(2, era: fifties), "the second page of the 1950s")

        // A range of years; then any time again.
        #expect(try browser.post("/pins/\(pin)/collection", form: [("_csrf", token), ("when", "years"), ("from", "1900"), ("to", "1925")]).status == 303)
        #expect(try AlbumTests.settled(browser, pin: pin).status != "downloading")
        album = try Self.shown(app, pin: pin)
        #expect(album.era == [1900, 1925] && album.ids == Self.flickrPage(1, era: Era(from: 1900, to: 1925)!))
        #expect(try browser.get("/pins/\(pin)").body.contains("value=\"1900\"") )
        #expect(try browser.post("/pins/\(pin)/collection", form: [("_csrf", token), ("when", "any")]).status == 303)
        #expect(try AlbumTests.settled(browser, pin: pin).status == "ready")
        album = try Self.shown(app, pin: pin)
        #expect(album.era == [nil, nil] && album.ids.count == 30)
    }

    /// Flickr puts the upload time in place of a date it does not know and matches on it: the
    /// fixture does the same, and the app keeps none of those in an era album.
    @Test func photosOfUnknownDateNeverJoinAnEra() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        _ = try AlbumTests.settled(browser, pin: pin)
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        #expect(try browser.post("/pins/\(pin)/collection", form: [("_csrf", token), ("when", "2010s")]).status == 303)
        #expect(try AlbumTests.settled(browser, pin: pin).status == "ready")
        let album = try Self.shown(app, pin: pin)
        let place = PhotoFixture.placeNumber(lat: Self.lat, lon: Self.lon)
        let unknown = (1...40).flatMap { p in (0..<30).map { place * 1_000_000 + p * 1000 + $0 } }.filter { FixtureDate.of(id: $0).unknown }
        #expect(!unknown.isEmpty, "the fixture has photos of unknown date here (so this could fail)")
        #expect(Set(album.ids).isDisjoint(with: unknown.map(String.init)))
        #expect(album.ids.count < 30, "Flickr's page held photos of unknown date (so this could fail)")
        #expect(album.ids == Self.flickrPage(1, era: Era.decade(2010)!))
    }

    @Test func choicesThatAreNoEraAreRefusedAndChangeNothing() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        _ = try AlbumTests.settled(browser, pin: pin)
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        let before = try Self.shown(app, pin: pin)
        let refusals: [[(String, String)]] = [
            [("when", "1840s")], [("when", "1955s")], [("when", "years"), ("from", "1990"), ("to", "1950")],
            [("when", "years"), ("from", "1950")], [("when", "years"), ("from", "١٩٥٠"), ("to", "1960")],
            [("when", "99999999999999999999s")], [("when", "3000s")], [("when", "<script>")],
        ]
        for fields in refusals {
            let answer = try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)] + fields)
            #expect(answer.status == 303, "\(fields)")
            let shownPage = try browser.get("/pins/\(pin)")
            #expect(shownPage.body.contains("Choose years between 1850") || shownPage.body.contains("Give the first and the last year")
                    || shownPage.body.contains("That is not a time to choose"), "\(fields): a clear message")
            #expect(!shownPage.body.contains("<script>"))
            let json = try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)] + fields, headers: [("Accept", "application/json")])
            #expect(json.status == 422, "\(fields)")
        }
        let after = try Self.shown(app, pin: pin)
        #expect(after.ids == before.ids && after.era == [nil, nil], "nothing changed")
        // Without the token, nothing at all.
        #expect(try browser.post("/pins/\(pin)/collection", form: [("when", "1950s")]).status == 403)
    }

    /// Commons cannot filter by date: a page reads one window of 200 nearby files, 50 a request,
    /// and keeps those of the era: at most five calls, and exactly the files of the era.
    @Test func commonsReadsAWindowOfCandidatesWithinItsBudget() throws {
        let fixture = try PhotoFixture(options: PhotoFixture.Options())
        defer { fixture.stop() }
        var options = HTTPClient.Options()
        options.internalOrigins = [fixture.baseURL]
        let commons = CommonsProvider(apiURL: fixture.baseURL + "/w/api.php", client: HTTPClient(options: options))
        let era = Era.decade(1900)!
        let place = PhotoFixture.placeNumber(lat: Self.lat, lon: Self.lon)
        let expected = (0..<CommonsProvider.eraWindow).filter { index in
            TakenDate.belongs(FixtureDate.of(id: place * 1000 + index).commonsText.map(TakenDate.commons)?.years, in: era)
        }
        let calls = fixture.searchCount
        let found = try commons.search(lat: Self.lat, lon: Self.lon, page: 1, era: era)
        #expect(!expected.isEmpty, "the window holds photos of the 1900s (so this could fail)")
        #expect(found.photos.map(\.remoteID) == expected.prefix(30).map { String(place * 1000 + $0) })
        #expect(found.photos.allSatisfy { TakenDate.belongs($0.takenYears, in: era) })
        #expect(fixture.searchCount - calls <= 1 + CommonsProvider.eraWindow / CommonsProvider.titlesPerRequest)
        #expect(found.pages == 3, "500 candidates, 200 a page")
        // Any time: one page of 30 in two calls, as before.
        let anyCalls = fixture.searchCount
        #expect(try commons.search(lat: Self.lat, lon: Self.lon, page: 1, era: nil).photos.count == 30)
        #expect(fixture.searchCount - anyCalls == 2)
    }
}
