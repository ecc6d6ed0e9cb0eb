/// Text out of a fragment of HTML that comes from outside (a Commons credit line, a tile source's
/// attribution): tags dropped, character references decoded in one pass — so "&amp;lt;" is the
/// text "&lt;", never "<" — runs of white space made one space, the ends trimmed. What comes out is
/// plain text, to be escaped again when written into a page.
public enum HTMLText {
    public static func plain(_ html: String) -> String {
        var out = ""
        var space = false
        func emit(_ character: Character) {
            if character.isWhitespace || (character.isASCII && character.asciiValue! < 0x20) {
                space = !out.isEmpty
            } else {
                if space { out.append(" ") }
                space = false
                out.append(character)
            }
        }
        var inTag = false
        var i = html.startIndex
        while i < html.endIndex {
            let character = html[i]
            let next = html.index(after: i)
            if inTag {
                if character == ">" { inTag = false }
            } else if character == "<" {
                inTag = true
            } else if character == "&", let semicolon = html[next...].prefix(12).firstIndex(of: ";"),
                      let decoded = reference(html[next..<semicolon]) {
                emit(decoded)
                i = html.index(after: semicolon)
                continue
            } else {
                emit(character)
            }
            i = next
        }
        return out
    }

    /// The character a reference names (without its & and ;), or nil to keep it as written.
    static func reference(_ name: Substring) -> Character? {
        switch name {
        case "amp": return "&"
        case "lt": return "<"
        case "gt": return ">"
        case "quot": return "\""
        case "apos": return "'"
        case "nbsp": return " "
        case "copy": return "©"
        default: break
        }
        guard name.first == "#" else { return nil }
        let digits = name.dropFirst()
        let value = digits.first == "x" || digits.first == "X" ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits, radix: 10)
        guard let value, value != 0, let scalar = Unicode.Scalar(value) else { return nil }
        return Character(scalar)
    }
}
