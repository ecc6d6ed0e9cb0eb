/// Image bytes without the metadata a camera or a provider left in them. A photo's original can
/// carry where it was taken (EXIF GPS in APP1, XMP in APP1 too, IPTC in APP13, comments), which a
/// share link that hides the location must not hand out.
package enum ImageMetadata {
    /// A JPEG without its APP1–APP15 and COM segments (ITU T.81 Annex B: markers FFE1–FFEF and
    /// FFFE); APP0 (JFIF) and everything the decoder needs are kept. Bytes that are not a JPEG,
    /// or a JPEG whose segments do not parse, come back as nil: the caller refuses to serve them
    /// rather than serve metadata.
    package static func strippedJPEG(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        var out: [UInt8] = [0xFF, 0xD8]
        out.reserveCapacity(bytes.count)
        var i = 2
        while i + 1 < bytes.count {
            guard bytes[i] == 0xFF else { return nil }
            let marker = bytes[i + 1]
            // Fill bytes before a marker (B.1.1.2).
            if marker == 0xFF { i += 1; continue }
            // Markers without a length: TEM and RSTn.
            if marker == 0x01 || (0xD0...0xD7).contains(marker) { out += [0xFF, marker]; i += 2; continue }
            if marker == 0xD9 { out += [0xFF, 0xD9]; return out }
            guard i + 3 < bytes.count else { return nil }
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            guard length >= 2, i + 2 + length <= bytes.count else { return nil }
            let end = i + 2 + length
            if marker == 0xDA {
                // Start of scan: the entropy-coded data follows the header with no length and ends at
                // the first marker that is neither a stuffed FF00 nor a restart; parsing goes on
                // from there (a progressive JPEG has several scans, and segments may follow one).
                out += bytes[i..<end]
                var j = end
                while j + 1 < bytes.count {
                    if bytes[j] == 0xFF, bytes[j + 1] != 0x00, !(0xD0...0xD7).contains(bytes[j + 1]), bytes[j + 1] != 0xFF { break }
                    j += 1
                }
                out += bytes[end..<j]
                i = j
                continue
            }
            let isMetadata = (0xE1...0xEF).contains(marker) || marker == 0xFE
            if !isMetadata { out += bytes[i..<end] }
            i = end
        }
        // No EOI: a truncated file; what was read is all there is.
        return out
    }

    /// True when a JPEG still holds an APPn (n ≥ 1) or COM segment before its image data.
    package static func hasMetadata(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return false }
        var i = 2
        while i + 3 < bytes.count, bytes[i] == 0xFF {
            let marker = bytes[i + 1]
            if (0xE1...0xEF).contains(marker) || marker == 0xFE { return true }
            if marker == 0xDA || marker == 0xD9 { return false }
            i += 2 + (Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]))
        }
        return false
    }
}
