/// Header fields in the order they arrived. Names compare case-insensitively (RFC 9110 §5.1); repeated
/// names are kept as separate fields so that the parser can tell duplicates apart from lists.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}
    public init(dictionaryLiteral elements: (String, String)...) {
        // Room for the literal and a few more (the server's own, a middleware's): one allocation.
        fields.reserveCapacity(elements.count + 4)
        for (name, value) in elements { add(name, value) }
    }

    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    /// The first value of `name`, or nil.
    public subscript(name: String) -> String? {
        for field in fields where field.name.equalsIgnoringASCIICase(name) { return field.value }
        return nil
    }

    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.equalsIgnoringASCIICase(name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    /// Replaces every field called `name` with a single one.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        fields.append((name, value))
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { $0.name.equalsIgnoringASCIICase(name) }
    }

    /// True when a comma-separated header (Connection, Accept-Encoding…) lists `token`.
    public func hasToken(_ token: String, in name: String) -> Bool {
        for value in values(name) {
            for part in value.split(separator: ",") {
                let item = part.split(separator: ";", maxSplits: 1).first ?? part
                if item.trimmingASCIIWhitespace().equalsIgnoringASCIICase(token) { return true }
            }
        }
        return false
    }
}

extension StringProtocol {
    func equalsIgnoringASCIICase(_ other: some StringProtocol) -> Bool {
        let a = self.utf8, b = other.utf8
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where x != y {
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            let ly = (y >= 65 && y <= 90) ? y | 0x20 : y
            if lx != ly { return false }
        }
        return true
    }

    func trimmingASCIIWhitespace() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
