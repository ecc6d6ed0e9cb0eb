import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import HTTPServer
import PhotoFixture
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The album flow end to end: real PostgreSQL, real HTTP, the fixture photo service over loopback.
@Suite struct AlbumTests {
    struct AlbumState {
        let status: String
        let error: String?
        let page: Int?
        let photos: [[String: Any]]
        var ids: [Int] { photos.compactMap { $0["id"] as? Int } }
        func count(_ status: String) -> Int { photos.filter { $0["status"] as? String == status }.count }
    }

    static func state(_ browser: Browser, pin: Int) throws -> AlbumState {
        let page = try browser.get("/pins/\(pin)/album.json")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any])
        return AlbumState(status: json["status"] as? String ?? "", error: json["error"] as? String,
                          page: json["page"] as? Int, photos: json["photos"] as? [[String: Any]] ?? [])
    }

    /// Polls until the album is no longer downloading.
    static func settled(_ browser: Browser, pin: Int, timeout: Double = 30, meanwhile: () -> Void = {}) throws -> AlbumState {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while true {
            let current = try state(browser, pin: pin)
            if current.status != "downloading" || Date() > deadline { return current }
            meanwhile()
            usleep(100_000)
        }
    }

    static func dropPin(_ browser: Browser, lat: Double = 35.0116, lon: Double = 135.7681) throws -> Int {
        let token = try browser.get("/").csrfToken ?? ""
        let page = try browser.post("/pins", form: [("_csrf", token), ("lat", String(lat)), ("lon", String(lon))],
                                    headers: [("Accept", "application/json")])
        let json = try JSONSerialization.jsonObject(with: Data(page.body.utf8)) as? [String: Any]
        return try #require(json?["id"] as? Int)
    }

    @Test func wholeLifecycle() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        let token = try #require(try browser.get("/").csrfToken)

        // The album page right away: placeholders or photos, and New Collection disabled while downloading.
        let first = try browser.get("/pins/\(pin)")
        #expect(first.status == 200)
        #expect(first.body.contains("Kyoto"))
        #expect(first.body.contains("This product uses the Flickr API but is not endorsed or certified by Flickr."))

        let album = try Self.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.photos.count == 30)
        #expect(album.count("ready") == 30)
        #expect(album.page == 1)
        let page = try browser.get("/pins/\(pin)")
        #expect(page.body.components(separatedBy: "<li class=\"photo\"").count - 1 == 30)
        #expect(!page.body.contains("id=\"new-collection\" disabled"))

        // Photo bytes: sniffed type, strong ETag, long private caching, 304.
        let photoID = album.ids[0]
        let image = try browser.get("/photos/\(photoID)")
        #expect(image.status == 200)
        #expect(image.header("Content-Type") == "image/jpeg")
        #expect(image.header("Cache-Control") == "private, max-age=31536000, immutable")
        let etag = try #require(image.header("ETag"))
        #expect(try browser.get("/photos/\(photoID)", headers: [("If-None-Match", etag)]).status == 304)
        #expect(try app.count("SELECT count(*) FROM photos WHERE width > 0 AND height > 0 AND byte_size > 1000 AND hash IS NOT NULL AND bytes IS NULL") == 30)

        // The photo page: attribution and previous/next.
        let view = try browser.get("/photos/\(album.ids[1])/view")
        #expect(view.status == 200)
        #expect(view.body.contains("Fixture photo 1-2"))
        #expect(view.body.contains("Licence"))
        #expect(view.body.contains("href=\"/photos/\(album.ids[0])/view\""))
        #expect(view.body.contains("href=\"/photos/\(album.ids[2])/view\""))
        #expect(view.body.contains("https://www.flickr.com/photos/"))

        // Remove a photo: gone at once and after a reload.
        #expect(try browser.request("DELETE", "/photos/\(photoID)", headers: [("X-CSRF-Token", token)]).status == 204)
        #expect(try Self.state(browser, pin: pin).photos.count == 29)
        #expect(try browser.get("/photos/\(photoID)").status == 404)

        // New Collection: a different page of results, all new photos.
        let before = Set(album.ids)
        #expect(try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)]).status == 303)
        let second = try Self.settled(browser, pin: pin)
        #expect(second.status == "ready")
        #expect(second.photos.count == 30)
        #expect(second.page != 1)
        #expect(before.isDisjoint(with: second.ids))
        #expect(try app.count("SELECT count(*) FROM photos") == 30)

        // The picker: browse page 2, save two photos; no duplicates when saved twice.
        let picker = try browser.get("/pins/\(pin)/picker?page=2")
        #expect(picker.status == 200)
        #expect(picker.body.contains("Page 2 of 40"))
        let ids = picker.body.matches(of: /name="photo" value="(\d+)"/).map { String($0.1) }
        #expect(ids.count == 30)
        let chosen = Array(ids.prefix(2))
        let saved = try browser.post("/pins/\(pin)/picker", form: [("_csrf", token), ("page", "2")] + chosen.map { ("photo", $0) })
        #expect(saved.status == 303)
        let afterPick = try Self.settled(browser, pin: pin)
        #expect(afterPick.photos.count == 32 || second.page == 2)
        let again = try browser.post("/pins/\(pin)/picker", form: [("_csrf", token), ("page", "2")] + chosen.map { ("photo", $0) })
        #expect(again.status == 303)
        #expect(try Self.settled(browser, pin: pin).photos.count == afterPick.photos.count)
        #expect(try browser.get("/pins/\(pin)/picker?page=2").body.contains("(in the album)"))

        // Delete the pin from the album page: photos and jobs go with it.
        #expect(try browser.post("/pins/\(pin)/delete", form: [("_csrf", token)]).status == 303)
        #expect(try app.count("SELECT count(*) FROM photos") == 0)
        #expect(try app.count("SELECT count(*) FROM album_jobs") == 0)
        #expect(try browser.get("/pins/\(pin)").status == 404)
    }

    @Test func noPhotosFound() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser, lat: -70, lon: 10)  // the fixture has nothing south of -60
        let album = try Self.settled(browser, pin: pin)
        #expect(album.status == "empty")
        #expect(try browser.get("/pins/\(pin)").body.contains("No photos found"))
    }

    @Test func searchFailuresAreRetriedThenSucceed() throws {
        var options = PhotoFixture.Options()
        options.failFirstSearches = 2
        let app = try TestApp(workers: true, fixture: options)
        let browser = try app.signedUp()
        let album = try Self.settled(browser, pin: try Self.dropPin(browser))
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        #expect(app.fixture.searchCount == 3)
    }

    @Test(arguments: [PhotoFixture.SearchFault.garbage, .html, .truncated, .invalidKey])
    func brokenSearchAnswersFailWithAReasonAndRetry(fault: PhotoFixture.SearchFault) throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        // An album made while the service was well must not change when it misbehaves.
        let other = try Self.dropPin(browser, lat: 48.8566, lon: 2.3522)
        let good = try Self.settled(browser, pin: other)
        #expect(good.status == "ready")
        app.fixture.setSearchFault(fault)
        let searchesBefore = app.fixture.searchCount
        let pin = try Self.dropPin(browser)
        let album = try Self.settled(browser, pin: pin)
        #expect(album.status == "failed")
        let reason = album.error ?? ""
        #expect(!reason.isEmpty)
        // A fixed phrase per class of failure; the provider's words go to the log and /readyz.
        let page = try browser.get("/pins/\(pin)")
        if fault == .invalidKey {
            #expect(reason == "The administrator must set a valid Flickr API key.")
            #expect(app.fixture.searchCount - searchesBefore == 1)  // not worth retrying
            #expect(!page.body.contains(">Retry</button>"))  // only the administrator can fix it
            #expect(try browser.get("/readyz").body.contains("flickr: invalid Flickr API key"))
        } else {
            #expect(reason == "Flickr is unavailable right now. Please try again later.", "\(reason)")
            // An unreadable answer is tried maxAttempts times; a cut-off one is a connection
            // failure, waited out up to the outage horizon (2 s in tests).
            #expect(fault == .truncated ? app.fixture.searchCount - searchesBefore >= 3 : app.fixture.searchCount - searchesBefore == 3)
            #expect(page.body.contains(">Retry</button>"))
            #expect(try browser.get("/readyz").body.contains("flickr: the photo service"))
        }
        #expect(!page.body.contains("could not be read") && !page.body.contains("JSON") && !page.body.contains("127.0.0.1"))
        #expect(try browser.get("/healthz").body == "ok \(Version.number)")
        let after = try Self.state(browser, pin: other)
        #expect(after.status == "ready")
        #expect(after.ids == good.ids)
    }

    @Test(arguments: [
        PhotoFixture.ImageFault.notAnImage, .oversized(bytes: 50 * 1024 * 1024),
        .redirect(to: "file:///etc/passwd"), .redirect(to: "gopher://127.0.0.1/x"), .status(404), .status(410), .status(403),
    ])
    func brokenImagesFailOneByOne(fault: PhotoFixture.ImageFault) throws {
        var options = PhotoFixture.Options()
        options.imageFault = fault
        options.faultyImageEvery = 2
        let app = try TestApp(workers: true, fixture: options)
        let browser = try app.signedUp()
        let album = try Self.settled(browser, pin: try Self.dropPin(browser), timeout: 60)
        #expect(album.status == "ready")
        #expect(album.count("pending") == 0)
        #expect(album.count("failed") > 0, "\(fault)")
        #expect(album.count("ready") > 0, "\(fault)")
        let reasons = try app.pool.query("SELECT DISTINCT error FROM photos WHERE status = 'failed'").map { try $0.decode("error", as: String.self) }
        #expect(!reasons.isEmpty)
        #expect(try app.count("SELECT count(*) FROM photos WHERE status = 'ready' AND (content_type <> 'image/jpeg' OR byte_size > 8388608)") == 0)
        #expect(try browser.get("/healthz").body == "ok \(Version.number)")
    }

    /// Trouble of the image host rather than of one image (a 5xx, a wait named, a connection cut
    /// mid-image): the photo stays pending, the album waits and fetches it again; none fails.
    @Test(arguments: [PhotoFixture.ImageFault.status(500), .status(503), .unavailable(retryAfter: 1), .truncated])
    func passingImageHostTroubleIsWaitedOut(fault: PhotoFixture.ImageFault) throws {
        var options = PhotoFixture.Options()
        options.imageFault = fault
        options.faultyImageEvery = 2
        let app = try TestApp(workers: true, fixture: options) { $0.workers.providerOutageHorizon = 60 }
        let browser = try app.signedUp()
        let album = try Self.settled(browser, pin: try Self.dropPin(browser), timeout: 60)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30, "\(fault)")
        #expect(album.count("failed") == 0, "\(fault)")
    }

    /// An image host that never answers in time: the album waits up to the outage horizon (2 s
    /// here), then the photos still pending fail with the host's last answer and the album completes.
    @Test func slowImagesFailOnlyPastTheOutageHorizon() throws {
        var options = PhotoFixture.Options()
        options.imageFault = .slow(bytesPerSecond: 20_000)
        options.faultyImageEvery = 1
        let app = try TestApp(workers: true, fixture: options) { $0.httpClient.totalTimeout = 1; $0.workers.imageAttempts = 1 }
        let browser = try app.signedUp()
        let album = try Self.settled(browser, pin: try Self.dropPin(browser), timeout: 60)
        #expect(album.status == "ready")
        #expect(album.count("failed") == 30)
        #expect(try app.pool.query("SELECT error FROM photos WHERE status = 'failed' LIMIT 1").first?.decode("error", as: String.self)
                    .contains("too long") == true)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE state = 'done' AND last_error IS NULL") == 1)
    }

    /// A lease that lapses while its worker is still downloading (a slow host, busy slots): a
    /// second worker takes the job over mid-album. The first one then writes nothing and finishes
    /// nothing; the second completes the album. Made deterministic by lapsing the lease by hand
    /// and claiming as the second worker from the test, while the app's only worker is mid-album.
    @Test func aLeaseTakenOverMidDownloadLeavesTheAlbumToTheNewHolder() throws {
        var options = PhotoFixture.Options()
        options.latency = 0.2  // with two downloads at once, the album takes about three seconds
        let app = try TestApp(workers: true, fixture: options) { $0.workers.workers = 1; $0.workers.downloadsPerAlbum = 2 }
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        #expect(eventually(timeout: 30) { ((try? Self.state(browser, pin: pin).count("ready")) ?? 0) >= 2 })
        let queue = app.app.workers.store
        let first = try #require(try app.pool.query("""
            SELECT id, pin_id, user_id, generation, kind, attempts, locked_by FROM album_jobs WHERE state = 'running'
            """).first.map {
            AlbumJob(id: try $0.decode("id"), pinID: try $0.decode("pin_id"), userID: try $0.decode("user_id"),
                     generation: try $0.decode("generation"), kind: try $0.decode("kind"), attempts: try $0.decode("attempts"),
                     worker: try $0.decode("locked_by"))
        })
        try app.pool.query("UPDATE album_jobs SET locked_until = now() - interval '1 second' WHERE id = $1", [first.id])
        let second = try #require(try queue.claimJob(worker: "second", leaseSeconds: 60))
        #expect(second.id == first.id)
        // The first holder can no longer change anything.
        #expect(throws: LeaseLost.self) { try queue.finish(first) }
        #expect(try queue.renewLease(first, leaseSeconds: 60) == false)
        let pending = try queue.pendingPhotos(second)
        #expect(try queue.storeResults([.failed(pending[0].id, reason: "from the first worker")], job: first) == false)
        #expect(throws: LeaseLost.self) { try queue.fail(first, phrase: "no", detail: "no", retryable: true) }
        let before = try Self.state(browser, pin: pin)
        #expect(before.status == "downloading", "the first worker did not finish the album")
        // The second worker completes it; the first stops at its next write.
        app.app.workers.process(second)
        let album = try Self.settled(browser, pin: pin, timeout: 30)
        let job = try app.pool.query("SELECT state, locked_by FROM album_jobs WHERE id = $1", [first.id])[0]
        print("lease taken over with \(before.count("ready")) of 30 ready: album \(album.status), \(album.count("ready")) ready, \(album.count("pending")) pending, job \(try job.decode("state", as: String.self))")
        #expect(album.status == "ready")
        #expect(album.count("pending") == 0)
        #expect(album.count("ready") == 30)
        #expect(album.count("failed") == 0, "nothing the first worker wrote after the takeover")
        #expect(try job.decode("state", as: String.self) == "done")
        #expect(app.app.workers.activeJobs == 0 || eventually(timeout: 10) { app.app.workers.activeJobs == 0 },
                "the first worker stopped")
    }

    /// After an outage every waiting album would look again in the same second: each wait goes
    /// after the jobs already due around then, five a second.
    @Test func resumesAfterAnOutageAreSpreadOut() throws {
        let app = try TestApp(workers: false)
        let browser = try app.signedUp()
        for index in 0..<40 { _ = try Self.dropPin(browser, lat: Double(index), lon: 10) }
        let queue = app.app.workers.store
        let started: Double = try app.pool.query("SELECT extract(epoch FROM clock_timestamp())::float8 AS t")[0].decode("t")
        while let job = try queue.claimJob(worker: "w", leaseSeconds: 60) {
            try queue.wait(job, seconds: 1, phrase: "waiting", detail: "an outage", countsAttempt: false, resumesPerSecond: 5)
        }
        let due: [Double] = try app.pool.query("""
            SELECT extract(epoch FROM run_after)::float8 - $1 AS due FROM album_jobs WHERE state = 'queued' ORDER BY due
            """, [started]).map { try $0.decode("due") }
        #expect(due.count == 40)
        let first = due.first ?? 0, last = due.last ?? 0
        let perSecond = (0...Int(last)).map { second in due.filter { Int($0) == second }.count }
        print("40 albums waiting 1 s: they resume from \(String(format: "%.1f", first)) s to \(String(format: "%.1f", last)) s, per second \(perSecond)")
        #expect(first >= 1, "never before the wait named")
        #expect(perSecond.allSatisfy { $0 <= 6 }, "about five a second: \(perSecond)")
        #expect(last <= 1 + 40.0 / 5 + 2)
    }

    @Test func aJobWhoseWorkerDiedIsFinishedByAnotherWithoutDuplicates() throws {
        let app = try TestApp(workers: false)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        // A worker claims the job, writes the placeholders and five images, then dies.
        let store = app.app.workers.store
        let ghost = try #require(try store.claimJob(worker: "ghost", leaseSeconds: 1))
        let search = try #require(try store.searchState(ghost))
        let result = try app.app.workers.provider.search(lat: search.lat, lon: search.lon, page: 1)
        #expect(try store.storeSearchResult(ghost, result)?.count == 30)
        for photo in try store.pendingPhotos(ghost).prefix(5) {
            guard case .success(let (bytes, info), _) = app.app.workers.fetchImage(photo.url) else { Issue.record("fetch failed"); continue }
            try store.storeImage(photoID: photo.id, job: ghost, hash: try store.photos.put(bytes), byteSize: bytes.count, info: info)
        }
        #expect(try Self.state(browser, pin: pin).count("ready") == 5)
        // Workers start (a restart); the lease runs out and the job is taken over.
        try app.app.startBackgroundWork()
        defer { app.app.stopBackgroundWork() }
        let album = try Self.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.photos.count == 30)
        #expect(album.count("ready") == 30)
        #expect(try app.count("SELECT count(*) FROM photos") == 30)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE state = 'done' AND attempts = 2") == 1)
        #expect(app.fixture.searchCount == 1)  // the taken-over job did not search again
    }

    @Test func twoNewCollectionsAtOnceMakeOne() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        _ = try Self.settled(browser, pin: pin)
        let token = try #require(try browser.get("/").csrfToken)
        let generation: Int = try app.pool.query("SELECT generation FROM pins")[0].decode("generation")
        let statuses = Mutex<[Int]>([])
        let group = DispatchGroup()
        for _ in 0..<2 {
            // One browser per thread, sharing the session.
            nonisolated(unsafe) let twin = app.browser()
            for (name, value) in browser.cookies { twin.setCookie(name, value) }
            group.enter()
            Thread.detachNewThread {
                let status = (try? twin.request("POST", "/pins/\(pin)/collection",
                                                   headers: [("X-CSRF-Token", token), ("Accept", "application/json")]).status) ?? 0
                statuses.withLock { $0.append(status) }
                group.leave()
            }
        }
        group.wait()
        #expect(statuses.withLock { $0.sorted() } == [202, 409])
        let album = try Self.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.photos.count == 30)
        #expect(try app.count("SELECT generation FROM pins") == generation + 1)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE state IN ('queued', 'running')") == 0)
    }

    @Test func liveUpdatesArriveAsServerSentEvents() throws {
        var options = PhotoFixture.Options()
        options.latency = 0.2
        let app = try TestApp(workers: true, fixture: options)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        // The first album may be done before a stream opens on a busy machine: let it settle, open
        // the event stream by hand, then take a New Collection and read its events as it fills.
        _ = try Self.settled(browser, pin: pin)
        let cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let client = try RawStream(port: app.port, request: "GET /pins/\(pin)/events HTTP/1.1\r\nHost: x\r\nCookie: \(cookie)\r\n\r\n")
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        #expect(try browser.post("/pins/\(pin)/collection", form: [("_csrf", token)]).status == 303)
        let text = client.read(until: { $0.components(separatedBy: "event: change").count > 4 }, timeout: 20)
        #expect(text.hasPrefix("HTTP/1.1 200"))
        #expect(text.contains("Content-Type: text/event-stream"))
        #expect(text.components(separatedBy: "event: change").count > 4)
        client.close()
        #expect(eventually(timeout: 5) { app.app.events.watcherCount == 0 })
        _ = try Self.settled(browser, pin: pin)
    }

    @Test func aChangeEventCarriesTheAlbumsFragment() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        let album = try Self.settled(browser, pin: pin)
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        let cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let client = try RawStream(port: app.port, request: "GET /pins/\(pin)/events HTTP/1.1\r\nHost: x\r\nCookie: \(cookie)\r\n\r\n")
        defer { client.close() }
        // The catch-up change: what album.html answers, line by line in data fields, the page's
        // CSRF token in its Remove forms, so the page patches itself without asking.
        let text = client.read(until: { $0.contains("</ul>\n\n") }, timeout: 10)
        #expect(text.contains("event: change\ndata: <div id=\"album-status\""))
        #expect(text.contains("data: <ul class=\"photo-grid\" id=\"photo-grid\">"))
        #expect(text.contains("<li class=\"photo\" data-id=\"\(album.ids[0])\" data-status=\"ready\">"))
        #expect(text.contains("name=\"_csrf\" value=\"\(token)\""))
        let fragment = try browser.get("/pins/\(pin)/album.html").body
        #expect(RawStream.lastChangeData(text) == fragment)
    }

    /// Six pages open on one album (tabs, members): a change is read from the database once and
    /// each page gets its own fragment of that read, not six reads of the same rows.
    @Test func pagesWatchingOneAlbumShareOneReadPerChange() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        let album = try Self.settled(browser, pin: pin)
        let token = try #require(try browser.get("/pins/\(pin)").csrfToken)
        let cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let pages = try (0..<6).map { _ in
            try RawStream(port: app.port, request: "GET /pins/\(pin)/events HTTP/1.1\r\nHost: x\r\nCookie: \(cookie)\r\n\r\n")
        }
        defer { for page in pages { page.close() } }
        for page in pages { _ = page.read(until: { $0.contains("</ul>\n\n") }, timeout: 10) }
        let shared = app.app.events.reads
        let before = shared.reads
        #expect(try browser.request("DELETE", "/photos/\(album.ids[0])", headers: [("X-CSRF-Token", token)]).status == 204)
        let fragment = try browser.get("/pins/\(pin)/album.html").body
        for page in pages {
            let text = page.read(until: { $0.components(separatedBy: "</ul>\n\n").count > 1 }, timeout: 10)
            #expect(RawStream.lastChangeData(text) == fragment, "every page shows the album without the removed photo")
        }
        #expect(shared.reads - before == 1, "\(shared.reads - before) reads for one change on six pages")
        for page in pages { page.close() }
        #expect(eventually(timeout: 5) { shared.count == 0 }, "the kept read goes with the album's last page")
    }

    @Test func openAlbumPagesReReadAfterTheListenConnectionComesBack() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        _ = try Self.settled(browser, pin: pin)
        let cookie = browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
        let client = try RawStream(port: app.port, request: "GET /pins/\(pin)/events HTTP/1.1\r\nHost: x\r\nCookie: \(cookie)\r\n\r\n")
        defer { client.close() }
        // The stream opens with one "change" (catch up); the album is settled, so nothing else comes…
        _ = client.read(until: { $0.contains("event: change") }, timeout: 5)
        // …until the LISTEN connection is cut: whatever was announced meanwhile is lost, so after
        // the reconnect every open page is told to re-read.
        let killed = try app.pool.query("""
            SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
            WHERE datname = current_database() AND application_name LIKE '% listener'
            """)[0].decode("n", as: Int.self)
        #expect(killed == 1)
        let text = client.read(until: { $0.contains("event: change") }, timeout: 10)
        #expect(text.contains("event: change"), "no re-read after the reconnect")
    }

    @Test func wikimediaCommonsFillsAlbumsWithCredits() throws {
        let app = try TestApp(workers: true) { $0.photoProvider = "commons" }
        let browser = try app.signedUp()
        let pin = try Self.dropPin(browser)
        let album = try Self.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        let view = try browser.get("/photos/\(album.ids[0])/view")
        #expect(view.body.contains("Commons fixture 1"))
        #expect(view.body.contains("Fixture &amp; Friends"))  // the HTML of extmetadata became text, then was escaped
        #expect(view.body.contains("CC BY-SA 4.0"))
        #expect(view.body.contains("https://commons.wikimedia.org/wiki/File:Fixture"))
        #expect(!view.body.contains("not endorsed or certified by Flickr"))
        // Paging through GeoSearch's results; the second page holds different files.
        let picker = try browser.get("/pins/\(pin)/picker?page=2")
        #expect(picker.body.contains("Page 2 of 17"))
        #expect(CommonsProvider.plainText("<a href=\"x\">Jane &amp; Joe</a> ") == "Jane & Joe")
        // No photos near the South Pole.
        #expect(try Self.settled(browser, pin: try Self.dropPin(browser, lat: -75, lon: 0)).status == "empty")
    }

    @Test func imagesAreSniffedNotTrusted() throws {
        let jpeg = try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/chelsea.jpg"))
        #expect(ImageInspector.inspect(Array(jpeg)) == ImageInfo(contentType: "image/jpeg", width: 451, height: 300))
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [0, 0, 1, 0, 0, 0, 0, 200]
        #expect(ImageInspector.inspect(png) == ImageInfo(contentType: "image/png", width: 256, height: 200))
        let gif: [UInt8] = Array("GIF89a".utf8) + [10, 0, 20, 0]
        #expect(ImageInspector.inspect(gif) == ImageInfo(contentType: "image/gif", width: 10, height: 20))
        var webp: [UInt8] = Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8X".utf8) + [UInt8](repeating: 0, count: 22)
        webp[24] = 99; webp[27] = 49
        #expect(ImageInspector.inspect(webp) == ImageInfo(contentType: "image/webp", width: 100, height: 50))
        #expect(ImageInspector.inspect(Array("<html>not an image</html>".utf8)) == nil)
        #expect(ImageInspector.inspect([0xFF, 0xD8, 0xFF]) == nil)
        #expect(ImageInspector.inspect([]) == nil)
    }

    @Test func flickrAnswersAreReadLeniently() throws {
        let body = #"{"photos":{"page":"2","pages":"400","perpage":30,"total":"","photo":[{"id":123,"owner":"o@N01","title":"T","license":"4","ownername":"Ann","url_m":"https://x/m.jpg"},{"id":"9","title":"no image"}]},"stat":"ok"}"#
        let page = try FlickrProvider.parse(Array(body.utf8), perPage: 30)
        #expect(page.page == 2)
        #expect(page.pages == 133)  // 4,000 results at most
        #expect(page.total == 0)
        #expect(page.photos.count == 1)
        #expect(page.photos[0].remoteID == "123")
        #expect(page.photos[0].license == "CC BY 2.0")
        #expect(page.photos[0].imageURL == "https://x/m.jpg")
        #expect(page.photos[0].pageURL == "https://www.flickr.com/photos/o@N01/123")
        #expect(throws: PhotoProviderError.invalidKey) {
            try FlickrProvider.parse(Array(#"{"stat":"fail","code":100,"message":"Invalid API Key"}"#.utf8), perPage: 30)
        }
        #expect(throws: PhotoProviderError.self) { try FlickrProvider.parse(Array("<html>".utf8), perPage: 30) }
    }

    /// Every number and id from an answer read into its range (issue 49's hostile review): the
    /// page is the one asked for, each photo once, at most a page of them.
    @Test func flickrAnswersAreReadIntoTheirRanges() throws {
        let photos = (0..<40).map { #"{"id":"\#($0 % 35 == 3 ? " 0003 " : String($0))","url_z":"https://x/\#($0).jpg"}"# }
            + [#"{"id":"12a","url_z":"https://x/a.jpg"}"#, #"{"id":"","url_z":"https://x/b.jpg"}"#]
        let body = #"{"photos":{"page":3000000000,"pages":-4,"total":1e300,"photo":["# + photos.joined(separator: ",") + "]},\"stat\":\"ok\"}"
        let page = try FlickrProvider.parse(Array(body.utf8), perPage: 30, asked: 7)
        #expect(page.page == 7, "the page asked for, never the answer's")
        #expect(page.pages == 1, "-4 read as none, and a page with photos is one")
        #expect((0...Int(Int32.max)).contains(page.total))
        #expect(page.photos.count == 30, "at most a page")
        #expect(Set(page.photos.map(\.remoteID)).count == 30, "each photo once: ' 0003 ' is 3")
        #expect(page.photos.allSatisfy { Int($0.remoteID) != nil }, "ids are Flickr's digits")
    }

    /// Commons: a file listed twice near a point is one photo.
    @Test func commonsFilesListedTwiceAreOnePhoto() {
        let info: [String: Any] = ["query": ["pages": [
            ["pageid": 11, "title": "File:A.jpg", "imageinfo": [["mime": "image/jpeg", "thumburl": "https://upload.wikimedia.org/a/960px-A.jpg",
                                                                   "url": "https://upload.wikimedia.org/a/A.jpg", "width": 4000, "height": 3000,
                                                                   "descriptionurl": "https://commons.wikimedia.org/wiki/File:A.jpg"]]],
        ]]]
        let photos = CommonsProvider.photos(in: info, order: ["File:A.jpg", "File:A.jpg"], originalCap: 1 << 20)
        #expect(photos.count == 1)
    }

    @Test func newCollectionsVisitUnseenPagesFirst() {
        #expect(AlbumWorkers.choosePage(totalPages: nil, shown: []) == 1)
        #expect(AlbumWorkers.choosePage(totalPages: 1, shown: [1]) == 1)
        for _ in 0..<20 {
            let page = AlbumWorkers.choosePage(totalPages: 5, shown: [1, 2, 3])
            #expect(page == 4 || page == 5)
            #expect(AlbumWorkers.choosePage(totalPages: 3, shown: [1, 2, 3]) != 3)
        }
    }
}

/// A raw socket for reading a long-lived response (Server-Sent Events) as it arrives.
final class RawStream {
    let fd: Int32

    init(port: Int, request: String) throws {
        fd = try connectLoopback(port: port, receiveTimeout: 0.2)
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func read(until done: (String) -> Bool, timeout: Double) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date(timeIntervalSinceNow: timeout)
        while Date() < deadline {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { received += buffer[0..<n] }
            if n == 0 { break }
            if done(String(decoding: received, as: UTF8.self)) { break }
        }
        return String(decoding: received, as: UTF8.self)
    }

    func close() { Glibc.close(fd) }

    /// The data of the last "change" event in `text`, its data lines joined as EventSource does.
    static func lastChangeData(_ text: String) -> String {
        (text.components(separatedBy: "event: change\n").last ?? "").split(separator: "\n", omittingEmptySubsequences: false)
            .filter { $0.hasPrefix("data: ") }.map { $0.dropFirst(6) }.joined(separator: "\n")
    }
}

/// The queue takes people in turn: one person's long queue does not hold back another's first album.
@Suite struct FairQueueTests {
    @Test func anotherPersonsFirstAlbumStartsBeforeTheThirdOfALongQueue() throws {
        var options = PhotoFixture.Options()
        options.latency = 0.2  // an album takes a few tenths of a second: longer than a pin drop
        let app = try TestApp(workers: true, fixture: options) { $0.workers.workers = 1 }
        let ann = try app.signedUp(email: "ann-queue@example.org")
        let bob = try app.signedUp(email: "bob-queue@example.org")
        // Ann queues 200 albums, straight into the table (as 200 pin drops would).
        let annID = Int64(try app.count("SELECT id FROM users WHERE email = 'ann-queue@example.org'"))
        try app.pool.query("""
            WITH made AS (
                INSERT INTO pins (user_id, lat, lon, status, generation)
                SELECT $1, n * 0.1, n * 0.1, 'downloading', 1 FROM generate_series(1, 200) n RETURNING id)
            INSERT INTO album_jobs (pin_id, user_id, generation, kind) SELECT id, $1, 1, 'collection' FROM made
            """, [annID])
        try app.pool.query("NOTIFY album_jobs")
        func started(_ email: String) throws -> Int {
            try app.count("""
                SELECT count(*) FROM album_jobs j JOIN users u ON u.id = j.user_id
                WHERE u.email = $1 AND (j.state <> 'queued' OR j.attempts > 0)
                """, [email])
        }
        #expect(eventually { (try? started("ann-queue@example.org")) ?? 0 >= 1 })
        // Bob drops one pin; his album must start before Ann's next two have.
        let annBefore = try started("ann-queue@example.org")
        let pin = try AlbumTests.dropPin(bob)
        #expect(eventually(timeout: 30) { (try? started("bob-queue@example.org")) ?? 0 == 1 })
        let annAfter = try started("ann-queue@example.org")
        #expect(annAfter - annBefore <= 2, "Ann's albums started meanwhile: \(annAfter - annBefore)")
        #expect(try AlbumTests.settled(bob, pin: pin).count("ready") == 30)
        // Photo updates (pending → ready) are HOT now that status is in no index: most rows are
        // updated in place. (Statistics reach pg_stat_user_tables within a second or so.)
        var ratio = 0.0
        #expect(eventually {
            let row = try? app.pool.query("""
                SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'photos'
                """).first
            let updates = (try? row?.decode("n_tup_upd", as: Int.self)) ?? 0
            let hot = (try? row?.decode("n_tup_hot_upd", as: Int.self)) ?? 0
            ratio = updates > 0 ? Double(hot) / Double(updates) : 0
            return updates >= 30 && ratio >= 0.5
        }, "HOT updates of photos: \(Int(ratio * 100)) %")
        withExtendedLifetime(ann) {}
    }
}
