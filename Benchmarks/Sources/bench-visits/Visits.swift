// The pieces of bench-visits: a person, the steps of a visit, one HTTP/1.1 connection.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

struct Person {
    let token, csrf: String
    let pin: Int64
    let photos: [Int64]
    let lat, lon: Double
}

enum Step: Int, CaseIterable {
    case map, pinsJSON, album, thumbnail, thumbnails, region, dropPin, visit
    var name: String {
        switch self {
        case .map: "GET /"
        case .pinsJSON: "GET /pins.json (viewport)"
        case .album: "GET /pins/:id (album page)"
        case .thumbnail: "GET /photos/:id?w=256"
        case .thumbnails: "  the album's 30 thumbnails"
        case .region: "POST /region (beacon)"
        case .dropPin: "POST /pins (1 visit in 20)"
        case .visit: "the whole visit"
        }
    }
}

/// Seconds since an arbitrary start, monotonic.
func now() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

struct HTTPFailure: Error { let reason: String }

/// One keep-alive HTTP/1.1 connection, reopened when the server closes it.
final class Connection {
    private let port: UInt16
    init(port: UInt16) { self.port = port }
    private var fd: Int32 = -1
    private var buffer = [UInt8](repeating: 0, count: 256 * 1024)
    private var start = 0, end = 0

    private func open() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTPFailure(reason: "socket") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { close(fd); fd = -1; throw HTTPFailure(reason: "connect: \(errno)") }
        start = 0; end = 0
    }

    func shut() { if fd >= 0 { close(fd); fd = -1 } }

    /// Sends the request and reads the whole response; returns the status and the body's size.
    func send(_ request: [UInt8]) throws -> (status: Int, bytes: Int) {
        for attempt in 0..<2 {
            if fd < 0 { try open() }
            do {
                return try exchange(request)
            } catch let failure as HTTPFailure where failure.reason == "closed" && attempt == 0 {
                shut()  // a kept-alive connection the server closed meanwhile: once more on a new one
            }
        }
        throw HTTPFailure(reason: "closed")
    }

    private func exchange(_ request: [UInt8]) throws -> (status: Int, bytes: Int) {
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { shut(); throw HTTPFailure(reason: "closed") }
            sent += n
        }
        // The head.
        var headEnd = -1
        while headEnd < 0 {
            if let found = find(crlfcrlf) { headEnd = found; break }
            try fill(reading: start == end)
        }
        let head = String(decoding: buffer[start..<headEnd], as: UTF8.self)
        start = headEnd + 4
        let lines = head.split(separator: "\r\n")
        guard let first = lines.first, first.count >= 12, let status = Int(first.dropFirst(9).prefix(3)) else {
            shut(); throw HTTPFailure(reason: "bad status line")
        }
        var length: Int?, chunked = false, closes = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased(), value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "content-length" { length = Int(value) }
            if name == "transfer-encoding", value.lowercased().contains("chunked") { chunked = true }
            if name == "connection", value.lowercased() == "close" { closes = true }
        }
        var bytes = 0
        if chunked {
            while true {
                var lineEnd = -1
                while lineEnd < 0 {
                    if let found = find(crlf) { lineEnd = found; break }
                    try fill(reading: true)
                }
                let size = Int(String(decoding: buffer[start..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
                start = lineEnd + 2
                try skip(size + 2)
                bytes += size
                if size == 0 { break }
            }
        } else if let length, status != 204, status != 304 {
            try skip(length)
            bytes = length
        }
        if closes { shut() }
        return (status, bytes)
    }

    private let crlfcrlf: [UInt8] = [13, 10, 13, 10]
    private let crlf: [UInt8] = [13, 10]

    private func find(_ needle: [UInt8]) -> Int? {
        guard end - start >= needle.count else { return nil }
        var i = start
        while i <= end - needle.count {
            if buffer[i] == needle[0] && buffer[i + 1] == needle[1] && (needle.count == 2 || (buffer[i + 2] == needle[2] && buffer[i + 3] == needle[3])) {
                return i
            }
            i += 1
        }
        return nil
    }

    /// Discards `count` bytes of body, reading as needed.
    private func skip(_ count: Int) throws {
        var left = count
        while left > 0 {
            if start == end { try fill(reading: true) }
            let take = min(left, end - start)
            start += take
            left -= take
        }
    }

    private func fill(reading: Bool) throws {
        if start == end { start = 0; end = 0 }
        if end == buffer.count {
            // Compact (a head longer than what is left of the buffer).
            buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
            end -= start; start = 0
        }
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + end, $0.count - end, 0) }
        guard n > 0 else { shut(); throw HTTPFailure(reason: "closed") }
        end += n
    }
}

func request(_ method: String, _ path: String, _ person: Person, port: UInt16, body: String? = nil, extra: String = "") -> [UInt8] {
    var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nCookie: vt_session=\(person.token)\r\n" + extra
    if let body {
        text += "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
    } else {
        text += "\r\n"
    }
    return Array(text.utf8)
}

/// Shared by all people: visits started (for the one in twenty that drops a pin, and MAX).
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var started = 0
    let maxVisits: Int
    init(maxVisits: Int) { self.maxVisits = maxVisits }
    func next() -> Int? {
        lock.lock(); defer { lock.unlock() }
        guard started < maxVisits else { return nil }
        started += 1
        return started
    }
}

final class Tally: @unchecked Sendable {
    var latencies = Array(repeating: [Double](), count: Step.allCases.count)
    var errors = Array(repeating: 0, count: Step.allCases.count)
    var statuses: [String: Int] = [:]
    var visits = 0
}


func fmt(_ x: Double, _ digits: Int = 6) -> String { String(format: "%.\(digits)f", x) }
