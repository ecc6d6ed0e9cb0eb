import Foundation
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

/// The real executable, started and killed like an administrator (or the kernel) would.
@Suite(.tags(.fault)) struct ProcessTests {
    static var binary: String { TestApp.repositoryRoot + "/.build/debug/virtual-tourist" }

    static func environment(database: String, fixture: PhotoFixture) -> [String: String] {
        ["DATABASE_URL": database, "PORT": "0", "PHOTO_PROVIDER": "fixture", "FLICKR_API_URL": fixture.apiURL,
         "WORKERS": "1", "ALBUM_LEASE_SECONDS": "2", "LOG_LEVEL": "warning", "SIGN_UP": "open",
         "PUBLIC_DIR": TestApp.repositoryRoot + "/Public", "MIGRATIONS_DIR": TestApp.repositoryRoot + "/migrations"]
    }

    /// `serve` on an empty instance with SIGN_UP=invite (the default) writes a setup code to its
    /// log; the first account needs it, and a restart makes a new one that replaces it.
    @Test func theFirstAccountNeedsTheSetupCodeTheServerLogs() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the app first (script/test does)")
        let fixture = try PhotoFixture()
        defer { fixture.stop() }
        let database = try TestDatabase.migrated("setup")
        var environment = Self.environment(database: database, fixture: fixture)
        environment["SIGN_UP"] = nil
        environment["PORT"] = String(OperationsTests.freePort())
        let port = Int(environment["PORT"]!)!
        func start() throws -> (ChildProcess, String) {
            let log = NSTemporaryDirectory() + "vt-setup-\(UUID().uuidString).log"
            let server = try ChildProcess([Self.binary, "serve"], environment: environment, logPath: log)
            #expect(eventually(timeout: 20) { (try? Browser(port: port).get("/readyz").status) == 200 })
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return (server, text.firstMatch(of: /setup code: ([A-Za-z0-9_-]{43})/).map { String($0.1) } ?? "")
        }
        var (server, first) = try start()
        #expect(first.count == 43, "the log names no setup code")
        server.kill(SIGTERM)
        _ = server.wait()
        let second: String
        (server, second) = try start()
        defer { server.kill(SIGTERM) }
        #expect(second.count == 43 && second != first, "a new code at each start")
        func signUp(_ code: String?) throws -> Int {
            let browser = Browser(port: port)
            let form = try browser.get("/sign-up")
            var fields = [("_csrf", form.csrfToken ?? ""), ("email", "first@example.org"), ("display_name", "First"),
                          ("password", "a long password"), ("password_confirmation", "a long password")]
            if let code { fields.append(("invite", code)) }
            return try browser.post("/sign-up", form: fields).status
        }
        #expect(try signUp(nil) == 403, "whoever finds the page first does not take the instance")
        #expect(try signUp(first) == 403, "the earlier start's code is gone")
        #expect(try signUp(second) == 303)
    }

    @Test func aKilledWorkerProcessLeavesNothingHalfDoneAfterARestart() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the app first (script/test does)")
        var options = PhotoFixture.Options()
        options.imageStagger = 0.2  // photos arrive one every 200 ms: time to kill the process halfway
        let fixture = try PhotoFixture(options: options)
        defer { fixture.stop() }
        let database = try TestDatabase.migrated("kill")
        let pool = PostgresPool(url: database, maxConnections: 2)
        defer { pool.close() }
        let user = try AccountStore(pool: pool).createUser(email: "kill@example.org", displayName: "K", password: "a long password")
        let pin = try PinStore(pool: pool).create(for: user.id, lat: 35.0116, lon: 135.7681, placeName: "Kyoto, Japan")
        #expect(try AlbumStore(pool: pool).startCollection(pinID: pin.id, userID: user.id) == .started)
        func count(_ status: String) throws -> Int {
            try pool.query("SELECT count(*) AS n FROM photos WHERE status = $1", [status])[0].decode("n")
        }
        let log = NSTemporaryDirectory() + "vt-kill-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let photos = NSTemporaryDirectory() + "vt-kill-photos-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: photos) }
        var environment = Self.environment(database: database, fixture: fixture)
        environment["PHOTO_STORE"] = photos

        let first = try ChildProcess([Self.binary, "serve"], environment: environment, logPath: log)
        let started = eventually(timeout: 30) { ((try? count("ready")) ?? 0) >= 2 }
        first.kill(SIGKILL)
        #expect(started, "the first process never stored a photo: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let readyAtKill = try count("ready")
        #expect(readyAtKill < 30, "the album finished before the kill; the test proves nothing")
        #expect(try count("pending") > 0)

        let restarted = Date()
        let second = try ChildProcess([Self.binary, "serve"], environment: environment, logPath: log)
        defer { second.kill(SIGTERM) }
        let finished = eventually(timeout: 60) {
            (try? pool.query("SELECT status FROM pins")[0].decode("status", as: String.self)) == "ready"
        }
        let rows: Int = try pool.query("SELECT count(*) AS n FROM photos")[0].decode("n")
        print("""
            kill -9 mid-album at \(readyAtKill) of 30 photos stored: after the restart \(try count("ready")) ready, \
            \(try count("pending")) pending, \(try count("failed")) failed, \(rows) rows (30 expected: none lost or duplicated), \
            album complete \(String(format: "%.1f", Date().timeIntervalSince(restarted))) s after the restart (lease 2 s)
            """)
        #expect(finished, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        #expect(try count("ready") == 30)
        #expect(try count("pending") == 0)
        #expect(try pool.query("SELECT count(*) AS n FROM photos")[0].decode("n", as: Int.self) == 30)
        #expect(try pool.query("SELECT count(*) AS n FROM album_jobs WHERE state = 'done'")[0].decode("n", as: Int.self) == 1)
        // The files: every row's blob and thumbnails are there; what the killed process wrote
        // and never named (blobs of unwritten rows, half-written temporary files) is the
        // collector's, and goes once its grace has passed (none here).
        let store = FileStore(root: photos)
        let named: [String] = try pool.query("""
            SELECT encode(h, 'hex') AS hash FROM photos, unnest(ARRAY[hash, thumb_256, thumb_512]) h WHERE h IS NOT NULL
            """).map { try $0.decode("hash") }
        #expect(try named.allSatisfy { try store.get($0) != nil }, "a row names a blob that is not there")
        let before = try store.list().count
        second.kill(SIGTERM)
        let collected = try PhotoCollector(pool: pool, store: store).collect(grace: 0)
        let left = try store.list().map(\.hash)
        func temporaryFiles() -> [String] {
            (FileManager.default.enumerator(atPath: photos)?.allObjects as? [String] ?? []).filter { $0.contains(".tmp-") }
        }
        // A write the kill cut short leaves its temporary file; the store removes it once it is
        // an hour old (a live write is far younger). Aged here rather than waited for.
        let halfWritten = temporaryFiles()
        for file in halfWritten {
            let old = Date(timeIntervalSinceNow: -7200)
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: photos + "/" + file)
        }
        _ = try store.list()
        print("after the restart: \(Set(named).count) distinct blobs named, \(before) in the store, \(collected) collected, \(halfWritten.count) half-written temporary files, \(temporaryFiles().count) left once an hour old")
        #expect(Set(left) == Set(named), "after collection the store holds exactly what the rows name")
        #expect(temporaryFiles().isEmpty, "\(temporaryFiles())")
    }

    /// kill -9 in the middle of a batch of own photos: nothing half-stored is shown (every row
    /// names blobs that are all there), nothing stored is lost (every photo the server answered
    /// 201 for is there after the restart), and the batch sent again completes it with no
    /// duplicates; the collector then leaves exactly the blobs rows name.
    @Test func aKillMidBatchOfOwnPhotosLosesNothingStoredAndShowsNothingHalfStored() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the app first (script/test does)")
        let fixture = try PhotoFixture()
        defer { fixture.stop() }
        let database = try TestDatabase.migrated("kill-own")
        let pool = PostgresPool(url: database, maxConnections: 2)
        defer { pool.close() }
        let photos = NSTemporaryDirectory() + "vt-kill-own-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: photos) }
        let log = NSTemporaryDirectory() + "vt-kill-own-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        var environment = Self.environment(database: database, fixture: fixture)
        environment["PHOTO_STORE"] = photos
        environment["PORT"] = String(OperationsTests.freePort())
        let port = Int(environment["PORT"]!)!
        func serve() throws -> ChildProcess {
            let server = try ChildProcess([Self.binary, "serve"], environment: environment, logPath: log)
            #expect(eventually(timeout: 30) { (try? Browser(port: port).get("/readyz").status) == 200 })
            return server
        }
        var server = try serve()
        let ann = Browser(port: port)
        let form = try ann.get("/sign-up")
        #expect(try ann.post("/sign-up", form: [("_csrf", form.csrfToken ?? ""), ("email", "kill-own@example.org"), ("display_name", "Ann"),
                                               ("password", "a long password"), ("password_confirmation", "a long password")]).status == 303)
        let pin = try #require(try SharedMapTests.drop(ann).body.firstMatch(of: /"id":([0-9]+)/).map { Int($0.1)! })
        let token = try #require(try ann.get("/pins/\(pin)").csrfToken)
        let batch = try (0..<12).map { try OwnPhotoTests.taggedPhoto(comment: "kill \($0)") }
        func rows() throws -> Int { try pool.query("SELECT count(*) AS n FROM own_photos")[0].decode("n") }

        // The batch one file after another, as the page sends it; killed once four are in.
        final class Acknowledged: @unchecked Sendable {  // ids, under the lock
            let lock = NSLock()
            var ids: [Int] = []
        }
        let acknowledged = Acknowledged()
        // The main thread only reads the database until the sender is done with the browser.
        nonisolated(unsafe) let sending = ann
        let sender = Thread {
            for photo in batch {
                guard let page = try? OwnPhotoTests.send(sending, pin: pin, photo, name: "IMG.JPG", token: token) else { break }
                if page.status == 201, let id = (try? OwnPhotoTests.json(page))?["id"] as? Int { acknowledged.lock.withLock { acknowledged.ids.append(id) } }
            }
        }
        sender.start()
        let started = eventually(timeout: 60) { ((try? rows()) ?? 0) >= 4 }
        server.kill(SIGKILL)
        _ = server.wait()
        #expect(started, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        #expect(eventually(timeout: 30) { sender.isFinished })
        let stored = try rows()
        #expect(stored < batch.count, "the batch finished before the kill; the test proves nothing")
        let store = FileStore(root: photos)
        func named() throws -> [String] {
            try pool.query("""
                SELECT encode(h, 'hex') AS hash FROM own_photos, unnest(ARRAY[original, display, thumb_256, thumb_512]) h WHERE h IS NOT NULL
                UNION SELECT encode(h, 'hex') FROM photos, unnest(ARRAY[hash, thumb_256, thumb_512]) h WHERE h IS NOT NULL
                """).map { try $0.decode("hash") }
        }
        #expect(try named().allSatisfy { try store.get($0) != nil }, "a row names a blob that is not there")
        let acked = acknowledged.lock.withLock { acknowledged.ids }
        let ids = Set(try pool.query("SELECT id FROM own_photos").map { try $0.decode("id", as: Int.self) })
        #expect(Set(acked).isSubset(of: ids), "an answered photo was lost: \(acked) vs \(ids)")

        server = try serve()
        defer { server.kill(SIGTERM) }
        #expect(Set(OwnPhotoTests.ownIDs(try ann.get("/pins/\(pin)"))) == ids, "the album shows exactly what was stored")
        // The batch again: what is in is "already here", the rest is added.
        for photo in batch {
            let page = try OwnPhotoTests.send(ann, pin: pin, photo, name: "IMG.JPG", token: token)
            #expect(page.status == 201 || page.status == 200, "\(page)")
        }
        #expect(try rows() == batch.count)
        #expect(OwnPhotoTests.ownIDs(try ann.get("/pins/\(pin)")).count == batch.count)
        server.kill(SIGTERM)
        _ = server.wait()
        _ = try PhotoCollector(pool: pool, store: store).collect(grace: 0)
        #expect(Set(try store.list().map(\.hash)) == Set(try named()), "after collection the store holds exactly what the rows name")
        print("kill -9 mid-batch of own photos: \(stored) of \(batch.count) stored at the kill, \(acked.count) answered 201, all \(batch.count) after the batch was sent again")
    }

    /// PHOTO_PROVIDER left unset: Wikimedia Commons without a Flickr key, Flickr with one (issue 12).
    @Test(arguments: [("", "commons"), ("a-flickr-key", "flickr")])
    func theDefaultProviderFollowsTheFlickrKey(key: String, expected: String) throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the app first (script/test does)")
        let fixture = try PhotoFixture()
        defer { fixture.stop() }
        let database = try TestDatabase.migrated("default")
        let pool = PostgresPool(url: database, maxConnections: 2)
        defer { pool.close() }
        let user = try AccountStore(pool: pool).createUser(email: "d@example.org", displayName: "D", password: "a long password")
        let pin = try PinStore(pool: pool).create(for: user.id, lat: 35.0116, lon: 135.7681, placeName: "Kyoto, Japan")
        #expect(try AlbumStore(pool: pool).startCollection(pinID: pin.id, userID: user.id) == .started)
        var environment = Self.environment(database: database, fixture: fixture)
        environment["PHOTO_PROVIDER"] = ""
        environment["FLICKR_API_KEY"] = key
        environment["COMMONS_API_URL"] = fixture.baseURL + "/w/api.php"
        let log = NSTemporaryDirectory() + "vt-default-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let process = try ChildProcess([Self.binary, "serve"], environment: environment, logPath: log)
        defer { process.kill(SIGTERM) }
        let finished = eventually(timeout: 30) {
            (try? pool.query("SELECT status FROM pins")[0].decode("status", as: String.self)) == "ready"
        }
        #expect(finished, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let providers = try pool.query("SELECT DISTINCT provider FROM photos").map { try $0.decode("provider", as: String.self) }
        #expect(providers == [expected])
        #expect(try pool.query("SELECT count(*) AS n FROM photos WHERE status = 'ready'")[0].decode("n", as: Int.self) == 30)
    }
}
