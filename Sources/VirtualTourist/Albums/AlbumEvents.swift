import Synchronization

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

    public init() {}

    /// Called by the LISTEN connection.
    public func received(_ payload: String) {
        guard let change = AlbumChange(payload: payload) else { return }
        let watching = watchers.withLock { Array(($0[change] ?? [:]).values) }
        for watcher in watching { watcher.albumChanged(change) }
    }

    /// After the LISTEN connection came back: changes made while it was down were never heard, so
    /// every open album re-reads its state.
    public func everyoneReread() {
        let all = watchers.withLock { $0.flatMap { change, byID in byID.values.map { (change, $0) } } }
        for (change, watcher) in all { watcher.albumChanged(change) }
    }

    /// Watches one person's pin until `stopWatching`.
    func watch(_ change: AlbumChange, _ watcher: any AlbumWatcher) {
        watchers.withLock { $0[change, default: [:]][ObjectIdentifier(watcher)] = watcher }
    }

    func stopWatching(_ change: AlbumChange, _ watcher: any AlbumWatcher) {
        watchers.withLock { all in
            all[change]?[ObjectIdentifier(watcher)] = nil
            if all[change]?.isEmpty == true { all[change] = nil }
        }
    }

    public var watcherCount: Int { watchers.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
