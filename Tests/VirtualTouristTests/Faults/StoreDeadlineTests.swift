import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// A store that hangs instead of failing (an NFS or FUSE mount that stops answering): every put
/// and get through the breaker has a deadline, past which it is an outage, and the breaker then
/// refuses at once without asking the store.
@Suite struct StoreDeadlineTests {
    /// Puts and gets that block until `release`, as on a mount that stopped answering.
    final class HangingStore: PhotoStore {
        let calls = Atomic<Int>(0)
        let gate = DispatchSemaphore(value: 0)

        func hang() { calls.add(1, ordering: .relaxed); gate.wait() }
        func release(_ count: Int) { for _ in 0..<count { gate.signal() } }

        func put(_ bytes: [UInt8]) throws -> String { hang(); return SHA256.hex(bytes) }
        func refresh(_ hash: String) throws -> Bool { hang(); return true }
        func get(_ hash: String) throws -> [UInt8]? { hang(); return [] }
        func list() throws -> [(hash: String, modified: Date)] { [] }
        func delete(_ hash: String, ifNotModifiedSince olderThan: Date) throws -> Bool { false }
    }

    static func breaker(on store: any PhotoStore) -> StoreBreaker {
        var settings = StoreBreakerStateMachine.Settings()
        settings.coolDown = .seconds(30)
        settings.writeDeadline = .milliseconds(500)
        settings.readDeadline = .milliseconds(300)
        return StoreBreaker(store, settings: settings)
    }

    /// How a call ended and how long it took.
    static func timed(_ call: () throws -> Void) -> (PhotoStoreError?, Double) {
        let start = Date()
        do { try call(); return (nil, Date().timeIntervalSince(start)) } catch {
            return (error as? PhotoStoreError, Date().timeIntervalSince(start))
        }
    }

    @Test(arguments: ["put", "get"]) func aCallThatHangsIsAnOutageAtItsDeadlineAndTheBreakerOpens(_ call: String) throws {
        let store = HangingStore()
        let breaker = Self.breaker(on: store)
        let hash = String(repeating: "a", count: 64)
        let attempt = { if call == "put" { _ = try breaker.put([1, 2, 3]) } else { _ = try breaker.get(hash) } }

        let (first, seconds) = Self.timed(attempt)
        let error = try #require(first)
        #expect(error.outage && error.retryAfter == nil && error.description.contains("did not answer"), "\(error)")
        #expect(seconds >= (call == "put" ? 0.45 : 0.25) && seconds < 2, "\(seconds) s")
        #expect(!breaker.status.available)
        #expect(breaker.calls.overdue.load(ordering: .relaxed) == 1)

        // Open: refused at once, the store not asked, no thread taken.
        let (again, quick) = Self.timed(attempt)
        #expect(again?.outage == true && again?.retryAfter != nil, "\(String(describing: again))")
        #expect(quick < 0.1)
        #expect(store.calls.load(ordering: .relaxed) == 1)

        // The hung call ends at last: its thread is free, and its late answer changes nothing.
        store.release(1)
        #expect(eventually(timeout: 5) { breaker.calls.overdue.load(ordering: .relaxed) == 0 })
        #expect(breaker.status.state == "open")
    }

    /// Reads hang; a put fails at once as a store that is down does.
    final class ReadsHangWritesFail: PhotoStore {
        let gate = DispatchSemaphore(value: 0)
        func put(_ bytes: [UInt8]) throws -> String { throw PhotoStoreError(description: "the store is down", outage: true) }
        func refresh(_ hash: String) throws -> Bool { true }
        func get(_ hash: String) throws -> [UInt8]? { gate.wait(); return [] }
        func list() throws -> [(hash: String, modified: Date)] { [] }
        func delete(_ hash: String, ifNotModifiedSince olderThan: Date) throws -> Bool { false }
    }

    /// A read waiting for a slot is refused as soon as a write's outage opens the breaker, not at
    /// the end of its wait: the photo answers 503 at once, as every later read does.
    @Test func aWriteThatOpensTheBreakerRefusesTheReadsWaitingForASlot() throws {
        let store = ReadsHangWritesFail()
        var settings = StoreBreakerStateMachine.Settings()
        settings.readSlots = 1
        settings.readSlotWait = .seconds(20)
        settings.readDeadline = .seconds(30)
        settings.coolDown = .seconds(30)
        let breaker = StoreBreaker(store, settings: settings)
        defer { store.gate.signal() }
        let hash = String(repeating: "a", count: 64)
        Thread.detachNewThread { _ = try? breaker.get(hash) }  // holds the only slot
        #expect(eventually(timeout: 5) { breaker.readsInFlight == 1 })
        let waited = Mutex<(PhotoStoreError?, Double)?>(nil)
        Thread.detachNewThread {
            let result = Self.timed { _ = try breaker.get(hash) }
            waited.withLock { $0 = result }
        }
        Thread.sleep(forTimeInterval: 0.3)  // the second read is in line for the slot
        #expect(throws: PhotoStoreError.self) { _ = try breaker.put([1, 2, 3]) }
        #expect(!breaker.status.available)
        #expect(eventually(timeout: 5) { waited.withLock { $0 } != nil }, "the waiting read was not told")
        let (error, seconds) = try #require(waited.withLock { $0 })
        #expect(error?.retryAfter != nil, "refused by the breaker: \(String(describing: error))")
        #expect(seconds < 5, "\(seconds) s: it waited out its turn instead")
    }

    /// A call that answers in time is passed through, result and error alike.
    @Test func callsInTimePassThrough() throws {
        let root = TestApp.scratchDirectory("deadline")
        let breaker = Self.breaker(on: FileStore(root: root))
        let hash = try breaker.put(Array("bytes".utf8))
        #expect(try breaker.get(hash) == Array("bytes".utf8))
        #expect(try breaker.get(String(repeating: "b", count: 64)) == nil)
        #expect(breaker.status.available && breaker.calls.overdue.load(ordering: .relaxed) == 0)
    }
}

/// GET /photos/:id while the file store's `open` hangs (a FIFO in the blob's place: opening it for
/// reading blocks until a writer comes, as an open on a dead NFS mount does): the photo answers
/// 503 with Retry-After within the read deadline, the server keeps answering everything else, and
/// once the breaker is open photos are refused at once.
@Suite(.serialized, .tags(.fault)) struct StoreDeadlineLiveTests {
    @Test func aPhotoWhoseFileHangsAnswers503WithinTheReadDeadline() throws {
        let app = try TestApp(workers: true) { settings in
            settings.photoStoreReadDeadline = 1
            settings.photoStoreCoolDown = 30
        }
        let ann = try app.signedUp()
        let pin = try AlbumTests.dropPin(ann)
        let album = try AlbumTests.settled(ann, pin: pin)
        try #require(album.status == "ready")
        let photo = try #require(try StoreOutageTests.readyPhotos(app, pin: pin).first)
        let files = try #require(app.app.albums.photos.base as? FileStore)
        let path = files.path(photo.hash).file
        try #require(unlink(path) == 0 && mkfifo(path, 0o644) == 0)
        defer {
            // A writer lets the hung opens go.
            let writer = open(path, O_RDWR | O_NONBLOCK)
            usleep(200_000)
            if writer >= 0 { close(writer) }
        }

        let port = app.port, cookies = ann.cookies
        let runs = StoreOutageTests.concurrently(2) { i -> [StoreOutageTests.Sample] in
            guard i == 1 else { return [StoreOutageTests.fetch(port, cookies, "/photos/\(photo.id)")] }
            usleep(100_000)
            return (0..<8).map { _ in
                defer { usleep(100_000) }
                return StoreOutageTests.fetch(port, cookies, "/healthz")
            }
        }
        let hung = runs[0][0], others = runs[1]
        let refused = StoreOutageTests.fetch(port, cookies, "/photos/\(photo.id)")
        print("""
            a blob's open hanging: the photo \(hung.status) in \(StoreOutageTests.format(hung.seconds)) (Retry-After \
            \(hung.retryAfter ?? "none")), /healthz \(others.map(\.status)) slowest \
            \(StoreOutageTests.format(others.map(\.seconds).max() ?? 0)); then \(refused.status) in \(StoreOutageTests.format(refused.seconds))
            """)
        #expect(hung.status == 503 && Int(hung.retryAfter ?? "") ?? 0 >= 1, "\(hung.status)")
        #expect(hung.seconds >= 0.9 && hung.seconds < 3, "\(hung.seconds) s")
        #expect(others.allSatisfy { $0.status == 200 && $0.seconds < 0.5 }, "\(others.map { ($0.status, $0.seconds) })")
        #expect(refused.status == 503 && Int(refused.retryAfter ?? "") ?? 0 >= 1 && refused.seconds < 0.5)
        #expect(!app.app.storeBreaker.status.reads)
    }
}
