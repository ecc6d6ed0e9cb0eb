import Testing
@testable import Zlib

@Suite struct GzipTests {
    @Test func compressedBytesComeBackWhole() throws {
        let text = Array(String(repeating: "Virtual Tourist · 東京 · ", count: 2_000).utf8)
        let packed = try #require(Gzip.compress(text))
        #expect(packed.count < text.count / 10 && packed.starts(with: [0x1F, 0x8B]))
        #expect(Gzip.decompress(packed) == text)
        #expect(Gzip.decompress(try #require(Gzip.compress([]))) == [])
    }

    /// A bomb costs at most the limit: a megabyte of zeros packs to about a kilobyte.
    @Test func inflatingStopsAtTheLimit() throws {
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        let bomb = try #require(Gzip.compress(zeros, level: 9))
        #expect(bomb.count < 4_096)
        #expect(Gzip.inflate(bomb[...], windowBits: 15 + 32, limit: 64 * 1024) == .tooLarge)
        #expect(Gzip.inflate(bomb[...], windowBits: 15 + 32, limit: 1 << 20) == .inflated(zeros))
    }

    @Test func brokenInputIsSaidSo() throws {
        let packed = try #require(Gzip.compress(Array("hello, world".utf8)))
        #expect(Gzip.inflate(packed.dropLast(12), windowBits: 15 + 32, limit: 1 << 20) == .endsEarly)
        #expect(Gzip.inflate(Array("not gzip at all".utf8)[...], windowBits: 15 + 32, limit: 1 << 20) == .invalid)
        #expect(Gzip.decompress(Array(packed.prefix(5))) == nil)
    }
}
