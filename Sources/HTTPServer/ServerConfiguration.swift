/// How the server listens and what it tolerates. Times are in seconds.
public struct ServerConfiguration: Sendable {
    /// Address to bind: "127.0.0.1", "0.0.0.0", "::" or a host name.
    public var host = "127.0.0.1"
    /// 0 picks a free port; `HTTPServer.port` tells which.
    public var port = 8080
    public var limits = HTTPLimits()
    /// From a request's first byte (or the connection's start) until its last: slow clients get 408.
    public var requestReadTimeout: Double = 10
    /// How long a keep-alive connection may sit idle between requests.
    public var idleTimeout: Double = 60
    /// How long a response may wait for a client that stopped reading.
    public var writeTimeout: Double = 30
    /// Bytes a second a client must take, over each `sendRateWindow` seconds, while a response
    /// waits on it (0: no floor): below it the response is cut and the connection closed, so a
    /// client reading a few bytes now and then cannot keep a download slot.
    public var minimumSendRate = 16 * 1024
    public var sendRateWindow: Double = 30
    /// Open connections at once. When the table is full an idle keep-alive connection is closed to
    /// make room; only when none is idle is the newcomer answered 503 and closed.
    public var maxConnections = 4096
    /// Open connections from one client address (trusted proxies excepted: they carry everyone).
    /// One address cannot take the whole table; a browser needs about six per site.
    public var maxConnectionsPerAddress = 256
    /// A connection past its address's share is held, unread, about this long (half to one and a
    /// half times, so those refused together are not let go together) before it is reset (0:
    /// reset at once). A client that reconnects the moment it is refused then makes one attempt
    /// per hold instead of hundreds a second: held, a connection costs a descriptor and no CPU,
    /// where each refusal would cost an accept, a close and a wake-up (script/bench abuse;
    /// docs/performance.md, "Abuse").
    public var overShareHold: Double = 10
    /// New connections one address may open a second, after a burst of `newConnectionBurst`
    /// (trusted proxies excepted; 0: no limit). Past it, a connection is answered 503 with
    /// Retry-After and closed (HTTPServer.admit). A browser opens a handful per page and keeps them; a household behind one
    /// address is far below this; a client reconnecting in a loop is not (`ConnectionRates`).
    public var newConnectionsPerSecond: Double = 100
    public var newConnectionBurst: Double = 500
    /// Per-address limits (connections, their rate, and the app's through
    /// `HTTPRequest.remoteNetwork`) count an IPv6 client by its first this many bits: one client
    /// is handed a /64 and may use any address in it (128: per address).
    public var ipv6PrefixLength = 64
    /// At most this many held at once (and never more than a quarter of the descriptor limit);
    /// past it, a connection over its share is reset at once. As many as the table itself, so one
    /// address filling it from outside its share is held whole.
    public var maxHeldOverShare = 4096
    /// A stream (Server-Sent Events) is ended after this long; EventSource reconnects by itself,
    /// so a forgotten tab cannot hold a connection and a handler's watcher forever.
    public var maxStreamLifetime: Double = 600
    /// Handlers running at once (they may block on the database) and requests queued behind them.
    public var handlerConcurrency = 64
    public var handlerBacklog = 4096
    /// On shutdown, how long in-flight requests get to finish.
    public var shutdownGracePeriod: Double = 10
    public var errorPage: ErrorPageRenderer = DefaultErrorPage.render
    /// Reverse proxies whose forwarding headers say who the client is (request.remoteAddress,
    /// the access log, per-address limits). Empty: the peer is the client.
    public var trustedProxies = TrustedProxies()
    /// Called once per response; nil to log nothing.
    public var accessLog: (@Sendable (AccessLogEntry) -> Void)? = AccessLogEntry.standardLogger
    /// How a request's path is written in every line the server logs about it (the access log,
    /// a handler's error): an app whose paths carry secrets (share links' tokens) cuts them out
    /// here, once. Query strings are never logged.
    public var loggedPath: @Sendable (String) -> String = { $0 }
    public var listenBacklog: Int32 = 1024
    /// Seconds before a new connection's first byte is read: the cost of a TCP + TLS handshake,
    /// simulated by test fixtures (photo-fixture --connect-latency). 0 in production.
    public var connectionSetupDelay: Double = 0

    public init() {}
}

public struct AccessLogEntry: Sendable {
    public let method: String
    public let path: String
    public let status: Int
    public let bytes: Int
    public let seconds: Double
    public let remoteAddress: String

    public var line: String {
        let ms = (seconds * 10_000).rounded() / 10
        return "\(method) \(path) \(status) \(bytes)B \(ms)ms \(remoteAddress)"
    }

    public static let standardLogger: @Sendable (AccessLogEntry) -> Void = { entry in
        accessLogger.info(entry.line)
    }
}
