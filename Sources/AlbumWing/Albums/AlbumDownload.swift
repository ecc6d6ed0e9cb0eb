/// One album's downloads as a state machine, in the manner of PoolStateMachine and
/// ConnectionStateMachine: events in, `now` passed in, actions out. It holds no lock, no clock and
/// does no I/O; `AlbumWorkers.download` is the thin driver that performs the actions (the search,
/// fetches and puts on the download slots, database writes on the worker's own thread) and feeds
/// back what became of them. Every rule of an album's life is here, testable on values
/// (Tests/VirtualTouristTests/AlbumDownloadTests):
///
/// - at most `width` images are fetched or stored at once;
/// - the first image to land is stored and written alone before the others are stored (they wait
///   for it, or `firstGate` at most), so the page's first photo waits for one download;
/// - results are written in batches (`ResultBatch`), one write at a time, and only once the
///   album's rows are known (a fresh album writes its placeholders while its first images land);
/// - the lease is renewed every `renewEvery` whatever the progress; a renewal refused (the job was
///   cancelled or taken over) or none for a whole lease ends the album with nothing more written;
/// - trouble (the database, the photo store, the image host, a refused write) stops new fetches;
///   what is in flight lands, what was stored is written when the trouble allows, and the album
///   ends with its reason — pending photos stay pending for the job's next turn;
/// - one image its host keeps failing fails alone when the host delivers the album's other images:
///   the album waits for the host only when a quarter or more of what it asked for failed so, or
///   came only after failing first (a flaky host is a host in trouble);
/// - a photo whose placeholder was not written (the album already holds that photo) is skipped;
/// - `deadline()` is in the future whenever `handle` returned no action, and nil only while an
///   answer is awaited or once the album ended: the driver never spins
///   (Tests/VirtualTouristTests/AlbumExplorationTests walks random event sequences to check this).
///
/// Events carry their payload and actions carry what they need (the search's answer, each
/// photo's source, an image's bytes, what the store made of them): the machine keeps them with
/// their slot until they are due, so the driver joins nothing. The payloads are type parameters
/// (`AlbumPayloads`): the driver's are the real page, URL, bytes and stored result; the tests'
/// are small values whose identity shows each landed on its own slot.
package struct AlbumDownload<P: AlbumPayloads> {
    package typealias Answer = P.Answer
    package typealias Source = P.Source
    package typealias Image = P.Image
    package typealias Stored = P.Stored

    package typealias Settings = AlbumDownloadSettings

    /// How one image's fetch ended.
    package enum Fetched: Equatable, Sendable {
        /// The image, for the machine to store (nil: fetched by `fetchAndPut`, its own slot stores it).
        case image(Image?)
        /// An image that came only after its host failed it once or more (the quick retries): a
        /// sign of trouble at the host, even though this one arrived.
        case imageAfterRetry(Image?)
        /// This photo fails for good (404, 410, not an image, too large).
        case failed(String)
        /// Outside the provider's image hosts or on an internal address: the photo leaves the album.
        case refused(String)
        /// The image host is down, slow or asks for a wait: the photo stays pending. With a wait
        /// named (429, 503 with Retry-After) no further image is fetched; otherwise the others
        /// still are, and at its end the album waits for the ones left, or fails them alone when
        /// the host delivered the rest (one bad image is not an outage of its host).
        case hostDown(retryAfter: Int?, reason: String = "the photo server is unavailable")
    }

    /// How one image's put into the photo store ended.
    package enum Put: Equatable, Sendable {
        /// In the store: what the batch write records for the photo.
        case stored(Stored)
        /// The store refused this image for a reason of its own (not an outage): the photo fails.
        case failed(String)
        /// The store is down: the photo stays pending and the album waits for the store.
        case storeDown
    }

    package enum Event: Equatable, Sendable {
        /// The search's answer and, by position, where each of its photos is fetched from (its
        /// placeholders are written next, with the answer).
        case searched(Answer, [Source])
        /// The search failed; the driver keeps the error.
        case searchFailed
        /// The placeholders' row ids by position; nil for a photo the album already holds (its
        /// row was not written: the same photo twice in one answer, or already chosen).
        case rowsWritten([Int64?])
        /// A newer collection (or a deleted pin) made the job stale before its rows were written.
        case superseded
        case fetched(Int, Fetched)
        case put(Int, Put)
        /// A batch was written (false: nothing was, the job is no longer ours).
        case batchWritten(Bool)
        /// A drop, a cleared wait or a note of failures went through.
        case written(Action)
        case leaseRenewed(Bool)
        case databaseDown
        /// The database refused a write for a reason other than an outage.
        case writeRefused
        /// The worker is stopping (the process shuts down).
        case stopping
        /// An action asked for earlier that the driver did not do, since `permits` said no by the
        /// time its turn came (the album stopped writing, or ended, meanwhile).
        case withdrawn(Action)
        /// Nothing happened; the time moved on (timers: lease, batch, first-photo gate).
        case tick
    }

    /// A result ready to be written: the row, and what the store made of the image or why it failed.
    package struct Item: Equatable, Sendable {
        package enum Outcome: Equatable, Sendable {
            case stored(Stored)
            case failed(String)
        }
        package let index: Int
        package let rowID: Int64
        package let outcome: Outcome

        package init(index: Int, rowID: Int64, _ outcome: Outcome) {
            self.index = index
            self.rowID = rowID
            self.outcome = outcome
        }
        package init(index: Int, rowID: Int64, stored: Stored) { self.init(index: index, rowID: rowID, .stored(stored)) }
        package init(index: Int, rowID: Int64, failure: String) { self.init(index: index, rowID: rowID, .failed(failure)) }
    }

    package enum Action: Equatable, Sendable {
        case search
        case writePlaceholders(Answer)
        case fetch(Int, Source)
        /// Fetch, and store it on the same slot if it is an image (once the first photo is
        /// written): the bytes never wait for a slot of their own. Reported as `fetched`, then `put`.
        case fetchAndPut(Int, Source)
        case put(Int, Image)
        case writeBatch([Item])
        /// A refused image's row leaves the album.
        case drop(Int64)
        /// The album no longer waits (a resumed album stored an image again).
        case clearWaiting
        /// This photo's host failed it, and no other, in this download (counted across downloads).
        case noteHostFailures([Int64])
        case renewLease
        case end(End)
    }

    package typealias End = AlbumEnd

    package enum Phase: Equatable {
        case searching
        case running
        /// No new fetches; waits for what is in flight, then ends.
        case ending(End)
        case ended(End)
    }

    private enum Slot: Equatable {
        case waiting
        case fetching
        /// Landed, waiting for the first photo to be written before it is stored.
        case held
        case putting
        /// Fetched and stored, or failed: its result waits for its row or its batch.
        case landed
        case written
        /// Not fetched (the album ended first): stays pending.
        case left
    }

    package let settings: Settings
    private(set) var phase: Phase
    private var slots: [Slot] = []
    /// Where each slot's photo is fetched from.
    private var sources: [Source] = []
    /// Images landed and held for the first photo's gate, by slot.
    private var images: [Int: Image] = [:]
    private var rowIDs: [Int64?]?
    /// Results whose rows are not known yet, in landing order.
    private var unplaced: [(index: Int, outcome: Item.Outcome)] = []
    /// Refused images whose rows are not known yet.
    private var undropped: [Int] = []
    private var batch: ResultBatch<Item>
    private var writing = false
    /// The rows of the batch being written: left pending again if the write does not go through.
    private var inWrite: [Int] = []
    private var renewing = false
    private var lastRenewed: ContinuousClock.Instant
    /// When the first image landed (the others wait for its row, or `firstGate`).
    private var firstLanded: ContinuousClock.Instant?
    private var firstWritten = false
    private var clearsWaiting: Bool
    /// Images fetched by `fetchAndPut`: their slot stores them without being asked.
    private var storedInline: Set<Int> = []
    /// An image host answered as if down: the longest wait it named (0: none).
    private var hostDown: Int?
    /// Photos left pending because their host answered as if down (no wait named), with its words.
    private var hostDownSlots: [(index: Int, reason: String)] = []
    /// Images the host delivered (or answered for once and for all, as a 404) in this run, and
    /// how many of those only after it failed them first.
    private var delivered = 0
    private var troubled = 0
    /// Photos of the album not pending when it resumed (delivered in earlier downloads), and how
    /// many downloads each pending one's host already failed.
    private var held = 0
    private var failedBefore: [Int] = []
    /// Drops, cleared waits and failure notes asked for and not answered yet: the end waits for them.
    private var sideWrites = 0
    private var failuresNoted = false

    /// A fresh collection: search first. `now` is when the job was claimed (the lease's start).
    package init(searching settings: Settings, now: ContinuousClock.Instant) {
        self.settings = settings
        phase = .searching
        lastRenewed = now
        clearsWaiting = false
        batch = ResultBatch(size: settings.batchSize, maxAge: settings.batchAge, now: now, firstAtOnce: true)
    }

    /// An album whose rows exist (a resumed job, chosen photos): download what is pending.
    /// `clearsWaiting`: the album shows a wait to clear once an image is stored again.
    /// `held`: photos of the album not pending (delivered before); `failedBefore`: per pending
    /// photo, the downloads its host already failed it in.
    /// `sources`: where each row's photo is fetched from, by position.
    package init(resuming rowIDs: [Int64], sources: [Source], settings: Settings, clearsWaiting: Bool, held: Int = 0,
         failedBefore: [Int] = [], now: ContinuousClock.Instant) {
        precondition(sources.count == rowIDs.count, "a source for every row")
        self.init(searching: settings, now: now)
        self.rowIDs = rowIDs.map { $0 }
        self.sources = sources
        self.held = held
        self.failedBefore = failedBefore
        self.clearsWaiting = clearsWaiting
        slots = Array(repeating: .waiting, count: rowIDs.count)
        phase = .running
    }

    /// The first actions.
    package mutating func start(now: ContinuousClock.Instant) -> [Action] {
        phase == .searching ? [.search] : advance(now: now)
    }

    /// When the driver must call `handle(.tick, now:)` if no other event comes first; nil: only an
    /// answer to an action can move the album on (it ended, or it writes nothing more and waits for
    /// what is in flight). Never a time already past on return from `handle` with no actions: a
    /// renewal awaited times out at the lease, a batch only counts while one can be written.
    package func deadline() -> ContinuousClock.Instant? {
        guard mayWrite else { return nil }
        var times = [lastRenewed + (renewing ? settings.lease : settings.renewEvery)]
        if !writing, rowIDs != nil, let oldest = batch.oldest { times.append(oldest + settings.batchAge) }
        if let first = firstLanded, !firstWritten, slots.contains(.held) { times.append(first + settings.firstGate) }
        return times.min()
    }

    /// Whether an action asked for earlier may still be done now: writes only while the album may
    /// write, nothing once it ended. The driver asks before each; one it does not do goes back as
    /// `withdrawn`, so nothing is written after an end whatever the order of the driver's queue.
    package func permits(_ action: Action) -> Bool {
        switch action {
        case .end: return true
        case .search, .fetch, .fetchAndPut, .put:
            if case .ended = phase { return false }
            return true
        case .writePlaceholders, .writeBatch, .drop, .clearWaiting, .noteHostFailures, .renewLease:
            return mayWrite
        }
    }

    /// A renewal or a batch write was asked for and not answered yet (the tests' invariants).
    package var isRenewing: Bool { renewing }
    package var isWriting: Bool { writing }

    package mutating func handle(_ event: Event, now: ContinuousClock.Instant) -> [Action] {
        if case .ended = phase { return [] }
        switch event {
        case .searched(let answer, let sources):
            guard phase == .searching else { break }
            slots = Array(repeating: .waiting, count: sources.count)
            self.sources = sources
            phase = .running
            return [.writePlaceholders(answer)] + advance(now: now)
        case .searchFailed:
            stop(.searchFailed)
        case .superseded:
            guard rowIDs == nil, phase != .searching else { break }
            stop(.superseded)
        case .rowsWritten(let ids):
            guard rowIDs == nil, phase != .searching else { break }
            guard ids.count == slots.count else { stop(.writeRefused); break }
            rowIDs = ids
            // A photo without a row is not the album's to write: skipped wherever it is.
            for index in slots.indices where ids[index] == nil && [.waiting, .held].contains(slots[index]) {
                slots[index] = .written
                images[index] = nil
            }
            for (index, outcome) in unplaced { landed(index, outcome, now: now) }
            unplaced = []
            guard mayWrite else { break }
            let drops = undropped.compactMap { ids[$0].map(Action.drop) }
            sideWrites += drops.count
            for index in undropped { slots[index] = .written }
            undropped = []
            return drops + advance(now: now)
        case .fetched(let index, let fetched):
            guard slots.indices.contains(index), slots[index] == .fetching else { break }
            switch fetched {
            case .image(let image), .imageAfterRetry(let image):
                delivered += 1
                if case .imageAfterRetry = fetched { troubled += 1 }
                if storedInline.contains(index) {
                    slots[index] = .putting
                    break
                }
                // An image not handed over cannot be stored: it stays pending (never lost as failed).
                guard let image else { slots[index] = .left; break }
                if firstLanded == nil && phase == .running {
                    firstLanded = now
                    slots[index] = .putting
                    return [.put(index, image)] + advance(now: now)
                }
                slots[index] = .held  // `advance` stores it, or leaves it pending
                images[index] = image
            case .failed(let reason):
                delivered += 1
                landed(index, .failed(reason), now: now)
            case .refused:
                if let rowIDs, mayWrite {
                    slots[index] = .written
                    guard let rowID = rowIDs[index] else { break }
                    sideWrites += 1  // the end waits for it: a refused photo never stays pending
                    return [.drop(rowID)] + advance(now: now)
                }
                slots[index] = .landed
                undropped.append(index)
            case .hostDown(let retryAfter, let reason):
                slots[index] = .left
                hostDownSlots.append((index, reason))
                // A wait named for an image its host has failed download after download, while the
                // album holds others from it, speaks for that image, not for the host.
                if let retryAfter, !failsAlone(index) {
                    hostDown = max(hostDown ?? 0, retryAfter)
                    stop(.imageHostDown(retryAfter: retryAfter))
                } else {
                    hostDown = hostDown ?? 0  // down, no wait named
                }
            }
        case .put(let index, let put):
            guard slots.indices.contains(index), slots[index] == .putting else { break }
            switch put {
            case .stored(let stored):
                landed(index, .stored(stored), now: now)
                if clearsWaiting {
                    clearsWaiting = false
                    sideWrites += 1
                    return [.clearWaiting] + advance(now: now)
                }
            case .failed(let reason):
                landed(index, .failed(reason), now: now)
            case .storeDown:
                slots[index] = .left
                stop(.storeDown)
            }
        case .batchWritten(let written):
            // "Not ours" always counts; a success answering nothing asked (a late one) does not.
            guard writing || !written else { break }
            writing = false
            if written {
                firstWritten = true
                inWrite = []
            } else {
                unwrite()
                stop(.leaseLost)
            }
        case .leaseRenewed(let ours):
            guard renewing || !ours else { break }  // a late "held" proves nothing: ignored
            renewing = false
            if ours { lastRenewed = now } else { stop(.leaseLost) }
        case .written(let action):
            switch action {
            case .drop, .clearWaiting, .noteHostFailures: sideWrites = max(0, sideWrites - 1)
            default: break
            }
        case .databaseDown:
            if writing { unwrite() }
            writing = false
            renewing = false
            sideWrites = 0
            stop(.databaseDown)
        case .writeRefused:
            // Whichever write it answered (a batch, a renewal, a drop): none is awaited any more.
            if writing { unwrite() }
            writing = false
            renewing = false
            sideWrites = 0
            stop(.writeRefused)
        case .withdrawn(let action):
            switch action {
            case .writeBatch:
                unwrite()
                writing = false
            case .renewLease: renewing = false
            case .drop, .clearWaiting, .noteHostFailures: sideWrites = max(0, sideWrites - 1)
            case .fetch(let index, _), .fetchAndPut(let index, _), .put(let index, _):
                if slots.indices.contains(index), [.fetching, .putting, .held].contains(slots[index]) {
                    slots[index] = .left
                    images[index] = nil
                }
            case .search, .writePlaceholders, .end: break
            }
        case .stopping:
            stop(.released)
        case .tick:
            break
        }
        return advance(now: now)
    }

    /// Photos that were not written (still pending), for the tests and the log.
    package var unwritten: Int { slots.filter { $0 != .written }.count }

    // MARK: Rules

    private mutating func landed(_ index: Int, _ outcome: Item.Outcome, now: ContinuousClock.Instant) {
        slots[index] = .landed
        if let rowIDs {
            // No row: nothing to write (a stored blob is then the collector's).
            guard let rowID = rowIDs[index] else { slots[index] = .written; return }
            add(Item(index: index, rowID: rowID, outcome), now: now)
        } else {
            unplaced.append((index, outcome))
        }
    }

    private mutating func unwrite() {
        for index in inWrite { slots[index] = .left }
        inWrite = []
    }

    private mutating func add(_ item: Item, now: ContinuousClock.Instant) {
        _ = batch.add(item, now: now)
    }

    /// The first trouble decides how the album ends, but a lost lease outranks everything (nothing
    /// more may be written), and the database outranks a wait for the store or the image host.
    private mutating func stop(_ end: End) {
        guard case .ending(let current) = phase else {
            if phase == .searching || phase == .running { phase = .ending(end) }
            return
        }
        if current == .leaseLost { return }
        if end == .leaseLost || ([.databaseDown, .writeRefused, .released].contains(end) && current.waits) { phase = .ending(end) }
    }

    /// Whether results may still be written: not once the job may be someone else's, the
    /// database is away, or the album is stale.
    private var mayWrite: Bool {
        switch phase {
        case .searching, .running: return true
        case .ending(let end): return end.waits
        case .ended: return false
        }
    }

    /// An image its host failed alone in `imageRuns` downloads, this one included, while the album
    /// holds (or got in this download) other photos: it fails alone.
    private func failsAlone(_ index: Int) -> Bool {
        let before = failedBefore.indices.contains(index) ? failedBefore[index] : 0
        return before + 1 >= settings.imageRuns && held + delivered > 0 && hostDownSlots.count <= 1
    }

    private var inFlight: Int {
        slots.filter { $0 == .fetching || $0 == .putting || $0 == .held }.count
    }

    /// Everything that can be done now: the lease, new fetches, held images, a batch, the end.
    private mutating func advance(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        // A whole lease without a renewal: another worker may hold the job by now, so no result
        // may be written. (An album that writes nothing more ends with its own reason: what the
        // worker does next names the holder, so it changes nothing if the job was taken over.)
        if mayWrite, now - lastRenewed >= settings.lease { stop(.leaseLost) }
        if !renewing, now - lastRenewed >= settings.renewEvery, mayWrite {
            renewing = true
            actions.append(.renewLease)
        }
        let ending: End?
        switch phase {
        case .ending(let end): ending = end
        case .ended: return actions
        case .searching: return actions
        case .running: ending = nil
        }
        // Held images go once the first photo is written, or the gate has waited long enough.
        let gateOpen = firstWritten || (firstLanded.map { now - $0 >= settings.firstGate } ?? false) || ending != nil
        if gateOpen {
            for index in slots.indices where slots[index] == .held {
                let image = images.removeValue(forKey: index)
                if !mayWrite {
                    slots[index] = .left
                } else if let image {
                    slots[index] = .putting
                    actions.append(.put(index, image))
                }
            }
        }
        if ending == nil {
            var next = slots.firstIndex(of: .waiting)
            while let index = next, inFlight < settings.width {
                slots[index] = .fetching
                // With no gate (other albums share the slots) nothing is held back: the slot that
                // fetches an image stores it, so no image waits in memory for this album's driver
                // while the slots work for other albums (peak RSS, docs/performance.md "Albums").
                if firstWritten || settings.firstGate == .zero {
                    storedInline.insert(index)
                    actions.append(.fetchAndPut(index, sources[index]))
                } else {
                    actions.append(.fetch(index, sources[index]))
                }
                next = slots[index...].firstIndex(of: .waiting)
            }
        }
        // Everything else done, and the host delivered most of the album: the images it kept
        // failing fail alone (after their tries) rather than hold the album for the host; so does
        // one it failed in `imageRuns` downloads while the album holds others from it.
        if ending == nil, rowIDs != nil, !hostDownSlots.isEmpty, inFlight == 0, !slots.contains(.waiting) {
            let hostFine = (hostDownSlots.count + troubled) * 4 < hostDownSlots.count + delivered
            let alone = hostDownSlots.filter { hostFine || failsAlone($0.index) }
            for (index, reason) in alone { landed(index, .failed(reason), now: now) }
            hostDownSlots.removeAll { slot in alone.contains { $0.index == slot.index } }
            if hostDownSlots.isEmpty { hostDown = nil }
        }
        // A batch: only one write at a time, only with rows known, never for a job no longer ours.
        if mayWrite, !writing, rowIDs != nil {
            let rest = slots.allSatisfy { $0 == .landed || $0 == .written || $0 == .left } || (ending != nil && inFlight == 0)
            if let items = batch.take(now: now, rest: rest) {
                writing = true
                for item in items { slots[item.index] = .written }
                inWrite = items.map(\.index)
                actions.append(.writeBatch(items))
            }
        }
        // The end: nothing in flight, nothing being written or renewed, nothing left to write.
        guard inFlight == 0 || ending == .released, !writing, !renewing, sideWrites == 0 || !mayWrite else { return actions }
        // The one image the host failed, counted on its row before the album waits for the host.
        if mayWrite, !failuresNoted, hostDown != nil, let rowIDs, batch.waiting.isEmpty,
           ending != nil || slots.allSatisfy({ $0 == .written || $0 == .left }) {
            failuresNoted = true
            let failed = hostDownSlots.compactMap { rowIDs[$0.index] }
            if failed.count == 1 {
                sideWrites += 1
                actions.append(.noteHostFailures(failed))
                return actions
            }
        }
        if let ending {
            if mayWrite && rowIDs != nil && !batch.waiting.isEmpty { return actions }
            for index in slots.indices where slots[index] != .written { slots[index] = .left }
            images = [:]
            phase = .ended(ending)
            actions.append(.end(ending))
        } else if rowIDs != nil, slots.allSatisfy({ $0 == .written || $0 == .left }), batch.waiting.isEmpty {
            let end: End = hostDown.map { .imageHostDown(retryAfter: $0 > 0 ? $0 : nil) } ?? .finished
            phase = .ended(end)
            actions.append(.end(end))
        }
        return actions
    }

}

/// The payloads an album's events and actions carry (see `AlbumDownload`).
package protocol AlbumPayloads {
    /// The search's answer, written as the album's placeholders.
    associatedtype Answer: Equatable & Sendable
    /// Where one photo is fetched from.
    associatedtype Source: Equatable & Sendable
    /// One fetched image, until it is stored.
    associatedtype Image: Equatable & Sendable
    /// What the store made of one image, for its row.
    associatedtype Stored: Equatable & Sendable
}

/// How an album downloads (`AlbumDownload`): its width, batches, lease and gates.
package struct AlbumDownloadSettings: Equatable {
    package var width = 30
    package var batchSize = 6
    package var batchAge: Duration = .milliseconds(250)
    package var renewEvery: Duration = .seconds(20)
    package var lease: Duration = .seconds(60)
    package var firstGate: Duration = .seconds(1)
    /// An image its host failed, and failed alone, in this many downloads of the album fails
    /// alone, once the album holds other photos from the host (one bad image is not an outage;
    /// a host failing some images now and others next time is a host in trouble).
    package var imageRuns = 3
}

/// How an album's download ended (`AlbumDownload`), for the job's next step (`AlbumJobPolicy`).
package enum AlbumEnd: Equatable, Sendable {
    /// Every photo ready or failed: the album is complete.
    case finished
    /// A newer collection (or a deleted pin) made the job stale.
    case superseded
    /// The job is no longer ours: nothing more is written, nothing finished.
    case leaseLost
    case databaseDown
    case writeRefused
    case searchFailed
    case storeDown
    case imageHostDown(retryAfter: Int?)
    /// Released for another worker (the process stops): at once, what is in flight abandoned
    /// (pending, downloaded again by the next holder).
    case released

    /// An end that still writes what was stored before it.
    package var waits: Bool {
        switch self {
        case .storeDown, .imageHostDown, .finished: return true
        default: return false
        }
    }
}
