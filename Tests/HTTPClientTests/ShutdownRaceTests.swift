import Dispatch
import Foundation
import Synchronization
import Testing
import HTTPClient

/// The app stops while album downloads still return their handles: `shutdown` and `giveBack` race
/// on the shared caches. Once, a shutdown racing a returned handle locked a freed mutex and hung
/// the test run at a TestApp's stop (fixed in HTTPClient: a handle is destroyed while still
/// counted as lent). Seeded rounds of requests from many threads with a shutdown at a random
/// moment: every request ends (200 or a thrown error), and so does the round.
@Suite(.timeLimit(.minutes(2))) struct ShutdownRaceTests {
    @Test(arguments: [1, 2, 3, 4])
    func aShutdownAmidRequestsNeverHangsOrCrashes(seed: UInt64) throws {
        let server = try TestHTTPServer { _ in Reply(status: 200, headers: [], body: Array("ok".utf8)) }
        defer { server.stop() }
        var random = SplitMix(seed: seed)
        for _ in 0..<10 {
            let client = makeClient(for: [server.origin])
            let threads = 6, each = 15
            let shutdownAfter = Int(random.next() % UInt64(threads * each))
            let done = Atomic<Int>(0), ok = Atomic<Int>(0)
            let group = DispatchGroup()
            for _ in 0..<threads {
                DispatchQueue.global().async(group: group) {
                    for _ in 0..<each {
                        if (try? client.get(server.origin + "/x"))?.status == 200 { ok.add(1, ordering: .relaxed) }
                        if done.add(1, ordering: .relaxed).newValue == shutdownAfter { client.shutdown() }
                    }
                }
            }
            #expect(group.wait(timeout: .now() + 60) == .success, "a round hung (seed \(seed))")
            client.shutdown()
            // Requests after a shutdown still work, each on a connection of its own.
            #expect(try client.get(server.origin + "/after").status == 200)
            #expect(ok.load(ordering: .relaxed) == threads * each, "every request answered")
        }
    }
}

/// A small seeded generator, so a failing round can be run again.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
