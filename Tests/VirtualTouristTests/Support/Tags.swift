import Testing

/// What `script/test unit` leaves out (on the @Suite line that names the suite: script/test.d/unit
/// reads them there); `script/test swift` runs all.
extension Tag {
    /// Seconds or more each: volumes, whole albums, real-time waits.
    @Tag static var slow: Self
    /// An outage or a fault ridden out in real time (a database, a store, a provider gone).
    @Tag static var fault: Self
}
