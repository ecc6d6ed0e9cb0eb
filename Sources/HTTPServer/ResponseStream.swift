import Synchronization

/// The writing end of a long-lived response (Server-Sent Events). Any thread may write; bytes are
/// handed to the connection's queue in order. Writes after either side closed are dropped.
public final class ResponseStream: Sendable {
    private let connection: Connection
    private let state = Mutex<(open: Bool, onClose: [@Sendable () -> Void])>((true, []))

    init(connection: Connection) {
        self.connection = connection
    }

    public var isOpen: Bool { state.withLock { $0.open } }

    public func write(_ bytes: [UInt8]) {
        guard isOpen else { return }
        let connection = self.connection
        connection.queue.async { connection.streamWrite(bytes) }
    }

    /// One event in the text/event-stream format (HTML Living Standard §9.2.6): every line of `data`
    /// gets its own "data:" field, so a newline in the payload cannot end the event early.
    public func send(event: String? = nil, data: String, id: String? = nil) {
        var text = ""
        if let event { text += "event: \(event.filter { $0 != "\n" && $0 != "\r" })\n" }
        if let id { text += "id: \(id.filter { $0 != "\n" && $0 != "\r" })\n" }
        for line in data.split(separator: "\n", omittingEmptySubsequences: false) {
            text += "data: \(line.filter { $0 != "\r" })\n"
        }
        text += "\n"
        write(Array(text.utf8))
    }

    /// Ends the response after what was written so far is sent.
    public func close() {
        let wasOpen = state.withLock { s -> Bool in
            defer { s.open = false }
            return s.open
        }
        guard wasOpen else { return }
        let connection = self.connection
        connection.queue.async { connection.streamFinish() }
    }

    /// Runs once when the stream ends, from either side; at once if it already has.
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { s -> Bool in
            guard s.open else { return true }
            s.onClose.append(handler)
            return false
        }
        if runNow { handler() }
    }

    /// Called by the connection, on its queue, once it has closed.
    func connectionClosed() {
        let handlers = state.withLock { s -> [@Sendable () -> Void] in
            s.open = false
            defer { s.onClose = [] }
            return s.onClose
        }
        for handler in handlers { handler() }
    }
}
