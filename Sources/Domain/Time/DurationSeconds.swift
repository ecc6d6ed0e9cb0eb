extension Duration {
    /// The duration in seconds, for APIs that take a Double (Dispatch, messages).
    package var inSeconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
