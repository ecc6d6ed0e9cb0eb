import Foundation
import HTTPServer
import Log
import Synchronization
import AlbumWing
import Domain

private let photoServingLogger = Logger(label: "photo-store")
private let providerLogger = Logger(label: "photos")

/// Album, photo and picker pages; photo bytes; live album updates.
extension WebPipeline {
    /// Whether `user` is still a member of `map` (a database that does not answer: yes, until it does).
    static func stillMember(_ albums: AlbumStore, user: Int64, map: Int64) -> @Sendable () -> Bool {
        { (try? albums.isMember(user, of: map)) != false }
    }

    mutating func addAlbumRoutes(_ routes: AlbumRoutes) {
        signedIn("GET", "/pins/:id", routes.album)
        signedIn("GET", "/pins/:id/album.json", routes.albumJSON)
        signedIn("GET", "/pins/:id/album.html", routes.albumFragment)
        signedIn("GET", "/pins/:id/album.zip", routes.albumZip)
        signedIn("GET", "/pins/:id/events", refuseEarly: routes.refuseStream, routes.albumEvents)
        signedIn("GET", "/map/events", refuseEarly: routes.refuseStream, routes.mapEvents)
        signedIn("GET", "/pins/:id/when", routes.when)
        signedIn("POST", "/pins/:id/collection", routes.startCollection)
        signedIn("POST", "/pins/:id/retry", routes.startCollection)
        addPhotoBytesRoute(albums: routes.albums)
        signedIn("GET", "/photos/:id/view", routes.photoPage)
        signedIn("DELETE", "/photos/:id", routes.deletePhoto)
        signedIn("POST", "/photos/:id/delete", routes.deletePhotoForm)
        signedIn("GET", "/pins/:id/decades", routes.decades)
        signedIn("GET", "/pins/:id/then-and-now", routes.thenAndNow)
        signedIn("GET", "/pins/:id/picker", routes.picker)
        signedIn("POST", "/pins/:id/picker", routes.addPicked)
    }

    /// A picker page's provider search, on the picker's own slots, keeping only images from the
    /// provider's hosts. The provider's failure becomes its problem page; busy and slow answer
    /// for themselves (DomainErrors).
    static func pickerSearch(_ searches: PickerSearches, _ provider: any PhotoProvider, pin: Pin, page: Int, era: Era? = nil) throws -> PhotoSearchPage {
        do {
            return try searches.search(provider, lat: pin.lat, lon: pin.lon, page: page, era: era)
                .keepingImages(from: provider.imageHosts, provider: provider.name)
        } catch let error as PhotoProviderError {
            throw providerPage(error, provider: provider)
        }
    }
}

/// A refused New Collection, for the page's script to show.
struct QuotaJSON: Codable {
    let started: Bool
    let error: String
}

/// The album as the page's script sees it.
struct AlbumJSON: Codable {
    let status: PinStatus
    let error: String?
    /// While downloading: what the album waits for (a fixed phrase).
    let waiting: String?
    let retryable: Bool
    let page: Int?
    let totalPages: Int?
    let photos: [Photo]

    struct Photo: Codable {
        let id: Int64
        let status: PhotoStatus
        let title: String
        let owner: String
        let license: String
        let width: Int?
        let height: Int?
        /// When it was taken, at the provider's precision ("1962", "circa 1920s"); nil: unknown.
        let taken: String?
    }

    init(_ album: Album) {
        status = album.pin.status
        error = album.error
        waiting = album.waiting
        retryable = album.retryable
        page = album.page
        totalPages = album.totalPages
        photos = album.photos.map { Photo(id: $0.id, status: $0.status, title: $0.title, owner: $0.ownerName, license: $0.license,
                                           width: $0.width, height: $0.height, taken: $0.dateTaken) }
    }
}

/// An album page's event stream as an `AlbumWatcher`: each change is a "change" event whose data is
/// the album's fragment as album.html would answer it, so the page shows a new photo without
/// fetching album.html first: that round trip would lie on the way to the first thumbnail
/// (script/bench pindrop). The Albums module knows watchers, never HTTP streams. Changes that come
/// while the album is being read are folded into one more read; if it cannot be read (the database
/// busy), the event carries the ids only and the page fetches album.html itself.
final class StreamWatcher: AlbumWatcher {
    private let stream: ResponseStream
    private let albums: AlbumStore
    private let userID: Int64
    private let pinID: Int64
    private let csrf: String
    private let view: AlbumView
    /// On a shared map, the person watching: each read first checks they are still a member, and
    /// ends the stream once they are not (a member removed with the page open gets no more of it).
    private let member: Int64?
    /// A read running, another wanted after it, and the change stamp the next read must be as of.
    private struct Reads { var running = false, again = false, asOf: UInt64 = 0 }
    private let reads = Mutex(Reads())
    private let shared: AlbumReads
    /// Reads block on the database: a few serial queues (a pin's always the same one) bound the
    /// threads, also when every open page re-reads at once (`AlbumEvents.everyoneReread`).
    private static let queues = (0..<4).map { DispatchQueue(label: "album-stream-reads-\($0)") }

    init(_ stream: ResponseStream, albums: AlbumStore, shared: AlbumReads, userID: Int64, pinID: Int64, csrf: String, view: AlbumView,
         member: Int64? = nil) {
        self.shared = shared
        self.view = view
        self.member = member
        self.stream = stream
        self.albums = albums
        self.userID = userID
        self.pinID = pinID
        self.csrf = csrf
    }

    /// Called on the LISTEN connection's thread: the read happens elsewhere.
    func albumChanged(_ change: AlbumChange) {
        changed(change, asOf: shared.latest)
    }

    /// The stream just opened: read afresh, never a kept read. What changed unheard (the LISTEN
    /// link down, a change that sends no notice) must not come back to a page newer than it.
    func catchUp(_ change: AlbumChange) {
        changed(change, asOf: .max)
    }

    private func changed(_ change: AlbumChange, asOf heard: UInt64) {
        let start = reads.withLock { r -> Bool in
            r.asOf = max(r.asOf, heard)
            if r.running { r.again = true; return false }
            r.running = true
            return true
        }
        if start { Self.queues[Int(pinID % 4)].async { self.readAndSend(change) } }
    }

    private func readAndSend(_ change: AlbumChange) {
        repeat {
            let asOf = reads.withLock { r -> UInt64 in
                defer { r.asOf = 0 }
                return r.asOf
            }
            if let member, (try? albums.isMember(member, of: userID)) == false {
                stream.close()  // its onClose stops the watching
            } else if let album = try? shared.album(AlbumChange(userID: userID, pinID: pinID), asOf: asOf, read: {
                try albums.album(pinID: pinID, userID: userID)
            }) {
                stream.send(event: "change", data: String(decoding: AlbumPages.fragment(album, csrf: csrf, view: view).bytes, as: UTF8.self))
            } else {
                stream.send(event: "change", data: change.payload)
            }
        } while reads.withLock { r -> Bool in
            if r.again { r.again = false; return true }
            r.running = false
            return false
        }
    }
}

/// A map page's event stream: each change of the map's pins is a "pins" event with the pin's id
/// (ids only: the page reads what it may see through /pins.json, with its own session). On a shared
/// map, `stillMember` is asked every `every` and after the LISTEN link came back (the reread's pin
/// 0), and the stream ends once the person is no longer a member: a removal this instance did not
/// hear (its LISTEN link was down) shows them pin ids for at most `every`, never a pin's contents.
final class MapStreamWatcher: AlbumWatcher {
    private let stream: ResponseStream
    private let stillMember: (@Sendable () -> Bool)?
    private let every: Double
    private let closed = Atomic<Bool>(false)
    /// The checks ask the database: off the LISTEN thread and the event loops.
    private static let checks = DispatchQueue(label: "map-stream-member-checks")

    init(_ stream: ResponseStream, stillMember: (@Sendable () -> Bool)? = nil, every: Duration = .seconds(60)) {
        self.stream = stream
        self.stillMember = stillMember
        self.every = every.inSeconds
        guard stillMember != nil else { return }
        stream.onClose { [weak self] in self?.closed.store(true, ordering: .relaxed) }
        scheduleCheck()
    }

    /// The next timed check; none once the stream has ended (then nothing holds the watcher).
    private func scheduleCheck() {
        Self.checks.asyncAfter(deadline: .now() + every) { [weak self] in
            guard let self, !self.closed.load(ordering: .relaxed), let stillMember = self.stillMember else { return }
            if stillMember() { self.scheduleCheck() } else { self.stream.close() }
        }
    }

    func albumChanged(_ change: AlbumChange) {
        if change.pinID == 0, let stillMember {
            // The LISTEN link came back: a removal may have gone unheard.
            Self.checks.async { [stream] in
                if stillMember() { stream.send(event: "pins", data: "0") } else { stream.close() }
            }
            return
        }
        stream.send(event: "pins", data: String(change.pinID))
    }
}

/// Album, photo and picker pages; live album and map updates: one handler per route, named for
/// what it answers (the table is `WebPipeline.addAlbumRoutes`).
struct AlbumRoutes: Sendable {
    let albums: AlbumStore
    let events: AlbumEvents
    let provider: any PhotoProvider
    let streams: StreamQuota
    let searches: PickerSearches
    let downloads: DownloadSlots
    /// How often a shared map's live page asks whether its person is still a member.
    var memberRecheck: Duration = .seconds(60)
    /// People's own photos, shown beside the provider's (nil: none, as in tests of the album alone).
    var ownPhotos: OwnPhotoStore? = nil
    var ownPhotoMaxBytes = 40 * 1024 * 1024
    let secure: Bool

    static let tooManyStreams = HTTPError(.tooManyRequests, "Too many album pages are open at once. Close a few tabs and reload.")

    /// A person's live pages are capped: past it, 429 (the page then falls back to polling), from
    /// the session cookie alone, before the session is looked up.
    var refuseStream: @Sendable (String) -> HTTPError? {
        { [streams] token in streams.isFull(token: token) ? Self.tooManyStreams : nil }
    }

    /// The "When" form (a GET): what the choice will do and a button that takes it; changes nothing.
    func when(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try albums.album(pinID: id, userID: $0) != nil }
        guard let album = try albums.album(pinID: id, userID: holder) else { throw HTTPError.notFound }
        let query = (when: context.request.queryValue("when") ?? "any", from: context.request.queryValue("from") ?? "",
                     to: context.request.queryValue("to") ?? "")
        let choice = Era.parse(when: query.when, from: query.from, to: query.to)
        let page = AlbumPages.eraConfirmation(album, choice: choice, query: query, chrome: context.chrome)
        if case .failure = choice { return .page(page, status: HTTPStatus(422)) }
        return .page(page)
    }

    /// New Collection and Retry: a new album for the pin (JSON for the page's script, a redirect
    /// with a message for the plain form).
    func startCollection(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try albums.album(pinID: id, userID: $0) != nil }
        // The era form sends `when` (AlbumPages.eraForm); New Collection and Retry keep the era.
        var era = AlbumStore.EraChange.keep
        if let when = context.request.formValue("when") {
            switch Era.parse(when: when, from: context.request.formValue("from"), to: context.request.formValue("to")) {
            case .success(let chosen): era = .change(to: chosen)
            case .failure(let refusal):
                if context.request.headers["Accept"]?.contains("application/json") ?? false {
                    return .jsonValue(QuotaJSON(started: false, error: refusal.description), status: HTTPStatus(422))
                }
                return .redirect(to: "/pins/\(id)", flash: refusal.description, secure: secure)
            }
        }
        let result = try albums.startCollection(pinID: id, userID: holder, by: context.user.id, era: era)
        if result == .notFound { throw HTTPError.notFound }
        if case .quotaReached(let reached) = result {
            if context.request.headers["Accept"]?.contains("application/json") ?? false {
                return .jsonValue(QuotaJSON(started: false, error: reached.description), status: .tooManyRequests)
            }
            return .redirect(to: "/pins/\(id)", flash: reached.description, secure: secure)
        }
        if context.request.headers["Accept"]?.contains("application/json") ?? false {
            return .jsonValue(["started": result == .started], status: result == .busy ? .conflict : .accepted)
        }
        if result == .busy {
            return .redirect(to: "/pins/\(id)", flash: "This album is still downloading; New Collection is available when it is complete.", secure: secure)
        }
        return .redirect(to: "/pins/\(id)")
    }

    /// The album page.
    func album(_ context: SignedInContext) throws -> HTTPResponse {
        let holder = context.map.forReading
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        // The album and its own photos in one round trip.
        var ownList: [OwnPhoto] = []
        let found: Album?
        if ownPhotos != nil {
            let read = try albums.album(pinID: id, userID: holder, with: OwnPhotoStore.photosStatement(pinID: id, holder: holder))
            found = read.album
            ownList = try OwnPhotoStore.photos(from: read.other)
        } else {
            found = try albums.album(pinID: id, userID: holder)
        }
        guard var album = found else { throw HTTPError.notFound }
        // A pin with no album yet gets one when opened (pins made before workers ran, say); only
        // then does the page cost more than the session and one statement.
        var chrome = context.chrome
        if album.pin.status == .new {
            // Any member's look starts it: the first album is the pin's, not a change of theirs.
            let start = try albums.startCollection(pinID: id, userID: holder, by: context.user.id, onlyIfNew: true)
            guard start != .notFound, let started = try albums.album(pinID: id, userID: holder) else { throw HTTPError.notFound }
            if case .quotaReached(let reached) = start { chrome.flash = reached.description }
            album = started
        }
        let byTaken = context.request.queryValue("sort") == "taken"
        var own = HTML.empty
        if ownPhotos != nil {
            let person = context.user.id, owner = context.map.role == .owner
            own = OwnPhotoPages.section(ownList, pinID: id, csrf: context.csrfToken, canAdd: context.map.role >= .editor,
                                        shared: context.map.sharedID != nil, mayRemove: { $0.addedBy == person || owner },
                                        maxFileMB: ownPhotoMaxBytes / (1024 * 1024))
        }
        return .page(AlbumPages.album(byTaken ? album.sortedByTaken() : album, chrome: chrome, providerName: provider.name,
                                      view: .member(id, map: context.map), sortedByTaken: byTaken, own: own))
    }

    /// The album as data, for the page's script to redraw the grid after a change.
    func albumJSON(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request), let album = try albums.album(pinID: id, userID: context.map.forReading) else {
            throw HTTPError.notFound
        }
        var response = HTTPResponse.jsonValue(AlbumJSON(album))
        response.headers.set("Cache-Control", "private, no-cache")
        return ETag.conditional(context.request, response)
    }

    /// The banner and the grid as the page draws them, for album.js to patch the page with:
    /// the grid has one renderer, the server's (AlbumPages.fragment).
    func albumFragment(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request), var album = try albums.album(pinID: id, userID: context.map.forReading) else {
            throw HTTPError.notFound
        }
        if context.request.queryValue("sort") == "taken" { album = album.sortedByTaken() }
        var response = HTTPResponse.page(AlbumPages.fragment(album, csrf: context.csrfToken, view: .member(id, map: context.map)))
        response.headers.set("Cache-Control", "private, no-cache")
        return ETag.conditional(context.request, response)
    }

    /// The album as a zip of its ready photos' originals and credits.csv, written as it is
    /// read: the stream waits for the socket after every slice (`writeWhenDrained`), so a
    /// 500-photo album costs the server one photo and the socket's backlog, not the archive.
    /// Close-delimited like every stream; a reader sees a cut-off download by its missing
    /// central directory. The list is read before the head goes out, so another person's pin
    /// is a 404.
    func albumZip(_ context: SignedInContext) throws -> HTTPResponse {
        let user = context.user.id, holder = context.map.forReading
        guard let id = WebPipeline.pinID(context.request), let (pin, era, found) = try albums.archive(pinID: id, userID: holder) else {
            throw HTTPError.notFound
        }
        // Then the people's own photos, by the time they were taken: the original (its location in
        // it) for who may download it (who added it, the map's owners), else the display version.
        let owner = context.map.role == .owner
        let photos = found + (try ownPhotos?.photos(pinID: id, holder: holder) ?? []).map { own in
            own.archived(original: own.addedBy == user || owner)
        }
        let ticket: DownloadSlots.Ticket
        switch downloads.admit(user) {
        case .success(let admitted): ticket = admitted
        case .failure(.tooManyOfYours):
            throw HTTPError.tooManyRequests("Your other album downloads are still running. Try again when one has finished.",
                                            retryAfter: .seconds(30))
        case .failure(.busy):
            throw HTTPError.unavailable("Many albums are being downloaded right now. Try again in a minute.", retryAfter: .seconds(30))
        }
        return HTTPResponse(status: .ok, headers: [
            "Content-Type": "application/zip",
            "Content-Disposition": AlbumArchive.contentDisposition(pinID: id, placeName: pin.placeName, era: era),
            "Cache-Control": "private, no-store",
        ], body: .stream(heartbeat: nil) { stream in
            // The slot is held until the writer is done (and given back if it never starts).
            defer { withExtendedLifetime(ticket) { stream.close() } }
            do {
                _ = try AlbumArchive.write(photos, bytes: { try albums.originalBytes($0, userID: holder) },
                                           sink: { stream.writeWhenDrained($0) })
            } catch {
                // The head is out: all that is left is to end the download short.
                // Troubleshooting: zip ended early
                photoServingLogger.warning("album \(id) zip ended early: \(error)")
            }
        })
    }

    /// Server-Sent Events: "change" whenever the album does, carrying the album's fragment (what
    /// album.html answers), so the page patches itself without a round trip.
    func albumEvents(_ context: SignedInContext) throws -> HTTPResponse {
        // A person's live pages are capped: past it, 429 (the page then falls back to polling).
        // Checked before the album is read, so a client reopening refused streams in a loop costs
        // the session's round trip only, not the album's as well (script/bench abuse). At the
        // cap every pin id gets 429, so it tells nothing.
        let user = context.user.id, holder = context.map.forReading
        guard !streams.isFull(user) else { throw Self.tooManyStreams }
        guard let id = WebPipeline.pinID(context.request), try albums.album(pinID: id, userID: holder) != nil else {
            throw HTTPError.notFound
        }
        let change = AlbumChange(userID: holder, pinID: id)
        let view = AlbumView.member(id, map: context.map)
        var response = HTTPResponse.eventStream(heartbeat: 15) { stream in
            // Counted once the stream runs, so a stream refused by a busy server holds no place.
            let token = context.sessionToken
            guard streams.admit(user, token: token) else { return stream.close() }
            stream.onClose { streams.release(user, token: token) }
            streams.hold(stream, token: token)
            let watcher = StreamWatcher(stream, albums: albums, shared: events.reads, userID: holder, pinID: id, csrf: context.csrfToken, view: view,
                                        member: context.map.sharedID == nil ? nil : user)
            events.watch(change, watcher)
            stream.onClose { events.stopWatching(change, watcher) }
            watcher.catchUp(change)  // catch up on anything missed
        }
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    /// A map page's live pins: "pins" whenever a pin of the map it shows is dropped, imported or
    /// deleted by anyone (a shared map's other members, another tab), carrying the pin's id; the
    /// page then reads its view again. Counted with the album pages against the person's cap.
    func mapEvents(_ context: SignedInContext) throws -> HTTPResponse {
        let user = context.user.id, holder = context.map.forReading
        guard !streams.isFull(user) else { throw Self.tooManyStreams }
        // On a shared map: still a member? Asked on a timer and when the LISTEN link came
        // back, besides the NOTIFY that ends the stream at once (which this instance may miss).
        let stillMember = context.map.sharedID == nil ? nil : WebPipeline.stillMember(albums, user: user, map: holder)
        var response = HTTPResponse.eventStream(heartbeat: 15) { stream in
            let token = context.sessionToken
            guard streams.admit(user, token: token) else { return stream.close() }
            stream.onClose { streams.release(user, token: token) }
            streams.hold(stream, token: token)
            let watcher = MapStreamWatcher(stream, stillMember: stillMember, every: memberRecheck)
            events.watchMap(holder, watcher)
            stream.onClose { events.stopWatchingMap(holder, watcher) }
        }
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    /// A photo full screen, with the previous and next ready photos of its album.
    func photoPage(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request), let album = try albums.album(containingPhoto: id, userID: context.map.forReading),
              let photo = album.photos.first(where: { $0.id == id }) else { throw HTTPError.notFound }
        let shown = album.photos.filter { $0.status == .ready || $0.id == id }
        let index = shown.firstIndex { $0.id == id } ?? 0
        return .page(AlbumPages.photoPage(photo, pin: album.pin,
                                          previous: index > 0 ? shown[index - 1].id : nil,
                                          next: index + 1 < shown.count ? shown[index + 1].id : nil,
                                          index: index, count: shown.count, chrome: context.chrome, providerName: provider.name,
                                          view: .member(album.pin.id, map: context.map)))
    }

    /// Removes a photo from its album (the page's script).
    func deletePhoto(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try albums.album(containingPhoto: id, userID: $0) != nil }
        guard try albums.deletePhoto(id, userID: holder) != nil else {
            throw HTTPError.notFound
        }
        albums.access?.forget(photo: id)
        return HTTPResponse(status: .noContent)
    }

    /// Removes a photo from its album (the plain form), back to the album with a message.
    func deletePhotoForm(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try albums.album(containingPhoto: id, userID: $0) != nil }
        guard let pinID = try albums.deletePhoto(id, userID: holder) else {
            throw HTTPError.notFound
        }
        albums.access?.forget(photo: id)
        return .redirect(to: "/pins/\(pinID)", flash: "Photo removed.", secure: secure)
    }

    /// The photo picker: a page of the provider's photos near the pin, to add by hand.
    var decadeStore: DecadeStore { DecadeStore(pool: albums.pool) }
    /// One count per pin at a time, for every page of this instance.
    let decadeGate = DecadeCountGate()

    /// The strip of decades: the kept counts while fresh, else counted now on a picker slot (a
    /// count that outlasts the page's wait goes on and is kept for the next look). A page of its
    /// own (without JavaScript), or with `fragment=1` the strip alone, which album.js puts in the
    /// album page (so the album page itself costs no more).
    func decades(_ context: SignedInContext) throws -> HTTPResponse {
        let holder = context.map.forReading
        guard let id = WebPipeline.pinID(context.request), let album = try albums.album(pinID: id, userID: holder) else {
            throw HTTPError.notFound
        }
        let store = decadeStore, provider = provider, pin = album.pin, gate = decadeGate
        let editor = context.map.role >= .editor
        var strip = TimePages.Strip(counts: try store.counts(pinID: id, userID: holder), canChoose: editor)
        // People's own photos take their place in the same strip, by the time they were taken.
        if let ownPhotos { strip.ours = TimePages.decadesOf(try ownPhotos.photos(pinID: id, holder: holder)) }
        // A count costs provider calls: editors and owners start one (a viewer sees kept counts),
        // one at a time per pin, and not again soon after one failed.
        if strip.counts == nil {
            switch editor ? gate.admit(id) : .resting {
            case .running:
                strip.note = "Still counting the photos of each decade; look again in a moment."
            case .resting:
                strip.note = editor ? "The photo service could not count the decades a moment ago; look again later."
                    : "Not counted yet: the counts come with an editor's first look."
            case .start:
                do {
                    strip.counts = try searches.run {
                        do {
                            try store.save(pinID: id, userID: holder, try provider.decadeCounts(lat: pin.lat, lon: pin.lon, decades: Era.decades()))
                            gate.finished(id, failed: false)
                        } catch {
                            gate.finished(id, failed: true)
                            throw error
                        }
                        return try store.counts(pinID: id, userID: holder)
                    }
                } catch is PickerSearches.TimedOut {
                    strip.note = "Still counting the photos of each decade; look again in a moment."
                } catch is PickerSearches.Busy {
                    gate.finished(id, failed: false)
                    strip.note = "The photo service is busy; look again in a moment."
                } catch let error as PhotoProviderError {
                    // Troubleshooting: counting decades: ERROR
                    providerLogger.warning("counting decades: \(error)")
                    strip.note = "The photo service could not count the decades now; look again later."
                }
            }
        }
        if context.request.queryValue("fragment") == "1" {
            var response = HTTPResponse.page(TimePages.strip(album, strip, csrf: context.csrfToken))
            response.headers.set("Cache-Control", "private, no-cache")
            return response
        }
        return .page(Layout.page(title: "Through time: \(album.pin.title)", chrome: context.chrome, bodyClass: "decades-page", main: """
            <nav class="breadcrumbs" aria-label="Breadcrumb"><a href="/pins/\(id)">← \(text: album.pin.title)</a></nav>
            <h1>\(text: album.pin.title) through time</h1>
            \(TimePages.strip(album, strip, csrf: context.csrfToken))
            """))
    }

    /// Then and now: a decade's photos beside this decade's, from the provider as the picker
    /// shows them. `then` is a decade before this one; anything else is the album's era, else the 1950s.
    func thenAndNow(_ context: SignedInContext) throws -> HTTPResponse {
        let holder = context.map.forReading
        guard let id = WebPipeline.pinID(context.request), let album = try albums.album(pinID: id, userID: holder),
              let now = Era.decades().last else {
            throw HTTPError.notFound
        }
        let asked = (try? Era.parse(when: context.request.queryValue("then")).get()) ?? nil
        let candidates = [asked, album.era.flatMap { Era.decade($0.from / 10 * 10) }, Era.decade(1950)]
        guard let then = candidates.compactMap({ $0 }).first(where: { $0.isDecade && $0.from < now.from }) else { throw HTTPError.notFound }
        let thenPage = try WebPipeline.pickerSearch(searches, provider, pin: album.pin, page: 1, era: then)
        let nowPage = try WebPipeline.pickerSearch(searches, provider, pin: album.pin, page: 1, era: now)
        return .page(TimePages.thenAndNow(pin: album.pin, then: then, now: now, thenPhotos: thenPage.photos, nowPhotos: nowPage.photos,
                                         chrome: context.chrome))
    }

    func picker(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try albums.album(pinID: id, userID: $0) != nil }
        guard let album = try albums.album(pinID: id, userID: holder) else { throw HTTPError.notFound }
        // Without a page: not the one the album already shows (page 1 is usually the album's own
        // thirty photos), so the picker opens on photos that can still be added.
        let shown = album.page ?? 0
        let page = context.request.queryValue("page") == nil
            ? min(shown == 1 ? 2 : 1, provider.lastPage)
            : InputNumber.page(context.request.queryValue("page"), last: provider.lastPage)
        let result = try WebPipeline.pickerSearch(searches, provider, pin: album.pin, page: page, era: album.era)
        let saved = try albums.savedRemoteIDs(pinID: id, userID: holder)
        return .page(AlbumPages.picker(pin: album.pin, result: result, saved: saved, chrome: context.chrome, providerName: provider.name))
    }

    /// Adds the ticked photos of a picker page to the album.
    func addPicked(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try albums.album(pinID: id, userID: $0) != nil }
        guard let album = try albums.album(pinID: id, userID: holder) else { throw HTTPError.notFound }
        let chosen = Set(context.request.formItems.filter { $0.name == "photo" }.map(\.value))
        let page = InputNumber.page(context.request.formValue("page"), last: provider.lastPage)
        guard !chosen.isEmpty else {
            return .redirect(to: "/pins/\(id)/picker?page=\(page)", flash: "Tick the photos to add first.", secure: secure)
        }
        // Details come from the provider again, never from the form: only real results are saved.
        let result = try WebPipeline.pickerSearch(searches, provider, pin: album.pin, page: page, era: album.era)
        let photos = result.photos.filter { chosen.contains($0.remoteID) }
        let added: Int
        do {
            guard let count = try albums.addPhotos(photos, pinID: id, userID: holder, by: context.user.id) else { throw HTTPError.notFound }
            added = count
        } catch let reached as QuotaReached {
            return .redirect(to: "/pins/\(id)", flash: reached.description, secure: secure)
        }
        let message = added == 0 ? "Those photos are already in the album (or it is still downloading)."
            : added == 1 ? "1 photo added; it is downloading now." : "\(added) photos added; they are downloading now."
        return .redirect(to: "/pins/\(id)", flash: message, secure: secure)
    }
}
