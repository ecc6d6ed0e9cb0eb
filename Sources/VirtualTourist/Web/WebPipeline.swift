import Foundation
import HTTPServer
import Postgres
import AlbumWing
import Domain

/// What every page handler gets: the request, the session if there is one, and the CSRF token its
/// forms must carry.
public struct RequestContext: Sendable {
    public let request: HTTPRequest
    public let session: Session?
    public let csrfToken: String
    /// A one-time message carried over a redirect ("Pin deleted").
    public let flash: String?

    var chrome: Layout.Chrome { Layout.Chrome(user: session?.user, csrfToken: csrfToken, flash: flash) }

    fileprivate init(request: HTTPRequest, session: Session?, csrfToken: String, flash: String?) {
        self.request = request
        self.session = session
        self.csrfToken = csrfToken
        self.flash = flash
    }
}

/// What a handler that needs a person gets. Its initializer is private to this file, where the
/// only code that creates one has checked the session: a route registered with `signedIn` cannot
/// run without a user, and a handler cannot ask for a user it was not given (docs/architecture.md:
/// routes and typed contexts).
public struct SignedInContext: Sendable {
    public let request: HTTPRequest
    public let user: User
    public let csrfToken: String
    public let flash: String?
    /// Where the person left the map (nil: never saved), from the session's statement.
    public let mapRegion: MapRegion?
    /// The person's map version, from the same statement (MapPageCache); nil without a version row.
    public let mapVersion: Int64?
    /// The session cookie's token (StreamQuota remembers which token holds a stream).
    let sessionToken: String?
    /// The map this request works on and the person's role there (MapAccess: its holder is what
    /// every query of map data filters by).
    public let map: MapAccess
    /// The shared maps the person belongs to, for the switcher, as the session's statement gave them.
    let mapsJSON: String?
    public var maps: [MapChoice] { MapChoice.list(mapsJSON) }

    var chrome: Layout.Chrome { Layout.Chrome(user: user, csrfToken: csrfToken, flash: flash, map: map, maps: maps) }

    fileprivate init(_ context: RequestContext, user: User) {
        request = context.request
        self.user = user
        csrfToken = context.csrfToken
        flash = context.flash
        mapRegion = context.session?.mapRegion
        mapVersion = context.session?.mapVersion
        sessionToken = context.session?.token
        map = context.session?.map ?? .own(user)
        mapsJSON = context.session?.mapsJSON
    }
}

/// The web pipeline every app route runs through: `page` or `signedIn` resolve the session, check
/// CSRF on every state-changing method, refuse control characters, set the cookies that need
/// setting and the Server-Timing header. There is no way to register an app route around them, and
/// the contexts above are created only here (their initializers are private to this file).
struct WebPipeline: Sendable {
    private(set) var router = Router()
    let accounts: AccountStore
    let secureCookies: Bool
    /// Say in a Server-Timing header how many database round trips the request took (tests and
    /// script/bench read it; off by default, SERVER_TIMING=1).
    let reportRoundTrips: Bool
    /// Told every session a request proves, so photo requests after a page need no round trip for
    /// theirs (PhotoStore/PhotoAccess).
    var photoAccess: PhotoAccess?
    /// Sessions kept in memory, so a request needs no round trip for its session (SessionCache).
    var sessions: SessionCache?

    init(accounts: AccountStore, secureCookies: Bool, reportRoundTrips: Bool = false) {
        self.accounts = accounts
        self.secureCookies = secureCookies
        self.reportRoundTrips = reportRoundTrips
    }

    /// Methods that change state (RFC 9110 §9.2.1: the others are safe) and so need the CSRF token.
    static let stateChanging: Set<String> = ["POST", "PUT", "PATCH", "DELETE"]

    mutating func page(_ method: String, _ pattern: String,
                       _ handler: @escaping @Sendable (RequestContext) throws -> HTTPResponse) {
        let accounts = accounts, secure = secureCookies, report = reportRoundTrips, access = photoAccess, sessions = sessions
        router.add(method, pattern, ClosureHandler { request in
            try Self.run(request, accounts: accounts, secure: secure, report: report, access: access, sessions: sessions, handler)
        })
    }

    /// A read-only route that needs no session and sets no cookies (health checks). Only GET, so
    /// nothing can change state around the CSRF check.
    mutating func plain(_ pattern: String, _ handler: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) {
        router.get(pattern, handler)
    }

    mutating func fallback(_ handler: any HTTPHandler) {
        router.fallback = handler
    }

    /// A route for signed-in people. Signed out: GET redirects to sign-in and comes back after;
    /// other methods get 401.
    /// `refuseEarly` sees the session cookie's token before the session is looked up, and may refuse
    /// the request from what the process already knows (StreamQuota): no database round trip.
    mutating func signedIn(_ method: String, _ pattern: String,
                           refuseEarly: (@Sendable (String) -> HTTPError?)? = nil,
                           _ handler: @escaping @Sendable (SignedInContext) throws -> HTTPResponse) {
        let signedIn = signedInHandler(handler)
        let secure = secureCookies
        router.add(method, pattern, ClosureHandler { request in
            if let refuseEarly, let token = Cookies.parse(request, secure: secure)[Cookies.session],
               let refusal = refuseEarly(token) {
                throw refusal
            }
            return try signedIn(request)
        })
    }

    private func signedInHandler(_ handler: @escaping @Sendable (SignedInContext) throws -> HTTPResponse)
        -> @Sendable (HTTPRequest) throws -> HTTPResponse {
        let accounts = accounts, secure = secureCookies, report = reportRoundTrips, access = photoAccess, sessions = sessions
        return { request in
            try Self.run(request, accounts: accounts, secure: secure, report: report, access: access, sessions: sessions) { context in
                guard let user = context.session?.user else {
                    if request.method == "GET" || request.method == "HEAD" {
                        let next = request.target == "/" ? "" : "?next=" + FormEncoding.encode(request.target)
                        return .redirect(to: "/sign-in" + next)
                    }
                    throw HTTPError(.unauthorized, "Please sign in again.")
                }
                return try handler(SignedInContext(context, user: user))
            }
        }
    }

    /// Server-Timing of an answer from memory, the one the photo route gives every time: built once.
    private static let noRoundTrips = "db;desc=\"round trips\";dur=0"

    /// What every signed-in answer carries, from memory or not: never from a shared cache (pages
    /// show a person's data), and, when asked, its round trips.
    private static func finish(_ response: inout HTTPResponse, report: Bool, roundTrips: Int) {
        if response.headers["Cache-Control"] == nil { response.headers.set("Cache-Control", "no-store") }
        if report { response.headers.add("Server-Timing", roundTrips == 0 ? noRoundTrips : "db;desc=\"round trips\";dur=\(roundTrips)") }
    }

    /// A signed-in GET that may be answered from PhotoAccess without the session's round trip:
    /// `cached` gets the grant the session cookie holds there and answers, or says nil; then (and
    /// without a cached grant) the request runs as a `signedIn` route does. `cached` is first asked
    /// with `mayBlock` false on the connection's event loop (HTTPHandler.respondInline): it then
    /// answers only from memory, and says nil for anything that needs the database or the network.
    mutating func signedInCached(_ pattern: String,
                                 cached: @escaping @Sendable (HTTPRequest, PhotoAccess.Grant, _ mayBlock: Bool) throws -> HTTPResponse?,
                                 _ handler: @escaping @Sendable (SignedInContext) throws -> HTTPResponse) {
        let access = photoAccess, secure = secureCookies, report = reportRoundTrips
        let signedIn = signedInHandler(handler)
        let answer: @Sendable (HTTPRequest, Bool) throws -> HTTPResponse? = { request, mayBlock in
            guard let access, let token = Cookies.value(Cookies.session, in: request, secure: secure),
                  let grant = access.grant(PhotoAccess.key(sessionToken: token)) else { return nil }
            let roundTripsBefore = RoundTrips.onThisThread
            guard var response = try cached(request, grant, mayBlock) else { return nil }
            if report {
                let trips = RoundTrips.onThisThread - roundTripsBefore
                response.headers.add("Server-Timing", trips == 0 ? Self.noRoundTrips : "db;desc=\"round trips\";dur=\(trips)")
            }
            return response
        }
        router.add("GET", pattern, ClosureHandler({ request in
            if let response = try answer(request, true) { return response }
            return try signedIn(request)
        }, inline: { request in try answer(request, false) }))
    }

    /// A signed-in GET whose answer may already be in memory (the kept map page): `kept` gets the
    /// session SessionCache holds for the cookie and answers, or says nil. It is asked on the
    /// connection's event loop (HTTPHandler.respondInline), so it answers only from memory and
    /// never compresses or waits; any nil — no kept session, a flash to show and clear, a page not
    /// kept — runs the request as a `signedIn` route does, on a handler slot.
    mutating func signedInKept(_ pattern: String, kept: @escaping @Sendable (HTTPRequest, Session) -> HTTPResponse?,
                               _ handler: @escaping @Sendable (SignedInContext) throws -> HTTPResponse) {
        let sessions = sessions, secure = secureCookies, report = reportRoundTrips
        let signedIn = signedInHandler(handler)
        router.add("GET", pattern, ClosureHandler({ request in try signedIn(request) }, inline: { request in
            // What `run` would add or check, for a request that changes nothing: the cookies it
            // would set (a flash to clear, a renewal: never for a kept session) and control characters.
            guard let sessions, let token = Cookies.value(Cookies.session, in: request, secure: secure),
                  Cookies.value(Cookies.flash, in: request, secure: secure) == nil,
                  let session = sessions.session(token: token), Self.controlCharacterField(in: request) == nil,
                  var response = kept(request, session) else { return nil }
            Self.finish(&response, report: report, roundTrips: 0)
            return response
        }))
    }

    private static func run(_ request: HTTPRequest, accounts: AccountStore, secure: Bool, report: Bool, access: PhotoAccess? = nil,
                            sessions: SessionCache? = nil,
                            _ handler: (RequestContext) throws -> HTTPResponse) throws -> HTTPResponse {
        let roundTripsBefore = RoundTrips.onThisThread
        let cookies = Cookies.parse(request, secure: secure)
        var setCookies: [String] = []

        var session: Session?
        if let token = cookies[Cookies.session] {
            // Taken before the session is read from either place: a revocation heard after it
            // stops the grant below from being kept.
            let mark = access?.mark()
            if let kept = sessions?.session(token: token) {
                session = kept
                if let access, let mark, access.grant(PhotoAccess.key(sessionToken: token)) == nil {
                    access.remember(PhotoAccess.key(sessionToken: token), userID: kept.map.holder, since: mark)
                }
            } else {
                let keptMark = sessions?.mark()
                session = try accounts.session(token: token)
                if session == nil { setCookies.append(Cookies.clear(Cookies.session, secure: secure)) }
                if let access, let mark, let session {
                    // Photos are granted by the map the session shows (its holder's), so a member removed
                    // from a shared map loses its photos with the grant this request replaces.
                    access.remember(PhotoAccess.key(sessionToken: token), userID: session.map.holder, since: mark)
                }
                if let sessions, let keptMark, let session { sessions.remember(session, since: keptMark) }
            }
        }
        // A change this request makes may concern what its session holds (the region, the map's
        // version, the map shown, the person's name): kept sessions of the person and of the map
        // go here at once, after the change; other instances hear it by NOTIFY.
        defer {
            if let sessions, let session, stateChanging.contains(request.method) {
                sessions.forget(people: [session.user.id, session.map.holder])
            }
        }

        // The token this request's forms carry: the session's, or a visitor's double-submit cookie.
        let csrfToken: String
        if let session {
            csrfToken = session.csrfToken
        } else if let anonymous = cookies[Cookies.anonymousCSRF], Tokens.isWellFormed(anonymous) {
            csrfToken = anonymous
        } else {
            csrfToken = Tokens.make()
            setCookies.append(Cookies.set(Cookies.anonymousCSRF, csrfToken, maxAge: nil, secure: secure))
        }

        if stateChanging.contains(request.method) {
            let sent = request.headers["X-CSRF-Token"] ?? formValue("_csrf", of: request)
            guard let sent, constantTimeEqual(Array(sent.utf8), Array(csrfToken.utf8)),
                  session != nil || cookies[Cookies.anonymousCSRF] != nil else {
                throw HTTPError(.forbidden, "This form has expired or did not come from this site. Reload the page and try again; nothing was changed.")
            }
        }

        // A NUL would be cut off (or refused with an error) by libpq, other controls by nothing at all:
        // any text field carrying one is refused here, by name, before a handler sees it.
        if let field = controlCharacterField(in: request) {
            throw HTTPError(.badRequest, "The field “\(field.prefix(40))” contains a control character (such as NUL). Remove it and try again; nothing was changed.")
        }

        let flash = cookies[Cookies.flash].flatMap { FormDecoding.percentDecode($0) }
        let context = RequestContext(request: request, session: session, csrfToken: csrfToken, flash: flash)
        var response = try handler(context)

        if let session, session.renewed, response.headers["Set-Cookie"] == nil {
            setCookies.append(Cookies.set(Cookies.session, session.token,
                                          maxAge: AccountStore.sessionLifetimeDays * 86400, secure: secure))
        }
        // A flash is shown once: cleared by the page that showed it, unless the response sets a new one.
        if flash != nil && !response.headers.values("Set-Cookie").contains(where: { $0.hasPrefix(Cookies.flash + "=") }) {
            setCookies.append(Cookies.clear(Cookies.flash, secure: secure))
        }
        for line in setCookies { response.headers.add("Set-Cookie", line) }
        finish(&response, report: report, roundTrips: RoundTrips.onThisThread - roundTripsBefore)
        return response
    }

    /// The first query or form field whose value holds a C0 control other than tab, CR and LF, or DEL.
    static func controlCharacterField(in request: HTTPRequest) -> String? {
        func hasControl(_ text: String) -> Bool {
            text.utf8.contains { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D) || $0 == 0x7F }
        }
        var items = request.queryItems
        if let type = request.headers["Content-Type"]?.lowercased(), type.hasPrefix("application/x-www-form-urlencoded") {
            items += request.formItems
        }
        return items.first { hasControl($0.value) || hasControl($0.name) }.map { String(decoding: $0.name.utf8.filter { $0 >= 0x20 && $0 != 0x7F }, as: UTF8.self) }
    }

    private static func formValue(_ name: String, of request: HTTPRequest) -> String? {
        guard let type = request.headers["Content-Type"]?.lowercased() else { return nil }
        // A file upload (the import form) carries its token as a part.
        if type.hasPrefix("multipart/form-data") { return (try? MultipartForm(request))?.value(name) }
        guard type.hasPrefix("application/x-www-form-urlencoded") else { return nil }
        return request.formValue(name)
    }
}
