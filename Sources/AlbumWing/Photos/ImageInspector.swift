/// What an image really is, read from its bytes: the Content-Type a server claims is never
/// trusted (a photo host answering with an HTML error page says image/jpeg just as happily).
public struct ImageInfo: Sendable, Equatable {
    public let contentType: String
    public let width: Int
    public let height: Int
}

public enum ImageInspector {
    /// JPEG, PNG, GIF or WebP with readable dimensions; nil for anything else.
    public static func inspect(_ bytes: [UInt8]) -> ImageInfo? {
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return jpeg(bytes) }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), bytes.count >= 24,
           Array(bytes[12..<16]) == Array("IHDR".utf8) {
            return sized("image/png", be32(bytes, 16), be32(bytes, 20))
        }
        if bytes.count >= 10, bytes.starts(with: Array("GIF87a".utf8)) || bytes.starts(with: Array("GIF89a".utf8)) {
            return sized("image/gif", Int(bytes[6]) | Int(bytes[7]) << 8, Int(bytes[8]) | Int(bytes[9]) << 8)
        }
        if bytes.count >= 30, bytes.starts(with: Array("RIFF".utf8)), Array(bytes[8..<12]) == Array("WEBP".utf8) {
            return webp(bytes)
        }
        return nil
    }

    private static func sized(_ type: String, _ width: Int, _ height: Int) -> ImageInfo? {
        guard width > 0, height > 0, width <= 65535, height <= 65535 else { return nil }
        return ImageInfo(contentType: type, width: width, height: height)
    }

    private static func be16(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) << 8 | Int(b[i + 1]) }
    private static func be32(_ b: [UInt8], _ i: Int) -> Int { be16(b, i) << 16 | be16(b, i + 2) }
    private static func le16(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) | Int(b[i + 1]) << 8 }
    private static func le24(_ b: [UInt8], _ i: Int) -> Int { le16(b, i) | Int(b[i + 2]) << 16 }

    /// Walks the marker segments to the first start-of-frame (ITU T.81 B.2): SOF0–SOF15 except
    /// DHT (C4), JPG (C8) and DAC (CC), which share the range.
    private static func jpeg(_ b: [UInt8]) -> ImageInfo? {
        var i = 2
        while i + 9 < b.count {
            guard b[i] == 0xFF else { return nil }
            let marker = b[i + 1]
            if marker == 0xFF { i += 1; continue }  // fill bytes
            if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 { i += 2; continue }
            let length = be16(b, i + 2)
            guard length >= 2 else { return nil }
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                return sized("image/jpeg", be16(b, i + 7), be16(b, i + 5))
            }
            i += 2 + length
        }
        return nil
    }

    private static func webp(_ b: [UInt8]) -> ImageInfo? {
        switch String(decoding: b[12..<16], as: UTF8.self) {
        case "VP8 ": return sized("image/webp", le16(b, 26) & 0x3FFF, le16(b, 28) & 0x3FFF)
        case "VP8L":
            let bits = Int(b[21]) | Int(b[22]) << 8 | Int(b[23]) << 16 | Int(b[24]) << 24
            return sized("image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
        case "VP8X": return sized("image/webp", le24(b, 24) + 1, le24(b, 27) + 1)
        default: return nil
        }
    }
}
