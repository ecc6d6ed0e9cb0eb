import Foundation
import HTTPClient
import PhotoFixture
import Postgres
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The album wing attacked over loopback (issue 49): each way a pin or a worker used to wedge, on
/// the real worker pool, the real fixture and PostgreSQL. Each failed before its fix.
@Suite(.tags(.fault)) struct AlbumWedgeTests {
    /// A Flickr-compatible answer whose 30 photos name one id twice: the album used to stay
    /// "downloading" with every photo pending and its job cancelled (the placeholder insert wrote
    /// one row fewer, which read as "superseded"). Now the repeat is read once.
    @Test func aRepeatedPhotoIdInOneAnswerGivesAReadyAlbum() throws {
        var options = PhotoFixture.Options()
        options.repeatsAPhoto = true
        let app = try TestApp(workers: true, fixture: options)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 30)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 29, "30 entries, 29 photos")
        #expect(album.count("pending") == 0)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE pin_id = $1 AND state = 'done'", [Int64(pin)]) == 1)
    }

    /// The same answer from a provider whose reading does not remove the repeat (a provider of
    /// tomorrow, or a repeat of a photo the album already holds): the placeholder insert names
    /// the rows it wrote, and the photo without a row is skipped, never taken for "superseded".
    @Test func aPhotoThePlaceholderInsertSkipsNeverWedgesThePin() throws {
        let app = try TestApp(workers: false)
        let base = app.app.workers
        var settings = AlbumWorkers.Settings()
        settings.sweepSeconds = 0.2
        settings.retryBaseSeconds = 0
        let workers = AlbumWorkers(store: base.store, provider: Repeating(base: base.provider), client: base.client, settings: settings)
        workers.start()
        defer { workers.stop() }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 30)
        #expect(album.status == "ready")
        #expect(album.count("pending") == 0)
        #expect(album.count("ready") >= 29)
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE pin_id = $1 AND state = 'cancelled'", [Int64(pin)]) == 0)
    }

    /// One image its host always answers 503 while the host serves the other 29: it fails alone,
    /// and the album is ready in seconds instead of waiting PROVIDER_OUTAGE_HOURS for the host.
    @Test func oneImageAlways503AmongGoodOnesFailsAlone() throws {
        var options = PhotoFixture.Options()
        options.brokenImagePosition = 4
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.workers.providerOutageHorizon = 24 * 3600
        }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 30)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 29)
        #expect(album.count("failed") == 1)
        #expect(album.count("pending") == 0)
    }

    /// A renewal the database refuses for a reason other than an outage (here a trigger; in life
    /// a statement timeout behind a lock, a read-only node, a full disk): the album used to keep
    /// `renewing` set and spin a core for good. Now it stops, is retried, and fails after its
    /// tries — with the process nearly idle meanwhile.
    @Test func aRefusedRenewalEndsTheAlbumWithoutSpinning() throws {
        var options = PhotoFixture.Options()
        options.imageStagger = 0.2  // the 30th image waits 6 s: every album outlives a renewal (1 s)
        let app = try TestApp(workers: true, fixture: options) { settings in
            settings.workers.leaseSeconds = 3
            settings.workers.maxAttempts = 2
        }
        try app.pool.query("""
            CREATE FUNCTION refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF OLD.state = 'running' AND NEW.state = 'running' AND NEW.locked_by = OLD.locked_by
                   AND NEW.locked_until IS DISTINCT FROM OLD.locked_until THEN
                    RAISE EXCEPTION 'renewal refused by the test';
                END IF;
                RETURN NEW;
            END $$
            """)
        try app.pool.query("CREATE TRIGGER refuse_renewal BEFORE UPDATE ON album_jobs FOR EACH ROW EXECUTE FUNCTION refuse_renewal()")
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let cpu = WorkerCPU(app.app.workers)
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 40)
        let used = cpu.share()
        #expect(album.status == "failed", "after its tries, not downloading forever")
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE pin_id = $1 AND state = 'running'", [Int64(pin)]) == 0)
        #expect(used < 0.5, "the process used \(used) of a core while the album stopped and was retried")
    }

    /// PostgreSQL stopped four times mid-album, each time for longer than 0.8 × the lease: each
    /// outage used to count as the worker's death (`lapses` never reset), and the fourth parked a
    /// healthy album as "the download kept stopping". Now the worker waits the outage out and
    /// the album completes; and the process stays nearly idle while the database is away.
    @Test func fourLongDatabaseOutagesMidAlbumNeitherParkNorSpin() throws {
        let (cluster, app, browser, pin) = try Self.albumMidDownload(lease: 2)
        var shares: [Double] = []
        for _ in 0..<4 {
            try cluster.stop()
            let cpu = WorkerCPU(app.app.workers)
            usleep(2_500_000)  // longer than the lease (2 s), let alone 0.8 × it
            shares.append(cpu.share())
            try cluster.start()
            usleep(700_000)
        }
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 60)
        #expect(album.status == "ready", "\(album.error ?? "")")
        #expect(album.count("ready") == 30, "\(album.photos.filter { $0["status"] as? String != "ready" })")
        #expect(try app.count("SELECT count(*) FROM album_jobs WHERE pin_id = $1 AND last_error LIKE 'parked%'", [Int64(pin)]) == 0)
        #expect(shares.allSatisfy { $0 < 0.05 }, "the workers' CPU, as a share of a core, during each outage: \(shares)")
    }

    /// Which lapse is a worker's death and which an outage, on the rows: a lease that ran out
    /// before the database's last start (it was down) waits one lease after that start for its
    /// holder; one that ran out while the database was up is taken over at once, however young
    /// the database (CI's cluster is seconds old when the suite starts).
    @Test func aLeaseThatRanOutDuringAnOutageWaitsForItsHolderAndNoOtherDoes() throws {
        let app = try TestApp()
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let queue = app.app.workers.store
        let job = try #require(try queue.claimJob(worker: "holder", leaseSeconds: 3600))
        try app.pool.query("UPDATE album_jobs SET locked_until = pg_postmaster_start_time() - interval '1 second' WHERE id = $1", [job.id])
        #expect(try queue.claimJob(worker: "other", leaseSeconds: 3600) == nil, "ran out while the database was down: the holder's to renew")
        #expect(try queue.renewLease(job, leaseSeconds: 3600), "the holder renews it")
        try app.pool.query("UPDATE album_jobs SET locked_until = now() - interval '1 second' WHERE id = $1", [job.id])
        let taken = try #require(try queue.claimJob(worker: "other", leaseSeconds: 3600), "ran out while the database was up: taken over")
        #expect(taken.pinID == Int64(pin))
        #expect(try app.count("SELECT lapses FROM album_jobs WHERE id = $1", [job.id]) == 1)
    }

    /// A 20 s database outage with images in flight: the album's driver waited for them with a
    /// deadline in the past (a busy loop). The workers' threads now use under 5 % of a core.
    @Test func aTwentySecondDatabaseOutageCostsTheWorkersNoCPU() throws {
        let (cluster, app, browser, pin) = try Self.albumMidDownload(lease: 60)
        try cluster.stop()
        let cpu = WorkerCPU(app.app.workers)
        usleep(20_000_000)
        let share = cpu.share()
        try cluster.start()
        print("album workers' CPU during a 20 s database outage: \(String(format: "%.4f", share)) of a core")
        #expect(share < 0.05, "\(share) of a core")
        let album = try AlbumTests.settled(browser, pin: pin, timeout: 60)
        #expect(album.status == "ready", "\(album.error ?? "")")
    }

    /// A database of its own (to stop and start), an album dropped whose images arrive one after
    /// another over 9 s, and the first of them written.
    static func albumMidDownload(lease: Int) throws -> (TemporaryCluster, TestApp, Browser, Int) {
        let cluster = try TemporaryCluster()
        let connection = try PostgresConnection(url: cluster.url)
        _ = try Migrator(directory: TestDatabase.migrationsDirectory).migrate(connection)
        connection.close()
        var options = PhotoFixture.Options()
        options.imageStagger = 0.3  // the 30th image waits 9 s: the album is mid-download through the outages
        let app = try TestApp(workers: true, fixture: options, database: cluster.url) { settings in
            settings.workers.leaseSeconds = lease
            settings.httpClient.totalTimeout = 15  // the slowest image takes 9 s
        }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        #expect(eventually(timeout: 10) { ((try? app.count("SELECT count(*) FROM photos WHERE pin_id = $1 AND status = 'ready'", [Int64(pin)])) ?? 0) > 0 })
        return (cluster, app, browser, pin)
    }
}

/// A provider that repeats the first photo of every page at its end, as the answer came.
private struct Repeating: PhotoProvider {
    let base: any PhotoProvider
    var name: String { base.name }
    var imageOrigins: [String] { base.imageOrigins }
    var photosPerPage: Int { base.photosPerPage }
    var lastPage: Int { base.lastPage }
    var downloadConcurrency: Int? { base.downloadConcurrency }
    var budget: ProviderBudget? { base.budget }
    var imageHosts: HostPolicy { base.imageHosts }
    var warmUpOrigin: String? { base.warmUpOrigin }
    func decadeCounts(lat: Double, lon: Double, decades: [Era]) throws -> [Int: Int] { try base.decadeCounts(lat: lat, lon: lon, decades: decades) }
    func search(lat: Double, lon: Double, page: Int, era: Era?) throws -> PhotoSearchPage {
        let found = try base.search(lat: lat, lon: lon, page: page, era: era)
        return PhotoSearchPage(photos: found.photos + found.photos.prefix(1), page: found.page, pages: found.pages, total: found.total)
    }
}

/// The CPU the album workers' threads use from now on, as a share of one core.
struct WorkerCPU {
    let workers: AlbumWorkers
    let started = ContinuousClock.now
    let cpu: Double

    init(_ workers: AlbumWorkers) {
        self.workers = workers
        cpu = workers.threadClocks.seconds
    }

    func share() -> Double {
        let elapsed = started.duration(to: .now)
        return (workers.threadClocks.seconds - cpu) / max(0.001, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}
