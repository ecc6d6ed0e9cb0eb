import Foundation
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// An album's downloads are written in batches: one statement and one NOTIFY per batch, not per photo.
@Suite struct AlbumBatchTests {
    final class Counter: AlbumWatcher {
        let changes = Atomic<Int>(0)
        func albumChanged(_ change: AlbumChange) { changes.add(1, ordering: .relaxed) }
    }

    @Test func thirtyPhotosAreAnnouncedInAFewBatches() throws {
        let app = try TestApp(workers: false) { settings in
            settings.workers.resultBatch = 10
            settings.workers.resultBatchSeconds = 60  // only the size closes a batch here
        }
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let userID: Int64 = try app.pool.query("SELECT user_id FROM pins WHERE id = $1", [Int64(pin)])[0].decode("user_id")
        let counter = Counter()
        app.app.events.watch(AlbumChange(userID: userID, pinID: Int64(pin)), counter)
        try app.app.startBackgroundWork()
        defer { app.app.stopBackgroundWork() }
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.status == "ready")
        #expect(album.count("ready") == 30)
        usleep(300_000)  // the last NOTIFY reaches the LISTEN connection
        // Placeholders (1), the first photo at once (1), three batches of ten, the album complete
        // (1); one per photo was 32.
        let heard = counter.changes.load(ordering: .relaxed)
        #expect(heard >= 3 && heard <= 6, "\(heard) changes")
        // Every photo is served from its batch's row.
        for id in album.ids { #expect(try browser.get("/photos/\(id)").status == 200) }
    }

    /// A stored photo is metadata only (script/bench albums measures bytes per album): the
    /// provider's thumbnail URL, which nothing reads back, is not kept, and no index duplicates
    /// the pin_id lookups the (pin_id, generation) index already serves.
    @Test func albumRowsKeepOnlyWhatIsReadBack() throws {
        let app = try TestApp(workers: true)
        let browser = try app.signedUp()
        let pin = try AlbumTests.dropPin(browser)
        let album = try AlbumTests.settled(browser, pin: pin)
        #expect(album.count("ready") == 30)
        #expect(try app.count("SELECT count(*) FROM photos WHERE pin_id = $1", [Int64(pin)]) == 30)
        #expect(try app.count("SELECT count(*) FROM photos WHERE thumbnail_url IS NOT NULL") == 0)
        #expect(try app.count("SELECT count(*) FROM pg_indexes WHERE tablename = 'photos' AND indexdef LIKE '%(pin_id)'") == 0)
    }
}
