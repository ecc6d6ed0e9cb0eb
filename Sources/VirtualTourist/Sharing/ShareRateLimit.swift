import Foundation
import Synchronization

/// Requests to share links, counted per address and per link with token buckets: one client
/// crawling for links, or a link posted somewhere busy, is answered with 429 before it costs the
/// database more than one lookup. `now` is passed in, so a bucket is plain arithmetic.
public final class ShareRateLimit: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Requests a minute from one address (IPv6: its /64) to any share link, with a burst of
        /// the same size: a visit is the page, its grid's thumbnails and a few more. 0: no limit.
        public var perAddressPerMinute = 300
        /// Requests a minute to one link from everyone together (5 times the address's).
        public var perLinkPerMinute: Int { perAddressPerMinute * 5 }
        /// Password tries one link takes in ten minutes, and one address on one link: each costs a
        /// yescrypt hash, and a guesser gets 10, not thousands.
        public var passwordTriesPer10Minutes = 10

        public init() {}
    }

    enum Key: Hashable, Sendable {
        case address(String)
        case link(Int64)
        case passwordTries(link: Int64)
        case passwordTriesFrom(String, link: Int64)
    }

    let limits: Limits
    private struct Bucket { var tokens: Double; var at: Double }
    private let buckets = Mutex<[Key: Bucket]>([:])

    init(_ limits: Limits) { self.limits = limits }

    /// (capacity, refill per second); nil: not limited.
    private func rule(_ key: Key) -> (Double, Double)? {
        switch key {
        case .address: limits.perAddressPerMinute > 0 ? (Double(limits.perAddressPerMinute), Double(limits.perAddressPerMinute) / 60) : nil
        case .link: limits.perLinkPerMinute > 0 ? (Double(limits.perLinkPerMinute), Double(limits.perLinkPerMinute) / 60) : nil
        case .passwordTries, .passwordTriesFrom:
            limits.passwordTriesPer10Minutes > 0 ? (Double(limits.passwordTriesPer10Minutes), Double(limits.passwordTriesPer10Minutes) / 600) : nil
        }
    }

    /// Takes one token from each key's bucket, or from none when any is empty (false).
    func allow(_ keys: [Key], now: Double = ProcessInfo.processInfo.systemUptime) -> Bool {
        let ruled = keys.compactMap { key in rule(key).map { (key, $0.0, $0.1) } }
        guard !ruled.isEmpty else { return true }
        return buckets.withLock { buckets in
            // Buckets untouched for ten minutes are full again and say nothing a new one would not.
            if buckets.count > 50_000 { buckets = buckets.filter { now - $0.value.at < 600 } }
            var taken: [(Key, Bucket)] = []
            for (key, capacity, rate) in ruled {
                var bucket = buckets[key] ?? Bucket(tokens: capacity, at: now)
                bucket.tokens = min(capacity, bucket.tokens + max(0, now - bucket.at) * rate)
                bucket.at = now
                guard bucket.tokens >= 1 else {
                    buckets[key] = bucket
                    return false
                }
                bucket.tokens -= 1
                taken.append((key, bucket))
            }
            for (key, bucket) in taken { buckets[key] = bucket }
            return true
        }
    }
}
