import Testing
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The album's result batching on values: by count, by age, the rest at the end, and a failed
/// write put back in front, with no clock and no database.
@Suite struct ResultBatchTests {
    let t0 = ContinuousClock.now

    @Test func aBatchIsDueAtItsSize() {
        var batch = ResultBatch<Int>(size: 3, maxAge: .seconds(60), now: t0)
        #expect(batch.add(1, now: t0) == false)
        #expect(batch.add(2, now: t0) == false)
        #expect(batch.take(now: t0, rest: false) == nil, "two of three, young: not due")
        #expect(batch.add(3, now: t0) == true)
        #expect(batch.add(4, now: t0) == true, "still a full batch waiting")
        #expect(batch.take(now: t0, rest: false) == [1, 2, 3], "at most `size`, the oldest first")
        #expect(batch.take(now: t0, rest: false) == nil)
        #expect(batch.waiting == [4])
    }

    @Test func aBatchIsDueWhenItsOldestHasWaitedItsAge() {
        let age = Duration.milliseconds(250)
        var batch = ResultBatch<Int>(size: 10, maxAge: age, now: t0)
        #expect(batch.add(1, now: t0 + .seconds(5)) == false, "the age counts from the first result, not from the start")
        #expect(batch.add(2, now: t0 + .seconds(5) + age - .milliseconds(1)) == false)
        #expect(batch.isDue(now: t0 + .seconds(5) + age, rest: false))
        #expect(batch.add(3, now: t0 + .seconds(5) + age) == true)
        #expect(batch.take(now: t0 + .seconds(6), rest: false) == [1, 2, 3])
        #expect(!batch.isDue(now: t0 + .seconds(60), rest: false), "nothing waits: never due")
    }

    @Test func takingABatchRestartsTheAgeOfWhatRemains() {
        var batch = ResultBatch<Int>(size: 2, maxAge: .seconds(1), now: t0)
        _ = batch.add(1, now: t0)
        _ = batch.add(2, now: t0)
        _ = batch.add(3, now: t0)
        #expect(batch.take(now: t0 + .seconds(2), rest: false) == [1, 2])
        #expect(batch.take(now: t0 + .seconds(2), rest: false) == nil, "the remainder waits from the take")
        #expect(batch.take(now: t0 + .seconds(3), rest: false) == [3])
    }

    @Test func theRestIsDueAtTheEndInBatchesOfItsSize() {
        var batch = ResultBatch<Int>(size: 2, maxAge: .seconds(60), now: t0)
        #expect(batch.take(now: t0, rest: true) == nil, "nothing to write")
        for i in 1...3 { _ = batch.add(i, now: t0) }
        #expect(batch.take(now: t0, rest: true) == [1, 2])
        #expect(batch.take(now: t0, rest: true) == [3])
        #expect(batch.take(now: t0, rest: true) == nil)
    }

    @Test func aFailedWriteGoesBackInFront() {
        var batch = ResultBatch<Int>(size: 2, maxAge: .seconds(60), now: t0)
        for i in 1...3 { _ = batch.add(i, now: t0) }
        let taken = batch.take(now: t0, rest: false)!
        _ = batch.add(4, now: t0)
        batch.putBack(taken)
        #expect(batch.waiting == [1, 2, 3, 4])
        #expect(batch.take(now: t0, rest: false) == [1, 2])
    }

    @Test func theFirstResultIsDueAtOnceWhenAsked() {
        var batch = ResultBatch<Int>(size: 3, maxAge: .seconds(60), now: t0, firstAtOnce: true)
        #expect(batch.take(now: t0, rest: false) == nil, "nothing waits: not due")
        #expect(batch.add(1, now: t0) == true, "the album's first photo waits for no other")
        #expect(batch.take(now: t0, rest: false) == [1])
        #expect(batch.add(2, now: t0) == false, "from the second on, batches as usual")
        #expect(batch.add(3, now: t0) == false)
        #expect(batch.take(now: t0, rest: false) == nil)
        #expect(batch.add(4, now: t0) == true)
        #expect(batch.take(now: t0, rest: false) == [2, 3, 4])
    }

    @Test func theFirstBatchTakesWhatWaitsByThen() {
        var batch = ResultBatch<Int>(size: 3, maxAge: .seconds(60), now: t0, firstAtOnce: true)
        #expect(batch.add(1, now: t0) == true)
        #expect(batch.add(2, now: t0) == true, "not taken yet: still due")
        #expect(batch.take(now: t0, rest: false) == [1, 2], "one statement for both")
        #expect(batch.add(3, now: t0) == false)
    }

    @Test func aSizeBelowOneIsOne() {
        var batch = ResultBatch<Int>(size: 0, maxAge: .seconds(60), now: t0)
        #expect(batch.add(1, now: t0) == true)
        #expect(batch.take(now: t0, rest: false) == [1])
    }
}
