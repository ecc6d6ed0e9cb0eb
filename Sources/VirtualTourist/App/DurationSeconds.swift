extension Duration {
    /// The duration in seconds, for APIs that take a Double (Dispatch, NSCondition, messages).
    var inSeconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
