import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// Real sockets for the client to talk to: a listener on 127.0.0.1 (and on ::1 at the same port when
// the host has IPv6) with one thread serving connections one after another. Small on purpose: it
// counts what reaches it, which is the point of most tests here (0 means nothing got through).

/// A value shared between the test and the server's thread, under a lock.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func change<T: Sendable>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

struct ServerError: Error, CustomStringConvertible {
    let description: String
}

/// One accepted connection, read with a buffer; reads give up after ten seconds of silence so a
/// stuck client cannot hang the server thread.
final class LoopbackConnection {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) {
        self.fd = fd
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// More bytes into the buffer; false at end of stream, an error or the read timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer += chunk[0..<n]
        return true
    }

    /// One line without its CRLF (or bare LF); nil when the peer is gone first.
    func readLine() -> String? {
        while true {
            if let lf = buffer.firstIndex(of: 0x0A) {
                var line = Array(buffer[..<lf])
                buffer.removeFirst(lf + 1)
                if line.last == 0x0D { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            guard fill() else { return nil }
        }
    }

    func read(count: Int) -> [UInt8]? {
        while buffer.count < count { guard fill() else { return nil } }
        defer { buffer.removeFirst(count) }
        return Array(buffer[..<count])
    }

    func write(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            sent += n
        }
    }

    func write(_ text: String) { write(Array(text.utf8)) }
}

/// The listener and its thread. `serve` is called for each accepted connection on the server's
/// one thread; the connection is closed when it returns.
final class LoopbackServer: Sendable {
    let port: Int
    /// Connections accepted so far, on either address.
    var connections: Int { accepted.value }

    private let listeners: [Int32]
    private let accepted = Locked(0)
    private let stopping = Locked(false)
    private let finished = DispatchSemaphore(value: 0)

    init(serve: @escaping @Sendable (LoopbackConnection) -> Void) throws {
        let v4 = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard v4 >= 0 else { throw ServerError(description: "socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(v4, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(v4, 16) == 0 else {
            close(v4)
            throw ServerError(description: "bind/listen on 127.0.0.1: \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(v4, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        var listeners = [v4]

        // The same port on ::1, so an [::1] address would land here too.
        let v6 = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        if v6 >= 0 {
            var only: Int32 = 1
            setsockopt(v6, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &only, socklen_t(MemoryLayout<Int32>.size))
            var address6 = sockaddr_in6()
            address6.sin6_family = sa_family_t(AF_INET6)
            address6.sin6_port = UInt16(port).bigEndian
            address6.sin6_addr = in6addr_loopback
            let bound6 = withUnsafePointer(to: &address6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(v6, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
            if bound6 == 0, listen(v6, 16) == 0 { listeners.append(v6) } else { close(v6) }
        }
        self.listeners = listeners

        let sockets = listeners, accepted = accepted, stopping = stopping, finished = finished
        let thread = Thread {
            var polled = sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            while !stopping.value {
                guard poll(&polled, nfds_t(polled.count), 50) > 0 else { continue }
                for entry in polled where entry.revents & Int16(POLLIN) != 0 {
                    let fd = accept(entry.fd, nil, nil)
                    guard fd >= 0 else { continue }
                    accepted.change { $0 += 1 }
                    serve(LoopbackConnection(fd: fd))
                    shutdown(fd, Int32(SHUT_RDWR))
                    close(fd)
                }
            }
            finished.signal()
        }
        thread.start()
    }

    /// Ends the thread (after the connection it is serving, if any) and closes the listeners.
    func stop() {
        guard stopping.change({ stopped in defer { stopped = true }; return !stopped }) else { return }
        _ = finished.wait(timeout: .now() + 30)
        for fd in listeners { close(fd) }
    }

    deinit { stop() }
}

/// What the HTTP server saw of one request.
struct SeenRequest: Sendable {
    var method: String
    var path: String
    /// Names lower-cased.
    var headers: [String: String]
    var body: [UInt8]
}

/// What the HTTP server answers.
struct Reply: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    /// false: no Content-Length, the body ends when the connection closes.
    var sendsLength = true

    static func ok(_ text: String = "ok") -> Reply { Reply(status: 200, body: Array(text.utf8)) }
    static func redirect(to location: String, status: Int = 302) -> Reply { Reply(status: status, headers: [("Location", location)]) }
}

/// HTTP/1.1 on a LoopbackServer: one request per connection ("Connection: close"), answered by
/// `respond` on the server thread (which may block to hold a request).
final class TestHTTPServer: Sendable {
    private let server: LoopbackServer
    private let seen = Locked<[SeenRequest]>([])

    var port: Int { server.port }
    /// "http://127.0.0.1:PORT"
    var origin: String { "http://127.0.0.1:\(server.port)" }
    var connections: Int { server.connections }
    var requests: [SeenRequest] { seen.value }

    init(respond: @escaping @Sendable (SeenRequest) -> Reply = { _ in .ok() }) throws {
        let seen = seen
        server = try LoopbackServer { connection in
            guard let requestLine = connection.readLine() else { return }
            let parts = requestLine.split(separator: " ")
            guard parts.count == 3 else { return }
            var headers: [String: String] = [:]
            while let line = connection.readLine(), !line.isEmpty {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            guard let body = connection.read(count: length) else { return }
            let request = SeenRequest(method: String(parts[0]), path: String(parts[1]), headers: headers, body: body)
            seen.change { $0.append(request) }
            let reply = respond(request)
            var head = "HTTP/1.1 \(reply.status) Status\r\n"
            for (name, value) in reply.headers { head += "\(name): \(value)\r\n" }
            if reply.sendsLength { head += "Content-Length: \(reply.body.count)\r\n" }
            head += "Connection: close\r\n\r\n"
            connection.write(head)
            if request.method != "HEAD" { connection.write(reply.body) }
        }
    }

    func stop() { server.stop() }
}
