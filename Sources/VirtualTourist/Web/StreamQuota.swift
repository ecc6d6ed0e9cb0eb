import HTTPServer
import Synchronization
import AlbumWing

/// Live album pages (event streams) open per person. Each holds a connection and a watcher for as
/// long as the tab stays open; without a cap one account could hold every connection the server
/// has. The server ends every stream after its lifetime anyway (ServerConfiguration.maxStreamLifetime).
///
/// It also remembers which session token opened each stream, so a client reopening refused
/// streams in a loop with that token is refused before its session is even looked up
/// (`isFull(token:)`): otherwise every retry costs a session lookup, the bulk of what that attack
/// costs (script/bench abuse; docs/performance.md, "Abuse").
final class StreamQuota: Sendable {
    let perPerson: Int
    private struct State {
        var open: [Int64: Int] = [:]
        /// Session token → its person and how many of the open streams it holds.
        var tokens: [String: (user: Int64, streams: Int)] = [:]
    }
    private let state = Mutex(State())
    /// The open streams by their session's token hash (sessions.token_hash, as NOTIFY photo_access
    /// names it), so a session whose rights change ends its streams (`endSessions`).
    private let bySession = Mutex<[String: [ObjectIdentifier: ResponseStream]]>([:])

    init(perPerson: Int) { self.perPerson = perPerson }

    /// Keeps `stream` under its session until it closes.
    func hold(_ stream: ResponseStream, token: String?) {
        guard let token else { return }
        let hash = SHA256.hex(Array(token.utf8)), id = ObjectIdentifier(stream)
        bySession.withLock { $0[hash, default: [:]][id] = stream }
        stream.onClose { [weak self] in
            self?.bySession.withLock { all in
                all[hash]?[id] = nil
                if all[hash]?.isEmpty == true { all[hash] = nil }
            }
        }
    }

    /// NOTIFY photo_access "s:hash,…" (a session signed out or deleted, a member removed from a
    /// shared map): those sessions' live pages end now. The page's EventSource reconnects, and
    /// that request is answered by what the person may see now (a 404 for an album they lost).
    func received(_ payload: String) {
        guard payload.hasPrefix("s:") else { return }
        let hashes = payload.dropFirst(2).split(separator: ",").map(String.init)
        let ending = bySession.withLock { all in hashes.flatMap { all.removeValue(forKey: $0).map { Array($0.values) } ?? [] } }
        for stream in ending { stream.close() }
    }

    /// Takes a place for `user`; false when all of theirs are taken.
    func admit(_ user: Int64, token: String? = nil) -> Bool {
        state.withLock { state in
            let n = state.open[user, default: 0]
            guard n < perPerson else { return false }
            state.open[user] = n + 1
            if let token { state.tokens[token] = (user, (state.tokens[token]?.streams ?? 0) + 1) }
            return true
        }
    }

    func release(_ user: Int64, token: String? = nil) {
        state.withLock { state in
            if let n = state.open[user] { state.open[user] = n > 1 ? n - 1 : nil }
            if let token, let held = state.tokens[token] {
                state.tokens[token] = held.streams > 1 ? (held.user, held.streams - 1) : nil
            }
        }
    }

    func count(_ user: Int64) -> Int { state.withLock { $0.open[user, default: 0] } }

    /// True when `user` has no place left.
    func isFull(_ user: Int64) -> Bool { count(user) >= perPerson }

    /// True when `token` holds an open stream and its person has no place left. A token the quota
    /// has not seen is never refused here (its session is looked up as usual). A signed-out token
    /// still holding streams gets 429 rather than the sign-in page until they end: either way it
    /// opens nothing.
    func isFull(token: String) -> Bool {
        guard let user = state.withLock({ $0.tokens[token]?.user }) else { return false }
        return isFull(user)
    }
}
