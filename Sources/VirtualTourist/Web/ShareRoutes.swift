import Foundation
import HTTPServer
import AlbumWing
import Domain

/// Share links: the owner's list and forms (/pins/:id/shares, /shares), and everything a visitor
/// with a link reads, all under /s/TOKEN/… so that the password cookie (Path=/s/TOKEN) guards
/// every resource the page uses: the page, album.json and album.html, events, photos.
/// docs/architecture.md, "Share links".
extension WebPipeline {
    mutating func addShareRoutes(_ routes: ShareRoutes) {
        // The owner's.
        signedIn("GET", "/pins/:id/shares", routes.pinShares)
        signedIn("GET", "/shares", routes.allShares)
        signedIn("POST", "/pins/:id/shares") { try routes.createShare($0, forPin: true) }
        signedIn("POST", "/shares") { try routes.createShare($0, forPin: false) }
        signedIn("POST", "/shares/:id/revoke", routes.revokeShare)
        // The visitor's.
        page("GET", "/s/:token", routes.sharedPage)
        page("POST", "/s/:token", routes.unlockShare)
        page("GET", "/s/:token/pins/:id", routes.sharedAlbum)
        for prefix in ["/s/:token", "/s/:token/pins/:id"] {
            page("GET", prefix + "/album.json", routes.visitorAlbumJSON)
            page("GET", prefix + "/album.html", routes.visitorAlbumFragment)
            page("GET", prefix + "/events", routes.visitorEvents)
        }
        page("GET", "/s/:token/photos/:id", routes.sharedPhoto)
        page("GET", "/s/:token/photos/:id/view", routes.sharedPhotoPage)
        page("GET", "/s/:token/own-photos/:id", routes.sharedOwnPhoto)
        page("GET", "/s/:token/preview.jpg", routes.sharePreview)
    }

    /// The visitor's view of an album under `link`. With the location hidden a place is called by
    /// what the owner wrote for the link (an album link's label), else by the country our own place
    /// index puts its coordinates in: never by the pin's name, which for an imported pin is the
    /// file's text ("Grandma's house Rue Mercière").
    /// An album as the link's visitor may see it: every visitor page and answer reads it here, so
    /// a link that hides the location shows no photo title and no link to a photo's page anywhere.
    static func visitorAlbum(_ albums: AlbumStore, pinID: Int64, link: ShareLink) throws -> Album? {
        let album = try albums.album(pinID: pinID, userID: link.userID)
        return link.hideLocation ? album?.locationHidden() : album
    }

    /// The album and, when the link's maker ticked so, their own photos on it, in one round
    /// trip (the own photos' section as the visitor sees it: empty when there are none or the
    /// link does not show them).
    static func visitorAlbumPage(_ albums: AlbumStore, pinID: Int64, link: ShareLink, token: String) throws -> (album: Album, own: HTML)? {
        guard link.ownPhotos else { return try visitorAlbum(albums, pinID: pinID, link: link).map { ($0, .empty) } }
        let read = try albums.album(pinID: pinID, userID: link.userID, with: OwnPhotoStore.photosStatement(pinID: pinID, holder: link.userID))
        guard let album = read.album else { return nil }
        // Only the maker's own: a link does not publish another member's photos for them.
        let own = try OwnPhotoStore.photos(from: read.other).filter { $0.addedBy == link.madeBy }
        return (link.hideLocation ? album.locationHidden() : album, OwnPhotoPages.visitorSection(own, token: token))
    }

    static func visitorView(token: String, pinID: Int64?, link: ShareLink, places: @escaping @Sendable () -> PlaceIndex) -> AlbumView {
        let label = link.pinID != nil && !link.label.isEmpty ? link.label : nil
        return AlbumView.visitor(token: token, pinID: pinID, hideLocation: link.hideLocation) { pin in
            label ?? Self.country(of: pin, places: places()) ?? AlbumView.unnamedPlace
        }
    }

    /// The country whose place lies nearest a pin (within the index's 300 km), from our own index.
    static func country(of pin: Pin, places: PlaceIndex) -> String? {
        places.nearest(lat: pin.lat, lon: pin.lon).map(\.place.country).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// og: tags for an open link without a password.
    /// The preview image is the album's first ready photo, as /s/TOKEN/preview.jpg serves it.
    static func previewHead(_ link: ShareLink, token: String, album: Album?, base: String?, view: AlbumView) -> HTML {
        guard !link.hasPassword else { return .empty }
        guard let album else {
            return SharePages.previewTags(title: link.label.isEmpty ? "Shared places" : link.label,
                                          description: "Places and their photos, shared from Virtual Tourist.", image: nil)
        }
        let place = view.title(album.pin)
        let ready = album.readyCount
        let hasImage = album.photos.contains { $0.status == .ready }
        let image = base.flatMap { hasImage ? $0 + "/s/" + token + "/preview.jpg" : nil }
        return SharePages.previewTags(title: link.label.isEmpty ? place : link.label,
                                      description: "\(ready) photo\(ready == 1 ? "" : "s") · \(place)", image: image)
    }

    /// A photo's bytes for a visitor. Revalidated on every use (no-cache), so a revoked link stops
    /// showing photos at once. With the location hidden the bytes lose their metadata segments,
    /// and an original that is not a JPEG is replaced by its largest thumbnail (ours, a JPEG).
    static func image(_ id: Int64, width: Int?, link: ShareLink, albums: AlbumStore, request: HTTPRequest) throws -> HTTPResponse {
        var found: (bytes: [UInt8], contentType: String, hash: String)?
        do {
            found = try albums.image(id, userID: link.userID, width: width)
            if link.hideLocation, let image = found, image.contentType != "image/jpeg" {
                found = try albums.image(id, userID: link.userID, width: Thumbnailer.widths.max())
            }
        } catch let error as PhotoStoreError where error.unavailable {
            return WebPipeline.storeUnavailable(retryAfter: error.retryAfter ?? 10)
        }
        guard var image = found else { throw HTTPError.notFound }
        if link.hideLocation {
            guard image.contentType == "image/jpeg", let stripped = ImageMetadata.strippedJPEG(image.bytes) else { throw HTTPError.notFound }
            image.bytes = stripped
            image.hash += "-plain"
        }
        let etag = "\"\(image.hash)\""
        let cache = "private, no-cache"
        if ETag.matches(request.headers["If-None-Match"], etag) {
            return HTTPResponse(status: .notModified, headers: ["ETag": etag, "Cache-Control": cache])
        }
        return HTTPResponse(status: .ok, headers: ["ETag": etag, "Cache-Control": cache, "Content-Type": image.contentType], body: image.bytes)
    }
}

/// The checks every visitor request passes, in order: the address's rate, the token (unknown,
/// revoked, expired), the link's rate, and for a link with a password its cookie.
struct ShareGate: Sendable {
    let links: ShareLinks
    let limit: ShareRateLimit
    let secure: Bool

    /// Live pages one link may have open at once (beyond them the page still works, without live updates).
    static let streamsPerLink = 16
    static let cookie = "vt_share"
    /// Cookies with a Path cannot be `__Host-`; `__Secure-` still makes browsers refuse one set
    /// without Secure, so plain http cannot plant it.
    var cookieName: String { (secure ? "__Secure-" : "") + Self.cookie }

    static let unknown = HTTPError(.notFound, "This share link does not exist. Check that the whole link was copied.")

    /// The token's link, open and within its rates. `visit` says how the request is counted: a
    /// page a person opens, or something a page goes on to load (ShareRateLimit).
    func open(_ request: HTTPRequest, _ visit: ShareRateLimit.Visit) throws -> (token: String, link: ShareLink) {
        let tooMany = HTTPError.tooManyRequests("This shared album is being opened very often right now. Wait a minute, then reload the page.",
                                                retryAfter: .seconds(60))
        let address = request.remoteNetwork
        guard limit.allowVisit(visit, from: address) else { throw tooMany }
        let token = request.parameters["token"] ?? ""
        switch try links.lookup(token: token, visit: visit == .page) {
        case .notFound:
            limit.missed(from: address)
            throw Self.unknown
        case .revoked:
            throw HTTPError(.gone, "This share link was withdrawn by the person who made it. Ask them for a new one if you still need it.")
        case .expired:
            throw HTTPError(.gone, "This share link has expired. Ask the person who sent it for a new one.")
        case .open(let link):
            guard limit.allowVisit(visit, to: link.id) else { throw tooMany }
            return (token, link)
        }
    }

    /// As `open`, and refused without the password's cookie.
    func openUnlocked(_ request: HTTPRequest, _ visit: ShareRateLimit.Visit) throws -> (token: String, link: ShareLink) {
        let (token, link) = try open(request, visit)
        guard unlocked(request, token: token, link: link) else {
            throw HTTPError(.forbidden, "This shared album has a password. Open the link itself and type the password first.")
        }
        return (token, link)
    }

    /// The album a URL names: an album link's own, or for a map link one of the owner's (:id).
    func openAlbum(_ request: HTTPRequest, _ visit: ShareRateLimit.Visit) throws -> (token: String, link: ShareLink, pinID: Int64) {
        let (token, link) = try openUnlocked(request, visit)
        if let pinID = link.pinID {
            guard request.parameters["id"] == nil else { throw HTTPError.notFound }
            return (token, link, pinID)
        }
        guard let pinID = WebPipeline.pinID(request) else { throw HTTPError.notFound }
        return (token, link, pinID)
    }

    func unlocked(_ request: HTTPRequest, token: String, link: ShareLink) -> Bool {
        guard let expected = ShareLinks.unlockValue(token: token, link: link) else { return true }
        return Self.cookies(request, named: cookieName).contains { constantTimeEqual(Array($0.utf8), Array(expected.utf8)) }
    }

    /// Scoped to the link's own path, so it goes with no other request; kept until the link expires
    /// (30 days at most).
    func unlockCookie(token: String, value: String, link: ShareLink) -> String {
        let untilExpiry = link.expiresAt.map { Int($0.timeIntervalSinceNow) } ?? Int.max
        let maxAge = max(1, min(30 * 86400, untilExpiry))
        return "\(cookieName)=\(value); Path=/s/\(token); Max-Age=\(maxAge); HttpOnly; SameSite=Lax\(secure ? "; Secure" : "")"
    }

    /// Every value of cookies called `name` (one per matching path).
    static func cookies(_ request: HTTPRequest, named name: String) -> [String] {
        request.headers.values("Cookie").flatMap { $0.split(separator: ";") }.compactMap { pair in
            guard let eq = pair.firstIndex(of: "=") else { return nil }
            return pair[..<eq].trimmingSpaces() == name ? pair[pair.index(after: eq)...].trimmingSpaces() : nil
        }
    }

    /// The visitor's page chrome: never the visitor's own account, whoever is signed in.
    func chrome(_ context: RequestContext) -> Layout.Chrome { Layout.Chrome(user: nil, csrfToken: context.csrfToken, flash: nil) }

    /// Every visitor answer is not for search engines. (The token does not leave in a Referer
    /// either: SecurityHeaders' Referrer-Policy is same-origin.)
    static func visitor(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        response.headers.set("X-Robots-Tag", "noindex, nofollow")
        return response
    }

    /// ?w= as the owner's photo route reads it: parsed into a range, then the nearest thumbnail
    /// width (ties to the larger).
    static func width(_ query: String?) -> Int? {
        query.flatMap { Int($0) }.map { requested in
            let clamped = min(max(requested, 1), 100_000)
            return Thumbnailer.widths.min { abs($0 - clamped) < abs($1 - clamped) || (abs($0 - clamped) == abs($1 - clamped) && $0 > $1) }!
        }
    }
}

/// A visitor's event stream: "change" with no payload (the owner's ids are not the visitor's business).
final class ShareStreamWatcher: AlbumWatcher {
    private let stream: ResponseStream

    init(_ stream: ResponseStream) { self.stream = stream }

    func albumChanged(_ change: AlbumChange) {
        stream.send(event: "change", data: "")
    }
}

/// Share links' pages and forms: one handler per route (the table is `WebPipeline.addShareRoutes`).
struct ShareRoutes: Sendable {
    let links: ShareLinks
    let albums: AlbumStore
    let pins: PinStore
    let events: AlbumEvents
    let provider: any PhotoProvider
    /// People's own photos (nil when the instance has no photo store for them).
    let ownPhotos: OwnPhotoStore?
    /// PUBLIC_URL without its trailing slash: a new link's address, the preview's.
    let base: String?
    let places: @Sendable () -> PlaceIndex
    let secure: Bool
    let gate: ShareGate
    let streams = StreamQuota(perPerson: ShareGate.streamsPerLink)

    static let tooManyStreams = HTTPError(.tooManyRequests, "Many people have this album open right now. The page updates when reloaded.")

    init(links: ShareLinks, albums: AlbumStore, pins: PinStore, events: AlbumEvents, provider: any PhotoProvider, ownPhotos: OwnPhotoStore?,
         limits: ShareRateLimit.Limits, base: String?, places: @escaping @Sendable () -> PlaceIndex, secure: Bool) {
        self.links = links
        self.albums = albums
        self.pins = pins
        self.events = events
        self.provider = provider
        self.ownPhotos = ownPhotos
        self.base = base
        self.places = places
        self.secure = secure
        gate = ShareGate(links: links, limit: ShareRateLimit(limits), secure: secure)
    }

    /// A new link, for one pin's album (`forPin`) or the whole map; its address is shown on this
    /// answer only.
    func createShare(_ context: SignedInContext, forPin: Bool) throws -> HTTPResponse {
        let pinID = forPin ? WebPipeline.pinID(context.request) : nil
        if forPin && pinID == nil { throw HTTPError.notFound }
        let user = try pinID.map { id in try context.map.forSharing { try pins.pin(id, of: $0) != nil } } ?? context.map.forSharing()
        var pin: Pin?
        if let id = pinID {
            guard let found = try pins.pin(id, of: user) else { throw HTTPError.notFound }
            pin = found
        }
        var new = ShareLinks.NewLink(pinID: pin?.id)
        new.label = context.request.formValue("label") ?? ""
        new.hideLocation = context.request.formValue("hide_location") == "1"
        new.ownPhotos = context.request.formValue("own_photos") == "1"
        // One of the form's choices; anything else is the default.
        let days = context.request.formValue("expires_days").flatMap { Int($0) }
            .flatMap { ShareLinks.expiryChoices.contains($0) ? $0 : nil } ?? ShareLinks.defaultExpiryDays
        new.expiresInDays = days == 0 ? nil : days
        if let password = context.request.formValue("password"), !password.isEmpty {
            if let problem = Password.problem(with: password) {
                let list = try links.list(userID: user, pinID: pin?.id)
                return .page(SharePages.manage(pin: pin, links: list, created: nil, chrome: context.chrome,
                                               formError: "The password: " + problem), status: .unprocessableContent)
            }
            new.password = password
        }
        guard let (token, _) = try links.create(new, userID: user, madeBy: context.user.id) else { throw HTTPError.notFound }
        // Shown on this answer only, never in a redirect's cookie or URL.
        let url = (base ?? "") + "/s/" + token
        var response = HTTPResponse.page(SharePages.manage(pin: pin, links: try links.list(userID: user, pinID: pin?.id),
                                                           created: url, chrome: context.chrome), status: .created)
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    /// A shared album as data, for the visitor page's script.
    func visitorAlbumJSON(_ context: RequestContext) throws -> HTTPResponse {
        let (_, link, pinID) = try gate.openAlbum(context.request, .load)
        guard let album = try WebPipeline.visitorAlbum(albums, pinID: pinID, link: link) else { throw HTTPError.notFound }
        var response = HTTPResponse.jsonValue(AlbumJSON(album))
        response.headers.set("Cache-Control", "private, no-cache")
        return ShareGate.visitor(ETag.conditional(context.request, response))
    }

    /// A shared album's banner and grid, for album.js to patch the visitor's page with.
    func visitorAlbumFragment(_ context: RequestContext) throws -> HTTPResponse {
        let (token, link, pinID) = try gate.openAlbum(context.request, .load)
        guard let album = try WebPipeline.visitorAlbum(albums, pinID: pinID, link: link) else { throw HTTPError.notFound }
        let view = WebPipeline.visitorView(token: token, pinID: link.pinID == nil ? pinID : nil, link: link, places: places)
        var response = HTTPResponse.page(AlbumPages.fragment(album, csrf: "", view: view))
        response.headers.set("Cache-Control", "private, no-cache")
        return ShareGate.visitor(ETag.conditional(context.request, response))
    }

    /// A shared album's live updates; a link's streams are capped (ShareGate.streamsPerLink).
    func visitorEvents(_ context: RequestContext) throws -> HTTPResponse {
        let (_, link, pinID) = try gate.openAlbum(context.request, .load)
        guard !streams.isFull(link.id) else { throw Self.tooManyStreams }
        // A map link names the album in the URL: one of the owner's, or nothing to watch.
        if link.pinID == nil, try WebPipeline.visitorAlbum(albums, pinID: pinID, link: link) == nil { throw HTTPError.notFound }
        let change = AlbumChange(userID: link.userID, pinID: pinID)
        var response = HTTPResponse.eventStream(heartbeat: 15) { stream in
            guard streams.admit(link.id) else { return stream.close() }
            stream.onClose { streams.release(link.id) }
            let watcher = ShareStreamWatcher(stream)
            events.watch(change, watcher)
            stream.onClose { events.stopWatching(change, watcher) }
            watcher.albumChanged(change)
        }
        response.headers.set("Cache-Control", "no-store")
        return ShareGate.visitor(response)
    }

    func pinShares(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forSharing { try pins.pin(id, of: $0) != nil }
        guard let pin = try pins.pin(id, of: holder) else { throw HTTPError.notFound }
        return .page(SharePages.manage(pin: pin, links: try links.list(userID: holder, pinID: id), created: nil, chrome: context.chrome))
    }

    func allShares(_ context: SignedInContext) throws -> HTTPResponse {
        .page(SharePages.manage(pin: nil, links: try links.list(userID: try context.map.forSharing()), created: nil, chrome: context.chrome))
    }

    func revokeShare(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request), let pinID = try links.revoke(id, userID: try context.map.forSharing()) else { throw HTTPError.notFound }
        return .redirect(to: pinID == 0 ? "/shares" : "/pins/\(pinID)/shares", flash: "Link revoked: it opens nothing any more.", secure: secure)
    }

    /// The album (an album link) or the list of places (a map link), or the password form.
    func sharedPage(_ context: RequestContext) throws -> HTTPResponse {
        let (token, link) = try gate.open(context.request, .page)
        guard gate.unlocked(context.request, token: token, link: link) else {
            return ShareGate.visitor(.page(SharePages.password(token: token, chrome: gate.chrome(context), error: nil), status: .forbidden))
        }
        guard let pinID = link.pinID else {
            let mapPins = try pins.pins(of: link.userID, after: 0, limit: 1000)
            let view = WebPipeline.visitorView(token: token, pinID: nil, link: link, places: places)
            return ShareGate.visitor(.page(SharePages.map(mapPins, token: token, view: view, chrome: gate.chrome(context),
                                                           extraHead: WebPipeline.previewHead(link, token: token, album: nil, base: base, view: view))))
        }
        guard let (album, own) = try WebPipeline.visitorAlbumPage(albums, pinID: pinID, link: link, token: token) else { throw ShareGate.unknown }
        let view = WebPipeline.visitorView(token: token, pinID: nil, link: link, places: places)
        let head = WebPipeline.previewHead(link, token: token, album: album, base: base, view: view)
        return ShareGate.visitor(.page(AlbumPages.album(album, chrome: gate.chrome(context), providerName: provider.name,
                                                        view: view, extraHead: SharePages.noindex + head, own: own)))
    }

    func unlockShare(_ context: RequestContext) throws -> HTTPResponse {
        let (token, link) = try gate.open(context.request, .page)
        guard link.hasPassword else { return .redirect(to: "/s/" + token) }
        guard gate.limit.allow([.passwordTries(link: link.id), .passwordTriesFrom(context.request.remoteNetwork, link: link.id)]) else {
            throw HTTPError.tooManyRequests("Too many wrong passwords for this link. Wait ten minutes and try again.", retryAfter: .seconds(600))
        }
        let sent = context.request.formValue("password") ?? ""
        guard let stored = link.passwordHash, Password.verify(sent, against: stored), let value = ShareLinks.unlockValue(token: token, link: link) else {
            return ShareGate.visitor(.page(SharePages.password(token: token, chrome: gate.chrome(context), error: "That password is not right."),
                                           status: .forbidden))
        }
        var response = HTTPResponse.redirect(to: "/s/" + token)
        response.headers.add("Set-Cookie", gate.unlockCookie(token: token, value: value, link: link))
        return ShareGate.visitor(response)
    }

    /// A map link's albums: /s/TOKEN/pins/ID is the album's page.
    func sharedAlbum(_ context: RequestContext) throws -> HTTPResponse {
        let (token, link, pinID) = try gate.openAlbum(context.request, .page)
        guard let (album, own) = try WebPipeline.visitorAlbumPage(albums, pinID: pinID, link: link, token: token) else { throw HTTPError.notFound }
        return ShareGate.visitor(.page(AlbumPages.album(album, chrome: gate.chrome(context), providerName: provider.name,
                                                        view: WebPipeline.visitorView(token: token, pinID: pinID, link: link, places: places),
                                                        extraHead: SharePages.noindex, own: own)))
    }

    func sharedPhoto(_ context: RequestContext) throws -> HTTPResponse {
        let (_, link) = try gate.openUnlocked(context.request, .load)
        guard let id = WebPipeline.pinID(context.request), try links.photo(id, of: link) != nil else { throw HTTPError.notFound }
        let width = ShareGate.width(context.request.queryValue("w"))
        return ShareGate.visitor(try WebPipeline.image(id, width: width, link: link, albums: albums, request: context.request))
    }

    /// An own photo of the link's maker, for a link that shows them: the display version or a
    /// thumbnail (made without any metadata), never the original; only of the link's album (an
    /// album link) or of the map's (a map link); never another member's.
    func sharedOwnPhoto(_ context: RequestContext) throws -> HTTPResponse {
        let (_, link) = try gate.openUnlocked(context.request, .load)
        guard link.ownPhotos, let ownPhotos, let id = WebPipeline.pinID(context.request),
              let photo = try ownPhotos.photo(id, holder: link.userID), photo.addedBy == link.madeBy,
              link.pinID == nil || link.pinID == photo.pinID else { throw HTTPError.notFound }
        let width = ShareGate.width(context.request.queryValue("w"))
        guard var response = try WebPipeline.photoResponse(context.request, photo.served(original: false, holder: link.userID), width: width,
                                                           store: ownPhotos.store, mayBlock: true) else { throw HTTPError.notFound }
        // Revalidated on every use, as the link's other photos: a revoked link stops showing them at once.
        response.headers.set("Cache-Control", "private, no-cache")
        return ShareGate.visitor(response)
    }

    func sharedPhotoPage(_ context: RequestContext) throws -> HTTPResponse {
        let (token, link) = try gate.openUnlocked(context.request, .page)
        guard let id = WebPipeline.pinID(context.request), let pinID = try links.photo(id, of: link),
              let album = try WebPipeline.visitorAlbum(albums, pinID: pinID, link: link),
              let photo = album.photos.first(where: { $0.id == id }) else { throw HTTPError.notFound }
        let shown = album.photos.filter { $0.status == .ready }
        let index = shown.firstIndex { $0.id == id } ?? 0
        let view = WebPipeline.visitorView(token: token, pinID: link.pinID == nil ? pinID : nil, link: link, places: places)
        return ShareGate.visitor(.page(AlbumPages.photoPage(photo, pin: album.pin,
                                                            previous: index > 0 ? shown[index - 1].id : nil,
                                                            next: index + 1 < shown.count ? shown[index + 1].id : nil,
                                                            index: index, count: shown.count, chrome: gate.chrome(context),
                                                            providerName: provider.name, view: view, extraHead: SharePages.noindex)))
    }

    /// The one image a link preview may fetch without a cookie: the album's first photo as a
    /// thumbnail. Links with a password have none (their pages carry no preview tags either).
    func sharePreview(_ context: RequestContext) throws -> HTTPResponse {
        let (_, link) = try gate.open(context.request, .load)
        guard !link.hasPassword, let id = try links.firstPhoto(of: link) else { throw HTTPError.notFound }
        return ShareGate.visitor(try WebPipeline.image(id, width: 512, link: link, albums: albums, request: context.request))
    }
}
