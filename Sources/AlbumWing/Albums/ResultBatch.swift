/// An album's finished downloads waiting to be written together (`AlbumJobQueue.storeResults`): one
/// statement and one NOTIFY per batch rather than per photo. A value with no clock and no lock: the
/// album's download slots keep it under a mutex and pass the time in, so its rules are tested on
/// values (Tests/VirtualTouristTests/ResultBatchTests).
///
/// A batch is due when `size` results wait, when the oldest has waited `maxAge` (so a slow album
/// still shows its photos as they come), or at the end of the album (`rest`). With `firstAtOnce`,
/// the album's first result is due as soon as it lands (with whatever else waits by then): the
/// page's first photo waits for no other download (script/bench pindrop); batching starts after it.
package struct ResultBatch<Result> {
    package let size: Int
    package let maxAge: Duration
    package let firstAtOnce: Bool
    private(set) var waiting: [Result] = []
    /// When the oldest waiting result arrived, or the last batch was taken.
    private var since: ContinuousClock.Instant
    /// Whether a batch was taken yet.
    private var taken = false

    package init(size: Int, maxAge: Duration, now: ContinuousClock.Instant, firstAtOnce: Bool = false) {
        self.size = max(1, size)
        self.maxAge = maxAge
        self.firstAtOnce = firstAtOnce
        self.since = now
    }

    /// When the oldest waiting result arrived (nil: none waits).
    package var oldest: ContinuousClock.Instant? { waiting.isEmpty ? nil : since }

    /// A download finished at `now`: true when a batch is due (take it with `take`).
    package mutating func add(_ result: Result, now: ContinuousClock.Instant) -> Bool {
        if waiting.isEmpty { since = now }
        waiting.append(result)
        return isDue(now: now, rest: false)
    }

    /// Whether a batch is due at `now`; with `rest`, whatever waits is.
    package func isDue(now: ContinuousClock.Instant, rest: Bool) -> Bool {
        waiting.count >= size || (!waiting.isEmpty && (rest || now - since >= maxAge || (firstAtOnce && !taken)))
    }

    /// The batch due at `now` (at most `size` results, the oldest first), taken out; nil when none
    /// is due.
    package mutating func take(now: ContinuousClock.Instant, rest: Bool) -> [Result]? {
        guard isDue(now: now, rest: rest) else { return nil }
        let batch = Array(waiting.prefix(size))
        taken = true
        waiting.removeFirst(batch.count)
        since = now
        return batch
    }

    /// A batch whose write failed goes back to the front: taken out and lost, its photos would stay
    /// pending under an album that then finished.
    package mutating func putBack(_ batch: [Result]) {
        waiting.insert(contentsOf: batch, at: 0)
    }
}
