#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import HTTPServer
import TestSupport

/// A deliberately raw HTTP client: it writes exactly the bytes a test gives it and reads responses
/// with its own small parser, so tests control framing, timing and hang-ups byte for byte.
final class TestClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    struct Response {
        let status: Int
        let headers: HTTPHeaders
        let body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    init(port: Int, timeout: Double = 5) throws {
        fd = try connectLoopback(port: port, receiveTimeout: timeout)
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    func close() { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    /// Reads more bytes; false on EOF. Throws on timeout.
    @discardableResult
    func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 { throw Failure(description: "read: \(String(cString: strerror(errno)))") }
        if n == 0 { return false }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    /// True when the server closed the connection (EOF) before `timeout`, with nothing more to read.
    func isClosedByPeer() -> Bool {
        do {
            while try fill() {}
            return true
        } catch {
            return false
        }
    }

    /// Reads one response. `head: true` for a response to HEAD (no body despite Content-Length).
    func readResponse(head: Bool = false) throws -> Response {
        while true {
            if let end = findHeadEnd() {
                let headText = String(decoding: buffer[0..<end], as: UTF8.self)
                var lines = headText.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ")
                guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
                    throw Failure(description: "bad status line in \(headText)")
                }
                var headers = HTTPHeaders()
                for line in lines where !line.isEmpty {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    headers.add(String(parts[0]), parts.count > 1 ? String(parts[1].trimmingASCIIWhitespace()) : "")
                }
                let bodyStart = end + 4
                if status < 200 || status == 204 || status == 304 || head {
                    buffer.removeFirst(bodyStart)
                    return Response(status: status, headers: headers, body: [])
                }
                if let lengthText = headers["Content-Length"], let length = Int(lengthText) {
                    while buffer.count < bodyStart + length {
                        guard try fill() else { throw Failure(description: "EOF inside body") }
                    }
                    let body = Array(buffer[bodyStart..<(bodyStart + length)])
                    buffer.removeFirst(bodyStart + length)
                    return Response(status: status, headers: headers, body: body)
                }
                // Close-delimited.
                while try fill() {}
                let body = Array(buffer[bodyStart...])
                buffer.removeAll()
                return Response(status: status, headers: headers, body: body)
            }
            guard try fill() else { throw Failure(description: "EOF before a response head (\(buffer.count) bytes)") }
        }
    }

    /// Reads until `needle` has arrived; returns everything read so far and clears it.
    func readUntil(_ needle: String) throws -> String {
        let n = Array(needle.utf8)
        while true {
            if buffer.count >= n.count {
                for i in 0...(buffer.count - n.count) where Array(buffer[i..<(i + n.count)]) == n {
                    let text = String(decoding: buffer[0..<(i + n.count)], as: UTF8.self)
                    buffer.removeFirst(i + n.count)
                    return text
                }
            }
            guard try fill() else { throw Failure(description: "EOF before \(needle.debugDescription)") }
        }
    }

    private func findHeadEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for i in 0...(buffer.count - 4) where buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
            return i
        }
        return nil
    }

    /// One request on a fresh connection.
    /// True when a new connection is closed (or reset) by the server before any answer.
    static func refusedAtOnce(port: Int) -> Bool {
        guard let client = try? TestClient(port: port, timeout: 2) else { return true }
        try? client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        return (try? client.readResponse()) == nil
    }

    static func get(_ path: String, port: Int, headers: String = "") throws -> Response {
        let client = try TestClient(port: port)
        try client.send("GET \(path) HTTP/1.1\r\nHost: test\r\n\(headers)Connection: close\r\n\r\n")
        return try client.readResponse()
    }
}

/// Open file descriptors of this process (Linux).
func openDescriptorCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(timeout: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}
