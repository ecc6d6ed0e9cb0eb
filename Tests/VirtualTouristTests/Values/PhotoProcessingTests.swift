import Foundation
import Synchronization
import Testing
@testable import AlbumWing

/// The line where own photos' versions are made: a slot per core, one photo per person at a time,
/// a person's next photo behind everyone who waited meanwhile, bounded in length and in patience.
@Suite struct PhotoProcessingTests {
    /// Runs `work` on a thread of its own; the returned group is left when it ends.
    static func spawn(_ work: @escaping @Sendable () -> Void) -> DispatchGroup {
        let group = DispatchGroup()
        group.enter()
        Thread.detachNewThread { work(); group.leave() }
        return group
    }

    /// Ann queues five photos, then Bob one: with one slot, Bob's goes second, not sixth.
    @Test func anotherPersonsPhotoGoesNextNotLast() throws {
        let line = PhotoProcessing(slots: 1, waiting: 10, lineLimit: 10)
        let order = Mutex<[String]>([])
        let gate = DispatchSemaphore(value: 0)
        var groups = [Self.spawn { _ = try? line.run(for: 1) { gate.wait(); order.withLock { $0.append("ann-0") } } }]
        while line.load.running == 0 { usleep(1000) }
        for n in 1...4 {
            groups.append(Self.spawn { _ = try? line.run(for: 1) { order.withLock { $0.append("ann-\(n)") } } })
            while line.load.waiting < n { usleep(1000) }
        }
        groups.append(Self.spawn { _ = try? line.run(for: 2) { order.withLock { $0.append("bob") } } })
        while line.load.waiting < 5 { usleep(1000) }
        gate.signal()
        for group in groups { group.wait() }
        let done = order.withLock { $0 }
        #expect(done.count == 6)
        #expect(done.prefix(2) == ["ann-0", "bob"], "\(done)")
    }

    /// A person's line is `waiting` long, the whole line `lineLimit`; past either: Busy, at once.
    @Test func theLineIsBounded() throws {
        let line = PhotoProcessing(slots: 1, waiting: 2, lineLimit: 3, patience: .seconds(30))
        let gate = DispatchSemaphore(value: 0)
        var groups = [Self.spawn { _ = try? line.run(for: 1) { gate.wait() } }]
        while line.load.running == 0 { usleep(1000) }
        for _ in 0..<2 { groups.append(Self.spawn { _ = try? line.run(for: 1) {} }) }
        while line.load.waiting < 2 { usleep(1000) }
        #expect(throws: PhotoProcessing.Busy.self) { try line.run(for: 1) {} }
        groups.append(Self.spawn { _ = try? line.run(for: 2) {} })
        while line.load.waiting < 3 { usleep(1000) }
        #expect(throws: PhotoProcessing.Busy.self) { try line.run(for: 3) {} }
        gate.signal()
        for group in groups { group.wait() }
        #expect(line.load.running == 0 && line.load.waiting == 0)
    }

    /// A photo whose turn does not come within `patience` leaves the line (Busy), and the ones
    /// behind it are not held up by it; a slot is given back when the work throws.
    @Test func aTurnThatDoesNotComeIsGivenUp() throws {
        let line = PhotoProcessing(slots: 1, waiting: 4, patience: .milliseconds(200))
        let gate = DispatchSemaphore(value: 0)
        let first = Self.spawn { _ = try? line.run(for: 1) { gate.wait() } }
        while line.load.running == 0 { usleep(1000) }
        #expect(throws: PhotoProcessing.Busy.self) { try line.run(for: 2) {} }
        #expect(line.load.waiting == 0)
        gate.signal()
        first.wait()
        struct Failure: Error {}
        #expect(throws: Failure.self) { try line.run(for: 3) { throw Failure() } }
        #expect(try line.run(for: 3) { 42 } == 42)
        #expect(line.load.running == 0)
    }
}
