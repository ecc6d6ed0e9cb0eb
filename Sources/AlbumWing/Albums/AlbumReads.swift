import Synchronization
import Domain

/// One read of an album for all the pages watching it. A batch of downloads is one NOTIFY, and
/// every page open on that album (tabs, members of a shared map) is told: read by each, ten pages
/// would be ten reads of the same rows. The first page's read is kept and the others take it, as
/// long as it began after the change they were told of (a read that began later sees everything
/// committed before the NOTIFY was sent).
///
/// `AlbumEvents` stamps each change it hears with the next number of `heard`; a read is stamped
/// with the number current when it began. One entry per watched album, dropped with its last
/// watcher, so memory follows the albums open, not the albums ever seen.
package final class AlbumReads: Sendable {
    private struct Kept {
        var albums: [AlbumChange: (stamp: UInt64, album: Album)] = [:]
        /// Albums with a page watching: only theirs are kept, so a read that ends after the last
        /// page left leaves nothing behind.
        var watched: Set<AlbumChange> = []
    }
    private let kept = Mutex(Kept())
    /// Changes heard so far (the stamp of the latest).
    private let heard = Atomic<UInt64>(0)
    private let readCount = Atomic<Int>(0)

    package init() {}

    /// A change was heard: its stamp.
    package func hear() -> UInt64 {
        heard.add(1, ordering: .sequentiallyConsistent).newValue
    }

    /// The latest stamp: what a watcher told of a change now needs its read to have begun after.
    package var latest: UInt64 { heard.load(ordering: .sequentiallyConsistent) }

    /// The album for `change` as of stamp `wanted` or later: a kept read that began at or after
    /// it, else `read()` (kept for the next page when it found the album).
    package func album(_ change: AlbumChange, asOf wanted: UInt64, read: () throws -> Album?) rethrows -> Album? {
        if let hit = kept.withLock({ $0.albums[change] }), hit.stamp >= wanted { return hit.album }
        let stamp = latest
        readCount.add(1, ordering: .relaxed)
        guard let album = try read() else { return nil }
        kept.withLock { kept in
            guard kept.watched.contains(change) else { return }
            if let other = kept.albums[change], other.stamp > stamp { return }
            kept.albums[change] = (stamp, album)
        }
        return album
    }

    /// The album's first watcher came.
    package func watch(_ change: AlbumChange) {
        _ = kept.withLock { $0.watched.insert(change) }
    }

    /// The album's last watcher left.
    package func forget(_ change: AlbumChange) {
        kept.withLock { kept in
            kept.watched.remove(change)
            kept.albums[change] = nil
        }
    }

    /// Albums kept now (tests, metrics).
    package var count: Int { kept.withLock { $0.albums.count } }
    /// Reads made so far (tests: one per change however many pages watch).
    package var reads: Int { readCount.load(ordering: .relaxed) }
}
