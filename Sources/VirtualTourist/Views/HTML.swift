import WebText

/// A fragment of HTML as UTF-8 bytes. Only three things can be interpolated into one: other HTML
/// (inserted as it is), text (`\(text: name)`, escaped) and numbers (integers as they are,
/// doubles through `\(decimal: x)`). A String without the `text:` label, an optional, a Double or any
/// other value does not compile, so markup cannot be built by accident from a String whose type
/// was inferred (the map list once printed `[HTML(rendered: …)]` that way: docs/architecture.md).
///
///     let name = "<script>"
///     let page: HTML = "<p>Hello, \(text: name)</p>"   // <p>Hello, &lt;script&gt;</p>
///
/// Literal segments are copied straight from the binary's read-only data; escaping works on bytes
/// (HTMLEscaping, the escaper the HTTP server's own error page uses too).
public struct HTML: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public typealias StringLiteralType = StaticString

    public private(set) var bytes: [UInt8]

    public init(stringLiteral value: StaticString) {
        bytes = []
        Self.append(value, to: &bytes)
    }

    public init(stringInterpolation: StringInterpolation) { bytes = stringInterpolation.bytes }

    public static let empty: HTML = ""

    public var count: Int { bytes.count }
    public var isEmpty: Bool { bytes.isEmpty }

    public static func + (lhs: HTML, rhs: HTML) -> HTML {
        var result = lhs
        result.bytes.append(contentsOf: rhs.bytes)
        return result
    }

    /// What a String interpolation of an HTML value would print. Interpolating HTML into a String
    /// is always a mistake (the markup would be escaped, or printed with its type name), and the
    /// compiler cannot forbid it: debug builds stop here, so every page test that reaches such a
    /// path fails; release builds print a marker the page tests also look for.
    public var description: String {
        assertionFailure("HTML interpolated into a String: build HTML instead")
        return "[HTML in a String]"
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        public typealias StringLiteralType = StaticString
        var bytes: [UInt8] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            bytes.reserveCapacity(literalCapacity + interpolationCount * 24)
        }

        /// Literals are written by us in the source, so they are markup.
        public mutating func appendLiteral(_ literal: StaticString) { HTML.append(literal, to: &bytes) }

        public mutating func appendInterpolation(_ html: HTML) { bytes.append(contentsOf: html.bytes) }
        /// An optional fragment: nothing when nil.
        public mutating func appendInterpolation(_ html: HTML?) { if let html { bytes.append(contentsOf: html.bytes) } }
        public mutating func appendInterpolation(_ fragments: [HTML]) {
            for fragment in fragments { bytes.append(contentsOf: fragment.bytes) }
        }

        /// Text for an element's content or a quoted attribute value, escaped.
        public mutating func appendInterpolation(text: String) { HTML.appendEscaped(text, to: &bytes) }
        public mutating func appendInterpolation(text: Substring) { HTML.appendEscaped(String(text), to: &bytes) }
        /// UTF-8 text already in bytes (JSON for a data- attribute), escaped.
        public mutating func appendInterpolation(text utf8: [UInt8]) {
            utf8.withUnsafeBufferPointer { HTML.appendEscaped($0, to: &bytes) }
        }

        public mutating func appendInterpolation(_ number: Int) { TextBytes.appendDecimal(number, to: &bytes) }
        public mutating func appendInterpolation(_ number: Int64) { TextBytes.appendDecimal(Int(number), to: &bytes) }
        /// The shortest decimal that reads back as the same Double ("35.0116"); 0 when not finite.
        public mutating func appendInterpolation(decimal number: Double) {
            bytes.append(contentsOf: (number.isFinite ? number.description : "0").utf8)
        }
    }

    // MARK: Bytes

    static func append(_ literal: StaticString, to bytes: inout [UInt8]) { TextBytes.append(literal, to: &bytes) }

    public static func appendEscaped(_ text: String, to bytes: inout [UInt8]) { HTMLEscaping.append(text, to: &bytes) }

    static func appendEscaped(_ source: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) {
        HTMLEscaping.append(source, to: &bytes)
    }

    /// Escaped text as a String (for places that are not pages, such as a JSON field for a script).
    public static func escape(_ text: String) -> String { HTMLEscaping.escape(text) }
}

extension Array where Element == HTML {
    func joined() -> HTML { HTML.each(self) { $0 } }
}

extension HTML {
    /// A fragment per element, appended into one buffer (lists of pins, photos, picks).
    static func each<S: Sequence>(_ items: S, _ render: (S.Element) -> HTML) -> HTML {
        var result = HTML.empty
        for item in items { result.bytes.append(contentsOf: render(item).bytes) }
        return result
    }

    /// Reserves room before a page is assembled, so the final buffer grows once.
    mutating func reserve(_ capacity: Int) { bytes.reserveCapacity(capacity) }
}
