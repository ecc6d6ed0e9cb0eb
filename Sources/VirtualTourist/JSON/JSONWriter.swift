import WebText

/// The few JSON pieces the hot routes write by hand (RFC 8259).
enum JSONWriter {
    static func raw(_ literal: StaticString, to out: inout [UInt8]) { TextBytes.append(literal, to: &out) }

    static func integer(_ value: Int, to out: inout [UInt8]) { TextBytes.appendDecimal(value, to: &out) }

    /// [a,b,…], each element written by `element`.
    static func array<Element>(_ items: [Element], to out: inout [UInt8], _ element: (Element, inout [UInt8]) -> Void) {
        out.append(UInt8(ascii: "["))
        for (index, item) in items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            element(item, &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    static func number(_ value: Double, to out: inout [UInt8]) {
        out.append(contentsOf: (value.isFinite ? value.description : "0").utf8)
    }

    /// A string with quotes, backslashes and control characters escaped (§7); everything else is
    /// UTF-8 as it is.
    static func string(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { source in
            var runStart = 0
            for index in 0..<source.count {
                let byte = source[index]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                if runStart < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart..<index])) }
                switch byte {
                case 0x22: out.append(contentsOf: [0x5C, 0x22] as [UInt8])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C] as [UInt8])
                case 0x0A: out.append(contentsOf: [0x5C, 0x6E] as [UInt8])
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
                runStart = index + 1
            }
            if runStart < source.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: source[runStart...])) }
        }
        out.append(UInt8(ascii: "\""))
    }
}
