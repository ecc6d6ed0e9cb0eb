import Foundation
import HTTPClient
import Postgres

/// An album's driver: performs what its `AlbumDownload` machine asks (the search and the images on
/// download slots, database writes on the worker's own thread, one at a time) and feeds back
/// what became of each, with its payload. The driver keeps no rules of its own: it asks the machine
/// before each queued action (`permits`) and hands back the ones it did not do.
extension AlbumWorkers {
    /// What the search and the download slots report to an album's driver, with the bytes the
    /// machine does not hold.
    final class Inbox: @unchecked Sendable {
        enum Payload {
            case page(PhotoSearchPage)
            case error(any Error)
            case image([UInt8], ImageInfo)
            case stored(AlbumJobQueue.PhotoResult)
            case storeDown(StoreDown)
            /// The store refused this image for a reason of its own, for the log.
            case unstored(String)
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
    func drive(_ job: AlbumJob, _ start: AlbumDownload, search: AlbumJobQueue.SearchState,
                       urls initial: [String]) -> (AlbumDownload.End, Trouble) {
        var album = start
        let inbox = Inbox()
        inHand(job, inbox)
        defer { inHand(job, nil) }
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
                var event: AlbumDownload.Event?
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
                                                             page: Self.choosePage(totalPages: search.totalPages, shown: search.shownPages))
                                .keepingImages(from: provider.imageHosts, provider: provider.name)
                            inbox.post(.searched(count: result.photos.count), .page(result))
                        } catch {
                            inbox.post(.searchFailed, .error(error))
                        }
                    }
                case .writePlaceholders:
                    guard let result = page else { event = .superseded; break }
                    stage(job, "searched")
                    event = write {
                        try store.clearWaiting(job)
                        guard let placed = try store.storeSearchResult(job, result) else { return .superseded }
                        stage(job, "placeholders written")
                        // By position; a photo the album already holds has no new row (nil), never
                        // a reason to drop the whole answer.
                        return .rowsWritten((0..<result.photos.count).map { placed[$0] })
                    }
                case .fetch(let index), .fetchAndPut(let index):
                    let url = urls[index], andPut = action == .fetchAndPut(index)
                    runOnSlot { [self] in
                        switch fetchImage(url, hosts: hosts) {
                        case .success(let (bytes, info), let retried):
                            let fetched: AlbumDownload.Fetched = retried ? .imageAfterRetry : .image
                            guard andPut else { return inbox.post(.fetched(index, fetched), .image(bytes, info)) }
                            inbox.post(.fetched(index, fetched))
                            storeImage(index, bytes: bytes, info: info, inbox: inbox)
                        case .failure(let reason): inbox.post(.fetched(index, .failed(reason)))
                        case .refused(let reason): inbox.post(.fetched(index, .refused(reason)))
                        case .unavailable(let reason, let retryAfter):
                            inbox.post(.fetched(index, .hostDown(retryAfter: retryAfter, reason: reason)))
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
            let (event, payload) = inbox.next(until: album.deadline()) ?? (.tick, nil)
            switch (event, payload) {
            case (_, .page(let result)?):
                page = result
                urls = result.photos.map(\.imageURL)
            case (_, .error(let error)?):
                switch error {
                case let error as PhotoProviderError: trouble.search = .provider(error)
                case let error as PostgresError where error.meansDatabaseUnavailable:
                    trouble.database = error
                    trouble.search = .databaseDown
                default: trouble.search = .other("\(error)")
                }
            case (.fetched(let index, .image), let payload), (.fetched(let index, .imageAfterRetry), let payload):
                if !firstDownloaded { stage(job, "first image downloaded") }
                firstDownloaded = true
                if case .image(let bytes, let info)? = payload { images[index] = (bytes, info) }
            case (.put(let index, _), .stored(let result)?):
                if stored.isEmpty && !firstWritten { stage(job, "first image stored") }
                stored[index] = result
            case (.put(let index, _), .unstored(let error)?): unstored[index] = error
            case (_, .storeDown(let down)?): trouble.store = trouble.store ?? down
            case (.fetched(_, .hostDown(_, let reason)), _): trouble.imageHost = reason
            case (.fetched(let index, .refused(let reason)), _):
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
    func storeImage(_ index: Int, bytes: [UInt8], info: ImageInfo, inbox: Inbox) {
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
