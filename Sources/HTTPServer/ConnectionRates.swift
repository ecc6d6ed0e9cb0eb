/// New connections per client address, as token buckets: each address may open `burst`
/// connections at once and `rate` a second after that. A value with no clock and no lock (the
/// server keeps it under its state's lock and passes the time in), so its rules are unit tested.
///
/// Why: a client that reconnects whenever it is refused makes its refusals the load. One account
/// reopening its 492 refused event streams did so 1,100 times a second, each a new connection, a
/// request and a 429; they came in waves, and everyone else's p99 went from 4 to 15 ms
/// (script/bench abuse). Past its rate an address's connections are held like those past its
/// share: unread, a descriptor and no CPU, then reset.
struct ConnectionRates {
    let rate: Double
    let burst: Double
    private var buckets: [String: Bucket] = [:]

    private struct Bucket {
        var tokens: Double
        var at: UInt64
    }

    /// `rate` 0 turns the limit off.
    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = max(1, burst)
    }

    /// Addresses remembered now (those that opened connections lately).
    var count: Int { buckets.count }

    /// Takes one connection's token for `address` at time `now` (monotonic nanoseconds); false
    /// when the address has none left.
    mutating func take(_ address: String, now: UInt64) -> Bool {
        guard rate > 0 else { return true }
        var bucket = buckets[address].map { refilled($0, now: now) } ?? Bucket(tokens: burst, at: now)
        let allowed = bucket.tokens >= 1
        if allowed { bucket.tokens -= 1 }
        buckets[address] = bucket
        return allowed
    }

    /// Forgets the addresses whose bucket is full again: nothing about them needs remembering, so
    /// memory follows the addresses of the last few seconds, not every address ever seen.
    mutating func forgetRefilled(now: UInt64) {
        buckets = buckets.filter { refilled($0.value, now: now).tokens < burst }
    }

    private func refilled(_ bucket: Bucket, now: UInt64) -> Bucket {
        let seconds = now > bucket.at ? Double(now - bucket.at) / 1e9 : 0
        return Bucket(tokens: min(burst, bucket.tokens + seconds * rate), at: max(now, bucket.at))
    }
}
