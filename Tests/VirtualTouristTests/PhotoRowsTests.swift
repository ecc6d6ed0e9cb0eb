import Foundation
import Synchronization
import Testing
@testable import VirtualTourist

/// A fresh album's downloads start while its placeholders are written (AlbumWorkers.download with
/// PhotoRows): a download that lands first waits for its row, and none is written under a row
/// that never came.
@Suite struct PhotoRowsTests {
    @Test func knownRowsAreThereAtOnce() {
        let rows = PhotoRows(known: [41, 42])
        #expect(rows.written)
        #expect(rows.row(0) == .id(41))
        #expect(rows.row(1) == .id(42))
        #expect(rows.row(2) == .skipped)
    }

    @Test func downloadsThatLandFirstWaitForTheirRows() {
        let pool = DownloadPool(slots: 4)
        defer { pool.stop() }
        let rows = PhotoRows()
        let got = Mutex<[Int: PhotoRows.Row]>([:])
        let waiting = Atomic(0)
        let running = pool.start(count: 4, width: 4) { index in
            waiting.add(1, ordering: .relaxed)
            let row = rows.row(index)
            got.withLock { $0[index] = row }
            return true
        }
        // The caller's own work runs while the batch does: every download is waiting by now, and
        // none has a row yet.
        let deadline = Date(timeIntervalSinceNow: 5)
        while waiting.load(ordering: .relaxed) < 4 && Date() < deadline { usleep(1_000) }
        #expect(waiting.load(ordering: .relaxed) == 4)
        #expect(got.withLock { $0.isEmpty })
        #expect(!rows.written)
        // Position 2 was on the pin already: no row, skipped.
        rows.write([0: 10, 1: 11, 3: 13])
        running.wait()
        #expect(got.withLock { $0 } == [0: .id(10), 1: .id(11), 2: .skipped, 3: .id(13)])
        rows.write(nil)  // once: a later call changes nothing
        #expect(rows.row(0) == .id(10))
    }

    @Test func rowsNeverWrittenStopTheDownloads() {
        let pool = DownloadPool(slots: 2)
        defer { pool.stop() }
        let rows = PhotoRows()
        let ran = Atomic(0)
        // One at a time: the first finds the rows abandoned and stops the batch.
        let running = pool.start(count: 5, width: 1) { index in
            ran.add(1, ordering: .relaxed)
            return rows.row(index) != .abandoned
        }
        rows.write(nil)
        running.wait()
        #expect(!rows.written)
        #expect(ran.load(ordering: .relaxed) == 1)
    }

    @Test func aStoppedPoolRunsTheBatchOnTheWaitingThreadAfterTheCallersWork() {
        let pool = DownloadPool(slots: 2)
        pool.stop()
        let rows = PhotoRows()
        let seen = Mutex<[PhotoRows.Row]>([])
        let running = pool.start(count: 2, width: 2) { index in
            seen.withLock { $0.append(rows.row(index)) }
            return true
        }
        rows.write([0: 1, 1: 2])  // had the batch run on the caller in start, this would never come
        running.wait()
        #expect(seen.withLock { $0 } == [.id(1), .id(2)])
    }
}
