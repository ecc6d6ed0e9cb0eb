import Foundation
import Waiting
import HTTPClient
import Log
import Postgres
import Synchronization

/// The worker pool that fills albums (docs/architecture.md, Albums). WORKERS threads each claim a job
/// from album_jobs (FOR UPDATE SKIP LOCKED, so every job goes to exactly one worker across all
/// instances), search the provider once, write placeholders, then download the images
/// concurrently and write each as it lands. Workers sleep until LISTEN album_jobs wakes them, with
/// a periodic sweep as the fallback (and for retries that come due).
///
/// `@unchecked Sendable`: `threads` is written by `start` alone, before any worker runs.
public final class AlbumWorkers: @unchecked Sendable {
    public struct Settings: Sendable {
        public var workers = 2
        /// Images of one album downloading at once: a whole page, so an album takes about two
        /// round trips (one search, one image) however many photos it has (script/bench album).
        public var downloadsPerAlbum = 30
        /// Download slots shared by every album of this instance (threads, curl handles, and so
        /// the most connections open at once). DOWNLOAD_SLOTS.
        public var downloadSlots = 32
        public var maxAttempts = 5
        /// How long a job is held without a renewal before another worker may take it over; the
        /// holder renews it every third of this, whatever its progress. ALBUM_LEASE_SECONDS.
        public var leaseSeconds = 60
        /// A job whose lease lapsed this many times (its worker died holding it each time) is
        /// parked: failed with Retry, named in admin_jobs, no longer claimed.
        public var parkAfterLapses = 3
        /// After an outage, the waiting albums resume about this many a second, spread at random.
        public var resumesPerSecond: Double = 5
        /// How often idle workers look for due jobs without being woken.
        public var sweepSeconds: Double = 5
        /// Tries of one image, a moment apart, before its host counts as down (the album waits).
        public var imageAttempts = 3
        public var retryBaseSeconds = 2
        /// A provider that is down (or asks us to wait) is waited out this long, counted from the
        /// job's first failed call, before the album fails; outages of the real services last
        /// minutes to hours. PROVIDER_OUTAGE_HOURS.
        public var providerOutageHorizon: Double = 24 * 3600
        /// The first wait for a provider that is down; each later one is as long as the outage has
        /// lasted so far (so the waits double), at most `outageBackoffMax`.
        public var outageBackoffFirst: Double = 2
        public var outageBackoffMax: Double = 600
        /// The same for the photo store: an album waits for it (its photos pending), looking again
        /// after as long as the store's outage has lasted, at least this and at most `storeBackoffMax`.
        public var storeBackoffFirst: Double = 1
        public var storeBackoffMax: Double = 60
        /// Results are written in batches (one statement, one NOTIFY each): when this many are
        /// waiting, or the oldest waited this long, so the live page still fills in as they land.
        /// Six, so a batch's new row versions fit in the room fillfactor 80 keeps on a heap page
        /// and its updates stay HOT (docs/performance.md, "Albums").
        public var resultBatch = 6
        public var resultBatchSeconds = 0.25
        public init() {}
    }

    package let store: AlbumJobQueue
    package let provider: any PhotoProvider
    package let client: HTTPClient
    package let settings: Settings
    package let name: String
    package let logger = Logger(label: "albums")
    /// One lock for one invariant: whether workers run, the wake-ups they sleep on (a worker sleeps
    /// only if none arrived since it last looked), and how many jobs are in hand.
    private let shared = Waitable(Shared())
    private struct Shared {
        package var running = false
        package var wakeups = 0
        package var active = 0
        /// The albums in hand, to tell when the workers stop.
        package var inboxes: [Int64: Inbox] = [:]
    }
    private var threads: [Thread] = []
    package let downloads: DownloadPool
    /// The CPU clocks of the worker threads: what a driver that spins would show
    /// (AlbumWedgeTests measure them across outages).
    package let threadClocks = ThreadClocks()
    /// Thumbnails already made, by original: a photo seen again is not decoded again.
    package let thumbnails = ThumbnailCache()
    /// The database outage the workers are waiting out, logged once when it starts and once when it ends.
    package let outage = Mutex<ContinuousClock.Instant?>(nil)
    /// The same for the photo store, and when its last outage ended.
    package let storeOutage = Mutex<(since: ContinuousClock.Instant?, endedAt: ContinuousClock.Instant?)>((nil, nil))

    package let metrics: Metrics?

    public init(store: AlbumJobQueue, provider: any PhotoProvider, client: HTTPClient, settings: Settings = Settings(),
                metrics: Metrics? = nil) {
        self.metrics = metrics
        self.store = store
        self.provider = provider
        self.client = client
        self.settings = settings
        downloads = DownloadPool(slots: settings.downloadSlots)
        name = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(6))"
    }

    private func withShared<T>(_ body: (inout Shared) -> T) -> T { shared.withLock(body) }

    /// The inbox of an album in hand (nil: no longer), told when the workers stop.
    /// One registered after `stop` took its list is told here instead.
    package func inHand(_ job: AlbumJob, _ inbox: Inbox?) {
        let running = withShared { shared -> Bool in
            shared.inboxes[job.id] = inbox
            return shared.running
        }
        if !running, let inbox { inbox.post(.stopping) }
    }

    public func start() {
        withShared { $0.running = true }
        for index in 0..<settings.workers {
            let thread = Thread { [self] in run(index) }
            thread.name = "album-worker-\(index)"
            thread.start()
            threads.append(thread)
        }
    }

    /// Stops claiming; the jobs in hand are given back (queued again for any worker, the attempt
    /// not counted), waiting up to `waiting` for that, so a restart is not taken for a crash.
    public func stop(waiting: Duration = .seconds(2)) {
        // The inboxes are told outside this lock: each has its own, and none is taken under another.
        let inboxes = shared.change { state in
            state.running = false
            return Array(state.inboxes.values)
        }
        for inbox in inboxes { inbox.post(.stopping) }
        _ = shared.wait(for: { $0.active == 0 ? true : nil }, timeout: waiting)
        downloads.stop()
    }

    /// A job was queued (LISTEN album_jobs): wake a sleeping worker.
    public func notify() {
        shared.change { $0.wakeups += 1 }
    }

    /// Jobs being worked on right now (metrics, tests).
    public var activeJobs: Int { withShared { $0.active } }

    package var running: Bool { withShared { $0.running } }

    private func run(_ index: Int) {
        let worker = "\(name)/\(index)"
        threadClocks.add()
        while running {
            let seen = withShared { $0.wakeups }
            var job: AlbumJob?
            do {
                job = try store.claimJob(worker: worker, leaseSeconds: settings.leaseSeconds, parkAfterLapses: settings.parkAfterLapses)
                databaseAnswered()
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                // Back off quietly (one line per outage) and look again soon: work resumes within
                // a fraction of a second of the database's return, LISTEN or not.
                databaseUnavailable(error)
                usleep(250_000)
                continue
            } catch {
                // Troubleshooting: claiming a job failed
                logger.warning("claiming a job failed: \(error)")
            }
            if let job {
                withShared { $0.active += 1 }
                process(job)
                shared.change { $0.active -= 1 }
                continue
            }
            // Asleep until a job is queued (or the workers stop), or the sweep is due.
            _ = shared.wait(for: { $0.wakeups != seen || !$0.running ? true : nil }, timeout: .seconds(settings.sweepSeconds))
        }
    }

    package func process(_ job: AlbumJob) {
        stage(job, "claimed")
        let claimed = ContinuousClock.now
        // While the search runs, open connections to the image host, so a cold album pays its
        // handshakes alongside the search rather than after it (skipped when they are warm).
        if client.options.reuseConnections, job.kind == .collection, let origin = provider.warmUpOrigin, !client.isWarm(origin) {
            let count = min(settings.downloadsPerAlbum, provider.downloadConcurrency ?? .max, provider.photosPerPage,
                            downloads.slots, client.options.perHostConcurrency - 1)
            for _ in 0..<max(0, count) { downloads.submit { [client] in client.preconnect(origin) } }
        }
        do {
            guard let search = try store.searchState(job), search.current else {
                try store.cancel(job)  // a newer collection (or a deleted pin) superseded it
                return
            }
            // A job taken over after a crash finds its placeholders already written: it only
            // downloads what is still pending, so nothing is duplicated. So does one that waited
            // for the photo store or the image host; its banner goes once a photo is stored again.
            let album: Download
            if job.kind == .collection && search.placeholders == 0 {
                album = Download(searching: downloadSettings, now: claimed)
            } else {
                let pending = try store.pendingPhotos(job)
                // Either kind may have waited (one live job per pin): its banner goes once a photo is stored.
                album = Download(resuming: pending.map(\.id), sources: pending.map(\.url), settings: downloadSettings, clearsWaiting: true,
                                      held: max(0, search.placeholders - pending.count), failedBefore: pending.map(\.hostFailures),
                                      now: claimed)
            }
            let (end, trouble) = drive(job, album, search: search)
            try conclude(job, end, trouble)
        } catch let error as PostgresError where error.meansDatabaseUnavailable {
            resumeAfterOutage(job, error: error)
        } catch is LeaseLost {
            leaseLost(job)
        } catch {
            giveUpOrRetry(job, reason: "\(error)")
        }
    }

    package var downloadSettings: Download.Settings {
        let lease = Duration.seconds(settings.leaseSeconds)
        var album = Download.Settings(width: min(settings.downloadsPerAlbum, provider.downloadConcurrency ?? .max),
                                           batchSize: settings.resultBatch, batchAge: .seconds(settings.resultBatchSeconds),
                                           renewEvery: lease / 3, lease: lease)
        // The first photo goes first only while this album has the slots to itself: with other
        // albums downloading, images held back for it would pile up in memory (up to a page an
        // album) while their slots fetch for the others.
        if activeJobs > 1 { album.firstGate = .zero }
        return album
    }

    /// The album's end, carried out as the policy decides.
    private func conclude(_ job: AlbumJob, _ end: Download.End, _ trouble: Trouble) throws {
        switch policy.step(after: end, attempts: job.attempts, refused: trouble.refused, search: trouble.search) {
        case .finish:
            try store.finish(job)
            logger.info("album of pin \(job.pinID) complete")
        case .cancel: try store.cancel(job)
        case .leave: leaseLost(job)
        case .release: try store.release(job)
        case .awaitDatabase: resumeAfterOutage(job, error: trouble.database ?? .connection("the database is unavailable"))
        case .retry(let seconds, let reason): record(job) { try retry(job, reason: reason, afterSeconds: seconds) }
        case .fail(let reason): record(job) { try giveUp(job, detail: reason) }
        case .provider(let error): providerTrouble(job, error)
        case .waitForStore:
            waitForStore(job, trouble.store ?? StoreDown(error: PhotoStoreError(description: "the photo store is unavailable", outage: true),
                                                         putStarted: .now))
        case .waitForImageHost(let retryAfter):
            imageHostTrouble(job, retryAfter: retryAfter, reason: trouble.imageHost ?? "the photo server is unavailable")
        }
    }

    package var policy: AlbumJobPolicy {
        AlbumJobPolicy(maxAttempts: settings.maxAttempts, retryBaseSeconds: settings.retryBaseSeconds,
                       outageBackoffFirst: settings.outageBackoffFirst, outageBackoffMax: settings.outageBackoffMax,
                       storeBackoffFirst: settings.storeBackoffFirst, storeBackoffMax: settings.storeBackoffMax,
                       providerOutageHorizon: settings.providerOutageHorizon)
    }

    /// What went wrong on the way, kept by the driver for the end (the machine holds no errors).
    package struct Trouble {
        package var database: PostgresError?
        package var refused: String?
        package var search: AlbumJobPolicy.SearchTrouble?
        package var store: StoreDown?
        package var imageHost: String?
    }

    /// A job that failed unexpectedly (an error no rule names): retried, then failed.
    private func giveUpOrRetry(_ job: AlbumJob, reason: String) {
        switch policy.retryOrFail(reason, attempts: job.attempts) {
        case .retry(let seconds, _): record(job) { try retry(job, reason: reason, afterSeconds: seconds) }
        default: record(job) { try giveUp(job, detail: reason) }
        }
    }

    private func retry(_ job: AlbumJob, reason: String, afterSeconds delay: Int) throws {
        logger.notice("album of pin \(job.pinID): \(reason); retrying in \(delay) s")
        try store.retryLater(job, reason: reason, afterSeconds: delay)
    }

    private func giveUp(_ job: AlbumJob, detail: String) throws {
        // Troubleshooting: album of pin N failed: …
        logger.warning("album of pin \(job.pinID) failed: \(detail)")
        // People read a fixed phrase; the detail (which may name a database error or a URL)
        // stays in the log and in album_jobs.last_error for the administrator.
        try store.fail(job, phrase: Self.failedPhrase, detail: detail, retryable: true)
    }

    /// Records what became of a job: a job no longer ours is left alone, anything else is logged.
    package func record(_ job: AlbumJob, _ body: () throws -> Void) {
        do {
            try body()
        } catch is LeaseLost {
            leaseLost(job)
        } catch {
            // Troubleshooting: recording what became of job
            logger.error("recording what became of job \(job.id) failed: \(error)")
        }
    }

    /// The one line for a job taken over (its lease lapsed) or cancelled under its worker.
    package func leaseLost(_ job: AlbumJob) {
        logger.notice("album of pin \(job.pinID): the job was taken over or cancelled; this worker stops")
    }

    /// A step of an album, at debug level with the log's millisecond stamp: script/bench pindrop lines
    /// these up with the browser's timings to account for the time from a pin drop to its first photo.
    package func stage(_ job: AlbumJob, _ name: String) {
        logger.debug("pin \(job.pinID): \(name) (job \(job.id))")
    }

    /// The first collection shows page 1; New Collection a random page not yet shown (all pages
    /// again once every one has been seen, but never the current one twice in a row).
    package static func choosePage(totalPages: Int?, shown: [Int]) -> Int {
        guard let total = totalPages, total > 1 else { return 1 }
        let unseen = Set(1...total).subtracting(shown)
        if let page = unseen.randomElement() { return page }
        return Set(1...total).subtracting([shown.last ?? 0]).randomElement() ?? 1
    }

    package static let failedPhrase = "The photos could not be downloaded. Try again in a while."
}

