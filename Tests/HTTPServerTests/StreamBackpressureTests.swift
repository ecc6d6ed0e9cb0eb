#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import HTTPServer
import TestSupport

/// `ResponseStream.writeWhenDrained`: a download written as it is read goes at the client's pace.
@Suite struct StreamBackpressureTests {
    static let total = 64 << 20
    static let piece = 64 << 10

    /// A route writing `total` bytes in pieces, counting what it handed over and whether it
    /// finished or was stopped.
    final class Writer: Sendable {
        let written = Atomic<Int>(0)
        let stopped = Atomic<Bool>(false)
        let finished = Atomic<Bool>(false)
        var bytesWritten: Int { written.load(ordering: .relaxed) }
        var wasStopped: Bool { stopped.load(ordering: .relaxed) }
        var hasFinished: Bool { finished.load(ordering: .relaxed) }
    }

    static func server(_ writer: Writer) throws -> TestServer {
        try TestServer(router: { router in
            router.get("/download") { _ in
                HTTPResponse(status: .ok, headers: ["Content-Type": "application/octet-stream"], body: .stream(heartbeat: nil) { stream in
                    defer { stream.close() }
                    let bytes = [UInt8](repeating: 0x7A, count: piece)
                    while writer.written.load(ordering: .relaxed) < total {
                        guard stream.writeWhenDrained(bytes) else { return writer.stopped.store(true, ordering: .relaxed) }
                        writer.written.add(piece, ordering: .relaxed)
                    }
                    writer.finished.store(true, ordering: .relaxed)
                })
            }
        })
    }

    static func request(_ port: Int) throws -> Int32 {
        let fd = try connectLoopback(port: port, receiveTimeout: 10)
        let head = Array("GET /download HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return fd
    }

    /// Reads up to `limit` bytes (head included) and drops them; the count read.
    static func drain(_ fd: Int32, limit: Int = .max) -> Int {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var read = 0
        while read < limit {
            let n = recv(fd, &buffer, min(buffer.count, limit - read), 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            read += n
        }
        return read
    }

    @Test func aWriterWaitsWhileTheClientDoesNotRead() throws {
        let writer = Writer()
        let t = try Self.server(writer)
        let fd = try Self.request(t.port)
        defer { close(fd) }
        #expect(Self.drain(fd, limit: 1 << 20) == 1 << 20)
        usleep(500_000)
        // What the writer got ahead by: the server's 256 KiB plus the kernel's two socket buffers.
        let ahead = writer.bytesWritten
        print("written while the client paused after 1 MiB: \(ahead) of \(Self.total) bytes")
        #expect(ahead < 16 << 20, "the writer ran \(ahead) bytes ahead")
        #expect(!writer.hasFinished)
        let rest = Self.drain(fd)
        #expect((1 << 20) + rest > Self.total)
        #expect(writer.hasFinished)
    }

    @Test func aWriterIsReleasedWhenTheClientHangsUp() throws {
        let writer = Writer()
        let t = try Self.server(writer)
        let fd = try Self.request(t.port)
        #expect(Self.drain(fd, limit: 1 << 20) == 1 << 20)
        close(fd)
        #expect(eventually { writer.wasStopped }, "the writer still waits after the client left")
        #expect(writer.bytesWritten < 16 << 20)
        #expect(!writer.hasFinished)
        #expect(eventually { t.server.openConnections == 0 })
    }
}
