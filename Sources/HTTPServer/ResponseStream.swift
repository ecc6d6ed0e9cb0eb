import Synchronization
import Waiting

/// The writing end of a long-lived response (Server-Sent Events, a download written as it is
/// read). Any thread may write; bytes are handed to the connection's event loop in order. Writes after
/// either side closed are dropped.
public final class ResponseStream: Sendable {
    private let connection: Connection
    /// A writer in `writeWhenDrained` waits on it until the connection has drained or closed.
    private let state = Waitable<State>(State())

    private struct State {
        var open = true
        var onClose: [@Sendable () -> Void] = []
        /// Bytes written but not yet taken by the connection's loop.
        var handedOff = 0
        /// Bytes the connection holds unsent (its last report).
        var unsent = 0
        /// A writer waits for the bytes in flight to fall to this level; nil when nobody waits.
        var waitingBelow: Int?
    }

    init(connection: Connection) {
        self.connection = connection
    }

    public var isOpen: Bool { state.withLock { $0.open } }

    public func write(_ bytes: [UInt8]) {
        guard isOpen else { return }
        let connection = self.connection
        connection.loop.execute { connection.streamWrite(bytes) }
    }

    /// Writes `bytes`, then blocks the calling thread while more than `limit` bytes wait to be
    /// sent: a download written as it is read goes at the client's pace and the server holds at
    /// most about `limit` plus one write of it (a stalled client is closed by the write timeout,
    /// which wakes the writer). False once the stream is closed, from either side: stop writing.
    /// Call it from the thread the stream's start closure runs on, never from the connection's.
    @discardableResult
    public func writeWhenDrained(_ bytes: [UInt8], limit: Int = 256 * 1024) -> Bool {
        let open = state.withLock { s -> Bool in
            if s.open { s.handedOff += bytes.count }
            return s.open
        }
        guard open else { return false }
        let connection = self.connection
        let count = bytes.count
        connection.loop.execute { connection.streamWrite(bytes, handingOff: count) }
        // Past the limit, it waits until half of it is sent (not one write's worth, back and forth).
        return state.wait(for: { s -> Bool? in
            if !s.open { s.waitingBelow = nil; return false }
            if let level = s.waitingBelow {
                guard s.handedOff + s.unsent <= level else { return nil }
                s.waitingBelow = nil
                return true
            }
            guard s.handedOff + s.unsent > limit else { return true }
            s.waitingBelow = limit / 2
            return nil
        })
    }

    /// Called by the connection, on its loop, after `handedOff` bytes were queued and after
    /// every send: what it still holds unsent.
    func connectionHolds(unsent: Int, handedOff: Int = 0) {
        // Every send reports here: the writer is woken only when it has something to wake for.
        let wake = state.withLock { s -> Bool in
            s.handedOff -= handedOff
            s.unsent = unsent
            guard let level = s.waitingBelow else { return false }
            return s.handedOff + s.unsent <= level
        }
        if wake { state.change { _ in } }
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
        connection.loop.execute { connection.streamFinish() }
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

    /// Called by the connection, on its loop, once it has closed.
    func connectionClosed() {
        let handlers = state.change { s -> [@Sendable () -> Void] in
            s.open = false
            defer { s.onClose = [] }
            return s.onClose
        }
        for handler in handlers { handler() }
    }
}
