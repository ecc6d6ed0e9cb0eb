import Synchronization
import Domain

/// Whoever shows an album live (a page's event stream, adapted in Web/AlbumRoutes): told when the
/// album changed, so it re-reads it.
public protocol AlbumWatcher: AnyObject, Sendable {
    func albumChanged(_ change: AlbumChange)
}

/// Fans album changes out to the browsers watching them. Changes arrive as NOTIFY album_events
/// (`AlbumChange`, from whichever instance's worker made them), so a page open on one instance hears
/// about downloads done by another.
public final class AlbumEvents: Sendable {
    private let watchers = Mutex<[AlbumChange: [ObjectIdentifier: any AlbumWatcher]]>([:])
    /// Open map pages by the map's holder: told of every change on any of its pins (a member's
    /// drop, a deletion, an album filling), so each member's map shows it live.
    private let mapWatchers = Mutex<[Int64: [ObjectIdentifier: any AlbumWatcher]]>([:])
    /// One read of a changed album for all its watchers.
    package let reads = AlbumReads()

    public init() {}

    /// Called by the LISTEN connection.
    public func received(_ payload: String) {
        guard let change = AlbumChange(payload: payload) else { return }
        _ = reads.hear()
        let watching = watchers.withLock { Array(($0[change] ?? [:]).values) }
        for watcher in watching { watcher.albumChanged(change) }
    }

    /// Called by the LISTEN connection for map_events: a map's pins changed.
    public func receivedForMap(_ payload: String) {
        guard let change = AlbumChange(payload: payload) else { return }
        let maps = mapWatchers.withLock { Array(($0[change.userID] ?? [:]).values) }
        for watcher in maps { watcher.albumChanged(change) }
    }

    /// After the LISTEN connection came back: changes made while it was down were never heard, so
    /// every open album re-reads its state.
    public func everyoneReread() {
        _ = reads.hear()
        let all = watchers.withLock { $0.flatMap { change, byID in byID.values.map { (change, $0) } } }
        for (change, watcher) in all { watcher.albumChanged(change) }
        let maps = mapWatchers.withLock { $0.flatMap { holder, byID in byID.values.map { (holder, $0) } } }
        for (holder, watcher) in maps { watcher.albumChanged(AlbumChange(userID: holder, pinID: 0)) }
    }

    /// Watches every pin of one map (by its holder) until `stopWatchingMap`.
    package func watchMap(_ holder: Int64, _ watcher: any AlbumWatcher) {
        mapWatchers.withLock { $0[holder, default: [:]][ObjectIdentifier(watcher)] = watcher }
    }

    package func stopWatchingMap(_ holder: Int64, _ watcher: any AlbumWatcher) {
        mapWatchers.withLock { all in
            all[holder]?[ObjectIdentifier(watcher)] = nil
            if all[holder]?.isEmpty == true { all[holder] = nil }
        }
    }

    /// Watches one person's pin until `stopWatching`.
    package func watch(_ change: AlbumChange, _ watcher: any AlbumWatcher) {
        watchers.withLock { all in
            if all[change] == nil { reads.watch(change) }
            all[change, default: [:]][ObjectIdentifier(watcher)] = watcher
        }
    }

    package func stopWatching(_ change: AlbumChange, _ watcher: any AlbumWatcher) {
        // The kept read goes under the same lock as the last watcher (and comes with the first),
        // so a read that ends later finds nobody watching and keeps nothing.
        watchers.withLock { all in
            all[change]?[ObjectIdentifier(watcher)] = nil
            guard all[change]?.isEmpty == true else { return }
            all[change] = nil
            reads.forget(change)
        }
    }

    public var watcherCount: Int {
        watchers.withLock { $0.values.reduce(0) { $0 + $1.count } } + mapWatchers.withLock { $0.values.reduce(0) { $0 + $1.count } }
    }
}
