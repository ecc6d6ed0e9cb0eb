/// Comments are for the people reading Public/, not for every browser that loads it: JavaScript
/// and CSS are served with their comments blanked, line for line, so line numbers in the browser's
/// errors still match the source (docs/architecture.md, "The map page's weight").
enum CommentStripping {
    /// The bytes to serve for a file of `contentType`; anything but JavaScript and CSS unchanged.
    static func served(_ bytes: [UInt8], contentType: String) -> [UInt8] {
        if contentType.hasPrefix("application/javascript") { return javaScript(bytes) }
        if contentType.hasPrefix("text/css") { return css(bytes) }
        return bytes
    }

    private static let slash = UInt8(ascii: "/"), star = UInt8(ascii: "*"), newline = UInt8(ascii: "\n")
    private static let backtick = UInt8(ascii: "`"), backslash = UInt8(ascii: "\\")

    /// Lines that hold only a `//` comment become empty. Lines inside a template literal that spans
    /// lines are kept as they are: there `//` is text.
    static func javaScript(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var inTemplate = false
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != newline { end += 1 }
            let line = bytes[start..<end]
            let firstCode = line.firstIndex { $0 != 0x20 && $0 != 0x09 }
            let isComment = !inTemplate && firstCode.map { $0 + 1 < end && bytes[$0] == slash && bytes[$0 + 1] == slash } == true
            if !isComment { out.append(contentsOf: line) }
            // An odd number of unescaped backticks opens or closes a template literal.
            var ticks = 0, escaped = false
            for byte in line {
                if escaped { escaped = false } else if byte == backslash { escaped = true } else if byte == backtick { ticks += 1 }
            }
            if ticks % 2 == 1 && !isComment { inTemplate.toggle() }
            if end < bytes.count { out.append(newline) }
            start = end + 1
        }
        return out
    }

    /// `/* … */` comments outside strings are removed; the newlines inside them are kept.
    static func css(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        var quote: UInt8? = nil
        while i < bytes.count {
            let byte = bytes[i]
            if let open = quote {
                out.append(byte)
                if byte == backslash, i + 1 < bytes.count { out.append(bytes[i + 1]); i += 2; continue }
                if byte == open { quote = nil }
                i += 1
            } else if byte == slash, i + 1 < bytes.count, bytes[i + 1] == star {
                i += 2
                while i < bytes.count && !(bytes[i] == star && i + 1 < bytes.count && bytes[i + 1] == slash) {
                    if bytes[i] == newline { out.append(newline) }
                    i += 1
                }
                i += 2
            } else {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") { quote = byte }
                out.append(byte)
                i += 1
            }
        }
        return out
    }
}
