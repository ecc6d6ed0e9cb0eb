import Foundation
import Postgres

/// A provider's call budget, shared by every instance through PostgreSQL (docs/providers.md): a
/// token bucket per provider key, drawn from before each API call. A row lock makes each draw
/// atomic, and the database clock is the one clock all instances agree on. A wait the provider
/// names (429 Retry-After, ratelimited, maxlag) pauses the bucket for everyone.
public final class ProviderBudget: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Calls earned per hour.
        public var perHour: Double
        /// Calls that may be made at once after a quiet spell.
        public var burst: Double

        public init(perHour: Double, burst: Double) {
            self.perHour = perHour
            self.burst = burst
        }

        /// Flickr allows 3,600 calls an hour per key: stay a sixth under it.
        public static let flickr = Limits(perHour: 3000, burst: 100)
        /// Wikimedia publishes no number for identified clients of api.php yet; 500 an hour is the one
        /// it publishes for anonymous API requests (docs/providers.md).
        public static let commons = Limits(perHour: 500, burst: 20)
    }

    /// Why calls are not made now.
    public enum WaitReason: String, Sendable, Equatable {
        /// Our own budget is spent.
        case budget
        /// The provider asked us to slow down (HTTP 429, ratelimited).
        case rateLimited = "rate_limited"
        /// The provider's replicas lag (maxlag).
        case lagged
    }

    public enum Draw: Sendable, Equatable {
        case granted
        case wait(seconds: Int, reason: WaitReason)
    }

    package let pool: PostgresPool
    /// The provider's key as the database knows it (never the API key itself).
    package let key: String
    package let keySource: String
    public let limits: Limits

    /// `secret` (an API key) is stored only as the first 12 hex digits of its SHA-256.
    public init(pool: PostgresPool, provider: String, secret: String? = nil, limits: Limits) {
        self.pool = pool
        self.limits = limits
        keySource = provider
        key = secret.map { "\(provider):\($0)" } ?? provider
    }

    /// The row's key: computed by PostgreSQL, so the API key never lands in a table.
    private static let keyExpression = """
        CASE WHEN position(':' IN $1) > 0
             THEN split_part($1, ':', 1) || ':' || left(encode(sha256(convert_to(substr($1, position(':' IN $1) + 1), 'UTF8')), 'hex'), 12)
             ELSE $1 END
        """

    /// Takes one call from the bucket, or says how long to wait for the next one. One statement,
    /// one round trip, since every search a pin drop waits for draws first: the sub-select locks
    /// the row and reads it as it was, the update writes the draw. A bucket not there yet is made
    /// first, once.
    public func draw() throws -> Draw {
        let rate = limits.perHour / 3600
        for attempt in 1...2 {
            let rows = try pool.query("""
                UPDATE provider_budgets b
                SET tokens = CASE WHEN o.paused THEN b.tokens WHEN o.tokens >= 1 THEN o.tokens - 1 ELSE o.tokens END,
                    refilled_at = CASE WHEN o.paused THEN b.refilled_at ELSE o.now END,
                    capacity = $2, refill_per_second = $3,
                    paused_until = CASE WHEN o.paused THEN b.paused_until END,
                    pause_reason = CASE WHEN o.paused THEN b.pause_reason END
                FROM (SELECT key, clock_timestamp() AS now,
                             least($2::float8, tokens + extract(epoch FROM clock_timestamp() - refilled_at) * $3::float8) AS tokens,
                             coalesce(paused_until > clock_timestamp(), false) AS paused,
                             ceil(extract(epoch FROM paused_until - clock_timestamp()))::int AS paused_for, pause_reason
                      FROM provider_budgets WHERE key = \(Self.keyExpression) FOR UPDATE) o
                WHERE b.key = o.key
                RETURNING o.tokens, o.paused, o.paused_for, o.pause_reason
                """, [key, limits.burst, rate])
            guard let row = rows.first else {
                guard attempt == 1 else { break }
                try pool.query("""
                    INSERT INTO provider_budgets (key, capacity, refill_per_second, tokens)
                    VALUES (\(Self.keyExpression), $2, $3, $2) ON CONFLICT (key) DO NOTHING
                    """, [key, limits.burst, rate])
                continue
            }
            if try row.decode("paused", as: Bool.self) {
                let reason = WaitReason(rawValue: try row.decode("pause_reason") ?? "") ?? .rateLimited
                return .wait(seconds: max(1, try row.decode("paused_for", as: Int?.self) ?? 1), reason: reason)
            }
            let tokens: Double = try row.decode("tokens")
            return tokens >= 1 ? .granted : .wait(seconds: max(1, Int(((1 - tokens) / rate).rounded(.up))), reason: .budget)
        }
        return .wait(seconds: 1, reason: .budget)  // the row went again at once (an operator's DELETE): next time
    }

    /// No calls from any instance for `seconds`: the provider said so.
    public func pause(seconds: Int, reason: WaitReason) throws {
        try pool.query("""
            UPDATE provider_budgets
            SET paused_until = greatest(coalesce(paused_until, clock_timestamp()), clock_timestamp() + make_interval(secs => $2::int)),
                pause_reason = $3
            WHERE key = \(Self.keyExpression)
            """, [key, seconds, reason.rawValue])
    }

    /// Keeps the provider's own words about a failure for /readyz and the operator.
    public func noteProblem(_ detail: String) {
        _ = try? pool.query("""
            UPDATE provider_budgets SET last_problem = $2, last_problem_at = clock_timestamp() WHERE key = \(Self.keyExpression)
            """, [key, String(detail.prefix(500))])
    }

    /// The last problem of the past hour, for /readyz.
    public func recentProblem() -> String? {
        guard let rows = try? pool.query("""
            SELECT last_problem FROM provider_budgets
            WHERE key = \(Self.keyExpression) AND last_problem_at > clock_timestamp() - interval '1 hour'
            """, [key]), let row = rows.first else { return nil }
        return try? row.decode("last_problem")
    }
}
