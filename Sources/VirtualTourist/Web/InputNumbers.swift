/// Numbers from requests, parsed into the range the code below them can use. A number that comes
/// from outside is never used as it arrives: `Int("9223372036854775807")` parses, and the first
/// multiplication with it traps and takes the whole process (every connection, every album in
/// flight) with it. Route code asks here instead of calling `Int(_:)`/`Double(_:)` itself.
enum InputNumber {
    /// A page number: garbage or missing is page 1; anything past `last` is `last`.
    static func page(_ text: String?, last: Int) -> Int {
        guard let text, let number = Int(text) else { return 1 }
        return min(max(number, 1), max(1, last))
    }

    /// A finite decimal inside `range`, or nil (NaN, ±inf, 1e308 outside the range, "", text).
    static func decimal(_ text: String?, in range: ClosedRange<Double>) -> Double? {
        guard let text, text.utf8.count <= 64, let number = Double(text), number.isFinite, range.contains(number) else { return nil }
        return number
    }
}
