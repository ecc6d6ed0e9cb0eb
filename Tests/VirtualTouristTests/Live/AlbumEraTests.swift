import Foundation
import Synchronization
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

        // The form, without JavaScript: a plain GET of a decade or a range of years; its page says
        // what the choice does and changes nothing; its button posts it with the token.
        let page = try browser.get("/pins/\(pin)")
        #expect(page.body.contains("<form method=\"get\" action=\"/pins/\(pin)/when\" class=\"album-era\" id=\"era-form\">"))
        #expect(page.body.contains("<option value=\"any\" selected>Any time</option>"))
        #expect(page.body.contains("<option value=\"1850s\">1850s</option>") && page.body.contains("<option value=\"1950s\">1950s</option>"))
        let before = try app.fingerprint()
        let asked = try browser.get("/pins/\(pin)/when?when=1950s&from=&to=")
        #expect(asked.status == 200 && asked.body.contains("A new collection of photos taken in"), "\(asked)")
        #expect(asked.body.contains("<form method=\"post\" action=\"/pins/\(pin)/collection\" class=\"stacked\">")
                && asked.body.contains("<input type=\"hidden\" name=\"when\" value=\"1950s\">"))
        let wrong = try browser.get("/pins/\(pin)/when?when=years&from=1990&to=1950")
        #expect(wrong.status == 422 && wrong.body.contains("role=\"alert\""))
        #expect(try app.fingerprint() == before, "the GET changed nothing")
        let token = try #require(asked.csrfToken)
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

    /// The fixture's count of a decade as Flickr's search gives it: every photo of the place
    /// whose datetaken falls in the decade (one of unknown date by its upload time).
    static func flickrCount(_ decade: Era, pages: Int = PhotoFixture.Options().pages) -> Int {
        let place = PhotoFixture.placeNumber(lat: lat, lon: lon)
        let low = "\(decade.from)-01-01 00:00:00", high = "\(decade.to)-12-31 23:59:59"
        return (1...pages).flatMap { p in (0..<30).map { place * 1_000_000 + p * 1000 + $0 } }
            .filter { low <= FixtureDate.of(id: $0).datetaken && FixtureDate.of(id: $0).datetaken <= high }.count
    }

    /// The strip's decades as the page shows them: name → count.
    static func strip(_ html: String) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for match in html.matches(of: /<span class="decade-name">(\d{4})s<\/span><span class="decade-count">([\d,]+) photos?<\/span>/) {
            counts[Int(match.1)!] = Int(match.2.replacingOccurrences(of: ",", with: ""))
        }
        return counts
    }

    static func budgetTokens(_ app: TestApp) throws -> Double {
        try app.pool.query("""
            SELECT least(capacity, tokens + refill_per_second * extract(epoch FROM clock_timestamp() - refilled_at))::float8 AS t
            FROM provider_budgets
            """)[0].decode("t")
    }

    @Test func theStripOfDecadesCountsWhatTheProviderHoldsOnceAMonthWithinTheBudget() throws {
        let app = try TestApp()
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        // The album page costs nothing more: the strip is a link until album.js (or a person) asks.
        let album = try browser.get("/pins/\(pin)")
        #expect(album.body.contains("data-count=\"/pins/\(pin)/decades?fragment=1\"") && album.body.contains("href=\"/pins/\(pin)/decades\""))
        let calls = app.fixture.searchCount
        let fragment = try browser.get("/pins/\(pin)/decades?fragment=1")
        #expect(fragment.status == 200)
        let decades = Era.decades()
        #expect(app.fixture.searchCount - calls == decades.count, "one light search a decade")
        let shown = Self.strip(fragment.body)
        #expect(shown.count == decades.count)
        for decade in decades { #expect(shown[decade.from] == Self.flickrCount(decade), "\(decade)") }
        // Kept: the next look asks the provider nothing; the page without JavaScript shows the same.
        let page = try browser.get("/pins/\(pin)/decades")
        #expect(page.status == 200 && Self.strip(page.body) == shown && app.fixture.searchCount - calls == decades.count)
        // Each decade with photos is a button that loads it, read as "1950s 12 photos".
        #expect(page.body.contains("<input type=\"hidden\" name=\"when\" value=\"1950s\">"))
        #expect(page.body.contains("<button type=\"submit\"><span class=\"decade-name\">1950s</span><span class=\"decade-count\">\(Self.flickrCount(Era.decade(1950)!)) photos</span></button>"))
        // After 30 days the count is made again, drawn from the provider's budget like any call.
        try app.pool.query("UPDATE pin_decades SET counted_at = now() - interval '31 days'")
        let before = try Self.budgetTokens(app)
        _ = try browser.get("/pins/\(pin)/decades?fragment=1")
        let spent = before - (try Self.budgetTokens(app))
        #expect(app.fixture.searchCount - calls == 2 * decades.count)
        #expect(spent > Double(decades.count) - 1 && spent <= Double(decades.count) + 0.01, "\(spent) calls drawn from the budget")
        #expect(try app.count("SELECT count(*) FROM pin_decades WHERE counted_at > now() - interval '1 minute'") == decades.count)
    }

    /// Olga's shared map "Club" with Vic its viewer, and a pin Olga dropped at the test's place.
    static func clubWithAViewer(_ app: TestApp) throws -> (owner: Browser, viewer: Browser, pin: Int) {
        let owner = try app.signedUp(email: "olga-\(UUID().uuidString.prefix(6))@example.org", name: "Olga")
        let viewerEmail = "vic-\(UUID().uuidString.prefix(6))@example.org"
        let viewer = try app.signedUp(email: viewerEmail, name: "Vic")
        _ = try SharedMapTests.makeMap(owner, name: "Club", member: viewer, email: viewerEmail, role: "viewer")
        let dropped = try SharedMapTests.drop(owner, lat: Self.lat, lon: Self.lon)
        let pin = try #require(dropped.body.firstMatch(of: /"id":([0-9]+)/).map { Int($0.1)! })
        return (owner, viewer, pin)
    }

    @Test func aViewerSeesTheCountsAndTheCurrentDecadeIsMarked() throws {
        let app = try TestApp(workers: true)
        let (owner, viewer, pin) = try Self.clubWithAViewer(app)
        _ = try AlbumTests.settled(owner, pin: pin)
        let token = try #require(try owner.get("/pins/\(pin)").csrfToken)
        #expect(try owner.post("/pins/\(pin)/collection", form: [("_csrf", token), ("when", "1950s")]).status == 303)
        _ = try AlbumTests.settled(owner, pin: pin)
        let theirs = try owner.get("/pins/\(pin)/decades?fragment=1").body
        #expect(theirs.contains("<button type=\"submit\" aria-current=\"true\"><span class=\"decade-name\">1950s</span>"))
        let vics = try viewer.get("/pins/\(pin)/decades?fragment=1")
        #expect(vics.status == 200 && Self.strip(vics.body) == Self.strip(theirs))
        #expect(!vics.body.contains("<button") && !vics.body.contains("name=\"when\""), "a viewer cannot choose")
        #expect(vics.body.contains("<li class=\"decade bar-"), "but sees every decade")
    }

    @Test func thenAndNowPairsADecadesPhotosWithThisDecadesAtTwoCalls() throws {
        let app = try TestApp()
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        let calls = app.fixture.searchCount
        let page = try browser.get("/pins/\(pin)/then-and-now?then=1920s")
        #expect(page.status == 200)
        #expect(app.fixture.searchCount - calls == 2, "one search for then, one for now")
        let thens = page.body.matches(of: /<figure class="then">/).count, nows = page.body.matches(of: /<figure class="now">/).count
        let expected = min(12, Self.flickrPage(1, era: Era.decade(1920)!).count, Self.flickrPage(1, era: Era.decades().last!).count)
        #expect(thens == expected && nows == expected && expected > 0)
        for match in page.body.matches(of: /<strong>Then<\/strong> · ([^<]*)<br>/) { #expect(match.1.contains("192"), "\(match.1)") }
        for match in page.body.matches(of: /<strong>Now<\/strong> · ([^<]*)<br>/) { #expect(match.1.contains("202"), "\(match.1)") }
        #expect(page.body.contains("<option value=\"1920s\" selected>1920s</option>"))
        // A choice that is no earlier decade falls back to the 1950s, never an error page.
        for odd in ["2020s", "1840s", "x", "1950-1960", "99999999999999999999s"] {
            let fallback = try browser.get("/pins/\(pin)/then-and-now?then=\(odd)")
            #expect(fallback.status == 200 && fallback.body.contains("<option value=\"1950s\" selected>1950s</option>"), "\(odd)")
        }
        #expect(try browser.get("/pins/999999/then-and-now").status == 404)
    }

    /// A review found a count started for every look while one ran, and started again at once
    /// after one failed: one count per pin at a time, shared; a failed one rests; a viewer starts none.
    @Test func aPinIsCountedOnceAtATimeAFailureRestsAndAViewerStartsNone() throws {
        var options = PhotoFixture.Options()
        options.latency = 0.05  // 18 calls: about a second a count
        let app = try TestApp(fixture: options)
        let (owner, viewer, pin) = try Self.clubWithAViewer(app)
        let calls = app.fixture.searchCount

        // A viewer's look spends nothing.
        let seen = try viewer.get("/pins/\(pin)/decades?fragment=1")
        #expect(seen.status == 200 && seen.body.contains("Not counted yet") && app.fixture.searchCount == calls)

        // Three looks at once (tabs, album.js asking again): one count.
        let answers = Mutex<[String]>([])
        // A browser each (a Browser is one person's cookies, not shared between threads).
        nonisolated(unsafe) let tabs = (0..<3).map { _ in PhotoAccessTests.copy(owner, port: app.port) }
        DispatchQueue.concurrentPerform(iterations: 3) { index in
            let body = (try? tabs[index].get("/pins/\(pin)/decades?fragment=1").body) ?? ""
            answers.withLock { $0.append(body) }
        }
        #expect(app.fixture.searchCount - calls == Era.decades().count, "one count for three looks")
        #expect(answers.withLock { $0.filter { $0.contains("Still counting") }.count } >= 1)
        #expect(Self.strip(try owner.get("/pins/\(pin)/decades?fragment=1").body).count == Era.decades().count)

        // A failed count rests: the next look does not ask again at once.
        try app.pool.query("DELETE FROM pin_decades")
        app.fixture.setSearchFault(.invalidKey)
        let before = app.fixture.searchCount
        #expect(try owner.get("/pins/\(pin)/decades?fragment=1").body.contains("could not count"))
        let afterFailure = app.fixture.searchCount
        #expect(afterFailure - before >= 1)
        #expect(try owner.get("/pins/\(pin)/decades?fragment=1").body.contains("a moment ago"))
        #expect(app.fixture.searchCount == afterFailure, "no call while the failure rests")
    }

    /// A review found the era changed by a New Collection the quota refused.
    @Test func aRefusedCollectionLeavesTheEraAsItWas() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        _ = try AlbumTests.settled(browser, pin: pin)
        let before = try Self.shown(app, pin: pin)
        try app.pool.query("UPDATE users SET max_collections_per_hour = 0")
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        #expect(try browser.post("/pins/\(pin)/collection", form: [("_csrf", token), ("when", "1950s")]).status == 303)
        let page = try browser.get("/pins/\(pin)").body
        #expect(page.contains("new collections in the past hour, your limit"), "the quota's message")
        let after = try Self.shown(app, pin: pin)
        #expect(after.era == [nil, nil] && after.ids == before.ids && !page.contains("taken in the 1950s"))
    }

    /// The exports and the zip name an album's era; a pin without one says nothing of it.
    @Test func exportsAndTheZipNameTheEra() throws {
        let app = try TestApp()
        let browser = try app.signedUp()
        let dated = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        let plain = try AlbumTests.dropPin(browser, lat: 48.85, lon: 2.35)
        try app.pool.query("UPDATE pins SET era_from = 1950, era_to = 1959, place_name = 'Kyoto' WHERE id = $1", [dated])
        let geojson = try browser.get("/pins.geojson").body
        #expect(geojson.components(separatedBy: #""era":"1950s""#).count == 2, "one pin has an era")
        #expect(try browser.get("/pins.gpx").body.contains("<desc>0 photos, taken in the 1950s</desc>"))
        #expect(try browser.get("/pins.kml").body.contains("0 photos, taken in the 1950s. Album:"))
        #expect(try browser.get("/pins/\(dated)/album.zip").header("Content-Disposition")?.contains("filename*=UTF-8''Kyoto%201950s.zip") == true)
        let plainName = try browser.get("/pins/\(plain)/album.zip").header("Content-Disposition") ?? ""
        #expect(plainName.hasPrefix("attachment; filename=\"album-\(plain).zip\"") && !plainName.contains("s.zip"), "\(plainName)")
        // The map's own data keeps its fields.
        #expect(!(try browser.get("/pins.json").body.contains("era")))
    }

    @Test func anAlbumOrdersByDateTakenOnTheServerWithOrWithoutJavaScript() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser, lat: Self.lat, lon: Self.lon)
        #expect(try AlbumTests.settled(browser, pin: pin).status == "ready")
        let rows = try app.pool.query("""
            SELECT ph.id, ph.date_taken FROM photos ph JOIN pins p ON p.id = ph.pin_id AND p.generation = ph.generation
            WHERE p.id = $1 ORDER BY ph.position
            """, [pin])
        let photos: [(id: Int64, taken: String?)] = try rows.map { (try $0.decode("id"), try $0.decode("date_taken")) }
        let expected = photos.enumerated().sorted {
            let a = TakenDate.sortKey($0.element.taken), b = TakenDate.sortKey($1.element.taken)
            return a != b ? a < b : $0.offset < $1.offset
        }.map { String($0.element.id) }
        #expect(expected != photos.map { String($0.id) }, "the fixture's order is not already by date (so this could fail)")
        func grid(_ html: String) -> [String] { html.matches(of: /<li class="photo[^"]*" data-id="(\d+)"/).map { String($0.1) } }
        let page = try browser.get("/pins/\(pin)?sort=taken").body
        #expect(grid(page) == expected)
        #expect(page.contains("<a href=\"/pins/\(pin)?sort=taken\" aria-current=\"page\">by date taken</a>"))
        #expect(grid(try browser.get("/pins/\(pin)/album.html?sort=taken").body) == expected, "album.js fetches the same order")
        #expect(grid(try browser.get("/pins/\(pin)").body) == photos.map { String($0.id) }, "as collected without it")
    }
}
