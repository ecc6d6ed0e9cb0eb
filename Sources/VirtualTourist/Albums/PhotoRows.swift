import Foundation
import Synchronization

/// Where an album's downloads find the rows their photos go into. A resumed album knows them
/// (its pending placeholders, read back); a fresh search's images start downloading as soon as
/// the search answers, while the worker writes their placeholders, so a download that lands
/// first waits here for its row: the page's first photo comes a few database round trips sooner
/// (script/bench pindrop), and nothing is written before the row that names it exists.
final class PhotoRows: Sendable {
    enum Row: Equatable {
        case id(Int64)
        /// No row for this photo: it was on the pin already (insertPlaceholders skips it).
        case skipped
        /// The rows were not written (the album was superseded, or the database failed): the
        /// downloads stop, and whatever they stored is left for the collector.
        case abandoned
    }

    private let ready = DispatchSemaphore(value: 0)
    /// Nil until written; then the ids by position (nil: abandoned).
    private let rows: Mutex<[Int: Int64]??>

    /// Rows already written, in download order.
    init(known ids: [Int64]) {
        rows = Mutex(.some(Dictionary(uniqueKeysWithValues: ids.enumerated().map { ($0.offset, $0.element) })))
        ready.signal()
    }

    /// Rows being written: `write` says what they are.
    init() {
        rows = Mutex(nil)
    }

    /// The rows are written (ids by position), or will not be (nil). Once; later calls are ignored.
    func write(_ ids: [Int: Int64]?) {
        let first = rows.withLock { rows -> Bool in
            guard rows == nil else { return false }
            rows = .some(ids)
            return true
        }
        if first { ready.signal() }
    }

    /// Whether the rows were written (false until `write`, and after `write(nil)`).
    var written: Bool { rows.withLock { $0.map { $0 != nil } ?? false } }

    /// The row of the photo at `position`, waiting until the rows are written.
    func row(_ position: Int) -> Row {
        ready.wait()
        ready.signal()  // passed on to the next waiter: the semaphore stays open once written
        return rows.withLock { rows in
            guard case .some(.some(let ids)) = rows else { return .abandoned }
            return ids[position].map(Row.id) ?? .skipped
        }
    }
}
