import HTTPServer

/// A fragment of HTML. Interpolating a String escapes it; interpolating HTML inserts it as it is.
/// Escaping is therefore the default and trusted markup has to say so by type, which is why the
/// views use this rather than a template language (docs/architecture.md).
///
///     let name = "<script>"
///     let page: HTML = "<p>Hello, \(name)</p>"   // <p>Hello, &lt;script&gt;</p>
public struct HTML: Sendable, ExpressibleByStringInterpolation {
    public private(set) var rendered: String

    /// Markup that is trusted as it is: only for literals and already-built fragments.
    public init(unsafeRaw: String) { rendered = unsafeRaw }

    public init(stringLiteral value: String) { rendered = value }

    public init(stringInterpolation: StringInterpolation) { rendered = stringInterpolation.output }

    public static let empty = HTML(unsafeRaw: "")

    public static func + (lhs: HTML, rhs: HTML) -> HTML { HTML(unsafeRaw: lhs.rendered + rhs.rendered) }

    public struct StringInterpolation: StringInterpolationProtocol {
        var output = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            output.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        /// Literals are written by us in the source, so they are markup.
        public mutating func appendLiteral(_ literal: String) { output += literal }

        public mutating func appendInterpolation(_ text: String) { output += HTML.escape(text) }
        public mutating func appendInterpolation(_ text: Substring) { output += HTML.escape(String(text)) }
        public mutating func appendInterpolation(_ html: HTML) { output += html.rendered }
        public mutating func appendInterpolation(_ fragments: [HTML]) {
            for fragment in fragments { output += fragment.rendered }
        }
        public mutating func appendInterpolation(_ number: Int) { output += String(number) }
        public mutating func appendInterpolation(_ number: Int64) { output += String(number) }
        public mutating func appendInterpolation(_ number: Double) { output += String(number) }
        /// An optional fragment: nothing when nil.
        public mutating func appendInterpolation(_ html: HTML?) { output += html?.rendered ?? "" }
    }

    /// Escapes the five characters that matter in text and in quoted attribute values (the same
    /// function the server's own error pages use).
    public static func escape(_ text: String) -> String { DefaultErrorPage.escape(text) }
}

extension Array where Element == HTML {
    func joined() -> HTML { HTML(unsafeRaw: map(\.rendered).joined()) }
}
