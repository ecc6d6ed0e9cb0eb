import Testing
import TestSupport

/// The explorer itself: the generator is the published SplitMix64, and a failure comes back shrunk.
@Suite struct ExplorationTests {
    @Test func theGeneratorIsSplitMix64() {
        var random = SeededGenerator(seed: 0)
        #expect(random.next() == 0xE220_A839_7B1D_CDAF)
        #expect(random.next() == 0x6E78_9E6A_A1B9_65F4)
    }

    /// A sequence fails when a 3 comes somewhere before a 7: whatever else was drawn, the report
    /// names the seed and only those two events.
    @Test func aFailureIsShrunkToTheEventsThatMatter() throws {
        let failure = explore(seeds: 0..<1000, length: 1...60, generate: { Int.random(in: 0..<10, using: &$0) }) { events in
            guard let three = events.firstIndex(of: 3), events[three...].contains(7) else { return nil }
            return "a 3 before a 7"
        }
        let report = try #require(failure)
        #expect(report.contains("seed "))
        #expect(report.hasSuffix("shrunk to 2:\n  0: 3\n  1: 7\na 3 before a 7"))
    }

    @Test func sequencesThatHoldReportNothing() {
        #expect(explore(seeds: 0..<100, length: 0...20, generate: { _ in () }, run: { _ in nil }) == nil)
    }
}
