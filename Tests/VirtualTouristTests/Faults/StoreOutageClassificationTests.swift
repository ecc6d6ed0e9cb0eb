import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPClient
import HTTPServer
import Postgres
import Synchronization
import Testing
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Which store failures are outages (the album waits, the breaker opens) and which concern one
/// request: S3's answers from a server over loopback that answers as S3 does, the file store's
/// errno values.
@Suite struct StoreOutageClassificationTests {
    /// An S3 endpoint answering each request with the next of `answers` (status, S3 error code),
    /// or 200 "stored"; a code of "hang" holds the request for `hang` seconds first.
    final class Script: Sendable {
        let answers = Mutex<[(Int, String)]>([])
        let requests = Mutex(0)
    }

    final class FakeS3: Sendable {
        let script = Script()
        let server: HTTPServer

        init() throws {
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.accessLog = nil
            let script = script
            server = HTTPServer(configuration: configuration, handler: ClosureHandler { _ in
                script.requests.withLock { $0 += 1 }
                guard let (status, code) = script.answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
                    return HTTPResponse(status: .ok, body: Array("stored".utf8))
                }
                if code == "hang" { usleep(1_500_000) }
                let error = "<Error><Code>\(code)</Code><Message>as S3 says it</Message></Error>"
                return HTTPResponse(status: HTTPStatus(status), body: Array(error.utf8))
            })
            try server.start()
        }

        deinit { server.shutdown(gracePeriod: 1) }

        func store(perHostConcurrency: Int = 32, locks: PostgresPool? = nil) -> S3Store {
            var options = HTTPClient.Options()
            options.perHostConcurrency = perHostConcurrency
            let store = S3Store(settings: S3Settings(endpoint: "http://127.0.0.1:\(server.port)", bucket: "fake", prefix: "p",
                                                     accessKeyID: "AK", secretAccessKey: "SK"), locks: locks, client: options)
            store.retryDelays = []
            store.readTimeout = 0.5
            return store
        }
    }

    static let hash = String(repeating: "0", count: 64)

    /// The error a get ends with, or nil when it returned.
    static func failure(_ store: S3Store) -> PhotoStoreError? {
        do { _ = try store.get(hash); return nil } catch let error as PhotoStoreError { return error } catch {
            Issue.record("not a PhotoStoreError: \(error)")
            return nil
        }
    }

    @Test(arguments: [
        (429, "TooManyRequests", true), (503, "SlowDown", true), (400, "RequestTimeout", true), (500, "InternalError", true),
        (503, "ServiceUnavailable", true), (403, "AccessDenied", false), (400, "InvalidArgument", false),
    ])
    func s3AnswersThatAreOutages(status: Int, code: String, outage: Bool) throws {
        let s3 = try FakeS3()
        let store = s3.store()
        s3.script.answers.withLock { $0 = [(status, code)] }
        let error = try #require(Self.failure(store))
        #expect(error.outage == outage, "HTTP \(status) \(code): \(error)")
        #expect(error.unavailable)
        #expect(!error.writesOnly)
        #expect(error.description.contains(code))
    }

    @Test func aMissingBlobIsNotAnOutage() throws {
        let s3 = try FakeS3()
        s3.script.answers.withLock { $0 = [(404, "NoSuchKey")] }
        #expect(try s3.store().get(Self.hash) == nil)
        let files = FileStore(root: TestApp.scratchDirectory("missing"))
        #expect(try files.get(Self.hash) == nil)
    }

    /// A read that gets no answer within the read timeout, and one that cannot even get a
    /// connection of the client's because the one allowed is held by a slow write: both outages.
    @Test func s3TimeoutsAndWaitsForTheClientsConnectionsAreOutages() throws {
        let s3 = try FakeS3()
        let store = s3.store(perHostConcurrency: 1)
        s3.script.answers.withLock { $0 = [(200, "hang")] }
        let timedOut = try #require(Self.failure(store))
        #expect(timedOut.outage && timedOut.description.contains("took too long"), "\(timedOut)")

        // A put's HEAD held 1.5 s (a write may take the client's whole timeout) holds the one slot.
        s3.script.answers.withLock { $0 = [(200, "hang")] }
        let before = s3.script.requests.withLock { $0 }
        let done = DispatchSemaphore(value: 0)
        Thread { _ = try? store.put(Array("slow".utf8)); done.signal() }.start()
        usleep(200_000)
        let waited = try #require(Self.failure(store))
        let reached = s3.script.requests.withLock { $0 } - before
        done.wait()
        #expect(waited.outage && waited.description.contains("took too long"), "\(waited)")
        // Only the put's HEAD reached the server: the get timed out waiting for the client's slot.
        #expect(reached == 1)
    }

    /// A put of a blob already stored refreshes it under an advisory lock. Not getting the lock
    /// (the database gone, the lock pool's connections all busy for its wait) is an outage of
    /// writes: the album keeps the photo pending, the breaker stops writes, reads carry on.
    @Test func s3AdvisoryLockFailuresAreOutagesOfWrites() throws {
        let s3 = try FakeS3()
        let bytes = Array("stored already".utf8)
        func putFailure(_ store: any PhotoStore) -> PhotoStoreError? {
            do { _ = try store.put(bytes); return nil } catch let error as PhotoStoreError { return error } catch {
                Issue.record("not a PhotoStoreError: \(error)")
                return nil
            }
        }

        // Nothing listens on port 1: the database is unavailable.
        let gone = PostgresPool(url: "postgresql://vt@127.0.0.1:1/none", maxConnections: 4, acquireTimeout: 1)
        let breaker = StoreBreaker(s3.store(locks: gone))
        let error = try #require(putFailure(breaker))
        #expect(error.outage && error.writesOnly, "\(error)")
        #expect(error.description.contains("advisory lock"), "\(error)")
        let status = breaker.status
        #expect(!status.available && status.reads, "\(status)")
        // Reads take no lock and still go to the store.
        #expect(try breaker.get(Self.hash) == Array("stored".utf8))
        // Further writes are refused at once, as outages too.
        #expect(putFailure(breaker)?.retryAfter != nil)

        // The lock pool's one connection held for longer than its wait.
        let busy = PostgresPool(url: try TestDatabase.adminURL(), maxConnections: 1, acquireTimeout: 0.2)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? busy.withConnection { _ in held.signal(); release.wait() }
            done.signal()
        }.start()
        held.wait()
        let timedOut = try #require(putFailure(s3.store(locks: busy)))
        release.signal()
        done.wait()
        #expect(timedOut.outage && timedOut.writesOnly, "\(timedOut)")
    }

    @Test func fileStoreErrorsThatAreOutages() {
        for code in [ENOSPC, EDQUOT, EROFS] {
            let error = PhotoStoreError.file("cannot write", errno: code)
            #expect(error.outage && error.writesOnly, "\(error)")
        }
        for code in [EIO, EACCES] {
            let error = PhotoStoreError.file("cannot read", errno: code)
            #expect(error.outage && !error.writesOnly, "\(error)")
        }
        for code in [ENAMETOOLONG, EINVAL] {
            #expect(!PhotoStoreError.file("cannot", errno: code).outage)
        }
    }
}
