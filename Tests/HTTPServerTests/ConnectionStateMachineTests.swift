import Foundation
import Testing
@testable import HTTPServer

/// The connection's rules on values: no socket, no Dispatch, no sleep. `Wire` plays the driver: it
/// performs the machine's actions the way Connection.swift does, with a "kernel" that takes all
/// output or only `room` bytes, and a clock that moves only when a test says so.
struct Wire {
    static let second = Duration.seconds(1)
    var machine: ConnectionStateMachine
    var now = ContinuousClock.now
    /// What the client received.
    var received = ""
    var handling: [HTTPRequest] = []
    var streamStarts = 0
    var heartbeat: Duration?
    var logs: [ResponseLogRecord] = []
    var closed = false
    /// Mirrors of the driver's Dispatch sources: suspend and resume must alternate.
    var readSuspended = false
    var waitingForWritable = false
    /// Bytes the kernel's send buffer takes before it is full; nil for "all".
    var room: Int?

    init(_ configure: (inout ConnectionStateMachine.Settings) -> Void = { _ in }) {
        var settings = ConnectionStateMachine.Settings()
        settings.remoteAddress = "192.0.2.7"
        settings.requestReadTimeout = Wire.second * 10
        settings.idleTimeout = Wire.second * 60
        settings.writeTimeout = Wire.second * 30
        settings.date = { "Mon, 23 Nov 2026 12:00:00 GMT" }
        configure(&settings)
        machine = ConnectionStateMachine(settings: settings, now: now)
    }

    mutating func perform(_ actions: ConnectionActions) {
        if let reading = actions.reading {
            #expect(readSuspended == (reading == .resume), "suspend and resume must alternate")
            readSuspended = reading == .pause
        }
        #expect(readSuspended == machine.readingPaused || closed)
        if let writable = actions.writable {
            #expect(waitingForWritable == (writable == .stopWaiting))
            waitingForWritable = writable == .wait
        }
        if let request = actions.handle { handling.append(request) }
        if actions.startStream != nil { streamStarts += 1 }
        if let beat = actions.heartbeat { heartbeat = beat }
        if let log = actions.log { logs.append(log) }
        if actions.close {
            #expect(!closed, "closed twice")
            closed = true
            return
        }
        if actions.send { flush() }
    }

    mutating func flush() {
        while machine.hasUnsentOutput {
            let take = machine.withUnsentOutput { min($0.count, room ?? $0.count) }
            if take == 0 { return perform(machine.sendBlocked(now: now)) }
            received += machine.withUnsentOutput { String(decoding: $0[0..<take], as: UTF8.self) }
            if let r = room { room = r - take }
            perform(machine.sent(take, now: now))
        }
    }

    // Events, performed at once.
    mutating func read(_ text: String) { perform(machine.bytesRead(Array(text.utf8), now: now)) }
    mutating func respond(_ response: HTTPResponse) { perform(machine.responseReady(response, now: now)) }
    mutating func respond(_ text: String) { respond(.text(text)) }
    mutating func peerCloses() { perform(machine.peerClosed(now: now)) }
    mutating func timer(after seconds: Double) {
        now += .seconds(seconds)
        perform(machine.timerFired(now: now))
    }
    mutating func shutdown() { perform(machine.shutdown(now: now)) }
    /// The client reads again: the kernel takes everything from now on.
    mutating func writable() {
        room = nil
        flush()
    }

    /// Takes what the client received so far.
    mutating func take() -> String {
        defer { received = "" }
        return received
    }

    var inFlight: String? {
        if case .handling(let exchange) = machine.answering { return exchange.path }
        return nil
    }
}

func get(_ path: String, _ extra: String = "") -> String {
    "GET \(path) HTTP/1.1\r\nHost: x\r\n\(extra)\r\n"
}

/// Status lines in what the client received, in order.
func statuses(_ text: String) -> [String] {
    text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
}

@Suite struct ConnectionStateMachineTests {
    /// The driver reads the socket before a timer that would close a connection as silent
    /// (Connection.checkTimeouts): the machine says exactly when that is, and a request that was
    /// waiting unread is then answered, not closed.
    @Test func aConnectionIsCalledSilentOnlyWhenItsReadTimeoutIsDueWithNothingRead() {
        var wire = Wire()
        #expect(!wire.machine.closesUnreadOnTimer(now: wire.now))
        wire.now += .seconds(11)
        #expect(wire.machine.closesUnreadOnTimer(now: wire.now), "10 s with no byte: due")
        // What the driver does then: the waiting request is read before the timer acts.
        wire.read(get("/late"))
        #expect(!wire.machine.closesUnreadOnTimer(now: wire.now))
        wire.timer(after: 0)
        #expect(!wire.closed, "the request read, not the connection closed")
        wire.respond("ok")
        #expect(statuses(wire.take()) == ["200"])
        // A partial request is the slow client's case (408), never this one.
        var slow = Wire()
        slow.read("GET / HTTP/1.1\r\nHo")
        slow.now += .seconds(11)
        #expect(!slow.machine.closesUnreadOnTimer(now: slow.now))
    }

    @Test func pipelinedRequestsAreAnsweredInOrderOneAtATime() {
        var wire = Wire()
        wire.read(get("/a") + get("/b") + get("/c"))
        #expect(wire.handling.map(\.path) == ["/a"], "only one request is handled at a time")
        #expect(wire.handling.first?.remoteAddress == "192.0.2.7")
        wire.respond("A")
        #expect(wire.handling.map(\.path) == ["/a", "/b"], "the next starts once the answer is sent")
        wire.respond("B")
        wire.respond("C")
        let text = wire.take()
        #expect(text.components(separatedBy: "\r\n\r\n").count == 4)
        #expect(text.hasSuffix("\r\n\r\nC"))
        #expect(text.range(of: "\r\n\r\nA")!.lowerBound < text.range(of: "\r\n\r\nB")!.lowerBound)
        #expect(wire.logs.map(\.path) == ["/a", "/b", "/c"])
        #expect(!wire.closed)
        if case .idle = wire.machine.answering {} else { Issue.record("idle after the last answer") }
    }

    @Test func aResponseWaitsForTheOneBeforeItToBeSent() {
        var wire = Wire()
        wire.room = 10 // the client reads slowly
        wire.read(get("/a") + get("/b"))
        wire.respond("first answer")
        #expect(wire.machine.awaitingWritable)
        #expect(wire.handling.count == 1, "/b waits until /a's answer has left")
        wire.writable()
        #expect(!wire.machine.awaitingWritable)
        #expect(wire.handling.map(\.path) == ["/a", "/b"])
    }

    @Test func backpressurePausesReadingAndBufferedRequestsAreParsedWhenItResumes() {
        var wire = Wire()
        // 20 requests in one read: 16 parsed ahead, then reading pauses; the last 4 are already
        // buffered and must not wait for another read event that will never come.
        wire.read((0..<20).map { get("/\($0)") }.joined())
        #expect(wire.readSuspended)
        for i in 0..<20 {
            #expect(wire.inFlight == "/\(i)")
            wire.respond("\(i)")
        }
        #expect(!wire.readSuspended)
        #expect(statuses(wire.take()).count == 20)
        #expect(!wire.closed)
    }

    @Test func continueIsSentOnceAndOnlyWhileTheBodyIsAwaited() {
        var wire = Wire()
        let head = "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n"
        wire.read(head)
        #expect(wire.take() == "HTTP/1.1 100 Continue\r\n\r\n")
        wire.read("01234")
        wire.read("5")
        #expect(wire.take() == "", "once per request")
        wire.read("6789")
        #expect(wire.handling.last?.bodyString == "0123456789")

        // The body arrived with the head: nothing is awaited, nothing sent.
        wire.respond("ok")
        _ = wire.take()
        wire.read(head + "0123456789")
        #expect(!wire.take().contains("100 Continue"))
        wire.respond("ok")
        _ = wire.take()

        // Behind a request in flight: the 100 waits for the earlier answer, so it cannot be taken
        // for that answer's interim response…
        wire.read(get("/slow") + head)
        #expect(wire.take() == "")
        wire.respond("slow")
        #expect(wire.take().hasSuffix("slow" + "HTTP/1.1 100 Continue\r\n\r\n"))
        wire.read("0123456789")
        wire.respond("ok")
        _ = wire.take()

        // …and is never sent when the body came while it waited.
        wire.read(get("/slow") + head)
        wire.read("0123456789")
        wire.respond("slow")
        wire.respond("ok")
        #expect(!wire.take().contains("100 Continue"))
        // Nor for a later request that did not ask.
        wire.read("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n")
        #expect(wire.take() == "")
    }

    @Test func continueIsNotSentWhenTheBodyIsRefusedOrThePeerLeft() {
        var wire = Wire { $0.limits.maxBodyBytes = 5 }
        wire.read("POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
        let text = wire.take()
        #expect(statuses(text) == ["413"])
        #expect(wire.closed)

        var gone = Wire()
        gone.read(get("/a") + "POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
        gone.peerCloses()
        gone.respond("a")
        #expect(statuses(gone.take()) == ["200"])
        #expect(gone.closed)
    }

    @Test func headGetsTheHeadersOfTheBodyButNoBody() {
        var wire = Wire()
        wire.read("HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n")
        wire.respond("hello")
        let text = wire.take()
        #expect(text.contains("Content-Length: 5\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
        #expect(wire.logs.last?.bytes == 0)
        #expect(!wire.closed)

        // HEAD of a stream: the head, no start, then close (a stream is close-delimited).
        wire.read("HEAD /events HTTP/1.1\r\nHost: x\r\n\r\n")
        wire.respond(.eventStream { _ in })
        #expect(wire.streamStarts == 0)
        #expect(statuses(wire.take()) == ["200"])
        #expect(wire.closed)
    }

    @Test func http10ClosesUnlessKeepAliveAndHandlersMayAskToClose() {
        var wire = Wire()
        wire.read("GET / HTTP/1.0\r\n\r\n")
        wire.respond("x")
        #expect(wire.take().contains("Connection: close"))
        #expect(wire.closed)

        var asked = Wire()
        asked.read(get("/a") + get("/b"))
        asked.respond(HTTPResponse(status: .ok, headers: ["Connection": "close"], body: []))
        #expect(asked.closed)
        #expect(asked.handling.count == 1, "nothing after a closing answer starts")
    }

    @Test func aStreamRefusedByAFullExecutorIsAnswered503AndClosed() {
        var wire = Wire()
        wire.read(get("/events") + get("/after"))
        wire.respond(.eventStream(heartbeat: 15) { _ in })
        #expect(wire.streamStarts == 1)
        #expect(wire.take() == "", "nothing is sent before the executor takes the stream")
        wire.perform(wire.machine.streamRefused(now: wire.now))
        let text = wire.take()
        #expect(statuses(text) == ["503"])
        #expect(text.contains("Connection: close\r\n"))
        #expect(text.contains("Retry-After: 1\r\n"))
        #expect(wire.logs.last?.status == 503)
        #expect(wire.closed, "never left busy")
        #expect(wire.handling.count == 1)
    }

    @Test func aHandlerRefusedByAFullExecutorIsAnswered503AndClosed() {
        var wire = Wire()
        wire.read(get("/a") + get("/b"))
        wire.perform(wire.machine.handlerRefused(now: wire.now))
        #expect(statuses(wire.take()) == ["503"])
        #expect(wire.closed)
    }

    @Test func aStreamOwnsTheConnectionUntilItFinishes() {
        var wire = Wire()
        wire.read(get("/events"))
        wire.respond(.eventStream(heartbeat: 15) { _ in })
        wire.perform(wire.machine.streamStarted(now: wire.now))
        #expect(wire.heartbeat == Wire.second * 15)
        let head = wire.take()
        #expect(head.contains("Connection: close\r\n"))
        #expect(!head.contains("Content-Length"))
        wire.perform(wire.machine.streamWrite(Array("data: 1\n\n".utf8), now: wire.now))
        #expect(wire.take() == "data: 1\n\n")

        // Heartbeats only after silence.
        wire.now += Wire.second * 5
        wire.perform(wire.machine.heartbeatDue(now: wire.now))
        #expect(wire.take() == "")
        wire.now += Wire.second * 14
        wire.perform(wire.machine.heartbeatDue(now: wire.now))
        #expect(wire.take() == ": keep-alive\n\n")

        // Streams are not idle connections: the sweep leaves them alone (past the idle timeout,
        // inside the stream lifetime).
        wire.timer(after: 300)
        #expect(!wire.closed)

        wire.perform(wire.machine.streamFinished(now: wire.now))
        #expect(wire.closed)
    }

    /// An event stream's client that hangs up is let go at once, not at the next heartbeat (a
    /// write to a half-closed socket succeeds, so even that one may not notice). A download (no
    /// heartbeat) keeps going: a client may half-close and still read it.
    @Test func anEventStreamEndsWhenItsClientHangsUp() {
        var events = Wire()
        events.read(get("/events"))
        events.respond(.eventStream(heartbeat: 15) { _ in })
        events.perform(events.machine.streamStarted(now: events.now))
        _ = events.take()
        events.peerCloses()
        #expect(events.closed)

        var starting = Wire()
        starting.read(get("/events"))
        starting.respond(.eventStream(heartbeat: 15) { _ in })
        starting.peerCloses()
        #expect(!starting.closed, "the executor still has to say whether it took the stream")
        starting.perform(starting.machine.streamStarted(now: starting.now))
        #expect(starting.closed, "a stream whose client is gone is not kept open")

        var download = Wire()
        download.read(get("/download"))
        download.respond(.eventStream(heartbeat: nil) { _ in })
        download.perform(download.machine.streamStarted(now: download.now))
        _ = download.take()
        download.peerCloses()
        #expect(!download.closed)
        download.perform(download.machine.streamWrite(Array("more".utf8), now: download.now))
        #expect(download.take() == "more")
    }

    /// A stream ends after its lifetime, what it wrote still delivered; EventSource reconnects.
    @Test func aStreamEndsAfterItsLifetime() {
        var wire = Wire { $0.maxStreamLifetime = Wire.second * 600 }
        wire.read(get("/events"))
        wire.respond(.eventStream(heartbeat: 15) { _ in })
        let started = wire.now
        wire.perform(wire.machine.streamStarted(now: wire.now))
        guard case .streaming(_, let since) = wire.machine.answering else { Issue.record("not streaming"); return }
        #expect(since == started, "the lifetime is measured from the stream's start")
        _ = wire.take()
        wire.timer(after: 599)
        #expect(!wire.closed)
        wire.perform(wire.machine.streamWrite(Array("data: last\n\n".utf8), now: wire.now))
        wire.timer(after: 2)
        #expect(wire.take() == "data: last\n\n")
        #expect(wire.closed)
    }

    /// When the server needs room it may take an idle keep-alive connection, never one at work.
    @Test func onlyAnIdleConnectionCanBeReclaimed() {
        var idle = Wire()
        idle.read(get("/a"))
        idle.respond("a")
        _ = idle.take()
        #expect(idle.machine.isIdleBetweenRequests)
        idle.perform(idle.machine.reclaim())
        #expect(idle.closed)

        var busy = Wire()
        busy.read(get("/a"))
        #expect(!busy.machine.isIdleBetweenRequests)
        busy.perform(busy.machine.reclaim())
        #expect(!busy.closed)
        busy.respond("a")
        #expect(statuses(busy.take()) == ["200"])

        var halfway = Wire()
        halfway.read("GET /a HTTP/1.1\r\nHo")
        #expect(!halfway.machine.isIdleBetweenRequests)
        halfway.perform(halfway.machine.reclaim())
        #expect(!halfway.closed)

        var streaming = Wire()
        streaming.read(get("/events"))
        streaming.respond(.eventStream(heartbeat: nil) { _ in })
        streaming.perform(streaming.machine.streamStarted(now: streaming.now))
        #expect(!streaming.machine.isIdleBetweenRequests)
    }

    @Test func aStreamWhoseClientStopsReadingIsClosed() {
        var wire = Wire { $0.maxStreamBacklog = 100 }
        wire.read(get("/events"))
        wire.respond(.eventStream(heartbeat: nil) { _ in })
        wire.perform(wire.machine.streamStarted(now: wire.now))
        wire.room = 0
        for _ in 0..<3 { wire.perform(wire.machine.streamWrite(Array(repeating: 0x61, count: 60), now: wire.now)) }
        #expect(wire.closed)
    }

    @Test func shutdownWithARequestHalfReadAnswersItThenCloses() {
        var wire = Wire()
        wire.read("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")
        wire.shutdown()
        #expect(!wire.closed, "the request arriving is let in")
        wire.read("56789")
        #expect(wire.handling.last?.bodyString == "0123456789")
        wire.respond("done")
        let text = wire.take()
        #expect(text.contains("Connection: close\r\n"))
        #expect(text.hasSuffix("done"))
        #expect(wire.closed)
    }

    @Test func shutdownWhileHandlingAnswersWithCloseAndStartsNothingMore() {
        var wire = Wire()
        wire.read(get("/a") + get("/b"))
        #expect(wire.machine.lifecycle == .serving)
        wire.shutdown()
        #expect(wire.machine.lifecycle == .draining)
        #expect(!wire.closed)
        wire.respond("a")
        #expect(wire.take().contains("Connection: close\r\n"))
        #expect(wire.closed)
        #expect(wire.handling.count == 1)

        var idle = Wire()
        idle.read(get("/a"))
        idle.respond("a")
        idle.shutdown()
        #expect(idle.closed, "an idle keep-alive connection closes at once")

        // A half-read request that never completes still ends with the read timeout.
        var slow = Wire()
        slow.read("GET /a HTTP/1.1\r\n")
        slow.shutdown()
        slow.timer(after: 11)
        #expect(statuses(slow.take()) == ["408"])
        #expect(slow.closed)
    }

    @Test func shutdownEndsAStreamAfterWhatItWrote() {
        var wire = Wire()
        wire.read(get("/events"))
        wire.respond(.eventStream(heartbeat: nil) { _ in })
        wire.perform(wire.machine.streamStarted(now: wire.now))
        wire.room = 0
        wire.perform(wire.machine.streamWrite(Array("data: last\n\n".utf8), now: wire.now))
        wire.shutdown()
        #expect(!wire.closed)
        wire.writable()
        #expect(wire.take().hasSuffix("data: last\n\n"))
        #expect(wire.closed)
    }

    @Test func aSlowReaderIsClosedOnceTheWriteStallsPastItsLimit() {
        var wire = Wire { $0.minimumSendRate = 0 }  // the write timeout alone (the floor is below)
        wire.room = 1000
        wire.read(get("/big"))
        wire.respond(HTTPResponse(body: Array(repeating: 0x61, count: 10_000)))
        #expect(wire.machine.awaitingWritable)
        wire.timer(after: 29)
        #expect(!wire.closed)
        // Progress restarts the clock.
        wire.room = 1000
        wire.flush()
        wire.timer(after: 29)
        #expect(!wire.closed)
        wire.timer(after: 2)
        #expect(wire.closed)
    }

    /// A client that takes a little now and then (1 KiB a second) never lets the write stall for
    /// 30 s, but falls below the floor (16 KiB/s over 30 s): cut after one window, slot freed. One
    /// that reads at 20 KiB/s, in bursts with pauses, is not.
    @Test func aReaderBelowTheSendRateFloorIsCutAfterOneWindow() {
        let body = Array(repeating: UInt8(0x61), count: 4 * 1024 * 1024)
        var slow = Wire()
        slow.room = 0
        slow.read(get("/pins/1/album.zip"))
        slow.respond(HTTPResponse(body: body))
        for _ in 0..<29 {
            slow.room = 1024
            slow.flush()
            slow.timer(after: 1)
            #expect(!slow.closed)
        }
        slow.room = 1024
        slow.flush()
        slow.timer(after: 1.5)
        #expect(slow.closed, "30 KiB in 30 s is below 16 KiB/s")

        var fast = Wire()
        fast.room = 0
        fast.read(get("/pins/1/album.zip"))
        fast.respond(HTTPResponse(body: body))
        for second in 0..<90 {
            if second % 3 == 0 { fast.room = 60 * 1024; fast.flush() }  // 60 KiB every 3 s, then nothing
            fast.timer(after: 1)
        }
        #expect(!fast.closed)
        fast.writable()
        #expect(fast.take().count > body.count)
    }

    @Test func peerHalfCloseStillAnswersEveryPendingRequest() {
        var wire = Wire()
        wire.read(get("/a") + get("/b") + get("/c") + "GET /partial HTTP/1.1\r\n")
        wire.peerCloses()
        #expect(wire.readSuspended)
        #expect(!wire.closed)
        wire.respond("a")
        wire.respond("b")
        #expect(!wire.closed)
        wire.respond("c")
        #expect(wire.closed, "the partial request can never complete")
        #expect(wire.handling.map(\.path) == ["/a", "/b", "/c"])
        #expect(statuses(wire.take()) == ["200", "200", "200"])

        var idle = Wire()
        idle.peerCloses()
        #expect(idle.closed)
    }

    @Test func aFramingErrorAfterGoodRequestsAnswersThemThen400AndCloses() {
        var wire = Wire()
        wire.read(get("/a") + get("/b") + "GET /c HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(wire.readSuspended, "nothing after the error is read")
        wire.respond("a")
        #expect(!wire.closed)
        wire.respond("b")
        let text = wire.take()
        #expect(statuses(text) == ["200", "200", "400"])
        #expect(text.hasSuffix(">") || text.contains("Connection: close"))
        #expect(wire.handling.count == 2)
        #expect(wire.logs.map(\.status) == [200, 200, 400])
        #expect(wire.closed)
    }

    @Test func timeoutsWithoutSleeping() {
        var silent = Wire()
        silent.timer(after: 9)
        #expect(!silent.closed)
        silent.timer(after: 2)
        #expect(silent.closed, "opened and never sent a byte")
        #expect(silent.take() == "")

        var slowloris = Wire()
        slowloris.read("GET / HTTP/1.1\r\n")
        for _ in 0..<10 {
            slowloris.now += Wire.second
            slowloris.read("X")
        }
        slowloris.timer(after: 0.5)
        #expect(statuses(slowloris.take()) == ["408"], "trickling bytes does not restart the clock")
        #expect(slowloris.closed)

        var idle = Wire()
        idle.read(get("/a"))
        idle.timer(after: 3600)
        #expect(!idle.closed, "a request in the handler is never timed out by the sweep")
        idle.respond("a")
        idle.timer(after: 59)
        #expect(!idle.closed)
        idle.timer(after: 2)
        #expect(idle.closed, "RFC 9112 §9.8")
    }

    @Test func everyEventInEveryStateKeepsTheInvariants() {
        // Each state reached the way a client reaches it, then each event applied once.
        let states: [(String, (inout Wire) -> Void)] = [
            ("new", { _ in }),
            ("reading a request", { $0.read("POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n12") }),
            ("handling", { $0.read(get("/a") + get("/b")) }),
            ("paused by backpressure", { $0.read((0..<17).map { get("/\($0)") }.joined()) }),
            ("starting a stream", { $0.read(get("/e")); $0.respond(.eventStream(heartbeat: 1) { _ in }) }),
            ("streaming", {
                $0.read(get("/e")); $0.respond(.eventStream(heartbeat: 1) { _ in })
                $0.perform($0.machine.streamStarted(now: $0.now))
            }),
            ("write blocked", { $0.room = 5; $0.read(get("/a")); $0.respond("a long answer") }),
            ("closing after flush", { $0.room = 5; $0.read("GET / HTTP/1.0\r\n\r\n"); $0.respond("a long answer") }),
            ("input ended", { $0.read(get("/a")); $0.peerCloses() }),
            ("input failed", { $0.read(get("/a") + "BAD\r\n\r\n") }),
            ("draining", { $0.read(get("/a")); $0.shutdown() }),
            ("closed", { $0.perform($0.machine.forceClose()) }),
        ]
        let events: [(String, (inout Wire) -> Void)] = [
            ("bytes read", { $0.read(get("/z")) }),
            ("peer closed", { $0.peerCloses() }),
            ("socket failed", { $0.perform($0.machine.socketFailed()) }),
            ("writable", { $0.writable() }),
            ("response ready", { $0.respond("r") }),
            ("stream response ready", { $0.respond(.eventStream(heartbeat: 1) { _ in }) }),
            ("handler refused", { $0.perform($0.machine.handlerRefused(now: $0.now)) }),
            ("stream started", { $0.perform($0.machine.streamStarted(now: $0.now)) }),
            ("stream refused", { $0.perform($0.machine.streamRefused(now: $0.now)) }),
            ("stream write", { $0.perform($0.machine.streamWrite([0x61], now: $0.now)) }),
            ("stream finished", { $0.perform($0.machine.streamFinished(now: $0.now)) }),
            ("heartbeat", { $0.now += Wire.second * 2; $0.perform($0.machine.heartbeatDue(now: $0.now)) }),
            ("timer", { $0.timer(after: 3600) }),
            ("shutdown", { $0.shutdown() }),
            ("force close", { $0.perform($0.machine.forceClose()) }),
        ]
        var cases = 0
        for (stateName, reach) in states {
            for (eventName, event) in events {
                var wire = Wire()
                reach(&wire)
                let wasClosed = wire.closed
                let handledBefore = wire.handling.count
                let receivedBefore = wire.received.count
                event(&wire)
                let label = "\(stateName) × \(eventName)"
                if wasClosed {
                    #expect(wire.received.count == receivedBefore, "\(label): nothing is sent after close")
                    #expect(wire.handling.count == handledBefore, "\(label): nothing starts after close")
                }
                #expect(wire.closed == wire.machine.isClosed, "\(label): the driver was told to close exactly when the machine closed")
                #expect(wire.readSuspended == wire.machine.readingPaused, "\(label): read source mirrors the machine")
                #expect(wire.waitingForWritable == wire.machine.awaitingWritable, "\(label): write source mirrors the machine")
                #expect(wire.handling.count <= handledBefore + 1, "\(label): one request at a time")
                if case .handling = wire.machine.answering {} else if !wire.closed, wire.handling.count > handledBefore {
                    Issue.record("\(label): a request started but the machine is not handling it")
                }
                // Whatever happened, the connection can always reach closed.
                wire.perform(wire.machine.forceClose())
                #expect(wire.machine.isClosed)
                cases += 1
            }
        }
        #expect(cases == states.count * events.count)
    }
}
