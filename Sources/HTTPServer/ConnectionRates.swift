/// New connections per client address, as token buckets: each address may open `burst`
/// connections at once and `rate` a second after that. A value with no clock and no lock (the
/// admission state machine keeps it and passes the time in), so its rules are unit tested.
///
/// Why: a client that reconnects whenever it is refused makes its refusals the load; past its
/// rate, an address is told so (see `AdmissionStateMachine`).
struct ConnectionRates {
    let rate: Double
    let burst: Double
    private var buckets: [String: Bucket] = [:]

    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }

    /// `rate` 0 turns the limit off.
    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = max(1, burst)
    }

    /// Addresses remembered now (those that opened connections lately).
    var count: Int { buckets.count }

    /// Takes one connection's token for `address` at `now`; false when the address has none left.
    mutating func take(_ address: String, now: ContinuousClock.Instant) -> Bool {
        guard rate > 0 else { return true }
        var bucket = buckets[address].map { refilled($0, now: now) } ?? Bucket(tokens: burst, at: now)
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        buckets[address] = bucket
        return allowed
    }

    /// Forgets the addresses whose bucket is full again: nothing about them needs remembering, so
    /// memory follows the addresses of the last few seconds, not every address ever seen.
    mutating func forgetRefilled(now: ContinuousClock.Instant) {
        buckets = buckets.filter { refilled($0.value, now: now).tokens < burst }
    }

    private func refilled(_ bucket: Bucket, now: ContinuousClock.Instant) -> Bucket {
        let seconds = now > bucket.at ? (now - bucket.at) / .seconds(1) : 0
        return Bucket(tokens: min(burst, bucket.tokens + seconds * rate), at: max(now, bucket.at))
    }
}
