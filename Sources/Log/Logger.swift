#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import Synchronization

/// One line per event on standard error, `time level label: message`. Small on purpose: the app
/// writes few kinds of line, and an administrator reads them with `docker compose logs` or journald.
public struct Logger: Sendable {
    public enum Level: Int, Comparable, Sendable, CaseIterable {
        case debug, info, notice, warning, error

        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }

        public init?(name: String) {
            guard let level = Level.allCases.first(where: { "\($0)" == name.lowercased() }) else { return nil }
            self = level
        }
    }

    private static let threshold = Atomic<Int>(Level.info.rawValue)

    /// The lowest level written, for every logger of the process (LOG_LEVEL).
    public static var level: Level {
        get { Level(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
        set { threshold.store(newValue.rawValue, ordering: .relaxed) }
    }

    public let label: String

    public init(label: String) { self.label = label }

    public func isEnabled(_ level: Level) -> Bool { level >= Logger.level }

    public func log(_ level: Level, _ message: @autoclosure () -> String) {
        guard isEnabled(level) else { return }
        let line = "\(Logger.timestamp()) \(level) \(label): \(message())\n"
        var bytes = Array(line.utf8)
        // One write(2) per line keeps lines from different threads whole.
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
        if Logger.observing.load(ordering: .relaxed) > 0 {
            for observer in Logger.observers.withLock({ Array($0.values) }) { observer(line) }
        }
    }

    private static let observers = Mutex<[Int: @Sendable (String) -> Void]>([:])
    private static let observing = Atomic<Int>(0)
    private static let nextObserver = Atomic<Int>(0)

    /// Also hands every line written to `observer` until the returned function is called: for
    /// tests that check a failure was logged with its reason.
    public static func observe(_ observer: @escaping @Sendable (String) -> Void) -> @Sendable () -> Void {
        let id = nextObserver.add(1, ordering: .relaxed).newValue
        observers.withLock { $0[id] = observer }
        observing.add(1, ordering: .relaxed)
        return {
            if observers.withLock({ $0.removeValue(forKey: id) }) != nil { observing.subtract(1, ordering: .relaxed) }
        }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func notice(_ message: @autoclosure () -> String) { log(.notice, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = ts.tv_sec
        var tm = tm()
        gmtime_r(&t, &tm)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(tm.tm_year + 1900, 4))-\(pad(tm.tm_mon + 1, 2))-\(pad(tm.tm_mday, 2))T" +
            "\(pad(tm.tm_hour, 2)):\(pad(tm.tm_min, 2)):\(pad(tm.tm_sec, 2)).\(pad(Int32(ts.tv_nsec / 1_000_000), 3))Z"
    }
}
