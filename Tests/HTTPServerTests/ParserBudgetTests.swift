import Testing
@testable import HTTPServer

/// What one request's bytes may cost the server, whatever their framing: the parser holds the
/// decoded body and a bounded window of input, never everything sent for it.
@Suite struct ParserBudgetTests {
    static let chunkedHead = "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

    /// The attack from the field: one-byte chunks, each behind a long extension. Refused once the
    /// framing outgrows its allowance, and the parser never held more than a small window.
    @Test func oneByteChunksBehindExtensionsAreRefusedEarly() {
        var parser = RequestParser()
        parser.append(Self.chunkedHead)
        let chunk = Array("1;\(String(repeating: "x", count: 200))\r\na\r\n".utf8)
        var sent = 0, peak = 0
        var refused: HTTPParseError?
        for _ in 0..<10_000 {
            parser.append(chunk)
            sent += chunk.count
            peak = max(peak, parser.retainedBytes)
            do { while try parser.next() != nil {} } catch { refused = error; break }
        }
        #expect(refused?.status.code == 413, "framing overhead never refused after \(sent) bytes")
        #expect(sent < 128 * 1024, "refused only after \(sent) bytes")
        #expect(peak < 64 * 1024, "the parser held \(peak) bytes")
    }

    @Test func chunkLinesLongerThanTheLimitAre400() {
        var parser = RequestParser()
        parser.append(Self.chunkedHead + "1;" + String(repeating: "e", count: 300) + "\r\na\r\n0\r\n\r\n")
        #expect(throws: HTTPParseError.self) { while try parser.next() != nil {} }
    }

    /// A large body in ordinary chunks is fine, and consumed input leaves the buffer as the body
    /// advances (before, it stayed until the request ended: 308 MB sent, 584 MB of RSS).
    @Test func consumedBodyBytesLeaveTheBufferAsTheBodyArrives() throws {
        var parser = RequestParser()
        parser.append(Self.chunkedHead)
        let data = [UInt8](repeating: 0x62, count: 4096)
        var peak = 0
        var request: HTTPRequest?
        for i in 0..<200 {
            parser.append(Array("1000;i=\(i)\r\n".utf8) + data + Array("\r\n".utf8))
            peak = max(peak, parser.retainedBytes)
            while let event = try parser.next() { if case .request(let r) = event { request = r } }
        }
        parser.append("0\r\n\r\n")
        while let event = try parser.next() { if case .request(let r) = event { request = r } }
        #expect(request?.body.count == 200 * 4096)
        #expect(peak < 40 * 1024, "the parser held \(peak) bytes of consumed input")
    }

    /// The same for a Content-Length body trickled in small writes.
    @Test func lengthDelimitedBodyDoesNotKeepConsumedInput() throws {
        var parser = RequestParser()
        parser.append("POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n")
        var peak = 0
        var done = false
        for _ in 0..<1000 {
            parser.append([UInt8](repeating: 0x63, count: 1000))
            peak = max(peak, parser.retainedBytes)
            while let event = try parser.next() { if case .request = event { done = true } }
        }
        #expect(done)
        #expect(peak < 40 * 1024, "the parser held \(peak) bytes of consumed input")
    }

    /// Framing of ordinary clients (a few bytes a chunk) stays inside the allowance.
    @Test func smallButHonestChunksAreAccepted() throws {
        var parser = RequestParser()
        var text = Self.chunkedHead
        for _ in 0..<20_000 { text += "8\r\nabcdefgh\r\n" }
        text += "0\r\n\r\n"
        parser.append(text)
        var body = 0
        while let event = try parser.next() { if case .request(let r) = event { body = r.body.count } }
        #expect(body == 160_000)
    }
}
