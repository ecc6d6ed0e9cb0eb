/// Writing text formats straight into bytes: literals from the binary's read-only data and
/// integers as ASCII digits, for HTML pages and JSON bodies alike (no String per number).
public enum TextBytes {
    @inlinable
    public static func append(_ literal: StaticString, to bytes: inout [UInt8]) {
        if literal.hasPointerRepresentation {
            bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
        } else {
            bytes.append(contentsOf: String(describing: literal.unicodeScalar).utf8)
        }
    }

    @inlinable
    public static func appendDecimal(_ number: Int, to bytes: inout [UInt8]) {
        if number < 0 {
            bytes.append(0x2D)
            if number == .min { bytes.append(contentsOf: String(number).utf8.dropFirst()); return }
            appendDecimal(-number, to: &bytes)
            return
        }
        if number < 10 { bytes.append(0x30 + UInt8(number)); return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = number
        withUnsafeMutableBytes(of: &digits) { buffer in
            while rest > 0 {
                buffer[19 - count] = 0x30 + UInt8(rest % 10)
                rest /= 10
                count += 1
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(20 - count)...]))
        }
    }
}
