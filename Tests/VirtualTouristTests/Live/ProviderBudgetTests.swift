import Foundation
import PhotoFixture
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
#if canImport(Glibc)
import Glibc
@testable import AlbumWing
@testable import Domain
#endif

/// The shared call budget (ProviderBudget): one bucket per provider key in PostgreSQL, never
/// overdrawn however many threads or processes draw from it.
@Suite struct ProviderBudgetTests {
    @Test func concurrentDrawsNeverTakeMoreThanTheBucketHolds() throws {
        let pool = PostgresPool(url: try TestDatabase.migrated("budget"), maxConnections: 8)
        defer { pool.close() }
        let budget = ProviderBudget(pool: pool, provider: "flickr", secret: "a-key", limits: .init(perHour: 1, burst: 5))
        let granted = Mutex(0)
        let group = DispatchGroup()
        for _ in 0..<8 {
            group.enter()
            Thread.detachNewThread {
                for _ in 0..<5 where (try? budget.draw()) == .granted { granted.withLock { $0 += 1 } }
                group.leave()
            }
        }
        group.wait()
        #expect(granted.withLock { $0 } == 5)
        guard case .wait(let seconds, .budget) = try budget.draw() else { Issue.record("the empty bucket granted a call"); return }
        #expect(seconds > 3000 && seconds <= 3600)  // one call an hour: the next one in about an hour
        // The API key is never stored, only a fingerprint of it.
        let key: String = try pool.query("SELECT key FROM provider_budgets")[0].decode("key")
        #expect(key.hasPrefix("flickr:") && !key.contains("a-key") && key.count == 19)

        // A wait the provider names holds every caller off, whatever the bucket holds.
        let other = ProviderBudget(pool: pool, provider: "commons", limits: .init(perHour: 3600, burst: 10))
        #expect(try other.draw() == .granted)
        try other.pause(seconds: 30, reason: .lagged)
        #expect(try other.draw() == .wait(seconds: 30, reason: .lagged))
    }

    @Test func twoServerProcessesSharingABudgetNeverExceedIt() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ProcessTests.binary), "build the app first (script/test does)")
        let fixture = try PhotoFixture()
        defer { fixture.stop() }
        let database = try TestDatabase.migrated("budget2")
        let pool = PostgresPool(url: database, maxConnections: 2)
        defer { pool.close() }
        let user = try AccountStore(pool: pool).createUser(email: "budget@example.org", displayName: "B", password: "a long password")
        let albums = AlbumStore(pool: pool)
        for index in 0..<6 {
            let pin = try PinStore(pool: pool).create(for: user.id, lat: 10 + Double(index), lon: 20, placeName: nil)
            #expect(try albums.startCollection(pinID: pin.id, userID: user.id) == .started)
        }
        var environment = ProcessTests.environment(database: database, fixture: fixture)
        environment["WORKERS"] = "2"
        environment["PROVIDER_CALLS_PER_HOUR"] = "1"
        environment["PROVIDER_CALL_BURST"] = "3"
        let log = NSTemporaryDirectory() + "vt-budget-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let first = try ChildProcess([ProcessTests.binary, "serve"], environment: environment, logPath: log)
        defer { first.kill(SIGTERM) }
        let second = try ChildProcess([ProcessTests.binary, "serve"], environment: environment, logPath: log)
        defer { second.kill(SIGTERM) }

        func count(_ status: String) -> Int {
            (try? pool.query("SELECT count(*) AS n FROM pins WHERE status = $1", [status])[0].decode("n", as: Int.self)) ?? -1
        }
        let settled = eventually(timeout: 30) {
            count("ready") == 3 && ((try? pool.query("SELECT count(*) AS n FROM pins WHERE waiting IS NOT NULL")[0].decode("n", as: Int.self)) ?? 0) == 3
        }
        #expect(settled, "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        usleep(2_000_000)  // both processes keep polling: still no fourth call
        #expect(fixture.searchCount == 3)
        #expect(count("ready") == 3)
        #expect(count("downloading") == 3)
        #expect(count("failed") == 0)  // they wait, they do not fail
        let phrases = try pool.query("SELECT DISTINCT waiting FROM pins WHERE waiting IS NOT NULL").map { try $0.decode("waiting", as: String.self) }
        #expect(phrases.count >= 1)
        #expect(phrases.allSatisfy { $0.hasPrefix("Waiting for Flickr: the hourly limit is reached; resumes at ") && $0.hasSuffix(" UTC.") }, "\(phrases)")
        #expect(try pool.query("SELECT count(*) AS n FROM album_jobs WHERE state = 'queued' AND attempts = 0")[0].decode("n", as: Int.self) == 3)
    }
}

extension ProviderBudgetTests {
    /// The picker asks the provider while a person waits: with the budget spent it answers 503 with
    /// Retry-After and the fixed phrase, and spends nothing.
    @Test func thePickerSaysWhenTheBudgetIsSpent() throws {
        let app = try TestApp(workers: true) { $0.providerCallBurst = 1; $0.providerCallsPerHour = 1 }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        #expect(try AlbumTests.settled(browser, pin: pin).status == "ready")  // the one call
        let picker = try browser.get("/pins/\(pin)/picker?page=2")
        #expect(picker.status == 503)
        #expect(Int(picker.header("Retry-After") ?? "") ?? 0 > 3000)
        #expect(picker.body.contains("Waiting for Flickr: the hourly limit is reached; resumes at "))
        #expect(app.fixture.searchCount == 1)
    }
}
