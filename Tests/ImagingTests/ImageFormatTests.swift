import Testing
@testable import Imaging

@Suite struct ImageFormatTests {
    @Test func formatsAreKnownByTheirFirstBytes() {
        #expect(ImageFormat.sniff([0xFF, 0xD8, 0xFF, 0xE0]) == .jpeg)
        #expect(ImageFormat.sniff([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0]) == .png)
        #expect(ImageFormat.sniff(Array("RIFF\u{0}\u{0}\u{0}\u{0}WEBPVP8 ".utf8)) == .webp)
        #expect(ImageFormat.sniff([0, 0, 0, 0x18] + Array("ftypheic\u{0}\u{0}\u{0}\u{0}mif1heic".utf8)) == .heif)
        #expect(ImageFormat.sniff([0, 0, 0, 0x18] + Array("ftypmif1\u{0}\u{0}\u{0}\u{0}mif1heic".utf8)) == .heif)
        // AVIF, a video, SVG, HTML, GIF: not taken.
        #expect(ImageFormat.sniff([0, 0, 0, 0x1C] + Array("ftypavif\u{0}\u{0}\u{0}\u{0}avifmif1miaf".utf8)) == nil)
        #expect(ImageFormat.sniff([0, 0, 0, 0x18] + Array("ftypmp42\u{0}\u{0}\u{0}\u{0}isommp42".utf8)) == nil)
        #expect(ImageFormat.sniff(Array("<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8)) == nil)
        #expect(ImageFormat.sniff(Array("<!doctype html><script>alert(1)</script>".utf8)) == nil)
        #expect(ImageFormat.sniff(Array("GIF89a".utf8)) == nil)
        #expect(ImageFormat.sniff([]) == nil)
    }
}
