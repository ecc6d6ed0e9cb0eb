/// An ICC colour profile carried from a photo to the versions made of it, so an iPhone's Display
/// P3 stays Display P3 (re-encoded pixels keep their values; without the profile a browser would
/// read them as sRGB and the colours would fade). Nothing else of the original's metadata is
/// carried: no EXIF, no XMP, so no location (docs/architecture.md, "Own photos").
public enum ColourProfile {
    static let jpegMarker: [UInt8] = Array("ICC_PROFILE".utf8) + [0]
    /// Profiles larger than this are dropped (a display's is a few KB; Display P3's is 536
    /// bytes): what a stranger's file puts in every version served is kept small.
    public static let maxBytes = 64 << 10

    /// The profile a JPEG carries in its APP2 segments (ICC.1 B.4: "ICC_PROFILE\0", the chunk's
    /// number from 1, the count), or nil when absent, incomplete or inconsistent.
    public static func inJPEG<Bytes: RandomAccessCollection<UInt8>>(_ jpeg: Bytes) -> [UInt8]? where Bytes.Index == Int {
        var chunks: [Int: Bytes.SubSequence] = [:]
        var expected = 0, consistent = true
        segments(of: jpeg) { marker, body in
            guard marker == 0xE2, body.count > jpegMarker.count + 2, body.starts(with: jpegMarker) else { return true }
            let number = Int(body[body.startIndex + 12]), count = Int(body[body.startIndex + 13])
            guard number >= 1, count >= 1, number <= count, expected == 0 || expected == count, chunks[number] == nil else {
                consistent = false
                return false
            }
            expected = count
            chunks[number] = body.dropFirst(14)
            return true
        }
        guard consistent, expected > 0, chunks.count == expected else { return nil }
        var profile: [UInt8] = []
        for number in 1...expected { profile += chunks[number]! }
        return isRGB(profile) ? profile : nil
    }

    /// The body of a JPEG's Exif segment (APP1 starting "Exif\0\0", at most 64 KB), or nil:
    /// what libexif reads tags from. It copies what it is given, so it gets this, never the file.
    static func exifSegment<Bytes: RandomAccessCollection<UInt8>>(_ jpeg: Bytes) -> Bytes.SubSequence? where Bytes.Index == Int {
        var found: Bytes.SubSequence?
        segments(of: jpeg) { marker, body in
            guard marker == 0xE1, body.starts(with: [0x45, 0x78, 0x69, 0x66, 0, 0]) else { return true }
            found = body
            return false
        }
        return found
    }

    /// A JPEG's marker segments before its image data, in order: each marker and its body, until
    /// `visit` answers false, the scan (SOS) or the end begins, or a length runs past the file.
    static func segments<Bytes: RandomAccessCollection<UInt8>>(of jpeg: Bytes, _ visit: (UInt8, Bytes.SubSequence) -> Bool) where Bytes.Index == Int {
        var at = jpeg.startIndex + 2
        while at + 4 <= jpeg.endIndex, jpeg[at] == 0xFF {
            let marker = jpeg[at + 1]
            if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 { at += 2; continue }
            if marker == 0xFF { at += 1; continue }
            if marker == 0xDA || marker == 0xD9 { return }  // the image data: no more headers
            let length = Int(jpeg[at + 2]) << 8 | Int(jpeg[at + 3])
            guard length >= 2, at + 2 + length <= jpeg.endIndex else { return }
            guard visit(marker, jpeg[(at + 4)..<(at + 2 + length)]) else { return }
            at += 2 + length
        }
    }

    /// A profile the RGB versions can carry: a whole ICC header (128 bytes) that says its own
    /// size, is signed "acsp" (ICC.1 7.2.9), and whose colour space (bytes 16–19) is "RGB " — a
    /// CMYK or grey profile on RGB pixels would make colours wrong.
    public static func isRGB(_ profile: [UInt8]) -> Bool {
        guard profile.count >= 128, profile.count <= maxBytes else { return false }
        let declared = Int(profile[0]) << 24 | Int(profile[1]) << 16 | Int(profile[2]) << 8 | Int(profile[3])
        return declared == profile.count && Array(profile[36..<40]) == Array("acsp".utf8) && Array(profile[16..<20]) == Array("RGB ".utf8)
    }

    /// The JPEG with the profile in APP2 segments after its SOI and JFIF APP0 (JFIF wants APP0
    /// first; TurboJPEG writes no profile of its own).
    public static func embedding(_ profile: [UInt8]?, in jpeg: [UInt8]) -> [UInt8] {
        guard let profile, !profile.isEmpty, profile.count <= maxBytes, jpeg.starts(with: [0xFF, 0xD8]) else { return jpeg }
        let room = 65_533 - 14  // a segment's length field counts itself: 65,535 - 2 - 14 header bytes
        let count = (profile.count + room - 1) / room
        guard count <= 255 else { return jpeg }
        var head = 2
        if jpeg.count > 6, jpeg[2] == 0xFF, jpeg[3] == 0xE0 { head = min(jpeg.count, 4 + (Int(jpeg[4]) << 8 | Int(jpeg[5]))) }
        var out = Array(jpeg[0..<head])
        out.reserveCapacity(jpeg.count + profile.count + count * 18)
        for number in 1...count {
            let chunk = profile[((number - 1) * room)..<min(profile.count, number * room)]
            let length = 2 + 14 + chunk.count
            out += [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)] + jpegMarker + [UInt8(number), UInt8(count)]
            out += chunk
        }
        out += jpeg[head...]
        return out
    }
}
