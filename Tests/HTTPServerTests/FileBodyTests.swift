#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import HTTPServer
import TestSupport

/// File bodies (`HTTPResponse.Body.file`): sent with sendfile at the client's pace, byte for byte,
/// and the descriptor closed however the transfer ends.
@Suite struct FileBodyTests {
    /// A file of `count` pseudo-random bytes under the temporary directory, with a unique name.
    static func file(_ count: Int) throws -> (path: String, bytes: [UInt8]) {
        let bytes = [UInt8](try #require(FileHandle(forReadingAtPath: "/dev/urandom")?.readData(ofLength: count)))
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("file-body-\(UUID().uuidString)")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    static func server(serving path: String) throws -> TestServer {
        try TestServer(router: { router in
            router.get("/file") { _ in
                guard let file = FileBody(path: path) else { throw HTTPError.notFound }
                return HTTPResponse(status: .ok, headers: ["Content-Type": "application/octet-stream"], body: .file(file))
            }
        })
    }

    /// Descriptors of this process that name `path` (other tests may open and close files meanwhile,
    /// so a count alone could not tell).
    static func descriptors(naming path: String) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == path }.count
    }

    /// A socket with a small receive buffer, so the server's sends block and wait for writability.
    static func slowClient(port: Int) throws -> Int32 {
        try connectLoopback(port: port, receiveTimeout: 10, receiveBuffer: 4096)
    }

    static func read(_ fd: Int32, limit: Int, pause: UInt32 = 0) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 8192)
        while out.count < limit {
            let n = recv(fd, &buffer, min(buffer.count, limit - out.count), 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out += buffer[0..<n]
            if pause > 0 { usleep(pause) }
        }
        return out
    }

    /// Many times the socket buffers, read 8 KiB at a time with pauses: every byte arrives, in
    /// order, after a head that promised exactly the file's length; then the same connection
    /// serves the next request (keep-alive after a file body), and the file is closed.
    @Test func aLargeFileReachesASlowReaderWhole() throws {
        let (path, bytes) = try Self.file(6 << 20 + 123)
        defer { unlink(path) }
        let t = try Self.server(serving: path)
        let fd = try Self.slowClient(port: t.port)
        defer { close(fd) }
        let request = Array("GET /file HTTP/1.1\r\nHost: x\r\n\r\nGET /file HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        for _ in 0..<2 {
            var head: [UInt8] = []
            while !head.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
                let byte = Self.read(fd, limit: 1)
                guard !byte.isEmpty else { break }
                head += byte
            }
            let text = String(decoding: head, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200"))
            #expect(text.contains("Content-Length: \(bytes.count)\r\n"))
            let body = Self.read(fd, limit: bytes.count, pause: 200)
            #expect(body.count == bytes.count)
            #expect(body == bytes)
        }
        #expect(eventually { t.server.openConnections == 0 })
        #expect(eventually { Self.descriptors(naming: path) == 0 })
    }

    /// A client that leaves after the first bytes: the connection closes and so does the file.
    @Test func theFileIsClosedWhenTheClientLeavesMidway() throws {
        let (path, _) = try Self.file(8 << 20)
        defer { unlink(path) }
        let t = try Self.server(serving: path)
        let before = Self.descriptors(naming: path)
        let fd = try Self.slowClient(port: t.port)
        let request = Array("GET /file HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(Self.read(fd, limit: 64 << 10).count == 64 << 10)
        // The server is mid-transfer, blocked on the full socket: the file is open.
        #expect(Self.descriptors(naming: path) == before + 1)
        close(fd)
        #expect(eventually { t.server.openConnections == 0 })
        #expect(eventually { Self.descriptors(naming: path) == before })
    }

    /// HEAD: the length is said, nothing is sent, and the file is closed.
    @Test func headSendsTheLengthOnly() throws {
        let (path, bytes) = try Self.file(100_000)
        defer { unlink(path) }
        let t = try Self.server(serving: path)
        let fd = try Self.slowClient(port: t.port)
        defer { close(fd) }
        let request = Array("HEAD /file HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let answer = String(decoding: Self.read(fd, limit: 1 << 20), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200"))
        #expect(answer.contains("Content-Length: \(bytes.count)\r\n"))
        #expect(answer.hasSuffix("\r\n\r\n"))
        #expect(eventually { Self.descriptors(naming: path) == 0 })
    }
}
