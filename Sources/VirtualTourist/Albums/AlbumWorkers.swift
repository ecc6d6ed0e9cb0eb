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
        public var maxAttempts = 5
        public var leaseSeconds = 60
        /// How often idle workers look for due jobs without being woken.
        public var sweepSeconds: Double = 5
        /// Retries of one image before it is marked failed.
        public var imageAttempts = 3
        public var retryBaseSeconds = 2
        public init() {}
    }

    let store: AlbumStore
    let provider: any PhotoProvider
    let client: HTTPClient
    let settings: Settings
    let name: String
    let logger = Logger(label: "albums")
    private let wake = NSCondition()
    private let state = Mutex((running: false, wakeups: 0, active: 0))
    private var threads: [Thread] = []

    let metrics: Metrics?

    public init(store: AlbumStore, provider: any PhotoProvider, client: HTTPClient, settings: Settings = Settings(),
                metrics: Metrics? = nil) {
        self.metrics = metrics
        self.store = store
        self.provider = provider
        self.client = client
        self.settings = settings
        name = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(UUID().uuidString.prefix(6))"
    }

    public func start() {
        state.withLock { $0.running = true }
        for index in 0..<settings.workers {
            let thread = Thread { [self] in run(index) }
            thread.name = "album-worker-\(index)"
            thread.start()
            threads.append(thread)
        }
    }

    /// Stops claiming; a job in hand finishes its current image and is left for the lease to hand on.
    public func stop() {
        state.withLock { $0.running = false }
        notify()
    }

    /// A job was queued (LISTEN album_jobs): wake a sleeping worker.
    public func notify() {
        wake.lock()
        state.withLock { $0.wakeups += 1 }
        wake.broadcast()
        wake.unlock()
    }

    /// Jobs being worked on right now (metrics, tests).
    public var activeJobs: Int { state.withLock { $0.active } }

    private var running: Bool { state.withLock { $0.running } }

    private func run(_ index: Int) {
        let worker = "\(name)/\(index)"
        while running {
            let seen = state.withLock { $0.wakeups }
            var job: AlbumJob?
            do {
                job = try store.claimJob(worker: worker, leaseSeconds: settings.leaseSeconds)
            } catch {
                logger.warning("claiming a job failed: \(error)")
            }
            if let job {
                state.withLock { $0.active += 1 }
                process(job, worker: worker)
                state.withLock { $0.active -= 1 }
                continue
            }
            wake.lock()
            if state.withLock({ $0.wakeups == seen && $0.running }) {
                _ = wake.wait(until: Date(timeIntervalSinceNow: settings.sweepSeconds))
            }
            wake.unlock()
        }
    }

    func process(_ job: AlbumJob, worker: String) {
        do {
            guard let search = try store.searchState(job), search.current else {
                try store.cancel(job)  // a newer collection (or a deleted pin) superseded it
                return
            }
            // A job taken over after a crash finds its placeholders already written: it only
            // downloads what is still pending, so nothing is duplicated.
            if job.kind == "collection" && search.placeholders == 0 {
                let page = Self.choosePage(totalPages: search.totalPages, shown: search.shownPages)
                let result = try provider.search(lat: search.lat, lon: search.lon, page: page)
                try store.clearWaiting(job)
                guard try store.storeSearchResult(job, result) else { try store.cancel(job); return }
                if result.photos.isEmpty {
                    try store.finish(job)
                    return
                }
            }
            try download(job, worker: worker)
            try store.finish(job)
            logger.info("album of pin \(job.pinID) complete")
        } catch let error as PhotoProviderError {
            providerTrouble(job, error)
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
                try store.fail(job, reason: Self.sentence(reason))
            }
        } catch {
            logger.error("recording the failure of job \(job.id) failed: \(error)")
        }
    }

    /// Downloads the pending placeholders, several at once. Each download blocks in curl, so
    /// they run on threads of their own: libdispatch's global queues do not grow for threads
    /// blocked in system calls and would run only a few at a time.
    private func download(_ job: AlbumJob, worker: String) throws {
        let pending = try store.pendingPhotos(job)
        let next = Mutex(0)
        let stale = Mutex(false)
        let group = DispatchGroup()
        let width = min(settings.downloadsPerAlbum, provider.downloadConcurrency ?? .max)
        for _ in 0..<min(pending.count, width) {
            group.enter()
            let thread = Thread { [self] in
                defer { group.leave() }
                while !stale.withLock({ $0 }) {
                    let index = next.withLock { value -> Int in value += 1; return value - 1 }
                    guard index < pending.count else { return }
                    let photo = pending[index]
                    do {
                        switch fetchImage(photo.url) {
                        case .success(let (bytes, info)):
                            metrics?.download(succeeded: true)
                            try store.storeImage(photoID: photo.id, job: job, bytes: bytes, info: info)
                        case .failure(let reason):
                            metrics?.download(succeeded: false)
                            try store.failPhoto(photoID: photo.id, job: job, reason: reason)
                        }
                        if try !store.renewLease(job, worker: worker, leaseSeconds: settings.leaseSeconds) {
                            stale.withLock { $0 = true }  // cancelled or taken over: stop spending effort
                        }
                    } catch {
                        logger.warning("storing photo \(photo.id) failed: \(error)")
                    }
                }
            }
            thread.name = "album-download"
            thread.stackSize = 1024 * 1024
            thread.start()
        }
        group.wait()
    }

    enum Fetch {
        case success(([UInt8], ImageInfo))
        case failure(String)
    }

    /// One image, retried on transient failures; never trusts the Content-Type.
    func fetchImage(_ url: String) -> Fetch {
        var lastReason = "not downloaded"
        for attempt in 1...settings.imageAttempts {
            do {
                let response = try client.get(url)
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

    /// The first collection shows page 1; New Collection a random page not yet shown (all pages
    /// again once every one has been seen, but never the current one twice in a row).
    static func choosePage(totalPages: Int?, shown: [Int]) -> Int {
        guard let total = totalPages, total > 1 else { return 1 }
        let unseen = Set(1...total).subtracting(shown)
        if let page = unseen.randomElement() { return page }
        return Set(1...total).subtracting([shown.last ?? 0]).randomElement() ?? 1
    }

    static func sentence(_ reason: String) -> String {
        guard let first = reason.first else { return reason }
        return first.uppercased() + reason.dropFirst() + (reason.hasSuffix(".") ? "" : ".")
    }
}
