import Foundation
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Faults around the person's map version (migration 0098) and the worker's batches: a kept map
/// page is never served once the pins behind it changed, whatever happened to the version table,
/// and a batch write PostgreSQL aborts is neither lost nor the cause of a failed pin drop.
/// One scenario a test; each prints its figures.
@Suite(.tags(.fault)) struct MapVersionFaultTests {
    /// "Your pins (N)" on the page, or nil.
    static func shownPins(_ body: String) -> Int? {
        body.firstMatch(of: /Your pins \((\d+)\)/).flatMap { Int($0.1) }
    }

    static func pinCount(_ app: TestApp, user: Int64) throws -> Int {
        try app.count("SELECT count(*) FROM pins WHERE user_id = $1", [user])
    }

    /// A signed-in person whose map page is kept (the welcome flash shown and gone).
    static func personWithKeptPage(_ app: TestApp, pins: Int) throws -> (Browser, Int64) {
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try PageTests.userID(app, email: email)
        for index in 0..<pins { try PageTests.insertPin(app, user: user, name: "Pin \(index)") }
        _ = try browser.get("/")
        _ = try browser.get("/")
        let kept = try browser.get("/")
        #expect(kept.roundTrips == 1, "the page is kept")
        #expect(Self.shownPins(kept.body) == pins)
        return (browser, user)
    }

    /// The way a counter came back to a kept page's key: after the table lost it, single-pin
    /// changes (one bump each) with nobody opening the map, until the number is the kept one again
    /// (the gap when the version fell below it, at most 8), then one visit. Returns how many pins
    /// were added and whether the page showed every pin.
    static func addPinsThenOpenTheMap(_ app: TestApp, _ browser: Browser, user: Int64, kept: Int) throws -> (added: Int, page: Int?, database: Int) {
        let now = try app.count("SELECT coalesce(max(version), 0) FROM map_versions WHERE user_id = $1", [user])
        let added = now < kept ? min(kept - now, 8) : 4
        for index in 0..<added { try PageTests.insertPin(app, user: user, name: "Added \(index)") }
        return (added, Self.shownPins(try browser.get("/").body), try Self.pinCount(app, user: user))
    }

    @Test func afterTruncatingMapVersionsTheOldPageIsNeverServed() throws {
        let app = try TestApp { $0.serverTiming = true }
        let (browser, user) = try Self.personWithKeptPage(app, pins: 3)
        let kept = try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user])
        try app.pool.query("TRUNCATE map_versions")
        let result = try Self.addPinsThenOpenTheMap(app, browser, user: user, kept: kept)
        let now = try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user])
        print("TRUNCATE map_versions: kept version \(kept), \(result.added) pins added, version now \(now); the page shows \(result.page.map(String.init) ?? "?") pins, the database holds \(result.database)")
        #expect(result.page == result.database)
        #expect(now != kept)
    }

    /// A person with no version row gets no kept page, and a DELETE moves on the people whose rows
    /// it removes, as TRUNCATE does: a page from before their first pin is never served again.
    @Test func afterDeletingMapVersionsTheOldPageIsNeverServed() throws {
        let app = try TestApp { $0.serverTiming = true }
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try PageTests.userID(app, email: email)
        _ = try browser.get("/")
        #expect(try app.count("SELECT count(*) FROM map_versions WHERE user_id = $1", [user]) == 0)
        let empty = try browser.get("/")
        #expect(Self.shownPins(empty.body) == 0)
        #expect(try browser.get("/").roundTrips == 2, "no page is kept without a version row")

        try PageTests.insertPin(app, user: user, name: "Added by SQL")
        let bumped = try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user])
        try app.pool.query("DELETE FROM map_versions")
        let back = try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user])
        #expect(back > bumped, "a deleted row comes back past the version it had")
        let page = try browser.get("/")
        print("DELETE FROM map_versions after the first pin: version \(bumped), back as \(back); the page shows \(Self.shownPins(page.body).map(String.init) ?? "?") pins, the database holds \(try Self.pinCount(app, user: user))")
        #expect(Self.shownPins(page.body) == 1)

        // A kept page, the rows deleted, then the pins changed by SQL: the next visit shows it.
        let kept = try browser.get("/")
        #expect(kept.roundTrips == 1, "kept again under the row put back")
        try app.pool.query("DELETE FROM map_versions WHERE user_id = $1", [user])
        try app.pool.query("UPDATE pins SET place_name = 'Renamed by SQL' WHERE user_id = $1", [user])
        let renamed = try browser.get("/")
        #expect(renamed.body.contains("Renamed by SQL"))
        #expect(try browser.get("/").roundTrips == 1)

        // A deleted person's row stays deleted.
        try app.pool.query("DELETE FROM users WHERE id = $1", [user])
        #expect(try app.count("SELECT count(*) FROM map_versions WHERE user_id = $1", [user]) == 0)
    }

    @Test func afterRestoringAnOlderDumpTheOldPageIsNeverServed() throws {
        let app = try TestApp { $0.serverTiming = true }
        let (browser, user) = try Self.personWithKeptPage(app, pins: 1)
        let bin = try TemporaryCluster.binDirectory()
        let dump = NSTemporaryDirectory() + "vt-\(UUID().uuidString).dump"
        defer { try? FileManager.default.removeItem(atPath: dump) }
        let dumped = try runProcess([bin + "/pg_dump", "-Fc", "-f", dump, "--dbname", app.pool.url])
        #expect(dumped.status == 0, "\(dumped.output)")
        // A pin dropped and renamed twice: three changes for one more pin, as an album's status
        // and counts move the version several times per pin.
        let later = try PageTests.insertPin(app, user: user, name: "After the dump")
        try app.pool.query("UPDATE pins SET place_name = 'Renamed' WHERE id = $1", [later])
        try app.pool.query("UPDATE pins SET place_name = 'Renamed again' WHERE id = $1", [later])
        #expect(Self.shownPins(try browser.get("/").body) == 2)
        let keptPage = try browser.get("/")
        #expect(keptPage.roundTrips == 1 && Self.shownPins(keptPage.body) == 2)
        let kept = try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user])

        // The whole database goes back to the dump while the app runs (its sessions too).
        let restored = try runProcess([bin + "/pg_restore", "--clean", "--no-owner", "--dbname", app.pool.url, dump])
        #expect(restored.status == 0, "\(restored.output)")
        let restoredVersion = try app.count("SELECT version FROM map_versions WHERE user_id = $1", [user])
        let result = try Self.addPinsThenOpenTheMap(app, browser, user: user, kept: kept)
        print("pg_restore --clean of an older dump: kept version \(kept), restored \(restoredVersion), \(result.added) pins added; the page shows \(result.page.map(String.init) ?? "?") pins, the database holds \(result.database)")
        #expect(result.page == result.database)
    }

    @Test func afterTruncatingPinsTheOldPageIsNeverServed() throws {
        let app = try TestApp { $0.serverTiming = true }
        let (browser, user) = try Self.personWithKeptPage(app, pins: 2)
        try app.pool.query("TRUNCATE pins CASCADE")
        let page = try browser.get("/")
        print("TRUNCATE pins: the page shows \(Self.shownPins(page.body).map(String.init) ?? "?") pins, the database holds \(try Self.pinCount(app, user: user)); \(page.roundTrips ?? 0) round trips")
        #expect(Self.shownPins(page.body) == 0)
        try app.pool.query("TRUNCATE pin_photo_counts")
        #expect(try browser.get("/").roundTrips == 2, "TRUNCATE pin_photo_counts moves the version too")
    }

    /// The first version row of a person used to take a KEY SHARE lock on their users row (the
    /// foreign key) at commit, while POST /pins holds it FOR UPDATE: a worker batch committing at
    /// that moment and the pin drop waited on each other and PostgreSQL aborted one. Forced here:
    /// the test holds pin_cells so the drop stops inside its transaction, the batch commits into
    /// the drop's lock, then the drop goes on.
    @Test func aPinDropAndAWorkerBatchCommittingTogetherBothSucceed() throws {
        let app = try TestApp()
        let email = "ann-\(UUID().uuidString.prefix(6))@example.org"
        let browser = try app.signedUp(email: email)
        let user = try PageTests.userID(app, email: email)
        let pin = try PageTests.insertPin(app, user: user, name: "Downloading", status: "downloading")
        try app.pool.query("""
            INSERT INTO photos (pin_id, user_id, generation, position, provider, remote_id, remote_url, status)
            SELECT $1, $2, 0, n, 'fixture', n::text, 'http://example.org/' || n, 'pending' FROM generate_series(0, 5) n
            """, [pin, user])
        let photoIDs: [Int64] = try app.pool.query("SELECT id FROM photos WHERE pin_id = $1 ORDER BY id", [pin]).map { try $0.decode("id") }
        // The batch is the job's holder's: a worker that holds a running job.
        let jobID: Int64 = try app.pool.query("""
            INSERT INTO album_jobs (pin_id, user_id, generation, state, attempts, locked_by, locked_until)
            VALUES ($1, $2, 0, 'running', 1, 'worker/0', now() + interval '1 hour') RETURNING id
            """, [pin, user])[0].decode("id")
        // The person has no version row yet, as before their first pin: a first bump. Triggers off
        // for the DELETE, which would otherwise put the row back (migration 0119).
        try app.pool.transaction { db in
            try db.execute("SET LOCAL session_replication_role = replica")
            try db.query("DELETE FROM map_versions WHERE user_id = $1", [user])
        }
        #expect(try app.count("SELECT count(*) FROM map_versions WHERE user_id = $1", [user]) == 0)
        let token = try #require(try browser.get("/").csrfToken)

        let holder = try PostgresConnection(url: app.pool.url)
        defer { holder.close() }
        try holder.execute("BEGIN")
        try holder.execute("LOCK TABLE pin_cells IN SHARE MODE")
        func waiting(_ like: String) -> Bool {
            (try? app.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", [like])) ?? 0 > 0
        }

        let drop = Mutex<(status: Int, body: String)?>(nil)
        nonisolated(unsafe) let dropping = browser
        let dropper = Thread {
            let page = try? dropping.post("/pins", form: [("_csrf", token), ("lat", "10"), ("lon", "20")], headers: [("Accept", "application/json")])
            drop.withLock { $0 = (page?.status ?? 0, page?.body ?? "no answer") }
        }
        dropper.start()
        #expect(eventually { waiting("%INSERT INTO pins%") }, "the drop holds the person's row and waits")

        let job = AlbumJob(id: jobID, pinID: pin, userID: user, generation: 0, kind: .collection, attempts: 1, worker: "worker/0")
        let info = ImageInfo(contentType: "image/jpeg", width: 1, height: 1)
        let batch = photoIDs.map { AlbumJobQueue.PhotoResult.stored($0, hash: String(repeating: "ab", count: 32), byteSize: 1, info: info) }
        let batchError = Mutex<String?>("not finished")
        let queue = app.app.workers.store
        let writer = Thread {
            do {
                let held = try queue.storeResults(batch, job: job)
                batchError.withLock { $0 = held ? nil : "the job was not held" }
            } catch {
                batchError.withLock { $0 = "\(error)" }
            }
        }
        writer.start()
        // With the foreign key the batch waits for the person's row; without it, it commits at once.
        #expect(eventually(timeout: 15) { waiting("%jsonb_to_recordset%") || batchError.withLock { $0 == nil } },
                "the batch neither waited on the person's row nor committed: the interleaving was not tested")
        let deadlocksBefore = try app.count("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        let started = Date()
        try holder.execute("COMMIT")
        #expect(eventually(timeout: 15) { drop.withLock { $0 != nil } && batchError.withLock { $0 != "not finished" } })
        let answer = drop.withLock { $0 }, written = batchError.withLock { $0 }
        let ready = try app.count("SELECT count(*) FROM photos WHERE pin_id = $1 AND status = 'ready'", [pin])
        // The statistics collector reports a little late.
        try app.pool.query("SELECT pg_stat_clear_snapshot()")
        usleep(1_500_000)
        let deadlocks = try app.count("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()") - deadlocksBefore
        print("pin drop and worker batch together: drop answered \(answer?.status ?? 0), batch \(written ?? "written"), \(ready) of 6 photos ready, \(deadlocks) deadlocks, \(String(format: "%.2f", Date().timeIntervalSince(started))) s after the release")
        #expect(deadlocks == 0)
        #expect(answer?.status == 201, "\(answer?.body ?? "")")
        #expect(written == nil)
        #expect(ready == 6)
        #expect(try Self.pinCount(app, user: user) == 2)
    }

    /// A batch the database refuses more often than the write retries goes back to its queue: the
    /// album does not finish with photos left pending, the job is tried again and completes.
    /// The refusal is the harness's: a trigger the test installs raises deadlock_detected on the
    /// first five batch writes (a sequence counts them, outside the aborted transactions).
    @Test func aBatchTheDatabaseRefusesGoesBackToItsQueue() throws {
        let app = try TestApp(workers: false)
        try app.pool.query("CREATE SEQUENCE test_refused_batches")
        try app.pool.query("""
            CREATE FUNCTION test_refuse_batches() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.status = 'ready' AND nextval('test_refused_batches') <= 5 THEN
                    RAISE EXCEPTION 'refused by the test' USING ERRCODE = '40P01';
                END IF;
                RETURN NEW;
            END $$
            """)
        try app.pool.query("CREATE TRIGGER test_refuse_batches BEFORE UPDATE ON photos FOR EACH ROW WHEN (OLD.status = 'pending') EXECUTE FUNCTION test_refuse_batches()")
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let started = Date()
        try app.app.startBackgroundWork()
        defer { app.app.stopBackgroundWork() }
        let album = try AlbumTests.settled(browser, pin: pin)
        let attempts = try app.count("SELECT max(attempts) FROM album_jobs WHERE pin_id = $1", [Int64(pin)])
        let refused = try app.count("SELECT last_value FROM test_refused_batches")
        print("batch writes refused \(min(refused, 5)) times: album \(album.status), \(album.count("ready")) ready, \(album.count("failed")) failed, \(album.count("pending")) pending, job attempts \(attempts), \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        #expect(album.count("failed") == 0 && album.count("pending") == 0)
    }
}
