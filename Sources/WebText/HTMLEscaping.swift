/// The one HTML escaper of the product, on bytes: the app's `HTML` type (Views) escapes every
/// `\(text:)` with it, and the HTTP server's default error page escapes its reason and message with
/// it. It lives in this small module because HTTPServer cannot import the app.
public enum HTMLEscaping {
    /// The five characters that end text or a quoted attribute value: " & ' < > (all below 64, so
    /// one 64-bit mask is the lookup table).
    @usableFromInline static let specialMask: UInt64 = (1 << 0x22) | (1 << 0x26) | (1 << 0x27) | (1 << 0x3C) | (1 << 0x3E)

    @inlinable @inline(__always)
    public static func isSpecial(_ byte: UInt8) -> Bool { byte < 64 && (specialMask >> UInt64(byte)) & 1 == 1 }

    @inlinable
    public static func append(_ text: String, to bytes: inout [UInt8]) {
        var text = text
        text.withUTF8 { append($0, to: &bytes) }
    }

    /// A run of safe bytes is copied at once; each special character becomes its entity.
    @inlinable
    public static func append(_ source: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        var runStart = 0
        var index = 0
        let end = source.count
        while index < end {
            let byte = source[index]
            if isSpecial(byte) {
                if runStart < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<index])) }
                switch byte {
                case 0x26: bytes.append(contentsOf: [0x26, 0x61, 0x6D, 0x70, 0x3B] as [UInt8])  // &amp;
                case 0x3C: bytes.append(contentsOf: [0x26, 0x6C, 0x74, 0x3B] as [UInt8])  // &lt;
                case 0x3E: bytes.append(contentsOf: [0x26, 0x67, 0x74, 0x3B] as [UInt8])  // &gt;
                case 0x22: bytes.append(contentsOf: [0x26, 0x71, 0x75, 0x6F, 0x74, 0x3B] as [UInt8])  // &quot;
                default: bytes.append(contentsOf: [0x26, 0x23, 0x33, 0x39, 0x3B] as [UInt8])  // &#39;
                }
                runStart = index + 1
            }
            index += 1
        }
        if runStart < end { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<end])) }
    }

    /// Escaped text as a String, for what is not assembled in bytes (an error page, a JSON field
    /// a script inserts as markup).
    public static func escape(_ text: String) -> String {
        guard text.utf8.contains(where: isSpecial) else { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 16)
        append(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
