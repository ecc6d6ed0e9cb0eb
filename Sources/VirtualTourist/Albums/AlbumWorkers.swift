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

    let store: AlbumJobQueue
    let provider: any PhotoProvider
    let client: HTTPClient
    let settings: Settings
    let name: String
    let logger = Logger(label: "albums")
    /// One lock for one invariant: whether workers run, the wake-ups they sleep on (a worker sleeps
    /// only if none arrived since it last looked), and how many jobs are in hand.
    private let wake = NSCondition()
    private var shared = Shared()  // guarded by `wake`
    private struct Shared {
        var running = false
        var wakeups = 0
        var active = 0
        /// The albums in hand, to tell when the workers stop.
        var inboxes: [Int64: Inbox] = [:]
    }
    private var threads: [Thread] = []
    let downloads: DownloadPool
    /// Thumbnails already made, by original: a photo seen again is not decoded again.
    let thumbnails = ThumbnailCache()
    /// The database outage the workers are waiting out, logged once when it starts and once when it ends.
    let outage = Mutex<Date?>(nil)
    /// The same for the photo store, and when its last outage ended.
    let storeOutage = Mutex<(since: Date?, endedAt: Date?)>((nil, nil))

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

    private func withShared<T>(_ body: (inout Shared) -> T) -> T {
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

    /// Stops claiming; the jobs in hand are given back (queued again for any worker, the attempt
    /// not counted), waiting up to `seconds` for that, so a restart is not taken for a crash.
    public func stop(waiting seconds: Double = 2) {
        wake.lock()
        shared.running = false
        for inbox in shared.inboxes.values { inbox.post(.stopping) }
        wake.broadcast()
        let deadline = Date(timeIntervalSinceNow: seconds)
        while shared.active > 0 && wake.wait(until: deadline) {}
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

    var running: Bool { withShared { $0.running } }

    private func run(_ index: Int) {
        let worker = "\(name)/\(index)"
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
                logger.warning("claiming a job failed: \(error)")
            }
            if let job {
                withShared { $0.active += 1 }
                process(job)
                wake.lock()
                shared.active -= 1
                wake.broadcast()
                wake.unlock()
                continue
            }
            wake.lock()
            if shared.wakeups == seen && shared.running {
                _ = wake.wait(until: Date(timeIntervalSinceNow: settings.sweepSeconds))
            }
            wake.unlock()
        }
    }

    func process(_ job: AlbumJob) {
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
            let album: AlbumDownload, urls: [String]
            if job.kind == .collection && search.placeholders == 0 {
                album = AlbumDownload(searching: downloadSettings, now: claimed)
                urls = []
            } else {
                let pending = try store.pendingPhotos(job)
                album = AlbumDownload(resuming: pending.map(\.id), settings: downloadSettings,
                                      clearsWaiting: job.kind == .collection, now: claimed)
                urls = pending.map(\.url)
            }
            let (end, trouble) = drive(job, album, search: search, urls: urls)
            try conclude(job, end, trouble)
        } catch let error as PostgresError where error.meansDatabaseUnavailable {
            resumeAfterOutage(job, error: error)
        } catch is LeaseLost {
            logger.notice("album of pin \(job.pinID): the job was taken over or cancelled; this worker stops")
        } catch {
            giveUpOrRetry(job, reason: "\(error)", transient: true)
        }
    }

    var downloadSettings: AlbumDownload.Settings {
        let lease = Duration.seconds(settings.leaseSeconds)
        var album = AlbumDownload.Settings(width: min(settings.downloadsPerAlbum, provider.downloadConcurrency ?? .max),
                                           batchSize: settings.resultBatch, batchAge: .seconds(settings.resultBatchSeconds),
                                           renewEvery: lease / 3, lease: lease)
        // The first photo goes first only while this album has the slots to itself: with other
        // albums downloading, images held back for it would pile up in memory (up to a page an
        // album) while their slots fetch for the others.
        if activeJobs > 1 { album.firstGate = .zero }
        return album
    }

    /// What the album's end does to the job.
    private func conclude(_ job: AlbumJob, _ end: AlbumDownload.End, _ trouble: Trouble) throws {
        switch end {
        case .finished:
            try store.finish(job)
            logger.info("album of pin \(job.pinID) complete")
        case .superseded:
            try store.cancel(job)
        case .leaseLost:
            logger.notice("album of pin \(job.pinID): the job was taken over or cancelled; this worker stops")
        case .released:
            try store.release(job)
        case .databaseDown:
            resumeAfterOutage(job, error: trouble.database ?? .connection("the database is unavailable"))
        case .writeRefused:
            giveUpOrRetry(job, reason: trouble.refused.map { "\($0)" } ?? "a write was refused", transient: true)
        case .searchFailed:
            switch trouble.search {
            case let error as PhotoProviderError: providerTrouble(job, error)
            case let error as PostgresError where error.meansDatabaseUnavailable: resumeAfterOutage(job, error: error)
            case let error?: giveUpOrRetry(job, reason: "\(error)", transient: true)
            case nil: giveUpOrRetry(job, reason: "the search failed", transient: true)
            }
        case .storeDown:
            waitForStore(job, trouble.store ?? StoreDown(error: PhotoStoreError(description: "the photo store is unavailable", outage: true),
                                                         putStarted: Date()))
        case .imageHostDown(let retryAfter):
            imageHostTrouble(job, retryAfter: retryAfter, reason: trouble.imageHost ?? "the photo server is unavailable")
        }
    }

    /// What went wrong on the way, kept by the driver for the end (the machine holds no errors).
    struct Trouble {
        var database: PostgresError?
        var refused: (any Error)?
        var search: (any Error)?
        var store: StoreDown?
        var imageHost: String?
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
        } catch is LeaseLost {
            logger.notice("album of pin \(job.pinID): the job was taken over or cancelled; this worker stops")
        } catch {
            logger.error("recording the failure of job \(job.id) failed: \(error)")
        }
    }

    // MARK: The driver

    /// What the search and the download slots report to an album's driver, with the bytes the
    /// machine does not hold.
    private final class Inbox: @unchecked Sendable {
        enum Payload {
            case page(PhotoSearchPage)
            case error(any Error)
            case image([UInt8], ImageInfo)
            case stored(AlbumJobQueue.PhotoResult)
            case storeDown(StoreDown)
            /// The store refused this image for a reason of its own, for the log.
            case unstored(String)
            /// Why an image was refused or its host counts as down, for the log and the wait.
            case reason(String)
        }
        private let condition = NSCondition()
        private var events: [(AlbumDownload.Event, Payload?)] = []  // guarded by `condition`

        func post(_ event: AlbumDownload.Event, _ payload: Payload? = nil) {
            condition.lock()
            events.append((event, payload))
            condition.signal()
            condition.unlock()
        }

        /// The next event, or nil at `deadline`.
        func next(until deadline: ContinuousClock.Instant?) -> (AlbumDownload.Event, Payload?)? {
            condition.lock()
            defer { condition.unlock() }
            while events.isEmpty {
                let left = deadline.map { ContinuousClock.now.duration(to: $0) } ?? .seconds(60)
                guard left > .zero else { return nil }
                let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
                if !condition.wait(until: Date(timeIntervalSinceNow: seconds)) && events.isEmpty { return nil }
            }
            return events.removeFirst()
        }
    }

    /// Performs the album's actions until it ends: the search and the images on other threads
    /// (their outcomes come back through the inbox), database writes here, one at a time.
    private func drive(_ job: AlbumJob, _ start: AlbumDownload, search: AlbumJobQueue.SearchState,
                       urls initial: [String]) -> (AlbumDownload.End, Trouble) {
        var album = start
        let inbox = Inbox()
        withShared { $0.inboxes[job.id] = inbox }
        defer { withShared { $0.inboxes[job.id] = nil } }
        if !running { inbox.post(.stopping) }
        var urls = initial, page: PhotoSearchPage?, trouble = Trouble()
        var images: [Int: (bytes: [UInt8], info: ImageInfo)] = [:]
        var stored: [Int: AlbumJobQueue.PhotoResult] = [:]
        var unstored: [Int: String] = [:]
        let hosts = provider.imageHosts
        var actions = album.start(now: .now)
        var firstWritten = false, firstDownloaded = false

        /// A database write: its outcome as the machine's event.
        func write(_ body: () throws -> AlbumDownload.Event) -> AlbumDownload.Event {
            do {
                return try body()
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                trouble.database = error
                return .databaseDown
            } catch is LeaseLost {
                return .batchWritten(false)
            } catch {
                logger.warning("album of pin \(job.pinID): \(error)")
                trouble.refused = error
                return .writeRefused
            }
        }

        while true {
            // Threads first, so the images download while the placeholders are written.
            actions = actions.filter(\.runsElsewhere) + actions.filter { !$0.runsElsewhere }
            var queue = actions[...]
            actions = []
            while let action = queue.popFirst() {
                var event: AlbumDownload.Event?
                switch action {
                case .search:
                    // On a download slot: a thread that exists anyway, not a new one per search.
                    runOnSlot { [provider] in
                        do {
                            let result = try provider.search(lat: search.lat, lon: search.lon,
                                                             page: Self.choosePage(totalPages: search.totalPages, shown: search.shownPages))
                                .keepingImages(from: provider.imageHosts, provider: provider.name)
                            inbox.post(.searched(count: result.photos.count), .page(result))
                        } catch {
                            inbox.post(.searchFailed, .error(error))
                        }
                    }
                case .writePlaceholders:
                    guard let result = page else { event = .rowsWritten(nil); break }
                    stage(job, "searched")
                    event = write {
                        try store.clearWaiting(job)
                        guard let placed = try store.storeSearchResult(job, result) else { return .rowsWritten(nil) }
                        stage(job, "placeholders written")
                        let ids = (0..<result.photos.count).compactMap { placed[$0] }
                        return .rowsWritten(ids.count == result.photos.count ? ids : nil)
                    }
                case .fetch(let index), .fetchAndPut(let index):
                    let url = urls[index], andPut = action == .fetchAndPut(index)
                    runOnSlot { [self] in
                        switch fetchImage(url, hosts: hosts) {
                        case .success(let (bytes, info)):
                            guard andPut else { return inbox.post(.fetched(index, .image), .image(bytes, info)) }
                            inbox.post(.fetched(index, .image))
                            storeImage(index, bytes: bytes, info: info, inbox: inbox)
                        case .failure(let reason): inbox.post(.fetched(index, .failed(reason)))
                        case .refused(let reason): inbox.post(.fetched(index, .refused(reason)), .reason(reason))
                        case .unavailable(let reason, let retryAfter):
                            inbox.post(.fetched(index, .hostDown(retryAfter: retryAfter)), .reason(reason))
                        }
                    }
                case .put(let index):
                    guard let image = images.removeValue(forKey: index) else { break }
                    runOnSlot(first: true) { [self] in storeImage(index, bytes: image.bytes, info: image.info, inbox: inbox) }
                case .writeBatch(let items):
                    event = write {
                        let results = items.map { item -> AlbumJobQueue.PhotoResult in
                            if let error = unstored.removeValue(forKey: item.index) {
                                logger.error("album of pin \(job.pinID): photo \(item.rowID) not stored: \(error)")
                            }
                            guard item.failure == nil, var result = stored.removeValue(forKey: item.index) else {
                                return .failed(item.rowID, reason: item.failure ?? "The photo could not be stored.")
                            }
                            result.id = item.rowID
                            return result
                        }
                        let held = try store.storeResults(results, job: job)
                        if held { for result in results { metrics?.download(succeeded: result.hash != nil) } }
                        if held && !firstWritten {
                            firstWritten = true
                            stage(job, "first photos written")
                        }
                        return .batchWritten(held)
                    }
                case .drop(let rowID):
                    let outcome = write { try store.dropPhoto(photoID: rowID, job: job); return .tick }
                    if outcome != .tick { event = outcome }
                case .clearWaiting:
                    let outcome = write { try store.clearWaiting(job); return .tick }
                    if outcome != .tick { event = outcome }
                case .renewLease:
                    event = write { .leaseRenewed(try store.renewLease(job, leaseSeconds: settings.leaseSeconds)) }
                case .end(let end):
                    if let why = end.whyStopped {
                        logger.notice("album of pin \(job.pinID) stops, \(why): \(album.unwritten) photos pending")
                    }
                    return (end, trouble)
                }
                if let event { queue.append(contentsOf: album.handle(event, now: .now)) }
            }
            let (event, payload) = inbox.next(until: album.deadline()) ?? (.tick, nil)
            switch (event, payload) {
            case (_, .page(let result)?):
                page = result
                urls = result.photos.map(\.imageURL)
            case (_, .error(let error)?): trouble.search = error
            case (.fetched(let index, .image), let payload):
                if !firstDownloaded { stage(job, "first image downloaded") }
                firstDownloaded = true
                if case .image(let bytes, let info)? = payload { images[index] = (bytes, info) }
            case (.put(let index, _), .stored(let result)?):
                if stored.isEmpty && !firstWritten { stage(job, "first image stored") }
                stored[index] = result
            case (.put(let index, _), .unstored(let error)?): unstored[index] = error
            case (_, .storeDown(let down)?): trouble.store = trouble.store ?? down
            case (.fetched(_, .hostDown), .reason(let reason)?): trouble.imageHost = reason
            case (.fetched(let index, .refused), .reason(let reason)?):
                // Never shown as a broken tile: the photo leaves the album, the log says why.
                logger.warning("album of pin \(job.pinID): image \(index) dropped, \(reason)")
            default: break
            }
            actions = album.handle(event, now: .now)
        }
    }

    /// Puts one image (and its thumbnails) into the photo store, on the slot it runs on, and
    /// reports how that went. The blob first, then the row that names it (written later by the
    /// driver): a row never names a blob that is not there.
    private func storeImage(_ index: Int, bytes: [UInt8], info: ImageInfo, inbox: Inbox) {
        let putStarted = Date()
        do {
            let hash = try store.photos.put(bytes)
            let thumbnails = try self.thumbnails.thumbnails(of: hash, bytes: bytes, store: store.photos)
            storeAnswered(putStarted: putStarted)
            inbox.post(.put(index, .stored), .stored(.stored(0, hash: hash, byteSize: bytes.count, info: info, thumbnails: thumbnails)))
        } catch let error as PhotoStoreError where error.outage {
            inbox.post(.put(index, .storeDown), .storeDown(StoreDown(error: error, putStarted: putStarted)))
        } catch {
            inbox.post(.put(index, .failed("The photo could not be stored.")), .unstored("\(error)"))
        }
    }

    /// Runs `task` on a download slot (`first`: ahead of those waiting); once the slots have
    /// stopped (shutting down), here.
    private func runOnSlot(first: Bool = false, _ task: @escaping @Sendable () -> Void) {
        if !downloads.submit(first: first, task) { task() }
    }

    /// A step of an album, at debug level with the log's millisecond stamp: script/bench pindrop lines
    /// these up with the browser's timings to account for the time from a pin drop to its first photo.
    func stage(_ job: AlbumJob, _ name: String) {
        logger.debug("pin \(job.pinID): \(name) (job \(job.id))")
    }

    enum Fetch {
        case success(([UInt8], ImageInfo))
        /// This photo cannot be had (404, 410, not an image, too large): it fails, the album goes on.
        case failure(String)
        /// Outside the provider's image hosts or on an internal address (first request or a redirect).
        case refused(String)
        /// The image host is down, overloaded or asks for a wait (5xx, 429, 408, a reset, a
        /// timeout): the photo stays pending and the album waits, as for the search.
        case unavailable(String, retryAfter: Int?)
    }

    /// One image, tried again at once on a blip; never trusts the Content-Type.
    func fetchImage(_ url: String, hosts: HostPolicy? = nil) -> Fetch {
        var outcome = Fetch.unavailable("not downloaded", retryAfter: nil)
        for attempt in 1...max(1, settings.imageAttempts) {
            do {
                let response = try client.get(url, hosts: hosts ?? provider.imageHosts)
                if response.status == 200 {
                    guard let info = ImageInspector.inspect(response.body) else {
                        return .failure("not an image (JPEG, PNG, GIF or WebP)")
                    }
                    return .success((response.body, info))
                }
                let reason = "the photo server answered HTTP \(response.status)"
                guard response.status >= 500 || response.status == 429 || response.status == 408 else { return .failure(reason) }
                let retryAfter = ProviderCall.retryAfter(response.headers["retry-after"])
                // A wait named: honoured, not retried over.
                if retryAfter != nil || response.status == 429 { return .unavailable(reason, retryAfter: retryAfter ?? 60) }
                outcome = .unavailable(reason, retryAfter: nil)
            } catch let error as HTTPClientError {
                switch error {
                case .refused(let reason): return .refused("\(reason) (\(url))")
                case .unsupportedURL, .tooLarge, .tooManyRedirects: return .failure(error.description)
                case .timedOut, .transport: outcome = .unavailable(error.description, retryAfter: nil)
                }
            } catch {
                outcome = .unavailable("\(error)", retryAfter: nil)
            }
            if attempt < settings.imageAttempts { usleep(UInt32(200_000 * attempt)) }
        }
        return outcome
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

extension AlbumDownload.Action {
    /// Done on another thread (the search, the download slots); the rest is database writes, done
    /// by the driver itself.
    var runsElsewhere: Bool {
        switch self {
        case .search, .fetch, .fetchAndPut, .put: return true
        default: return false
        }
    }
}

extension AlbumDownload.End {
    /// For the log, when an album stops with photos pending; nil when the end says it elsewhere.
    var whyStopped: String? {
        switch self {
        case .finished, .released, .superseded, .searchFailed: return nil
        case .leaseLost: return "its job was taken over or cancelled"
        case .databaseDown: return "the database is unavailable"
        case .writeRefused: return "the database refused a write"
        case .storeDown: return "the photo store is unavailable"
        case .imageHostDown(let retryAfter): return retryAfter.map { "the image host asked for a wait of \($0) s" } ?? "the image host is unavailable"
        }
    }
}
