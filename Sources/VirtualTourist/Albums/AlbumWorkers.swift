import Foundation
import HTTPClient
import Log
import Postgres
import Synchronization

/// The worker pool that fills albums (docs/architecture.md, Albums). WORKERS threads each claim a job
/// from album_jobs (FOR UPDATE SKIP LOCKED, so every job goes to exactly one worker across all
/// instances), search the provider once, write placeholders, then download the images
/// concurrently and write each as it lands. Workers sleep until LISTEN album_jobs wakes them, with
/// a periodic sweep as the fallback (and for retries that come due).
public final class AlbumWorkers: @unchecked Sendable {
    public struct Settings: Sendable {
        public var workers = 2
        /// Images of one album downloading at once: a whole page, so an album takes about two
        /// round trips (one search, one image) however many photos it has (script/bench album).
        public var downloadsPerAlbum = 30
        /// Download slots shared by every album of this instance (threads, curl handles, and so
        /// the most connections open at once). DOWNLOAD_SLOTS.
        public var downloadSlots = 32
        /// Open connections to the image host while the search runs, so a cold album pays the
        /// handshakes in parallel with the search instead of after it. Off reproduces the old client
        /// for script/bench album.
        public var warmUpConnections = true
        public var maxAttempts = 5
        public var leaseSeconds = 60
        /// How often idle workers look for due jobs without being woken.
        public var sweepSeconds: Double = 5
        /// Retries of one image before it is marked failed.
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
        /// Six: a batch's new row versions must fit in the room fillfactor 80 keeps on a heap
        /// page (1.6 KB, four ready rows; an album's rows span two pages) for its updates to be
        /// HOT. With 10, and batches of one album written side by side, half the updates moved
        /// their row to another page and the heap took twice the live rows' bytes; 4 kept more
        /// updates HOT but cost more PostgreSQL CPU per album than it saved (script/bench albums,
        /// docs/architecture.md).
        public var resultBatch = 6
        public var resultBatchSeconds = 0.25
        /// The album's first photo is written alone as soon as it lands, before any batch fills: the
        /// first thumbnail on the page waits for one download, not six (script/bench pindrop). One
        /// statement and NOTIFY more per album.
        public var firstResultAtOnce = true
        public init() {}
    }

    let store: AlbumJobQueue
    let provider: any PhotoProvider
    let client: HTTPClient
    let settings: Settings
    let name: String
    let logger = Logger(label: "albums")
    /// One lock for one invariant: whether workers run, the wake-ups they sleep on (a worker sleeps
    /// only if none arrived since it last looked), and how many jobs are in hand.
    private let wake = NSCondition()
    private var shared = (running: false, wakeups: 0, active: 0)  // guarded by `wake`
    private var threads: [Thread] = []
    let downloads: DownloadPool
    /// Thumbnails already made, by original: a photo seen again is not decoded again.
    let thumbnails = ThumbnailCache()
    /// The database outage the workers are waiting out, logged once when it starts and once when it ends.
    private let outage = Mutex<Date?>(nil)
    /// The same for the photo store, and when its last outage ended.
    private let storeOutage = Mutex<(since: Date?, endedAt: Date?)>((nil, nil))

    let metrics: Metrics?

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

    private func withShared<T>(_ body: (inout (running: Bool, wakeups: Int, active: Int)) -> T) -> T {
        wake.lock()
        defer { wake.unlock() }
        return body(&shared)
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

    /// Stops claiming; a job in hand finishes its current image and is left for the lease to hand on.
    public func stop() {
        wake.lock()
        shared.running = false
        wake.broadcast()
        wake.unlock()
        downloads.stop()
    }

    /// A job was queued (LISTEN album_jobs): wake a sleeping worker.
    public func notify() {
        wake.lock()
        shared.wakeups += 1
        wake.broadcast()
        wake.unlock()
    }

    /// Jobs being worked on right now (metrics, tests).
    public var activeJobs: Int { withShared { $0.active } }

    private var running: Bool { withShared { $0.running } }

    private func run(_ index: Int) {
        let worker = "\(name)/\(index)"
        while running {
            let seen = withShared { $0.wakeups }
            var job: AlbumJob?
            do {
                job = try store.claimJob(worker: worker, leaseSeconds: settings.leaseSeconds)
                databaseAnswered()
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                // Back off quietly (one line per outage) and look again soon: work resumes within
                // a fraction of a second of the database's return, LISTEN or not.
                databaseUnavailable(error)
                usleep(250_000)
                continue
            } catch {
                logger.warning("claiming a job failed: \(error)")
            }
            if let job {
                withShared { $0.active += 1 }
                process(job, worker: worker)
                withShared { $0.active -= 1 }
                continue
            }
            wake.lock()
            if shared.wakeups == seen && shared.running {
                _ = wake.wait(until: Date(timeIntervalSinceNow: settings.sweepSeconds))
            }
            wake.unlock()
        }
    }

    func process(_ job: AlbumJob, worker: String) {
        stage(job, "claimed")
        // While the search runs, open connections to the image host, so a cold album pays its
        // handshakes alongside the search rather than after it (skipped when they are warm).
        if settings.warmUpConnections, job.kind == .collection, let origin = provider.warmUpOrigin, !client.isWarm(origin) {
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
            // for the photo store; its banner goes once a photo is stored again.
            let resumed = job.kind == .collection && search.placeholders > 0
            if job.kind == .collection && search.placeholders == 0 {
                let page = Self.choosePage(totalPages: search.totalPages, shown: search.shownPages)
                let result = try provider.search(lat: search.lat, lon: search.lon, page: page)
                    .keepingImages(from: provider.imageHosts, provider: provider.name)
                stage(job, "searched")
                // The images start downloading now, while their placeholders are written
                // (PhotoRows): a download that lands first waits for its row.
                let rows = PhotoRows()
                try download(job, worker: worker, urls: result.photos.map(\.imageURL), rows: rows) {
                    try store.clearWaiting(job)
                    let placed = try store.storeSearchResult(job, result)
                    rows.write(placed)
                    if placed != nil { stage(job, "placeholders written") }
                }
                guard rows.written else { try store.cancel(job); return }  // superseded meanwhile
            } else {
                let pending = try store.pendingPhotos(job)
                try download(job, worker: worker, urls: pending.map(\.url), rows: PhotoRows(known: pending.map(\.id)),
                             clearsWaiting: resumed)
            }
            try store.finish(job)
            logger.info("album of pin \(job.pinID) complete")
        } catch let error as PhotoProviderError {
            providerTrouble(job, error)
        } catch let error as PostgresError where error.meansDatabaseUnavailable {
            resumeAfterOutage(job, worker: worker, error: error)
        } catch let down as StoreDown {
            waitForStore(job, down)
        } catch {
            giveUpOrRetry(job, reason: "\(error)", transient: true)
        }
    }

    private func giveUpOrRetry(_ job: AlbumJob, reason: String, transient: Bool) {
        do {
            if transient && job.attempts < settings.maxAttempts {
                let delay = min(60, settings.retryBaseSeconds << (job.attempts - 1))
                logger.notice("album of pin \(job.pinID): \(reason); retrying in \(delay) s")
                try store.retryLater(job, reason: reason, afterSeconds: delay)
            } else {
                logger.warning("album of pin \(job.pinID) failed: \(reason)")
                // People read a fixed phrase; the detail (which may name a database error or a URL)
                // stays in the log and in album_jobs.last_error for the administrator.
                try store.fail(job, phrase: Self.failedPhrase, detail: reason, retryable: true)
            }
        } catch {
            logger.error("recording the failure of job \(job.id) failed: \(error)")
        }
    }

    /// Downloads an album's images on the shared download slots, a whole page at once (fewer when
    /// the provider asks for restraint), writing each image into its row (`rows`, by position in
    /// `urls`) as it lands. `meanwhile` runs on this thread while the first images download (a
    /// fresh album writes its placeholders there); when it throws, the downloads stop and its
    /// error is thrown once they have.
    private func download(_ job: AlbumJob, worker: String, urls: [String], rows: PhotoRows, clearsWaiting: Bool = false,
                          meanwhile: () throws -> Void = {}) throws {
        let waitingCleared = Atomic(!clearsWaiting)
        let width = min(settings.downloadsPerAlbum, provider.downloadConcurrency ?? .max)
        let hosts = provider.imageHosts
        let outage = Mutex<PostgresError?>(nil)
        // A write the database refused for another reason: the album stops and the job is tried
        // again later (giveUpOrRetry), the unwritten photos still pending.
        let refused = Mutex<(any Error)?>(nil)
        // The photo store went down: the photo stays pending and the album waits (waitForStore).
        let storeDown = Mutex<(error: PhotoStoreError, putStarted: Date)?>(nil)
        // The lease is renewed at most once a second rather than after every image: an album's
        // images land together, and renewing after each one is a round trip per image.
        let renewed = Mutex(ContinuousClock.now)
        // The first photo is written as soon as it lands (the page shows it at once), the rest in batches.
        let batch = Mutex(ResultBatch<AlbumJobQueue.PhotoResult>(size: settings.resultBatch,
                                                                 maxAge: .seconds(settings.resultBatchSeconds), now: .now,
                                                                 firstAtOnce: settings.firstResultAtOnce))
        // One batch of this album is written at a time, at most `size` rows: its new row versions
        // then fit in the room the page keeps, and the last batch's old versions (its transaction
        // committed) are pruned to make that room again, so the updates stay HOT.
        let writing = NSLock()
        // For the stage log (script/bench pindrop): the first of each, once per album.
        let firstWritten = Atomic(false), firstDownloaded = Atomic(false), firstStored = Atomic(false)
        // The first image to land goes first: the others (landing with it, a page's downloads
        // run at once) wait to be hashed, thumbnailed and stored until its row is written, or
        // for a second at most. Sharing the core with them, its one-row write took 6-16 ms
        // rather than 2 (script/bench pindrop); they finish a moment later, the album no later.
        let firstDone = DispatchSemaphore(value: 0)
        @Sendable func write(rest: Bool) throws {
            writing.lock()
            defer { writing.unlock() }
            while let taken = batch.withLock({ $0.take(now: .now, rest: rest) }) {
                do {
                    try store.storeResults(taken, job: job)
                    if !firstWritten.exchange(true, ordering: .relaxed) { stage(job, "first photos written") }
                } catch {
                    batch.withLock { $0.putBack(taken) }
                    throw error
                }
            }
        }
        @Sendable func finished(_ result: AlbumJobQueue.PhotoResult) throws {
            // Checked first so a result that completes no batch never waits for the writer.
            if batch.withLock({ $0.add(result, now: .now) }) { try write(rest: false) }
        }
        /// What became of an image before its row is known.
        enum Outcome {
            case stored(hash: String, byteSize: Int, info: ImageInfo, thumbnails: [Int: String])
            case failed(String)
            /// The store refused the write (the error, for the log).
            case unstored(String)
            case refused(String)
        }
        let running = downloads.start(count: urls.count, width: width) { [self] index in
            var photo = urls[index]  // for the log: "photo ID" once its row is known
            var first = false
            defer { if first { firstDone.signal() } }
            do {
                let outcome: Outcome
                switch fetchImage(urls[index], hosts: hosts) {
                case .success(let (bytes, info)):
                    if !firstDownloaded.exchange(true, ordering: .relaxed) {
                        first = true
                        stage(job, "first image downloaded")
                    } else if settings.firstResultAtOnce {
                        _ = firstDone.wait(timeout: .now() + 1)
                        firstDone.signal()  // passed on: open for the rest
                    }
                    // The blob first, then the row that names it: a row never names a blob that
                    // is not there. A store that refuses the write fails this photo, not the album.
                    // Thumbnails too (JPEG only), into the same store.
                    let putStarted = Date()
                    do {
                        let hash = try store.photos.put(bytes)
                        let thumbnails = try self.thumbnails.thumbnails(of: hash, bytes: bytes, store: store.photos)
                        storeAnswered(putStarted: putStarted)
                        if !firstStored.exchange(true, ordering: .relaxed) { stage(job, "first image stored") }
                        outcome = .stored(hash: hash, byteSize: bytes.count, info: info, thumbnails: thumbnails)
                    } catch let error as PhotoStoreError where error.outage {
                        storeDown.withLock { $0 = $0 ?? (error, putStarted) }
                        return false
                    } catch {
                        outcome = .unstored("\(error)")
                    }
                case .failure(let reason): outcome = .failed(reason)
                case .refused(let reason): outcome = .refused(reason)
                }
                let photoID: Int64
                switch rows.row(index) {
                case .id(let id): photoID = id; photo = "photo \(id)"
                case .skipped: return true
                case .abandoned: return false
                }
                switch outcome {
                case .stored(let hash, let byteSize, let info, let thumbnails):
                    if !waitingCleared.exchange(true, ordering: .relaxed) { try store.clearWaiting(job) }
                    metrics?.download(succeeded: true)
                    try finished(.stored(photoID, hash: hash, byteSize: byteSize, info: info, thumbnails: thumbnails))
                case .failed(let reason):
                    metrics?.download(succeeded: false)
                    try finished(.failed(photoID, reason: reason))
                case .unstored(let error):
                    logger.error("album of pin \(job.pinID): photo \(photoID) not stored: \(error)")
                    metrics?.download(succeeded: false)
                    try finished(.failed(photoID, reason: "The photo could not be stored."))
                case .refused(let reason):
                    // Never shown as a broken tile: the photo leaves the album, the log says why.
                    logger.warning("album of pin \(job.pinID): photo \(photoID) dropped, \(reason)")
                    metrics?.download(succeeded: false)
                    try store.dropPhoto(photoID: photoID, job: job)
                }
                let due = renewed.withLock { last -> Bool in
                    let now = ContinuousClock.now
                    guard now - last >= .seconds(1) else { return false }
                    last = now
                    return true
                }
                // Cancelled or taken over: stop spending effort.
                return try !due || store.renewLease(job, worker: worker, leaseSeconds: settings.leaseSeconds)
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                outage.withLock { $0 = error }
                return false  // the rest waits for the database (resumeAfterOutage)
            } catch {
                // Never left pending under a finished album: the album does not finish, and the
                // job's next attempt downloads what is still pending.
                logger.warning("album of pin \(job.pinID): storing \(photo) failed: \(error)")
                refused.withLock { $0 = $0 ?? error }
                return false
            }
        }
        do {
            try meanwhile()
        } catch {
            rows.write(nil)
            running.wait()
            throw error
        }
        running.wait()
        if let error = outage.withLock({ $0 }) { throw error }
        if let error = refused.withLock({ $0 }) { throw error }
        if let down = storeDown.withLock({ $0 }) {
            try write(rest: true)  // what was stored before the store went away is kept
            throw StoreDown(error: down.error, putStarted: down.putStarted)
        }
        // The last, partial batch. (After an outage it is dropped above: those photos are still
        // pending and download again when the job resumes.)
        try write(rest: true)
    }

    /// A step of an album, at debug level with the log's millisecond stamp: script/bench pindrop lines
    /// these up with the browser's timings to account for the time from a pin drop to its first photo.
    func stage(_ job: AlbumJob, _ name: String) {
        logger.debug("pin \(job.pinID): \(name) (job \(job.id))")
    }

    enum Fetch {
        case success(([UInt8], ImageInfo))
        case failure(String)
        /// Outside the provider's image hosts or on an internal address (first request or a redirect).
        case refused(String)
    }

    /// One image, retried on transient failures; never trusts the Content-Type.
    func fetchImage(_ url: String, hosts: HostPolicy? = nil) -> Fetch {
        var lastReason = "not downloaded"
        for attempt in 1...settings.imageAttempts {
            do {
                let response = try client.get(url, hosts: hosts ?? provider.imageHosts)
                if response.status == 200 {
                    guard let info = ImageInspector.inspect(response.body) else {
                        return .failure("not an image (JPEG, PNG, GIF or WebP)")
                    }
                    return .success((response.body, info))
                }
                lastReason = "the photo server answered HTTP \(response.status)"
                if response.status < 500 && response.status != 429 { return .failure(lastReason) }
            } catch let error as HTTPClientError {
                lastReason = error.description
                switch error {
                case .refused(let reason): return .refused("\(reason) (\(url))")
                case .unsupportedURL, .tooLarge, .tooManyRedirects: return .failure(lastReason)
                case .timedOut, .transport: break
                }
            } catch {
                lastReason = "\(error)"
            }
            if attempt < settings.imageAttempts { usleep(UInt32(200_000 * attempt)) }
        }
        return .failure(lastReason)
    }

    // MARK: Database outages

    private func databaseUnavailable(_ error: PostgresError) {
        let first = outage.withLock { since -> Bool in
            guard since == nil else { return false }
            since = Date()
            return true
        }
        if first { logger.warning("the database is unavailable (\(error)); album workers wait for it") }
    }

    private func databaseAnswered() {
        guard let since = outage.withLock({ since -> Date? in defer { since = nil }; return since }) else { return }
        logger.notice(String(format: "the database is back after %.1f s; album workers resume", Date().timeIntervalSince(since)))
    }

    // MARK: Photo store outages

    /// A put the store could not take because it is down, and when that put began.
    struct StoreDown: Error {
        let error: PhotoStoreError
        let putStarted: Date
    }

    /// The photo store is down (unreachable, failing, full): the album's unstored photos stay
    /// pending and the job is queued again, after as long as the outage has lasted so far; no
    /// attempt is used, so it resumes by itself however long the store takes. Logged once per
    /// outage: a put that began before the last outage ended and failed late is part of that one.
    private func waitForStore(_ job: AlbumJob, _ down: StoreDown) {
        let (since, first) = storeOutage.withLock { state -> (Date, Bool) in
            if let since = state.since { return (since, false) }
            if let ended = state.endedAt, down.putStarted < ended { return (Date(), false) }
            state.since = Date()
            return (state.since!, true)
        }
        if first { logger.warning("the photo store is unavailable (\(down.error)); albums wait for it") }
        let seconds = min(settings.storeBackoffMax, max(settings.storeBackoffFirst, Date().timeIntervalSince(since)))
        do {
            try store.wait(job, seconds: seconds, phrase: Self.storeWaitingPhrase(until: Date(timeIntervalSinceNow: seconds)),
                           detail: down.error.description, countsAttempt: false)
        } catch {
            logger.error("queuing job \(job.id) to wait for the photo store failed: \(error)")
        }
    }

    /// A put that started after the outage began went through (one that started before may
    /// land after the first failure and proves nothing).
    private func storeAnswered(putStarted: Date) {
        guard let since = storeOutage.withLock({ state -> Date? in
            guard let started = state.since, putStarted > started else { return nil }
            state = (nil, Date())
            return started
        }) else { return }
        logger.notice(String(format: "the photo store is back after %.1f s; albums resume", Date().timeIntervalSince(since)))
    }

    static func storeWaitingPhrase(until: Date) -> String {
        "Photos cannot be saved right now; trying again at \(ProviderPhrases.clockTime(until))."
    }

    /// The database went away in the middle of a job. The job is still ours (its lease runs on),
    /// so wait for the database and carry on where it stopped: placeholders already written are
    /// kept and only pending images are fetched, so nothing is lost or done twice. Past the
    /// lease, the job is left for whichever worker claims it next.
    private func resumeAfterOutage(_ job: AlbumJob, worker: String, error: PostgresError) {
        databaseUnavailable(error)
        let deadline = Date(timeIntervalSinceNow: Double(settings.leaseSeconds) * 0.8)
        while running && Date() < deadline {
            usleep(250_000)
            do {
                guard try store.renewLease(job, worker: worker, leaseSeconds: settings.leaseSeconds) else { return }
                databaseAnswered()
                process(job, worker: worker)
                return
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                continue
            } catch {
                logger.warning("album of pin \(job.pinID): \(error)")
                return
            }
        }
    }

    /// The first collection shows page 1; New Collection a random page not yet shown (all pages
    /// again once every one has been seen, but never the current one twice in a row).
    static func choosePage(totalPages: Int?, shown: [Int]) -> Int {
        guard let total = totalPages, total > 1 else { return 1 }
        let unseen = Set(1...total).subtracting(shown)
        if let page = unseen.randomElement() { return page }
        return Set(1...total).subtracting([shown.last ?? 0]).randomElement() ?? 1
    }

    static let failedPhrase = "The photos could not be downloaded. Try again in a while."
}
