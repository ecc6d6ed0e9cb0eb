import Foundation

/// Seeded exploration of a state machine (the way FoundationDB's simulation and swift-nio's
/// state-machine tests work): many long random sequences of steps, each replayed by a `check`
/// that feeds them to the machine and returns the first invariant broken. A failure is shrunk to
/// the shortest sequence that still breaks it and reported with its seed, so it can be replayed
/// and read. Steps are choices the check interprets against the machine's state (answer the
/// third thing in flight, let 40 s pass), so any subsequence is still a valid run.

/// SplitMix64: a tiny generator whose sequence depends only on its seed (never the system's random).
public struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// How many sequences to run: `quick` in the quick loop, or EXPLORE_SEQUENCES when set (the slow
/// stage sets it to 1,000,000).
public func explorationCount(quick: Int) -> Int {
    if let text = getenvText("EXPLORE_SEQUENCES"), let count = Int(text), count > 0 { return count }
    return quick
}

private func getenvText(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}

/// Runs `sequences` sequences (seeds `firstSeed`…), each of a length drawn from `length`, made of
/// `step`s drawn from the seeded generator. `check` replays one (with its seed, for whatever the
/// run draws once: a kind of album, its settings; it stays the same while the steps shrink) and
/// returns what broke (nil: all held). Returns nil when every sequence held, or the first failure: its seed, the broken
/// invariant and the shortest sequence found that still breaks one.
public func explore<Step>(sequences: Int, firstSeed: UInt64 = 1, length: ClosedRange<Int>,
                          step: (inout SeededGenerator) -> Step, check: (UInt64, [Step]) -> String?) -> String? {
    for seed in firstSeed..<(firstSeed + UInt64(sequences)) {
        var random = SeededGenerator(seed: seed)
        let count = Int.random(in: length, using: &random)
        let steps = (0..<count).map { _ in step(&random) }
        guard let broken = check(seed, steps) else { continue }
        let (shortest, why) = shrink(steps, broken) { check(seed, $0) }
        let listing = shortest.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n")
        return "seed \(seed) broke: \(broken)\nshortest sequence (\(shortest.count) of \(steps.count) steps) breaks: \(why)\n\(listing)"
    }
    return nil
}

/// Drops chunks (halves, quarters, … single steps) while the sequence still fails.
private func shrink<Step>(_ steps: [Step], _ broken: String, _ check: ([Step]) -> String?) -> ([Step], String) {
    var current = steps, why = broken
    var chunk = max(1, current.count / 2)
    while true {
        var removed = false
        var start = 0
        while start < current.count {
            var candidate = current
            candidate.removeSubrange(start..<min(current.count, start + chunk))
            if let failure = check(candidate) {
                current = candidate
                why = failure
                removed = true
            } else {
                start += chunk
            }
        }
        if chunk == 1 && !removed { return (current, why) }
        if !removed { chunk = max(1, chunk / 2) }
    }
}
