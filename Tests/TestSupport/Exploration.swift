/// Exploring a state machine with long random event sequences instead of hand-picked ones: a
/// seeded generator makes every sequence reproducible from its seed, and a failing sequence is
/// shrunk to one short enough to read before it is reported.
///
/// Events should not name things the machine handed out (tickets, connections) directly but by
/// position ("finish the 3rd one out, modulo how many are out"), so a sequence stays meaningful
/// when the shrinker drops events from it.

/// SplitMix64 (Steele, Lea, Flood 2014): small, fast, and the same numbers on every platform and
/// run for a seed — the system generator is none of these.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
}

/// Runs one sequence per seed in `seeds`, `length` events long (drawn per seed), each event made by
/// `generate`; `run` plays a sequence from a fresh start and returns why it broke an invariant, or
/// nil. Returns nil when every sequence passed, else the seed, the shrunk sequence (one event a
/// line) and `run`'s description of its failure — for `Issue.record` or `#expect(failure == nil)`.
public func explore<Event>(
    seeds: Range<UInt64>,
    length: ClosedRange<Int>,
    generate: (inout SeededGenerator) -> Event,
    run: ([Event]) -> String?
) -> String? {
    explore(seeds: seeds, length: length, generate: generate, run: { (_: UInt64, events: [Event]) in run(events) })
}

/// `explore` for a machine whose start the seed also draws (a kind of album, its settings): `run`
/// gets the seed with the events, and keeps it while the events are shrunk.
public func explore<Event>(
    seeds: Range<UInt64>,
    length: ClosedRange<Int>,
    generate: (inout SeededGenerator) -> Event,
    run: (UInt64, [Event]) -> String?
) -> String? {
    for seed in seeds {
        var random = SeededGenerator(seed: seed)
        let count = Int.random(in: length, using: &random)
        let events = (0..<count).map { _ in generate(&random) }
        guard run(seed, events) != nil else { continue }
        let shortest = shrink(events, failing: { run(seed, $0) != nil })
        let why = run(seed, shortest) ?? "(no longer fails once shrunk: the machine is not deterministic)"
        let lines = shortest.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n")
        return """
            seed \(seed): a sequence of \(events.count) events broke an invariant; shrunk to \(shortest.count):
            \(lines)
            \(why)
            """
    }
    return nil
}

/// The shortest sequence found that still fails: drops halves, then quarters… then single events
/// (delta debugging's complement step), until no single event can go. Not the shortest there is,
/// but one no event can be dropped from.
public func shrink<Event>(_ events: [Event], failing: ([Event]) -> Bool) -> [Event] {
    var current = events
    var chunk = max(1, current.count / 2)
    while !current.isEmpty {
        var dropped = false
        var start = 0
        while start < current.count {
            var candidate = current
            candidate.removeSubrange(start..<min(start + chunk, current.count))
            if failing(candidate) {
                current = candidate
                dropped = true
            } else {
                start += chunk
            }
        }
        if chunk == 1 && !dropped { break }
        if !dropped { chunk = max(1, chunk / 2) }
    }
    return current
}
