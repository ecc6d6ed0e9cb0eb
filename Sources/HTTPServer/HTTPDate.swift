#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import Synchronization

/// IMF-fixdate (RFC 9110 §5.6.7), e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
public enum HTTPDate {
    private static let cache = Mutex<(second: Int, text: String)>((-1, ""))

    /// The current date, formatted at most once a second.
    public static var now: String {
        let t = time(nil)
        return cache.withLock { c in
            if c.second != t {
                c = (t, format(t))
            }
            return c.text
        }
    }

    public static func format(_ seconds: Int) -> String {
        var t = seconds
        var tm = tm()
        gmtime_r(&t, &tm)
        var buf = [CChar](repeating: 0, count: 64)
        let n = strftime(&buf, buf.count, "%a, %d %b %Y %H:%M:%S GMT", &tm)
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Parses IMF-fixdate; the obsolete formats are not worth accepting for If-Modified-Since.
    public static func parse(_ text: String) -> Int? {
        // "Sun, 06 Nov 1994 08:49:37 GMT"
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int32(parts[1]), let year = Int32(parts[3]),
              let month = months.firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, let h = Int32(clock[0]), let m = Int32(clock[1]), let s = Int32(clock[2]) else { return nil }
        var tm = tm()
        tm.tm_year = year - 1900
        tm.tm_mon = Int32(month)
        tm.tm_mday = day
        tm.tm_hour = h
        tm.tm_min = m
        tm.tm_sec = s
        return timegm(&tm)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}
