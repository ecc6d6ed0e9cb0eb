import Foundation
import Waiting
import HTTPClient
import Postgres

/// An album's driver: performs what its `AlbumDownload` machine asks (the search and the images on
/// download slots, database writes on the worker's own thread, one at a time) and feeds back
/// what became of each. Events carry their payload (the answer, the image, what the store made of
/// it) and actions carry what they need, so the driver joins nothing; it keeps no rules of its
/// own either: it asks the machine before each queued action (`permits`) and hands back the ones it
/// did not do.


extension AlbumWorkers {
    package typealias Download = AlbumDownload<Payloads>

    /// What an album's events and actions carry in the running server.
    package enum Payloads: AlbumPayloads {
        package typealias Answer = PhotoSearchPage
        package typealias Source = String
        package typealias Image = FetchedImage
        package typealias Stored = StoredImage
    }

    package struct FetchedImage: Equatable, Sendable {
        /// Where it came from (the photo's `remote_url`), for the log.
        package let url: String
        package let bytes: [UInt8]
        package let info: ImageInfo
    }

    /// An image in the photo store: what its row records.
    package struct StoredImage: Equatable, Sendable {
        package let hash: String
        package let byteSize: Int
        package let info: ImageInfo
        package let thumbnails: [Int: String]
    }

    /// What the search and the download slots report to an album's driver; beside an event, the
    /// trouble behind it, for the job's next step (`Trouble`), which the machine has no use for.
    package final class Inbox: Sendable {
        package enum Trouble {
            case error(any Error)
            case storeDown(StoreDown)
        }
        private let events = Waitable<[(Download.Event, Trouble?)]>([])

        package func post(_ event: Download.Event, _ trouble: Trouble? = nil) {
            events.change(wake: .one) { $0.append((event, trouble)) }
        }

        /// The next event, or nil at `deadline` (with none, after a minute).
        package func next(until deadline: ContinuousClock.Instant?) -> (Download.Event, Trouble?)? {
            let left = deadline.map { ContinuousClock.now.duration(to: $0) } ?? .seconds(60)
            return events.wait(for: { $0.isEmpty ? nil : $0.removeFirst() }, timeout: left)
        }
    }

    /// Performs the album's actions until it ends: the search and the images on other threads
    /// (their outcomes come back through the inbox), database writes here, one at a time.
    package func drive(_ job: AlbumJob, _ start: Download, search: AlbumJobQueue.SearchState) -> (Download.End, Trouble) {
        var album = start
        let inbox = Inbox()
        inHand(job, inbox)
        defer { inHand(job, nil) }
        if !running { inbox.post(.stopping) }
        var trouble = Trouble()
        let hosts = provider.imageHosts
        var actions = album.start(now: .now)
        var firstWritten = false, firstDownloaded = false, firstStored = false

        /// A database write: its outcome as the machine's event.
        func write(_ body: () throws -> Download.Event) -> Download.Event {
            do {
                return try body()
            } catch let error as PostgresError where error.meansDatabaseUnavailable {
                trouble.database = error
                return .databaseDown
            } catch is LeaseLost {
                return .batchWritten(false)
            } catch {
                // Troubleshooting: album of pin N: ERROR
                logger.warning("album of pin \(job.pinID): \(error)")
                trouble.refused = "\(error)"
                return .writeRefused
            }
        }

        while true {
            // Threads first, so the images download while the placeholders are written.
            actions = actions.filter(\.runsElsewhere) + actions.filter { !$0.runsElsewhere }
            var queue = actions[...]
            actions = []
            while let action = queue.popFirst() {
                var event: Download.Event?
                // Asked for before the album's last event: done only if that still holds.
                guard album.permits(action) else {
                    queue.append(contentsOf: album.handle(.withdrawn(action), now: .now))
                    continue
                }
                switch action {
                case .search:
                    // On a download slot: a thread that exists anyway, not a new one per search.
                    runOnSlot { [provider] in
                        do {
                            let result = try provider.search(lat: search.lat, lon: search.lon,
                                                             page: Self.choosePage(totalPages: search.totalPages, shown: search.shownPages),
                                                             era: search.era)
                                .keepingImages(from: provider.imageHosts, provider: provider.name)
                            inbox.post(.searched(result, result.photos.map(\.imageURL)))
                        } catch {
                            inbox.post(.searchFailed, .error(error))
                        }
                    }
                case .writePlaceholders(let result):
                    stage(job, "searched")
                    event = write {
                        try store.clearWaiting(job)
                        guard let placed = try store.storeSearchResult(job, result) else { return .superseded }
                        stage(job, "placeholders written")
                        // By position; a photo the album already holds has no new row (nil), never
                        // a reason to drop the whole answer.
                        return .rowsWritten((0..<result.photos.count).map { placed[$0] })
                    }
                case .fetch(let index, let url), .fetchAndPut(let index, let url):
                    let andPut = action == .fetchAndPut(index, url)
                    runOnSlot { [self] in
                        switch fetchImage(url, hosts: hosts) {
                        case .success(let (bytes, info), let retried):
                            // Stored here (`andPut`): the machine is told it landed, not handed the bytes.
                            let image = FetchedImage(url: url, bytes: bytes, info: info), handed = andPut ? nil : image
                            inbox.post(.fetched(index, retried ? .imageAfterRetry(handed) : .image(handed)))
                            if andPut { storeImage(index, image, job: job, inbox: inbox) }
                        case .failure(let reason): inbox.post(.fetched(index, .failed(reason)))
                        case .refused(let reason): inbox.post(.fetched(index, .refused(reason)))
                        case .unavailable(let reason, let retryAfter):
                            inbox.post(.fetched(index, .hostDown(retryAfter: retryAfter, reason: reason)))
                        }
                    }
                case .put(let index, let image):
                    runOnSlot(first: true) { [self] in storeImage(index, image, job: job, inbox: inbox) }
                case .writeBatch(let items):
                    event = write {
                        let results = items.map { item -> AlbumJobQueue.PhotoResult in
                            switch item.outcome {
                            case .stored(let image):
                                return .stored(item.rowID, hash: image.hash, byteSize: image.byteSize, info: image.info,
                                               thumbnails: image.thumbnails)
                            case .failed(let reason): return .failed(item.rowID, reason: reason)
                            }
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
                    event = write { try store.dropPhoto(photoID: rowID, job: job); return .written(action) }
                case .clearWaiting:
                    event = write { try store.clearWaiting(job); return .written(action) }
                case .noteHostFailures(let rowIDs):
                    event = write { try store.noteHostFailures(rowIDs, job: job); return .written(action) }
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
            let (event, reported) = inbox.next(until: album.deadline()) ?? (.tick, nil)
            switch (event, reported) {
            case (_, .error(let error)?):
                switch error {
                case let error as PhotoProviderError: trouble.search = .provider(error)
                case let error as PostgresError where error.meansDatabaseUnavailable:
                    trouble.database = error
                    trouble.search = .databaseDown
                default: trouble.search = .other("\(error)")
                }
            case (.fetched(_, .image), _), (.fetched(_, .imageAfterRetry), _):
                if !firstDownloaded { stage(job, "first image downloaded") }
                firstDownloaded = true
            case (.put(_, .stored), _):
                if !firstStored && !firstWritten { stage(job, "first image stored") }
                firstStored = true
            case (_, .storeDown(let down)?): trouble.store = trouble.store ?? down
            case (.fetched(_, .hostDown(_, let reason)), _): trouble.imageHost = reason
            case (.fetched(let index, .refused(let reason)), _):
                // Never shown as a broken tile: the photo leaves the album, the log says why.
                // Troubleshooting: image I dropped
                logger.warning("album of pin \(job.pinID): image \(index) dropped, \(reason)")
            default: break
            }
            actions = album.handle(event, now: .now)
        }
    }

    /// Puts one image (and its thumbnails) into the photo store, on the slot it runs on, and
    /// reports how that went. The blob first, then the row that names it (written later by the
    /// driver): a row never names a blob that is not there.
    package func storeImage(_ index: Int, _ image: FetchedImage, job: AlbumJob, inbox: Inbox) {
        let putStarted = ContinuousClock.now
        do {
            let hash = try store.photos.put(image.bytes)
            let thumbnails = try self.thumbnails.thumbnails(of: hash, bytes: image.bytes, store: store.photos)
            storeAnswered(putStarted: putStarted)
            inbox.post(.put(index, .stored(StoredImage(hash: hash, byteSize: image.bytes.count, info: image.info, thumbnails: thumbnails))))
        } catch let error as PhotoStoreError where error.outage {
            inbox.post(.put(index, .storeDown), .storeDown(StoreDown(error: error, putStarted: putStarted)))
        } catch {
            // The photo fails with a reason a person can read; the log keeps the store's own words.
            // Troubleshooting: not stored:
            logger.error("album of pin \(job.pinID): photo \(image.url) not stored: \(error)")
            inbox.post(.put(index, .failed("The photo could not be stored.")))
        }
    }

    /// Runs `task` on a download slot (`first`: ahead of those waiting); once the slots have
    /// stopped (shutting down), here.
    private func runOnSlot(first: Bool = false, _ task: @escaping @Sendable () -> Void) {
        if !downloads.submit(first: first, task) { task() }
    }

}

extension AlbumDownload.Action {
    /// Done on another thread (the search, the download slots); the rest is database writes, done
    /// by the driver itself.
    package var runsElsewhere: Bool {
        switch self {
        case .search, .fetch, .fetchAndPut, .put: return true
        default: return false
        }
    }
}

extension AlbumEnd {
    /// For the log, when an album stops with photos pending; nil when the end says it elsewhere.
    package var whyStopped: String? {
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
