import Foundation
import Testing
import TestSupport
@testable import HTTPServer

/// HTTPLimits.uploads: a route named by method and exact path takes a larger body than every other;
/// past its own limit it is refused with its own sentence, from the Content-Length alone.
@Suite struct UploadLimitTests {
    static var limits: HTTPLimits {
        var limits = HTTPLimits()
        limits.maxBodyBytes = 10
        limits.uploads = [HTTPLimits.Upload(method: "POST", path: "/import", maxBodyBytes: 20, refusal: "files of up to 20 bytes")]
        return limits
    }

    func outcome(_ text: String) -> Result<Int, HTTPParseError> {
        var parser = RequestParser(limits: Self.limits)
        parser.append(text)
        do {
            var bodies = 0
            while let event = try parser.next() {
                if case .request(let request) = event { bodies += request.body.count }
            }
            return .success(bodies)
        } catch {
            return .failure(error)
        }
    }

    /// A route with a `:name` segment (a pin's photos) matches one whole segment there, nothing else.
    @Test func aPatternSegmentMatchesOneSegment() {
        #expect(HTTPLimits.matches("/pins/:id/own-photos", "/pins/12/own-photos"))
        for other in ["/pins//own-photos", "/pins/1/2/own-photos", "/pins/12/own-photos/", "/pins/12/photos", "/pins/own-photos", "/PINS/12/own-photos"] {
            #expect(!HTTPLimits.matches("/pins/:id/own-photos", other), "\(other)")
        }
        #expect(HTTPLimits.matches("/import", "/import") && !HTTPLimits.matches("/import", "/import/1"))
    }

    /// Large bodies share one budget, held as their bytes arrive (a step at a time): a head that
    /// only claims a large body holds one step; past the budget the next is refused with 503 and
    /// Retry-After; a request's share comes back when the request goes. Chunked bodies count too.
    @Test func largeUploadsShareABudget() throws {
        var limits = Self.limits
        let budget = UploadBudget(bytes: 30, step: 5)
        limits.uploadBudget = budget
        var first = RequestParser(limits: limits)
        first.append("POST /import HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n")
        let waiting = try first.next()
        #expect(waiting == nil ? true : false, "the body is not here yet")
        #expect(budget.reserved == 5, "a head holds one step")
        first.append("0123456789")
        _ = try first.next()
        #expect(budget.reserved == 10)
        var second = RequestParser(limits: limits)
        second.append("POST /import HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n0123456789abcdefghij\r\n")
        _ = try second.next()
        #expect(budget.reserved == 30, "a chunked body is counted as it arrives")
        var third = RequestParser(limits: limits)
        third.append("POST /import HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n")
        #expect(throws: HTTPParseError.self) { try third.next() }
        #expect(UploadBudget.refusal.status == .serviceUnavailable && UploadBudget.refusal.headers["Retry-After"] == "5")
        // A small body is not counted; the first request, once read and let go, gives its share back.
        var small = RequestParser(limits: limits)
        small.append("POST /import HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde")
        _ = try small.next()
        #expect(budget.reserved == 30)
        second = RequestParser(limits: limits)  // the chunked one's connection closes: its share comes back
        #expect(budget.reserved == 10)
        first.append("0123456789")
        do {
            guard case .request(let request)? = try first.next() else { Issue.record("no request"); return }
            #expect(request.body == Array("01234567890123456789".utf8) && request.uploadReservation?.held == 20)
        }
        first = RequestParser(limits: limits)
        #expect(budget.reserved == 0)
    }

    /// A 40 MB body read in 64 KiB pieces arrives whole (the parser keeps one copy of it while it
    /// grows; script/bench http measures the time).
    @Test func aLargeBodyInSmallPiecesArrivesWhole() throws {
        var limits = HTTPLimits()
        limits.uploads = [HTTPLimits.Upload(method: "POST", path: "/up", maxBodyBytes: 41 << 20, refusal: "too large")]
        limits.uploadBudget = UploadBudget(bytes: 64 << 20)
        var parser = RequestParser(limits: limits)
        let size = 40 << 20
        parser.append("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: \(size)\r\n\r\n")
        var body = [UInt8](repeating: 0, count: 64 << 10)
        var received: HTTPRequest?
        for piece in 0..<(size / body.count) {
            body[0] = UInt8(truncatingIfNeeded: piece)
            parser.append(body)
            if case .request(let request)? = try parser.next() { received = request }
        }
        let request = try #require(received)
        #expect(request.body.count == size && request.body[64 << 10] == 1 && request.body[size - (64 << 10)] == UInt8(truncatingIfNeeded: size / (64 << 10) - 1))
        #expect(limits.uploadBudget?.reserved == size)
    }

    /// A spooled upload (own photos) goes to a file from its first byte: the same 40 MB, in the
    /// same pieces, leaves the request's body empty and the parser's buffer as small as one
    /// piece; the file holds every byte in order; it is unlinked already (nothing to clean up);
    /// chunked bodies spool too; and a spool that cannot be written refuses with 503 before the
    /// body is read.
    @Test func aSpooledUploadIsNeverHeldInMemory() throws {
        var limits = HTTPLimits()
        limits.uploads = [HTTPLimits.Upload(method: "POST", path: "/up", maxBodyBytes: 41 << 20, refusal: "too large", spooled: true)]
        limits.uploadBudget = UploadBudget(bytes: 64 << 20)
        let directory = FileManager.default.temporaryDirectory.path + "/spool-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        limits.spoolDirectory = directory
        var parser = RequestParser(limits: limits)
        let size = 40 << 20
        parser.append("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: \(size)\r\n\r\n")
        var piece = [UInt8](repeating: 7, count: 64 << 10)
        var received: HTTPRequest?, largestBuffer = 0
        for index in 0..<(size / piece.count) {
            piece[0] = UInt8(truncatingIfNeeded: index)
            parser.append(piece)
            if case .request(let request)? = try parser.next() { received = request }
            largestBuffer = max(largestBuffer, parser.retainedBytes)
        }
        let request = try #require(received)
        let spooled = try #require(request.spooled)
        #expect(request.body.isEmpty && spooled.count == size && request.bodyCount == size)
        #expect(largestBuffer <= 2 * piece.count, "the parser kept \(largestBuffer) bytes")
        #expect(spooled.read((64 << 10)..<((64 << 10) + 2)) == [1, 7])
        #expect(spooled.read((size - (64 << 10))..<(size - (64 << 10) + 1)) == [UInt8(truncatingIfNeeded: size / (64 << 10) - 1)])
        try spooled.withMapped { #expect($0.count == size && $0[size - 1] == 7) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty, "the spool file is unlinked")
        #expect(limits.uploadBudget?.reserved == size, "the budget bounds spooled bytes as it bounded held ones")

        var chunked = RequestParser(limits: limits)
        chunked.append("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        guard case .request(let small)? = try chunked.next() else { Issue.record("no request"); return }
        #expect(small.body.isEmpty && small.spooled?.read(0..<100) == Array("hello world".utf8))

        limits.spoolDirectory = directory + "/missing"
        var refused = RequestParser(limits: limits)
        refused.append("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n")
        #expect(throws: HTTPParseError.self) { try refused.next() }
        // Other routes keep their bodies in memory.
        var other = RequestParser(limits: limits)
        other.append("POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
        guard case .request(let form)? = try other.next() else { Issue.record("no request"); return }
        #expect(form.body == Array("abc".utf8) && form.spooled == nil)
    }

    /// However small, a spooled body holds a file (a descriptor, disk): each is in the budget for
    /// a step from its first byte, so a client pipelining many small uploads on many connections
    /// cannot open more spool files than the budget has steps (an attack review's finding).
    @Test func smallSpooledBodiesCountInTheBudget() throws {
        var limits = HTTPLimits()
        limits.uploads = [HTTPLimits.Upload(method: "POST", path: "/up", maxBodyBytes: 1 << 20, refusal: "too large", spooled: true)]
        limits.uploadBudget = UploadBudget(bytes: 3 << 20, step: 1 << 20)
        limits.spoolDirectory = NSTemporaryDirectory()
        var parsers: [RequestParser] = []
        var refused = 0
        for _ in 0..<5 {
            var parser = RequestParser(limits: limits)
            parser.append("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab")
            do { _ = try parser.next() } catch { refused += 1; #expect(error.status == .serviceUnavailable) }
            parsers.append(parser)
        }
        #expect(refused == 2 && limits.uploadBudget?.reserved == 3 << 20)
        parsers.removeAll()
        #expect(limits.uploadBudget?.reserved == 0)
    }

    /// Seeded random streams of pipelined requests on one connection: spooled uploads and plain
    /// forms, Content-Length or chunked (random chunk sizes), empty or up to 300 KB, arriving in
    /// random pieces. Invariants: each request comes out with exactly the bytes sent, an upload's
    /// on disk and none in memory, anything else in memory; the parser's buffer never holds more
    /// than what one read brings plus a head; no spool file is ever left in the folder; every
    /// budget reservation is given back once the requests go.
    @Test func randomPipelinedStreamsSpoolExactlyTheUploads() throws {
        struct Request: CustomStringConvertible {
            let upload: Bool, chunked: Bool, size: Int, chunk: Int, piece: Int, fill: UInt8
            var description: String { "\(upload ? "upload" : "form") \(chunked ? "chunked/\(chunk)" : "length") \(size) B in \(piece) B pieces" }
        }
        let directory = FileManager.default.temporaryDirectory.path + "/spool-explore-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var limits = HTTPLimits()
        limits.maxBodyBytes = 64 << 10
        limits.uploads = [HTTPLimits.Upload(method: "POST", path: "/pins/:id/own-photos", maxBodyBytes: 1 << 20, refusal: "too large", spooled: true)]
        limits.uploadBudget = UploadBudget(bytes: 8 << 20, step: 16 << 10)
        limits.spoolDirectory = directory
        let budget = try #require(limits.uploadBudget)
        let failure = explore(seeds: 51..<71, length: 1...12, generate: { random -> Request in
            let upload = random.chance(0.6)
            return Request(upload: upload, chunked: random.chance(0.4), size: random.chance(0.1) ? 0 : Int.random(in: 1...(upload ? 300_000 : 60_000), using: &random),
                           chunk: Int.random(in: 1...70_000, using: &random), piece: Int.random(in: 1...100_000, using: &random),
                           fill: UInt8.random(in: 0...255, using: &random))
        }, run: { requests in
            var parser = RequestParser(limits: limits)
            var received: [HTTPRequest] = []
            for (index, request) in requests.enumerated() {
                let body = (0..<request.size).map { UInt8(truncatingIfNeeded: $0 &* 7) ^ request.fill }
                let path = request.upload ? "/pins/\(index)/own-photos" : "/form"
                var wire = Array("POST \(path) HTTP/1.1\r\nHost: a\r\n".utf8)
                if request.chunked {
                    wire += Array("Transfer-Encoding: chunked\r\n\r\n".utf8)
                    var at = 0
                    while at < body.count {
                        let n = min(request.chunk, body.count - at)
                        wire += Array((String(n, radix: 16) + "\r\n").utf8) + body[at..<(at + n)] + [13, 10]
                        at += n
                    }
                    wire += Array("0\r\n\r\n".utf8)
                } else {
                    wire += Array("Content-Length: \(body.count)\r\n\r\n".utf8) + body
                }
                var at = 0
                while at < wire.count {
                    let n = min(request.piece, wire.count - at)
                    parser.append(Array(wire[at..<(at + n)]))
                    at += n
                    do {
                        while let event = try parser.next() { if case .request(let r) = event { received.append(r) } }
                    } catch {
                        return "request \(index) refused: \(error)"
                    }
                    if parser.retainedBytes > request.piece + 64 << 10 + 1024 { return "the parser kept \(parser.retainedBytes) bytes" }
                }
                guard received.count == index + 1, let got = received.last else { return "request \(index) did not come out" }
                // An empty body has no framing unless it is chunked (a last chunk at once).
                let spooledAsItShould = request.upload && (request.size > 0 || request.chunked)
                if (got.spooled != nil) != spooledAsItShould { return "request \(index) spooled: \(got.spooled != nil)" }
                let bytes = got.spooled.map { $0.read(0..<Int.max) } ?? got.body
                if bytes != body { return "request \(index) came out with \(bytes.count) bytes, not its \(body.count)" }
                if got.spooled != nil && !got.body.isEmpty { return "request \(index) is in memory too" }
            }
            if let left = try? FileManager.default.contentsOfDirectory(atPath: directory), !left.isEmpty { return "left in the spool: \(left)" }
            received.removeAll()
            parser = RequestParser(limits: limits)
            return budget.reserved == 0 ? nil : "\(budget.reserved) bytes still reserved"
        })
        #expect(failure == nil, "\(failure ?? "")")
    }

    @Test func theUploadRouteTakesItsOwnLimitAndNoOtherDoes() throws {
        let body = String(repeating: "x", count: 20)
        #expect(try outcome("POST /import HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n\(body)").get() == 20)
        #expect(try outcome("POST /import HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n\(body)\r\n0\r\n\r\n").get() == 20)
        for refused in ["POST /import HTTP/1.1\r\nHost: a\r\nContent-Length: 21\r\n\r\n",
                        "POST /import HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n14\r\n\(body)\r\n1\r\n"] {
            #expect(outcome(refused) == .failure(HTTPParseError(.contentTooLarge, "files of up to 20 bytes")))
        }
        // Same path, other method; other path, same method; a path that only starts the same.
        for other in ["PUT /import", "POST /pins", "POST /import/1", "POST /IMPORT"] {
            let result = outcome("\(other) HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n")
            #expect(result == .failure(HTTPParseError(.contentTooLarge, "body larger than 10 bytes")), "\(other)")
        }
        // The query is not part of the path: the upload's limit holds with one.
        #expect(try outcome("POST /import?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n\(body)").get() == 20)
        #expect(Self.limits.largestBody == 20)
    }
}
