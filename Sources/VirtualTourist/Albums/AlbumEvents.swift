import HTTPServer
import Synchronization

/// Fans album changes out to the browsers watching them. Changes arrive as NOTIFY album_events
/// with "userID:pinID" (from whichever instance's worker made them), so a page open on one
/// instance hears about downloads done by another.
public final class AlbumEvents: Sendable {
    private let subscribers = Mutex<[String: [ObjectIdentifier: ResponseStream]]>([:])

    public init() {}

    /// Called by the LISTEN connection.
    public func received(_ payload: String) {
        let streams = subscribers.withLock { Array(($0[payload] ?? [:]).values) }
        for stream in streams { stream.send(event: "change", data: payload) }
    }

    /// Watches one person's pin until the browser goes away.
    func subscribe(userID: Int64, pinID: Int64, _ stream: ResponseStream) {
        let key = "\(userID):\(pinID)"
        let id = ObjectIdentifier(stream)
        subscribers.withLock { $0[key, default: [:]][id] = stream }
        stream.onClose { [weak self] in
            self?.subscribers.withLock { all in
                all[key]?[id] = nil
                if all[key]?.isEmpty == true { all[key] = nil }
            }
        }
    }

    public var watcherCount: Int { subscribers.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
