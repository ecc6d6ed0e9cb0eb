/// The formats a person's own photos may come in, known by their first bytes only: a file's name
/// and the browser's Content-Type are never trusted (an HTML page renamed .jpg starts with `<`).
public enum ImageFormat: String, Sendable, CaseIterable {
    case jpeg, heif, png, webp

    /// The type the original is served as; the only four the routes ever send for one.
    public var contentType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .heif: "image/heic"
        case .png: "image/png"
        case .webp: "image/webp"
        }
    }

    /// The file name's extension for a download of the original.
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        case .heif: "heic"
        case .png: "png"
        case .webp: "webp"
        }
    }

    public var name: String {
        switch self {
        case .jpeg: "JPEG"
        case .heif: "HEIC"
        case .png: "PNG"
        case .webp: "WebP"
        }
    }

    /// HEIF brands of HEVC images (ISO/IEC 23008-12 Annex B): `heic`, `heix`, and the image
    /// sequences' `heim`, `heis`, `hevc`, `hevx`. A file must name one, as its major brand or a
    /// compatible one: the structural `mif1`/`msf1` alone is also what AVIF (AV1, not asked
    /// for here) gives.
    static let heifBrands: Set<String> = ["heic", "heix", "heim", "heis", "hevc", "hevx"]

    /// The format of these bytes, or nil for anything else (SVG, HTML, GIF, TIFF, RAW, a video).
    public static func sniff<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes) -> ImageFormat? where Bytes.Index == Int {
        let b = Array(bytes.prefix(32))
        if b.starts(with: [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if b.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if b.count >= 12, b.starts(with: Array("RIFF".utf8)), Array(b[8..<12]) == Array("WEBP".utf8) { return .webp }
        // ISO BMFF: a box size, then "ftyp", the major brand, a version, compatible brands.
        if b.count >= 12, Array(b[4..<8]) == Array("ftyp".utf8) {
            let major = String(decoding: b[8..<12], as: UTF8.self)
            if heifBrands.contains(major) { return .heif }
            var at = 16
            while at + 4 <= b.count {
                if heifBrands.contains(String(decoding: b[at..<(at + 4)], as: UTF8.self)) { return .heif }
                at += 4
            }
        }
        return nil
    }
}
