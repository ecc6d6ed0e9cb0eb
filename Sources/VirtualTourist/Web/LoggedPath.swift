/// A request path as every log line writes it (the access log, the server's error lines, the
/// outage warnings): ONE rule for every secret a URL can carry, share link tokens (/s/TOKEN),
/// shared-map invitation codes (/maps/join/CODE) and any code a future route takes in its path.
/// (Sign-up invitations and the setup code travel in the query, `?invite=`, which no log writes.)
///
/// The path is first read the way the router reads it: split at "/" with empty segments dropped
/// (so `//s/TOKEN` and `/s//TOKEN` are `/s/TOKEN`), each segment percent-decoded (so `%2F`, `%41`
/// and friends spell nothing new). Then, whatever the route, any run of 16 or more characters of
/// the tokens' alphabet (base64url: letters, digits, `-`, `_`) is cut to its first four and `…`:
/// enough to tell links apart in a log, far too few to open one. No route's own words are that
/// long, and ids are numbers, so nothing else is cut. The prefix does not matter, so `/S/TOKEN`,
/// `/Maps/Join/CODE` or a path no route knows cannot carry a token past the rule. What is written
/// back is printable ASCII: a decoded byte outside it (a control character, a space, `%`, `/`
/// inside a segment, UTF-8) is written as `%XX`, so a path cannot forge a log line either.
public enum LoggedPath {
    /// Runs of the token alphabet at least this long are cut.
    static let longestKept = 15
    static let keptCharacters = 4

    public static func redacted(_ path: String) -> String {
        let segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        var out = ""
        for segment in segments {
            out += "/"
            out += redact(decoded(segment))
        }
        return out.isEmpty ? "/" : out
    }

    /// %XX decoded to its byte; a `%` that starts no escape is kept as it is.
    static func decoded(_ segment: Substring.UTF8View.SubSequence) -> [UInt8] {
        let bytes = Array(segment)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }

    static func redact(_ bytes: [UInt8]) -> String {
        var out = ""
        var i = 0
        while i < bytes.count {
            guard isTokenByte(bytes[i]) else {
                out += written(bytes[i])
                i += 1
                continue
            }
            var end = i
            while end < bytes.count, isTokenByte(bytes[end]) { end += 1 }
            let run = bytes[i..<end]
            if run.count > longestKept {
                out += String(decoding: run.prefix(keptCharacters), as: UTF8.self) + "…"
            } else {
                out += String(decoding: run, as: UTF8.self)
            }
            i = end
        }
        return out
    }

    static func isTokenByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
    }

    private static func written(_ b: UInt8) -> String {
        if b > 0x20 && b < 0x7F && b != UInt8(ascii: "%") && b != UInt8(ascii: "/") { return String(UnicodeScalar(b)) }
        let digits = Array("0123456789ABCDEF")
        return "%" + String(digits[Int(b >> 4)]) + String(digits[Int(b & 0xF)])
    }

    private static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: b - 0x30
        case 0x41...0x46: b - 0x41 + 10
        case 0x61...0x66: b - 0x61 + 10
        default: nil
        }
    }
}
