import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The album's state machine on values: no database, no threads, no clock but the one passed in.
/// The scenarios walk an album's life; `everyEventInEveryState` feeds each event to the machine in
/// each of its states and checks the rules that must hold whatever happens.
@Suite struct AlbumDownloadTests {
    typealias Machine = AlbumDownload<TestPayloads>
    let t0 = ContinuousClock.now
    var settings: Machine.Settings {
        var settings = Machine.Settings()
        settings.width = 3
        settings.batchSize = 2
        settings.batchAge = .seconds(10)
        settings.renewEvery = .seconds(20)
        settings.lease = .seconds(60)
        settings.firstGate = .seconds(1)
        return settings
    }
    let rows: [Int64] = [100, 101, 102, 103, 104]

    /// Fetches asked for, with or without the store on the same slot.
    func fetches(_ actions: [Machine.Action]) -> [Int] {
        actions.compactMap {
            switch $0 {
            case .fetch(let index, _), .fetchAndPut(let index, _): return index
            default: return nil
            }
        }
    }
    func puts(_ actions: [Machine.Action]) -> [Int] {
        actions.compactMap { if case .put(let index, _) = $0 { return index } else { return nil } }
    }
    func batches(_ actions: [Machine.Action]) -> [[Machine.Item]] {
        actions.compactMap { if case .writeBatch(let items) = $0 { return items } else { return nil } }
    }
    func ends(_ actions: [Machine.Action]) -> [Machine.End] {
        actions.compactMap { if case .end(let end) = $0 { return end } else { return nil } }
    }

    /// A fresh album of five photos, searched and its rows written: fetches 0, 1, 2 in flight.
    func searched(now: ContinuousClock.Instant? = nil) -> Machine {
        var album = Machine(searching: settings, now: t0)
        #expect(album.start(now: t0) == [.search])
        let actions = album.handle(.searched("answer", photoSources(5)), now: t0)
        #expect(actions.first == .writePlaceholders("answer"), "the rows are written first")
        #expect(fetches(actions) == [0, 1, 2], "at most `width` images at once, while the rows are written")
        #expect(album.handle(.rowsWritten(rows), now: t0).isEmpty)
        return album
    }

    @Test func anAlbumFromSearchToFinish() {
        var album = searched()
        var actions = album.handle(.fetched(0, .image(0)), now: t0)
        #expect(puts(actions) == [0], "the first image is stored at once")
        #expect(fetches(actions) == [], "a stored image still holds its slot")
        actions = album.handle(.put(0, .stored(0)), now: t0)
        #expect(batches(actions) == [[.init(index: 0, rowID: 100, stored: 0)]], "the first photo is written alone, at once")
        #expect(fetches(actions) == [3])
        actions = album.handle(.fetched(1, .failed("HTTP 404")), now: t0)
        #expect(batches(actions).isEmpty, "one write at a time")
        #expect(fetches(actions) == [4], "a failed image frees its slot")
        actions = album.handle(.batchWritten(true), now: t0)
        #expect(batches(actions).isEmpty, "one result waits for its batch")
        #expect(album.handle(.fetched(2, .image(2)), now: t0) == [.put(2, 2)], "after the first photo is written, no gate")
        actions = album.handle(.put(2, .stored(2)), now: t0)
        #expect(batches(actions) == [[.init(index: 1, rowID: 101, failure: "HTTP 404"), .init(index: 2, rowID: 102, stored: 2)]])
        #expect(album.handle(.batchWritten(true), now: t0).isEmpty)
        #expect(album.handle(.fetched(3, .refused("internal address")), now: t0) == [.drop(103)])
        _ = album.handle(.fetched(4, .image(4)), now: t0)
        actions = album.handle(.put(4, .stored(4)), now: t0)
        #expect(batches(actions) == [[.init(index: 4, rowID: 104, stored: 4)]], "the last, partial batch at the end")
        actions = album.handle(.batchWritten(true), now: t0)
        #expect(ends(actions) == [], "the refused photo's drop is awaited: it never stays pending")
        #expect(ends(album.handle(.written(.drop(103)), now: t0)) == [.finished])
        #expect(album.unwritten == 0)
        #expect(album.handle(.tick, now: t0).isEmpty, "an ended album does nothing more")
    }

    /// Once the first photo is written, a fetch stores its image on the same slot: no put is
    /// asked for, the result comes as `fetched` then `put`.
    @Test func afterTheFirstPhotoAFetchStoresOnItsOwnSlot() {
        var settings = self.settings
        settings.width = 1
        var album = Machine(resuming: [7, 8, 9], settings: settings, clearsWaiting: false, now: t0)
        #expect(album.start(now: t0) == [.fetch(0, "u0")])
        #expect(album.handle(.fetched(0, .image(0)), now: t0) == [.put(0, 0)])
        #expect(album.handle(.put(0, .stored(0)), now: t0) == [.fetch(1, "u1"), .writeBatch([.init(index: 0, rowID: 7, stored: 0)])],
                "the first photo is not written yet: a plain fetch")
        #expect(album.handle(.batchWritten(true), now: t0).isEmpty)
        #expect(album.handle(.fetched(1, .image(1)), now: t0) == [.put(1, 1)])
        #expect(album.handle(.put(1, .stored(1)), now: t0) == [.fetchAndPut(2, "u2")], "the first photo written: the slot stores it too")
        #expect(album.handle(.fetched(2, .image(2)), now: t0).isEmpty, "no put asked for")
        #expect(batches(album.handle(.put(2, .stored(2)), now: t0)) == [[.init(index: 1, rowID: 8, stored: 1), .init(index: 2, rowID: 9, stored: 2)]])
        #expect(album.handle(.batchWritten(true), now: t0) == [.end(.finished)])
    }

    /// Without a gate (other albums share the slots) every fetch stores on its own slot: nothing
    /// is held in memory waiting for the driver.
    @Test func withoutAGateEveryFetchStoresOnItsOwnSlot() {
        var settings = self.settings
        settings.firstGate = .zero
        var album = Machine(resuming: [7, 8, 9], settings: settings, clearsWaiting: false, now: t0)
        #expect(album.start(now: t0) == [.fetchAndPut(0, "u0"), .fetchAndPut(1, "u1"), .fetchAndPut(2, "u2")])
        for index in 0..<3 { #expect(album.handle(.fetched(index, .image(index)), now: t0).isEmpty, "no put asked for") }
        #expect(batches(album.handle(.put(1, .stored(1)), now: t0)) == [[.init(index: 1, rowID: 8, stored: 1)]],
                "the first stored is written alone")
        _ = album.handle(.put(0, .stored(0)), now: t0)
        _ = album.handle(.put(2, .stored(2)), now: t0)
        #expect(batches(album.handle(.batchWritten(true), now: t0)) == [[.init(index: 0, rowID: 7, stored: 0), .init(index: 2, rowID: 9, stored: 2)]])
        #expect(album.handle(.batchWritten(true), now: t0) == [.end(.finished)])
    }

    @Test func theOthersWaitForTheFirstPhotoOrTheGate() {
        var album = searched()
        #expect(puts(album.handle(.fetched(0, .image(0)), now: t0)) == [0])
        #expect(puts(album.handle(.fetched(1, .image(1)), now: t0)).isEmpty, "held until the first photo is written")
        #expect(album.deadline() == t0 + .seconds(1), "the gate's end is a deadline")
        #expect(puts(album.handle(.tick, now: t0 + .milliseconds(999))).isEmpty)
        #expect(puts(album.handle(.tick, now: t0 + .seconds(1))) == [1], "the gate opens after a second")
    }

    @Test func resultsWaitForTheirRows() {
        var album = Machine(searching: settings, now: t0)
        _ = album.start(now: t0)
        _ = album.handle(.searched("answer", photoSources(2)), now: t0)
        // The images land before the placeholders' write has answered.
        #expect(album.handle(.fetched(0, .image(0)), now: t0) == [.put(0, 0)])
        #expect(batches(album.handle(.put(0, .stored(0)), now: t0)).isEmpty, "no row yet: nothing written")
        #expect(album.handle(.fetched(1, .refused("redirect to 10.0.0.1")), now: t0).isEmpty)
        let actions = album.handle(.rowsWritten([7, 8]), now: t0)
        #expect(actions.contains(.drop(8)))
        #expect(batches(actions) == [[.init(index: 0, rowID: 7, stored: 0)]])
        #expect(ends(album.handle(.batchWritten(true), now: t0)) == [])
        #expect(ends(album.handle(.written(.drop(8)), now: t0)) == [.finished])
    }

    @Test func theLeaseIsRenewedOnATimerWhateverTheProgress() {
        var album = searched()
        #expect(album.deadline() == t0 + .seconds(20))
        #expect(album.handle(.tick, now: t0 + .seconds(19)).isEmpty)
        #expect(album.handle(.tick, now: t0 + .seconds(20)) == [.renewLease], "no image landed, still renewed")
        #expect(album.handle(.tick, now: t0 + .seconds(21)).isEmpty, "one renewal at a time")
        #expect(album.handle(.leaseRenewed(true), now: t0 + .seconds(21)).isEmpty)
        #expect(album.deadline() == t0 + .seconds(41), "the next one counts from the last answer")
        #expect(album.handle(.tick, now: t0 + .seconds(41)) == [.renewLease])
    }

    @Test func aLostLeaseWritesNothingMoreAndNeverFinishes() {
        var album = searched()
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        #expect(fetches(album.handle(.put(0, .stored(0)), now: t0)) == [3], "0 written: its slot goes to 3")
        _ = album.handle(.batchWritten(true), now: t0)
        #expect(album.handle(.fetched(1, .image(1)), now: t0) == [.put(1, 1)])
        _ = album.handle(.tick, now: t0 + .seconds(20))
        // Another worker took the job over.
        var actions = album.handle(.leaseRenewed(false), now: t0 + .seconds(20))
        #expect(actions.isEmpty)
        #expect(album.handle(.put(1, .stored(1)), now: t0 + .seconds(20)).isEmpty, "stored, never written")
        #expect(album.handle(.fetched(2, .image(2)), now: t0 + .seconds(20)).isEmpty, "not even stored")
        actions = album.handle(.fetched(3, .failed("404")), now: t0 + .seconds(20))
        #expect(actions == [.end(.leaseLost)], "ends once what is in flight has landed")
        #expect(album.unwritten == 4)
    }

    @Test func aBatchWrittenForAJobNoLongerOursEndsTheAlbum() {
        var album = searched()
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        _ = album.handle(.put(0, .stored(0)), now: t0)
        #expect(album.handle(.batchWritten(false), now: t0).isEmpty)
        _ = album.handle(.fetched(1, .image(1)), now: t0)
        _ = album.handle(.fetched(2, .failed("404")), now: t0)
        #expect(album.handle(.fetched(3, .image(3)), now: t0) == [.end(.leaseLost)])
        #expect(album.unwritten == 5, "the first photo's write did not go through either")
    }

    @Test func noRenewalForAWholeLeaseCountsAsLost() {
        var album = searched()
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        _ = album.handle(.put(0, .stored(0)), now: t0)
        _ = album.handle(.batchWritten(true), now: t0)
        _ = album.handle(.fetched(1, .image(1)), now: t0 + .seconds(61))
        #expect(album.phase == .ending(.leaseLost), "past the lease the job may be another worker's")
        #expect(album.handle(.put(1, .stored(1)), now: t0 + .seconds(61)).isEmpty, "stored, never written")
    }

    /// An album that writes nothing more keeps its own reason past the lease: what the worker does
    /// next (wait for the database, retry) names the holder, so it changes nothing if the job was
    /// taken over meanwhile — and it is not taken for a lapse of its own.
    @Test func anOutageOutlastingTheLeaseStaysAnOutage() {
        var album = searched()
        #expect(album.handle(.tick, now: t0 + .seconds(20)) == [.renewLease])
        #expect(album.handle(.databaseDown, now: t0 + .seconds(20)).isEmpty, "no renewal while the database is away")
        _ = album.handle(.fetched(0, .image(0)), now: t0 + .seconds(61))
        _ = album.handle(.fetched(1, .image(1)), now: t0 + .seconds(61))
        #expect(album.handle(.fetched(2, .image(2)), now: t0 + .seconds(61)) == [.end(.databaseDown)])
    }

    @Test func theStoreGoingDownStopsNewFetchesAndKeepsWhatWasStored() {
        var album = searched()
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        _ = album.handle(.put(0, .stored(0)), now: t0)  // and fetch(3)
        _ = album.handle(.batchWritten(true), now: t0)
        _ = album.handle(.fetched(1, .image(1)), now: t0)
        #expect(album.handle(.put(1, .storeDown), now: t0).isEmpty, "no new fetch once the store is down")
        #expect(album.handle(.fetched(2, .image(2)), now: t0) == [.put(2, 2)], "what landed is still offered to the store")
        #expect(album.handle(.put(2, .stored(2)), now: t0).isEmpty, "3 is still in flight")
        let actions = album.handle(.fetched(3, .failed("410")), now: t0)
        #expect(batches(actions) == [[.init(index: 2, rowID: 102, stored: 2), .init(index: 3, rowID: 103, failure: "410")]],
                "what was stored meanwhile is kept")
        #expect(album.handle(.batchWritten(true), now: t0) == [.end(.storeDown)])
        #expect(album.unwritten == 2, "1 and 4 stay pending for the job's next turn")
    }

    @Test func anImageHostThatIsDownLeavesItsPhotosPendingAndTheAlbumWaits() {
        var album = searched()
        var actions = album.handle(.fetched(0, .hostDown(retryAfter: nil)), now: t0)
        #expect(fetches(actions) == [3], "one image failing: the others are still fetched")
        _ = album.handle(.fetched(1, .image(1)), now: t0)
        _ = album.handle(.put(1, .stored(1)), now: t0)
        _ = album.handle(.batchWritten(true), now: t0)
        _ = album.handle(.fetched(2, .hostDown(retryAfter: nil)), now: t0)
        _ = album.handle(.fetched(3, .failed("HTTP 410")), now: t0)
        actions = album.handle(.fetched(4, .hostDown(retryAfter: nil)), now: t0)
        #expect(batches(actions) == [[.init(index: 3, rowID: 103, failure: "HTTP 410")]])
        actions = album.handle(.batchWritten(true), now: t0)
        #expect(ends(actions) == [.imageHostDown(retryAfter: nil)], "never finished with photos pending; three failed: none counted alone")
        #expect(album.unwritten == 3)
    }

    @Test func aWaitTheImageHostNamesStopsNewFetches() {
        var album = searched()
        let actions = album.handle(.fetched(0, .hostDown(retryAfter: 30)), now: t0)
        #expect(fetches(actions).isEmpty)
        _ = album.handle(.fetched(1, .hostDown(retryAfter: 5)), now: t0)
        #expect(ends(album.handle(.fetched(2, .failed("404")), now: t0)) == [], "the failure is written first")
        #expect(ends(album.handle(.batchWritten(true), now: t0)) == [.imageHostDown(retryAfter: 30)], "the longest wait named")
    }

    @Test func theDatabaseGoingDownMidWriteLeavesTheBatchPending() {
        var album = searched()
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        #expect(batches(album.handle(.put(0, .stored(0)), now: t0)).count == 1)
        #expect(album.handle(.databaseDown, now: t0).isEmpty)
        _ = album.handle(.fetched(1, .image(1)), now: t0)
        _ = album.handle(.fetched(2, .image(2)), now: t0)
        let actions = album.handle(.fetched(3, .image(3)), now: t0)
        #expect(actions == [.end(.databaseDown)], "nothing more is stored or written")
        #expect(album.unwritten == 5)
    }

    @Test func aSupersededAlbumEndsWithoutWriting() {
        var album = Machine(searching: settings, now: t0)
        _ = album.start(now: t0)
        _ = album.handle(.searched("answer", photoSources(2)), now: t0)
        #expect(album.handle(.superseded, now: t0).isEmpty, "two fetches in flight")
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        #expect(ends(album.handle(.fetched(1, .image(1)), now: t0)) == [.superseded])
    }

    @Test func anEmptySearchFinishesOnceItsResultIsWritten() {
        var album = Machine(searching: settings, now: t0)
        _ = album.start(now: t0)
        #expect(album.handle(.searched("answer", photoSources(0)), now: t0) == [.writePlaceholders("answer")])
        #expect(album.handle(.rowsWritten([]), now: t0) == [.end(.finished)])
    }

    @Test func aFailedSearchEnds() {
        var album = Machine(searching: settings, now: t0)
        _ = album.start(now: t0)
        #expect(album.handle(.searchFailed, now: t0) == [.end(.searchFailed)])
    }

    @Test func aResumedAlbumClearsItsWaitOnceAnImageIsStored() {
        var album = Machine(resuming: [7, 8], settings: settings, clearsWaiting: true, now: t0)
        #expect(fetches(album.start(now: t0)) == [0, 1])
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        let actions = album.handle(.put(0, .stored(0)), now: t0)
        #expect(actions.first == .clearWaiting)
        #expect(batches(actions).count == 1)
        _ = album.handle(.batchWritten(true), now: t0)
        #expect(!album.handle(.fetched(1, .image(1)), now: t0).contains(.clearWaiting))
        #expect(!album.handle(.put(1, .stored(1)), now: t0).contains(.clearWaiting), "once")
    }

    @Test func stoppingReleasesAtOnce() {
        var album = searched()
        #expect(album.handle(.stopping, now: t0) == [.end(.released)], "fetches in flight are not waited for")
        #expect(album.unwritten == 5)
    }

    // MARK: Defects found by attacking the machine (issue 49), each failing before its fix

    /// A provider answer with one photo twice: its second placeholder is not written (ON CONFLICT
    /// DO NOTHING). Read as "superseded", that cancelled the job and wedged the pin downloading.
    @Test func aPhotoWithoutARowIsSkippedNotReadAsSuperseded() {
        var album = Machine(searching: settings, now: t0)
        _ = album.start(now: t0)
        _ = album.handle(.searched("answer", photoSources(3)), now: t0)
        #expect(album.handle(.rowsWritten([7, nil, 9]), now: t0).isEmpty, "fetches in flight, nothing ended")
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        #expect(batches(album.handle(.put(0, .stored(0)), now: t0)) == [[.init(index: 0, rowID: 7, stored: 0)]])
        _ = album.handle(.batchWritten(true), now: t0)
        #expect(album.handle(.fetched(1, .image(1)), now: t0) == [.put(1, 1)])
        #expect(batches(album.handle(.put(1, .stored(1)), now: t0)).isEmpty, "no row: nothing to write for it")
        _ = album.handle(.fetched(2, .image(2)), now: t0)
        let actions = album.handle(.put(2, .stored(2)), now: t0)
        #expect(batches(actions) == [[.init(index: 2, rowID: 9, stored: 2)]])
        #expect(ends(album.handle(.batchWritten(true), now: t0)) == [.finished])
    }

    /// A renewal the database refused for a reason other than an outage (a statement timeout
    /// behind a lock, a read-only node, a full disk): `renewing` stayed set, the album could never
    /// end and its deadline stayed in the past, so the driver spun a core for good.
    @Test func aRefusedRenewalEndsTheAlbumAndNeverSpins() {
        var album = searched()
        let later = t0 + .seconds(20)
        #expect(album.handle(.tick, now: later) == [.renewLease])
        #expect(album.handle(.writeRefused, now: later).isEmpty, "three fetches still in flight")
        #expect(album.deadline() == nil, "nothing to time: only the fetches' answers move it on")
        _ = album.handle(.fetched(0, .image(0)), now: later)
        _ = album.handle(.fetched(1, .failed("404")), now: later)
        #expect(album.handle(.fetched(2, .image(2)), now: later) == [.end(.writeRefused)])
    }

    /// The endings that write nothing (database down, lease lost, a refused write, superseded)
    /// had a deadline in the past (the last renewal's or a batch's): the driver busy-waited until
    /// the fetches in flight landed.
    @Test func anEndingThatWritesNothingHasNoDeadline() {
        for stop in [Machine.Event.databaseDown, .writeRefused, .superseded] {
            var album = Machine(searching: settings, now: t0)
            _ = album.start(now: t0)
            _ = album.handle(.searched("answer", photoSources(5)), now: t0)
            _ = album.handle(.fetched(0, .image(0)), now: t0)
            _ = album.handle(.put(0, .stored(0)), now: t0)
            #expect(album.handle(stop, now: t0 + .seconds(30)).isEmpty, "\(stop)")
            #expect(album.deadline() == nil, "\(stop)")
        }
        var album = searched()
        _ = album.handle(.tick, now: t0 + .seconds(61))
        #expect(album.phase == .ending(.leaseLost))
        #expect(album.deadline() == nil)
    }

    /// One image its host always answers 503 among images the host delivers: it fails alone after
    /// its tries; the album is complete, not waiting hours for a host that is up.
    @Test func oneImageTheHostKeepsFailingFailsAlone() {
        var settings = self.settings
        settings.width = 10
        var album = Machine(resuming: Array(100..<110), settings: settings, clearsWaiting: false, now: t0)
        _ = album.start(now: t0)
        var written: [Machine.Item] = []
        func run(_ event: Machine.Event) -> [Machine.Action] {
            var actions = album.handle(event, now: t0)
            while let items = batches(actions).first {
                written += items
                actions = album.handle(.batchWritten(true), now: t0)
            }
            return actions
        }
        _ = run(.fetched(3, .hostDown(retryAfter: nil, reason: "the photo server answered HTTP 503")))
        var last: [Machine.Action] = []
        for index in (0..<10) where index != 3 {
            _ = run(.fetched(index, .image(index)))
            last = run(.put(index, .stored(index)))
        }
        #expect(ends(last) == [.finished])
        #expect(written.contains(.init(index: 3, rowID: 103, failure: "the photo server answered HTTP 503")))
        #expect(album.unwritten == 0)
    }

    /// A wait named by one image's host still stops the album (the host speaks for itself); and
    /// when most images fail so, the host as a whole is down: the album waits.
    @Test func aHostFailingForMostImagesStillMakesTheAlbumWait() {
        var album = Machine(resuming: [1, 2, 3, 4], settings: settings, clearsWaiting: false, now: t0)
        _ = album.start(now: t0)
        _ = album.handle(.fetched(0, .hostDown(retryAfter: nil)), now: t0)
        _ = album.handle(.fetched(1, .hostDown(retryAfter: nil)), now: t0)
        _ = album.handle(.fetched(2, .image(2)), now: t0)
        _ = album.handle(.put(2, .stored(2)), now: t0)
        _ = album.handle(.batchWritten(true), now: t0)
        let actions = album.handle(.fetched(3, .hostDown(retryAfter: nil)), now: t0)
        #expect(ends(actions) == [.imageHostDown(retryAfter: nil)])
    }

    /// One image its host failed in two downloads before (a picked photo, or the last one left
    /// of an album resumed after a restart): at the third it fails alone, since the album holds
    /// other photos from that host — even when it is the only one asked for, and even when its
    /// host names a wait for it.
    @Test func anImageFailedInThreeDownloadsFailsAloneWhenTheAlbumHoldsOthers() {
        for retryAfter in [nil, 1] as [Int?] {
            var album = Machine(resuming: [7], settings: settings, clearsWaiting: false, held: 30, failedBefore: [2], now: t0)
            _ = album.start(now: t0)
            let actions = album.handle(.fetched(0, .hostDown(retryAfter: retryAfter, reason: "HTTP 503")), now: t0)
            #expect(batches(actions) == [[.init(index: 0, rowID: 7, failure: "HTTP 503")]], "\(String(describing: retryAfter))")
            #expect(ends(album.handle(.batchWritten(true), now: t0)) == [.finished])
        }
        // The second download of it: it still waits (the host may be down now), and is counted.
        var album = Machine(resuming: [7], settings: settings, clearsWaiting: false, held: 30, failedBefore: [1], now: t0)
        _ = album.start(now: t0)
        #expect(album.handle(.fetched(0, .hostDown(retryAfter: nil)), now: t0) == [.noteHostFailures([7])])
        // An album that holds nothing from the host waits whatever the count: the host may be down.
        var fresh = Machine(resuming: [7], settings: settings, clearsWaiting: false, held: 0, failedBefore: [5], now: t0)
        _ = fresh.start(now: t0)
        #expect(fresh.handle(.fetched(0, .hostDown(retryAfter: nil)), now: t0) == [.noteHostFailures([7])])
    }

    /// A flaky host (images arriving only after their quick retries, a few not at all) is a host
    /// in trouble, not one bad image: the album waits and fetches the rest again.
    @Test func aFlakyHostMakesTheAlbumWaitEvenWhenMostImagesCame() {
        var settings = self.settings
        settings.width = 8
        var album = Machine(resuming: Array(100..<108), settings: settings, clearsWaiting: false, now: t0)
        _ = album.start(now: t0)
        var last: [Machine.Action] = []
        for index in 0..<8 {
            if index == 7 {
                last = album.handle(.fetched(index, .hostDown(retryAfter: nil)), now: t0)
            } else {
                _ = album.handle(.fetched(index, index % 2 == 0 ? .imageAfterRetry(index) : .image(index)), now: t0)
                last = album.handle(.put(index, .stored(index)), now: t0)
            }
            while !batches(last).isEmpty { last = album.handle(.batchWritten(true), now: t0) }
        }
        #expect(last == [.noteHostFailures([107])])
        #expect(ends(album.handle(.written(last[0]), now: t0)) == [.imageHostDown(retryAfter: nil)])
        #expect(album.unwritten == 1)
    }

    /// An action queued before the album stopped writing is withdrawn, not done: nothing is
    /// written after an end whatever the order of the driver's queue.
    @Test func anActionQueuedBeforeTheEndIsWithdrawn() {
        var album = searched()
        _ = album.handle(.fetched(0, .image(0)), now: t0)
        let actions = album.handle(.put(0, .stored(0)), now: t0)
        let batch = actions.first { if case .writeBatch = $0 { return true } else { return false } }!
        _ = album.handle(.databaseDown, now: t0)
        #expect(!album.permits(batch))
        #expect(!album.permits(.renewLease))
        #expect(fetches(actions) == [3], "0's slot went to 3")
        _ = album.handle(.withdrawn(batch), now: t0)
        _ = album.handle(.fetched(1, .image(1)), now: t0)
        _ = album.handle(.fetched(2, .image(2)), now: t0)
        #expect(album.handle(.fetched(3, .image(3)), now: t0) == [.end(.databaseDown)])
        #expect(album.unwritten == 5)
    }

    // MARK: Every event in every state

    enum State: CaseIterable {
        case searching, runningWithoutRows, running, endingForTheStore, leaseLost, ended
    }

    func machine(in state: State) -> Machine {
        var album: Machine
        switch state {
        case .searching:
            album = Machine(searching: settings, now: t0)
            _ = album.start(now: t0)
        case .runningWithoutRows:
            album = Machine(searching: settings, now: t0)
            _ = album.start(now: t0)
            _ = album.handle(.searched("answer", photoSources(5)), now: t0)
        case .running:
            album = searched()
        case .endingForTheStore:
            album = searched()
            _ = album.handle(.fetched(0, .image(0)), now: t0)
            _ = album.handle(.put(0, .storeDown), now: t0)
        case .leaseLost:
            album = searched()
            _ = album.handle(.tick, now: t0 + .seconds(20))
            _ = album.handle(.leaseRenewed(false), now: t0 + .seconds(20))
        case .ended:
            album = Machine(searching: settings, now: t0)
            _ = album.start(now: t0)
            _ = album.handle(.searchFailed, now: t0)
        }
        return album
    }

    static let events: [Machine.Event] = [
        .searched("answer", photoSources(5)), .searchFailed, .rowsWritten([100, 101, 102, 103, 104]), .rowsWritten([100, nil, 102, nil, 104]), .superseded,
        .fetched(1, .image(1)), .fetched(1, .failed("404")), .fetched(1, .refused("internal")), .fetched(1, .hostDown(retryAfter: nil)),
        .fetched(1, .hostDown(retryAfter: 9)), .put(0, .stored(0)), .put(0, .failed("EIO")), .put(0, .storeDown),
        .batchWritten(true), .batchWritten(false), .leaseRenewed(true), .leaseRenewed(false),
        .databaseDown, .writeRefused, .stopping, .tick, .withdrawn(.renewLease), .withdrawn(.fetch(1, "u1")),
        .withdrawn(.writeBatch([.init(index: 0, rowID: 100, stored: 0)])),
    ]

    @Test(arguments: State.allCases) func everyEventInEveryState(_ state: State) {
        for event in Self.events {
            var album = machine(in: state)
            let before = album.phase
            let actions = album.handle(event, now: t0 + .seconds(1))
            // An ended album does nothing, whatever arrives.
            if case .ended = before { #expect(actions.isEmpty, "\(state) + \(event)") }
            // A job no longer ours writes nothing and fetches nothing.
            if case .ending(.leaseLost) = before {
                #expect(batches(actions).isEmpty && fetches(actions).isEmpty && puts(actions).isEmpty, "\(state) + \(event)")
                #expect(!actions.contains(.renewLease))
            }
            // Once the album is ending, nothing new is fetched.
            if case .ending = before { #expect(fetches(actions).isEmpty, "\(state) + \(event)") }
            // Never more than one end, and an end is the last action.
            #expect(ends(actions).count <= 1)
            if let last = actions.last, !ends(actions).isEmpty { #expect(ends([last]).count == 1, "\(state) + \(event)") }
            // Never finished while photos are unwritten.
            if ends(actions) == [.finished] { #expect(album.unwritten == 0, "\(state) + \(event)") }
            // A lost lease, wherever it happens, leads to no write afterwards.
            if event == .leaseRenewed(false) || event == .batchWritten(false) {
                for later in Self.events {
                    var copy = album
                    let next = copy.handle(later, now: t0 + .seconds(2))
                    #expect(batches(next).isEmpty, "\(state) + \(event) + \(later)")
                    #expect(!ends(next).contains(.finished), "\(state) + \(event) + \(later)")
                }
            }
        }
    }
}

/// The tests' payloads: each image and each stored result is its photo's index, and each source
/// "u" and the index, so an action or a batch carrying another photo's payload shows at once.
enum TestPayloads: AlbumPayloads {
    typealias Answer = String
    typealias Source = String
    typealias Image = Int
    typealias Stored = Int
}

/// The sources of an album of `count` photos: "u0", "u1", …
func photoSources(_ count: Int) -> [String] { (0..<max(0, count)).map { "u\($0)" } }

extension AlbumDownload where P == TestPayloads {
    /// A resumed album whose photos come from `photoSources`.
    init(resuming rowIDs: [Int64], settings: Settings, clearsWaiting: Bool, held: Int = 0, failedBefore: [Int] = [],
         now: ContinuousClock.Instant) {
        self.init(resuming: rowIDs, sources: photoSources(rowIDs.count), settings: settings, clearsWaiting: clearsWaiting,
                  held: held, failedBefore: failedBefore, now: now)
    }
}
