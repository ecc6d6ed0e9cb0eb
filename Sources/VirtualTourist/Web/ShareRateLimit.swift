import Foundation
import HTTPServer
import Synchronization

/// What a visitor of share links may do, counted per address (IPv6: its /64) and per link with
/// token buckets. It counts what a person does, not what a page loads:
/// - **pages**: a link's page, a map link's album, a photo's page, a password sent;
/// - **loads**: what a page that was let in goes on to ask for (album.json and .html, the event
///   stream, thumbnails and photos, the preview image), in a budget 20 times larger, so a household
///   behind one router opening the same albums is never refused;
/// - **misses**: tokens that do not exist. A crawler guessing tokens is refused after a few dozen
///   guesses, before it costs the database more than one lookup each;
/// - **password tries** per link, and per address on a link: each costs a yescrypt hash.
///
/// One table of bounded size (`TokenBuckets`): the cost of a request and the memory stay the same
/// however many addresses come.
public final class ShareRateLimit: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Pages a minute one address may open under share links, with a burst of as many.
        /// 0: no limit (on pages and loads alike).
        public var pagesPerAddressPerMinute = 300
        /// Loads a minute one address may make: a page brings its thumbnails and data with it.
        public var loadsPerAddressPerMinute: Int { pagesPerAddressPerMinute * 20 }
        /// One link takes 5 times an address's pages and loads from everyone together.
        public static let linkShare = 5
        /// Made-up tokens one address may try: this many at once, as many again each hour.
        public var missesPerAddressPerHour = 30
        /// Password tries one link takes in ten minutes, and one address on one link: a guesser
        /// gets 10, not thousands.
        public var passwordTriesPer10Minutes = 10
        /// Buckets remembered at most (the oldest dropped first).
        public var tableLimit = 100_000

        public init() {}
    }

    /// What a request to a share link is, for counting.
    public enum Visit: Sendable { case page, load }

    enum Key: Hashable, Sendable {
        case pages(String), loads(String), misses(String)
        case linkPages(Int64), linkLoads(Int64)
        case passwordTries(link: Int64)
        case passwordTriesFrom(String, link: Int64)
    }

    let limits: Limits
    private let buckets: Mutex<TokenBuckets<Key>>

    init(_ limits: Limits) {
        self.limits = limits
        buckets = Mutex(TokenBuckets(limit: limits.tableLimit))
    }

    /// Buckets remembered now.
    var count: Int { buckets.withLock { $0.count } }

    /// nil: not limited.
    private func rule(_ key: Key) -> TokenBuckets<Key>.Rule? {
        let pages = limits.pagesPerAddressPerMinute, loads = limits.loadsPerAddressPerMinute
        let share = Limits.linkShare
        switch key {
        case .pages: return pages > 0 ? .init(pages, per: 60) : nil
        case .loads: return pages > 0 ? .init(loads, per: 60) : nil
        case .linkPages: return pages > 0 ? .init(pages * share, per: 60) : nil
        case .linkLoads: return pages > 0 ? .init(loads * share, per: 60) : nil
        case .misses: return limits.missesPerAddressPerHour > 0 ? .init(limits.missesPerAddressPerHour, per: 3600) : nil
        case .passwordTries, .passwordTriesFrom:
            return limits.passwordTriesPer10Minutes > 0 ? .init(limits.passwordTriesPer10Minutes, per: 600) : nil
        }
    }

    /// Takes one token from each key's bucket, or from none when any is empty (false).
    func allow(_ keys: [Key], now: ContinuousClock.Instant = .now) -> Bool {
        let ruled = keys.compactMap { key in rule(key).map { (key, $0) } }
        guard !ruled.isEmpty else { return true }
        return buckets.withLock { $0.take(ruled, now: now) }
    }

    /// An address's visit, before its token is looked up: false when the address is past its
    /// pages or loads, or has guessed too many tokens that do not exist.
    func allowVisit(_ visit: Visit, from address: String, now: ContinuousClock.Instant = .now) -> Bool {
        let key: Key = visit == .page ? .pages(address) : .loads(address)
        let misses = rule(.misses(address)), visits = rule(key)
        // Every share request passes here, thumbnails included: one lock for both buckets.
        return buckets.withLock { buckets in
            if let misses, buckets.tokens(.misses(address), misses, now: now) < 1 { return false }
            guard let visits else { return true }
            return buckets.take(key, visits, now: now)
        }
    }

    /// A link's share of a visit, once the token is known to be open.
    func allowVisit(_ visit: Visit, to link: Int64, now: ContinuousClock.Instant = .now) -> Bool {
        allow([visit == .page ? .linkPages(link) : .linkLoads(link)], now: now)
    }

    /// The address asked for a token that does not exist.
    func missed(from address: String, now: ContinuousClock.Instant = .now) {
        guard let misses = rule(.misses(address)) else { return }
        buckets.withLock { $0.charge(.misses(address), misses, now: now) }
    }
}
