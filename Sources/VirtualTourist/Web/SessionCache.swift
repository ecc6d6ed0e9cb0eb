import AlbumWing
import Domain
import LRU
import Synchronization

/// The sessions requests have proved, kept in memory per instance, so a signed-in request needs no
/// round trip for its session, and the kept map page none at all (docs/architecture.md, "Sessions
/// kept in memory"). A kept session is everything the session's statement read
/// (`AccountStore.session`): the person, the CSRF token, the shared map shown and the person's role
/// there, the saved region, the map's version and the switcher's maps.
///
/// Kept right by NOTIFY: session_cache (migration 0126) names the people and map holders whose rows
/// changed — a person renamed or disabled, a membership or a saved region changed — and sessions by
/// their token's hash; a map whose version moved (any member's pin, a photo count, an
/// administrator's SQL) only has its sessions forget the version: the next view renders the page
/// with the session still kept, and the version it read with the pins is learnt (`learn`);
/// photo_access (migrations 0115, 0116, 0120) names sessions deleted (a sign-out, a
/// password reset, a removed member) and people deleted. Every instance drops what they name when
/// it hears them, and the instance that made a change drops its own at once (`WebPipeline`: every
/// state-changing request forgets its person and its map).
///
/// The bound: a change reaches every instance within the notification's delay (milliseconds). The
/// cache is used only while the LISTEN link is up, emptied when it comes back (notifications sent
/// while it was down are lost), and an entry lives at most `lifetime` even if a notification were
/// lost some other way, so nothing is ever served more than `lifetime` stale. The same bound covers
/// a session's expiry, which is checked when the session is read again.
///
/// Bounded: at most `maxCount` sessions and `maxBytes` of their estimated size, the least recently
/// used dropped first; both in /metrics.
final class SessionCache: Sendable {
    static let channel = "session_cache"

    private struct Entry {
        var session: Session
        /// sessions.token_hash in hex, as the notifications name a session.
        let hash: String
        let expires: ContinuousClock.Instant
        /// Whose changes end it: the person, and the map's holder when it is a shared map.
        var people: [Int64] {
            session.map.holder == session.user.id ? [session.user.id] : [session.user.id, session.map.holder]
        }

        /// Bytes held, estimated: the strings' bytes and a fixed share for the entry, its list
        /// node and the two indexes' slots.
        var cost: Int {
            Self.fixedCost + session.token.utf8.count + session.csrfToken.utf8.count + hash.utf8.count
                + session.user.email.utf8.count + session.user.displayName.utf8.count
                + session.map.name.utf8.count + (session.mapsJSON?.utf8.count ?? 0)
        }
        static let fixedCost = 400
    }

    private struct State {
        var entries = LRUList<String, Entry>()
        var byPerson: [Int64: Set<String>] = [:]
        var byHash: [String: String] = [:]
        /// Moved on by every forgetting, so a fill that read the database before one keeps nothing.
        var changes: UInt64 = 0

        mutating func remove(_ token: String) {
            guard let entry = entries.get(token) else { return }
            entries.remove(token)
            unindex(token, entry)
        }

        mutating func unindex(_ token: String, _ entry: Entry) {
            for person in entry.people {
                byPerson[person]?.remove(token)
                if byPerson[person]?.isEmpty == true { byPerson[person] = nil }
            }
            byHash[entry.hash] = nil
        }
    }

    let lifetime: Duration
    let maxCount: Int
    let maxBytes: Int
    private let state = Mutex(State())
    /// Whether notifications are being heard now (the LISTEN link's state).
    private let linkUp: @Sendable () -> Bool

    init(lifetime: Duration = .seconds(10), maxCount: Int = 50_000, maxBytes: Int = 32 << 20,
         linkUp: @escaping @Sendable () -> Bool) {
        self.lifetime = lifetime
        self.maxCount = max(0, maxCount)
        self.maxBytes = max(0, maxBytes)
        self.linkUp = linkUp
    }

    // MARK: Reading

    /// The kept session behind a cookie's token, when the cache may be used and holds a live one.
    func session(token: String) -> Session? {
        guard linkUp() else { return nil }
        let now = ContinuousClock.now
        return state.withLock { state in
            guard let entry = state.entries.get(token) else { return nil }
            guard entry.expires > now else {
                state.remove(token)
                return nil
            }
            return entry.session
        }
    }

    // MARK: Filling

    /// Taken before the session is read from the database: `remember(_:since:)` keeps nothing
    /// when anything was forgotten in between (it may concern what was read).
    func mark() -> UInt64 { state.withLock { $0.changes } }

    func remember(_ session: Session, since mark: UInt64) {
        guard linkUp() else { return }
        // Never past the session's own expiry: no request reads it (and refuses it) before then.
        let lives = session.secondsLeft.map { min(lifetime, .milliseconds(Int64(max(0, $0) * 1000))) } ?? lifetime
        let entry = Entry(session: session.kept, hash: SHA256.hex(Array(session.token.utf8)), expires: .now + lives)
        let token = session.token
        let (maxCount, maxBytes) = (maxCount, maxBytes)
        state.withLock { state in
            guard state.changes == mark else { return }
            state.remove(token)
            state.entries.put(token, entry, cost: entry.cost)
            for person in entry.people { state.byPerson[person, default: []].insert(token) }
            state.byHash[entry.hash] = token
            var evicted: [(String, Entry)] = []
            state.entries.evict(maxCount: maxCount, maxCost: maxBytes) { evicted.append(($0, $1)) }
            for (token, entry) in evicted { state.unindex(token, entry) }
        }
    }

    // MARK: Forgetting

    /// The sessions of these people, and those showing maps they hold.
    func forget(people: some Sequence<Int64>) {
        state.withLock { state in
            state.changes &+= 1
            for person in people {
                for token in state.byPerson[person] ?? [] { state.remove(token) }
            }
        }
    }

    /// The maps whose version moved: the sessions showing them keep everything but the version,
    /// so no page is served from memory for them until a view has read the new one (`learn`).
    func forgetVersions(of holders: some Sequence<Int64>) {
        state.withLock { state in
            state.changes &+= 1
            for holder in holders {
                for token in state.byPerson[holder] ?? [] {
                    _ = state.entries.update(token, { entry in
                        if entry.session.map.holder == holder { entry.session.mapVersion = nil }
                    }, cost: { $0.cost })
                }
            }
        }
    }

    /// The map's version a page read with its pins, for the kept session of `token`, when nothing
    /// was forgotten since `mark` (taken before that read): the next view is served from memory.
    func learn(version: Int64, holder: Int64, token: String, since mark: UInt64) {
        state.withLock { state in
            guard state.changes == mark else { return }
            _ = state.entries.update(token, { entry in
                if entry.session.map.holder == holder { entry.session.mapVersion = version }
            }, cost: { $0.cost })
        }
    }

    /// Sessions by their token's SHA-256 in hex, as the notifications name them.
    func forget(sessionHashes hashes: some Sequence<Substring>) {
        state.withLock { state in
            state.changes &+= 1
            for hash in hashes {
                if let token = state.byHash[String(hash)] { state.remove(token) }
            }
        }
    }

    /// Notifications may have been lost (the link was down): nothing kept can be trusted.
    func forgetEverything() {
        state.withLock { state in
            state.changes &+= 1
            state.entries = LRUList()
            state.byPerson = [:]
            state.byHash = [:]
        }
    }

    /// A NOTIFY session_cache or photo_access payload: KIND:id,id,… (u: people or map holders,
    /// v: map holders whose version moved, s: session token hashes; photo_access's p: and ph: name pins and photos, which a session
    /// does not hold) or * for everything; anything else forgets everything.
    func received(_ payload: String) {
        guard let colon = payload.firstIndex(of: ":") else { return forgetEverything() }
        let ids = payload[payload.index(after: colon)...].split(separator: ",")
        switch payload[..<colon] {
        case "u": forget(people: ids.compactMap { Int64($0) })
        case "v": forgetVersions(of: ids.compactMap { Int64($0) })
        case "s": forget(sessionHashes: ids)
        case "p", "ph": return
        default: forgetEverything()
        }
    }

    // MARK: Size

    /// What is wrong with the indexes, if anything (tests): every kept session is found by its
    /// hash and under each of its people, and the indexes name nothing else.
    func indexProblem() -> String? {
        state.withLock { state in
            var problem: String?
            var named = 0
            state.entries.forEach { token, entry in
                if state.byHash[entry.hash] != token { problem = "session \(token.prefix(6)) not found by its hash" }
                for person in entry.people where state.byPerson[person]?.contains(token) != true {
                    problem = "session \(token.prefix(6)) not found under person \(person)"
                }
                named += entry.people.count
            }
            if state.byHash.count != state.entries.count { problem = "\(state.byHash.count) hashes for \(state.entries.count) sessions" }
            let indexed = state.byPerson.values.reduce(0) { $0 + $1.count }
            if indexed != named { problem = "\(indexed) tokens under people for \(named) expected" }
            return problem
        }
    }

    var count: Int { state.withLock { $0.entries.count } }
    var bytes: Int { state.withLock { $0.entries.totalCost } }
}
