/// New connections per client address, as token buckets: each address may open `burst`
/// connections at once and `rate` a second after that. A value with no clock and no lock (the
/// admission state machine keeps it and passes the time in), so its rules are unit tested.
///
/// Why: a client that reconnects whenever it is refused makes its refusals the load; past its
/// rate, an address is told so (see `AdmissionStateMachine`).
struct ConnectionRates {
    /// `burst` at once, `rate` a second after that.
    private let rule: TokenBuckets<String>.Rule
    /// Bounded (the oldest dropped first), so however many addresses connect, memory and the cost
    /// of a connection stay the same.
    private var buckets = TokenBuckets<String>(limit: 100_000)

    /// `rate` 0 turns the limit off.
    init(rate: Double, burst: Double) {
        rule = .init(capacity: burst, perSecond: rate)
    }

    /// Addresses remembered now (those that opened connections lately).
    var count: Int { buckets.count }

    /// Takes one connection's token for `address` at `now`; false when the address has none left.
    mutating func take(_ address: String, now: ContinuousClock.Instant) -> Bool {
        guard rule.perSecond > 0 else { return true }
        return buckets.take(address, rule, now: now)
    }

    /// Forgets the addresses whose bucket is full again: nothing about them needs remembering, so
    /// memory follows the addresses of the last few seconds, not every address ever seen.
    mutating func forgetRefilled(now: ContinuousClock.Instant) {
        buckets.forgetRefilled(rule, now: now)
    }
}
