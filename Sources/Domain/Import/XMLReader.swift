/// A small, strict XML 1.0 reader for the files people import (GPX, KML). It reads bytes and calls
/// back per element start, element end and text; it never opens a file or a connection. A document
/// type declaration is refused outright: GPX and KML never need one, and a DTD is what external
/// entities (a file or URL read into the document) and entity expansion ("billion laughs") hide in.
/// So the only entity references are the five predefined ones and numeric character references.
///
/// Handled: the XML declaration (UTF-8, US-ASCII or ISO-8859-1), elements, attributes, namespace
/// prefixes (resolved to their URI, scoped per element), text, CDATA sections, comments and
/// processing instructions (skipped). Nesting deeper than `maxDepth` is refused.
package struct XMLReader {
    package struct Element {
        /// The name without its prefix ("Placemark" for "kml:Placemark").
        package let localName: String
        /// The namespace URI the prefix (or the default namespace) stands for; "" for none.
        package let namespace: String
        package let attributes: [String: String]
    }

    package enum Event {
        case start(Element)
        case end(localName: String)
        case text(String)
    }

    package struct Failure: Error, Equatable, CustomStringConvertible {
        package let description: String
        /// 1-based line of the problem.
        package let line: Int
    }

    package static let defaultMaxDepth = 64

    private let bytes: [UInt8]
    private var index = 0
    private let maxDepth: Int
    private var latin1 = false

    package init(_ bytes: [UInt8], maxDepth: Int = XMLReader.defaultMaxDepth) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// Reads the whole document, calling `handle` for each event in order.
    package static func read(_ bytes: [UInt8], maxDepth: Int = XMLReader.defaultMaxDepth,
                     _ handle: (Event) throws -> Void) throws {
        var reader = XMLReader(bytes, maxDepth: maxDepth)
        try reader.document(handle)
    }

    // MARK: Document

    private mutating func document(_ handle: (Event) throws -> Void) throws {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
            throw fail("the file is UTF-16; save it as UTF-8")
        }
        if starts("<?xml") , let after = bytes[safe: index + 5], isSpace(after) { try declaration() }
        // Namespace bindings in scope: one dictionary per open element.
        var scopes: [[String: String]] = [["xml": "http://www.w3.org/XML/1998/namespace"]]
        var open: [String] = []
        var rootSeen = false
        var text: [UInt8] = []
        func flushText() throws {
            guard !text.isEmpty else { return }
            defer { text.removeAll(keepingCapacity: true) }
            guard !open.isEmpty else {
                if text.allSatisfy(isSpace) { return }
                throw fail("text outside the root element")
            }
            try handle(.text(decode(text)))
        }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "<") {
                if starts("<!--") {
                    try skip(past: "-->", what: "comment")
                } else if starts("<![CDATA[") {
                    guard !open.isEmpty else { throw fail("CDATA outside the root element") }
                    index += 9
                    let start = index
                    try skip(past: "]]>", what: "CDATA section")
                    text.append(contentsOf: bytes[start..<(index - 3)])
                } else if starts("<!DOCTYPE") || starts("<!doctype") {
                    throw fail("the file has a DOCTYPE (a document type declaration); GPX and KML files need none, and we do not read them, since they can pull in other files or expand entities without end")
                } else if starts("<!") {
                    throw fail("markup declarations such as <!ENTITY are not accepted")
                } else if starts("<?") {
                    index += 2
                    let target = name()
                    if target.lowercased() == "xml" { throw fail("an XML declaration is only allowed at the very start") }
                    guard !target.isEmpty else { throw fail("a processing instruction without a name") }
                    try skip(past: "?>", what: "processing instruction")
                } else if starts("</") {
                    try flushText()
                    index += 2
                    let qualified = name()
                    skipSpaces()
                    guard consume(">") else { throw fail("an end tag </\(qualified) is not closed with >") }
                    guard let expected = open.popLast() else { throw fail("an end tag </\(qualified)> with no element open") }
                    guard expected == qualified else { throw fail("</\(qualified)> ends <\(expected)>") }
                    scopes.removeLast()
                    try handle(.end(localName: Self.localName(qualified)))
                } else {
                    try flushText()
                    if open.isEmpty && rootSeen { throw fail("a second root element") }
                    index += 1
                    let qualified = name()
                    guard !qualified.isEmpty else { throw fail("a “<” in text must be written as the entity lt") }
                    var raw: [(String, String)] = []
                    var seen = Set<String>()
                    var empty = false
                    while true {
                        let spaced = skipSpaces()
                        guard index < bytes.count else { throw fail("the file ends inside the tag <\(qualified)> (it may be cut short)") }
                        if consume("/>") { empty = true; break }
                        if consume(">") { break }
                        guard spaced else { throw fail("attributes of <\(qualified)> must be separated by spaces") }
                        let attribute = name()
                        guard !attribute.isEmpty else { throw fail("a malformed attribute in <\(qualified)>") }
                        skipSpaces()
                        guard consume("=") else { throw fail("the attribute \(attribute) of <\(qualified)> has no value") }
                        skipSpaces()
                        let value = try attributeValue()
                        guard seen.insert(attribute).inserted else { throw fail("the attribute \(attribute) appears twice in <\(qualified)>") }
                        raw.append((attribute, value))
                    }
                    guard open.count < maxDepth else { throw fail("elements are nested more than \(maxDepth) deep") }
                    var scope = scopes[scopes.count - 1]
                    var attributes: [String: String] = [:]
                    for (attribute, value) in raw {
                        if attribute == "xmlns" { scope[""] = value } else if attribute.hasPrefix("xmlns:") { scope[String(attribute.dropFirst(6))] = value }
                    }
                    for (attribute, value) in raw where attribute != "xmlns" && !attribute.hasPrefix("xmlns:") {
                        if let colon = attribute.firstIndex(of: ":"), scope[String(attribute[..<colon])] == nil {
                            throw fail("the prefix of the attribute \(attribute) is not declared")
                        }
                        attributes[Self.localName(attribute)] = value
                    }
                    let prefix = qualified.firstIndex(of: ":").map { String(qualified[..<$0]) } ?? ""
                    guard let namespace = scope[prefix] ?? (prefix.isEmpty ? "" : nil) else {
                        throw fail("the namespace prefix “\(prefix)” of <\(qualified)> is not declared")
                    }
                    rootSeen = true
                    try handle(.start(Element(localName: Self.localName(qualified), namespace: namespace, attributes: attributes)))
                    if empty {
                        try handle(.end(localName: Self.localName(qualified)))
                    } else {
                        open.append(qualified)
                        scopes.append(scope)
                    }
                }
            } else if byte == UInt8(ascii: "&") {
                try reference(into: &text)
            } else {
                if byte == UInt8(ascii: ">"), text.suffix(2).elementsEqual([0x5D, 0x5D] as [UInt8]) {
                    throw fail("“]]>” is not allowed in text")
                }
                try checkCharacter(byte)
                text.append(byte)
                index += 1
            }
        }
        if let unclosed = open.last { throw fail("the file ends inside <\(unclosed)> (it may be cut short)") }
        guard rootSeen else { throw fail("no root element") }
        try flushText()
    }

    /// `<?xml version="1.0" encoding="…" standalone="…"?>`: only the encodings we can read.
    private mutating func declaration() throws {
        let start = index
        try skip(past: "?>", what: "XML declaration")
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard text.contains("version=\"1.") || text.contains("version='1.") else { throw fail("the XML declaration names no version 1.x") }
        if let match = text.firstMatch(of: /encoding\s*=\s*["']([A-Za-z0-9._-]+)["']/) {
            switch match.1.uppercased() {
            case "UTF-8", "UTF8", "US-ASCII", "ASCII": break
            case "ISO-8859-1", "LATIN1", "ISO_8859-1": latin1 = true
            default: throw fail("the encoding \(match.1) is not read here; save the file as UTF-8")
            }
        }
    }

    // MARK: Pieces

    private mutating func attributeValue() throws -> String {
        guard let quote = bytes[safe: index], quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
            throw fail("an attribute value must be in quotes")
        }
        index += 1
        var value: [UInt8] = []
        while true {
            guard let byte = bytes[safe: index] else { throw fail("the file ends inside an attribute value") }
            if byte == quote { index += 1; break }
            if byte == UInt8(ascii: "<") { throw fail("“<” in an attribute value") }
            if byte == UInt8(ascii: "&") { try reference(into: &value); continue }
            try checkCharacter(byte)
            // XML 1.0 §3.3.3: whitespace characters in a value read as spaces.
            value.append(byte == 0x09 || byte == 0x0A || byte == 0x0D ? 0x20 : byte)
            index += 1
        }
        return decode(value)
    }

    /// `&lt;` `&gt;` `&amp;` `&quot;` `&apos;`, `&#NNN;` and `&#xHHH;`; any other name is refused,
    /// since without a DTD nothing can define it.
    private mutating func reference(into out: inout [UInt8]) throws {
        index += 1
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: ";"), index - start < 12 { index += 1 }
        guard bytes[safe: index] == UInt8(ascii: ";") else { throw fail("a bare “&” (in text it must be written as the entity amp)") }
        let name = String(decoding: bytes[start..<index], as: UTF8.self)
        index += 1
        switch name {
        case "lt": out.append(UInt8(ascii: "<"))
        case "gt": out.append(UInt8(ascii: ">"))
        case "amp": out.append(UInt8(ascii: "&"))
        case "quot": out.append(UInt8(ascii: "\""))
        case "apos": out.append(UInt8(ascii: "'"))
        default:
            var value: UInt32?
            if name.hasPrefix("#x") { value = UInt32(name.dropFirst(2), radix: 16) } else if name.hasPrefix("#") { value = UInt32(name.dropFirst(), radix: 10) }
            guard name.hasPrefix("#") else { throw fail("the entity “\(name)” is not defined (only lt, gt, amp, quot, apos and numeric references are)") }
            guard let value, Self.isXMLCharacter(value), let scalar = Unicode.Scalar(value) else {
                throw fail("the character reference “\(name)” is not a character XML allows")
            }
            out.append(contentsOf: Array(String(Character(scalar)).utf8))
        }
    }

    /// XML 1.0 §2.2 Char: tab, LF, CR, and from space up, without surrogates, U+FFFE and U+FFFF.
    package static func isXMLCharacter(_ value: UInt32) -> Bool {
        value == 0x9 || value == 0xA || value == 0xD || (0x20...0xD7FF).contains(value)
            || (0xE000...0xFFFD).contains(value) || (0x10000...0x10FFFF).contains(value)
    }

    private func checkCharacter(_ byte: UInt8) throws {
        if byte < 0x20 && byte != 0x09 && byte != 0x0A && byte != 0x0D { throw fail("a control character (byte \(byte)) that XML does not allow") }
    }

    /// A name: everything up to whitespace or a delimiter (the exact Name production is not needed
    /// to read GPX or KML safely).
    private mutating func name() -> String {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if isSpace(byte) || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=")
                || byte == UInt8(ascii: "<") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'")
                || byte == UInt8(ascii: "&") || byte == UInt8(ascii: "!") { break }
            index += 1
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    @discardableResult
    private mutating func skipSpaces() -> Bool {
        let start = index
        while index < bytes.count, isSpace(bytes[index]) { index += 1 }
        return index > start
    }

    private mutating func consume(_ literal: StaticString) -> Bool {
        guard starts(literal) else { return false }
        index += literal.utf8CodeUnitCount
        return true
    }

    private func starts(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        let pattern = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != pattern[offset] { return false }
        return true
    }

    private mutating func skip(past terminator: StaticString, what: String) throws {
        let count = terminator.utf8CodeUnitCount
        let pattern = Array(UnsafeBufferPointer(start: terminator.utf8Start, count: count))
        while index + count <= bytes.count {
            if bytes[index] == pattern[0] && bytes[index..<(index + count)].elementsEqual(pattern) {
                index += count
                return
            }
            index += 1
        }
        throw fail("the file ends inside a \(what) (it may be cut short)")
    }

    private func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    private func decode(_ text: [UInt8]) -> String {
        if latin1 { return String(String.UnicodeScalarView(text.map { Unicode.Scalar($0) })) }
        return String(decoding: text, as: UTF8.self)
    }

    package static func localName(_ qualified: String) -> String {
        qualified.firstIndex(of: ":").map { String(qualified[qualified.index(after: $0)...]) } ?? qualified
    }

    private func fail(_ message: String) -> Failure {
        let line = 1 + bytes[..<min(index, bytes.count)].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        return Failure(description: message, line: line)
    }
}

fileprivate extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
