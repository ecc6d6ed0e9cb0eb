import Foundation
import Testing
@testable import Waiting

/// Waitable under real threads: what is handed over arrives once, a waiter wakes for its own
/// condition and not before, and a timed wait ends at its timeout and not sooner.
@Suite struct WaitableTests {
    /// Producers and consumers through one queue, with a seeded mix of waking one and all: every
    /// item is taken exactly once, and every consumer ends.
    @Test(arguments: [1, 2, 3, 4, 5]) func everyItemIsTakenExactlyOnce(seed: Int) {
        struct Queue { var items: [Int] = []; var closed = false }
        let queue = Waitable(Queue())
        let taken = Waitable<[Int]>([])
        let producers = 4, consumers = 3 + seed % 3, perProducer = 2_000
        let group = DispatchGroup()
        for c in 0..<consumers {
            group.enter()
            Thread {
                var mine: [Int] = []
                while let item = queue.wait(for: { q -> Int?? in
                    if !q.items.isEmpty { return .some(q.items.removeFirst()) }
                    return q.closed ? .some(nil) : nil
                }) { mine.append(item) }
                taken.change { $0 += mine }
                _ = c
                group.leave()
            }.start()
        }
        let producing = DispatchGroup()
        for p in 0..<producers {
            producing.enter()
            Thread {
                for n in 0..<perProducer {
                    let item = p * perProducer + n
                    queue.change(wake: (item &* (seed + 7)) % 5 == 0 ? .all : .one) { $0.items.append(item) }
                }
                producing.leave()
            }.start()
        }
        producing.wait()
        queue.change { $0.closed = true }
        #expect(group.wait(timeout: .now() + 60) == .success, "a consumer never ended")
        let all = taken.withLock { $0 }
        #expect(all.count == producers * perProducer && Set(all).count == all.count)
    }

    @Test func aWaiterWakesForItsConditionAndNotBefore() {
        let value = Waitable(0)
        let seen = Waitable<[Int]>([])
        let done = Finished()
        Thread {
            let got = value.wait(for: { $0 >= 3 ? $0 : nil })
            seen.change { $0.append(got) }
            done.finish()
        }.start()
        for n in 1...2 {
            value.change { $0 = n }
            usleep(20_000)
            #expect(seen.withLock { $0.isEmpty }, "woke at \(n)")
        }
        value.change { $0 = 3 }
        #expect(done.wait(seconds: 10))
        #expect(seen.withLock { $0 } == [3])
    }

    @Test func aTimedWaitEndsAtItsTimeoutNotBefore() {
        let value = Waitable(false)
        let start = ContinuousClock.now
        #expect(value.wait(for: { $0 ? true : nil }, timeout: .milliseconds(200)) == nil)
        #expect(ContinuousClock.now - start >= .milliseconds(200))
        // Already true: no wait at all, whatever the timeout.
        value.change { $0 = true }
        #expect(value.wait(for: { $0 ? true : nil }, timeout: .zero) == true)
        #expect(value.wait(for: { $0 ? true : nil }, timeout: .seconds(-5)) == true)
        #expect(value.wait(for: { $0 ? true : nil }, timeout: .seconds(Int64.max)) == true, "a huge timeout does not trap")
    }
}

/// A one-shot "finished" for the tests above, itself a Waitable.
final class Finished: Sendable {
    private let finished = Waitable(false)
    func finish() { finished.change { $0 = true } }
    func wait(seconds: Int) -> Bool { finished.wait(for: { $0 ? true : nil }, timeout: .seconds(seconds)) ?? false }
}
