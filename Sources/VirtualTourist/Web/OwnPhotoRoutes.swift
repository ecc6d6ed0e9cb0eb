import Foundation
import HTTPServer
import AlbumWing
import Domain
import Imaging
import Log
import Waiting

private let ownPhotoLogger = Logger(label: "photo-store")

/// People's own photos: added to a pin's album (one file a request from the page's script, or
/// the plain form's several at once), served (the display version and thumbnails to every member,
/// the original only to who may download it), removed by who added them or an owner.
extension WebPipeline {
    /// The upload's limit: one file (the script sends each on its own) or the plain form's files
    /// together, and the form around them. Larger is refused from the Content-Length alone.
    static func ownPhotoUpload(maxBytes: Int) -> HTTPLimits.Upload {
        HTTPLimits.Upload(method: "POST", path: "/pins/:id/own-photos", maxBodyBytes: maxBytes + 64 * 1024,
                          refusal: "photos of up to \(maxBytes / (1024 * 1024)) MB can be added (the form without JavaScript sends all its files at once, together at most that)",
                          spooled: true)
    }

    /// The map's "Add photos": the same limit, another route.
    static func mapPhotoUpload(maxBytes: Int) -> HTTPLimits.Upload {
        var upload = ownPhotoUpload(maxBytes: maxBytes)
        upload.path = "/own-photos"
        return upload
    }

    mutating func addOwnPhotoRoutes(_ routes: OwnPhotoRoutes) {
        signedIn("POST", "/own-photos", routes.addToMap)
        signedIn("POST", "/pins/:id/own-photos", routes.add)
        signedIn("GET", "/own-photos/:id", routes.bytes)
        signedIn("GET", "/own-photos/:id/view", routes.view)
        signedIn("POST", "/own-photos/:id/delete", routes.removeForm)
        signedIn("DELETE", "/own-photos/:id", routes.remove)
    }
}

/// A file's answer to the page's script.
struct OwnPhotoAdded: Codable {
    let id: Int64?
    let added: Bool
    /// What the page shows beside the file: "added", "already in this album", or why not.
    let message: String
    /// The photo as the grid shows it (HTML made and escaped here, by HTML), when added.
    let figure: String?
    /// On the map: the pin it went to (new or near), for the map to show.
    var pin: PinJSON? = nil
    var newPin: Bool? = nil
    /// Refused for now: it may find its place beside the batch's other photos once they are in
    /// (own-photos.js sends it again, once, at the end of the batch).
    var later: Bool? = nil
}

/// One placement at a time per map on this instance: two photos of one new place arriving
/// together make one pin, not two (the second finds the first's); other maps' placements go on.
/// Instances sharing a database may still make two, a few metres apart, which a person merges by
/// deleting one.
final class PlacementLock: @unchecked Sendable {
    // @unchecked: the set is only touched inside the Waitable, which locks it.
    private let placing = Waitable(Set<Int64>())

    func withLock<T>(holder: Int64, _ body: () throws -> T) rethrows -> T {
        _ = placing.wait { state -> Bool? in state.insert(holder).inserted ? true : nil }
        defer { placing.change(wake: .all) { _ = $0.remove(holder) } }
        return try body()
    }
}

struct OwnPhotoRoutes: Sendable {
    let ownPhotos: OwnPhotoStore
    let pins: PinStore
    let places: @Sendable () -> PlaceIndex
    let maxFileBytes: Int
    /// A photo joins the map's nearest pin within this many metres, else makes a pin of its own.
    let pinRadius: Double
    let placement = PlacementLock()
    let secure: Bool
    /// Where a body the server kept in memory is spooled (the server spools these routes' own,
    /// HTTPLimits.spoolDirectory; a request made in a test does not come through it).
    let spoolDirectory: String

    /// Where a request's photos go: one pin's album ("Add your photos here"), or the map ("Add
    /// photos"), each where it was taken.
    enum Destination {
        case pin(Pin)
        /// `dropped`: where the files were dropped, for photos whose files do not say; `estimate`:
        /// a photo without a position may stand beside the person's photos taken minutes apart.
        case map(dropped: (lat: Double, lon: Double)?, estimate: Bool)
        /// The map form was drawn for another map than the session's now.
        case anotherMap
    }

    /// POST /own-photos: the map's "Add photos". Each photo goes where its GPS says (or, without
    /// one, beside the person's photos taken within minutes when they ask so, or where it was
    /// dropped: `lat`, `lon`), to the map's nearest pin within `pinRadius`, else to a new pin named
    /// after the nearest place, whose album then fills with the world's photos as a dropped pin's
    /// does. So a trip's batch makes a handful of pins.
    func addToMap(_ context: SignedInContext) throws -> HTTPResponse {
        let holder = try context.map.forChanging()
        let dropped: (lat: Double, lon: Double)? = {
            guard let lat = InputNumber.decimal(context.request.queryValue("lat"), in: -90...90),
                  let lon = InputNumber.decimal(context.request.queryValue("lon"), in: -180...180) else { return nil }
            return (lat, lon)
        }()
        return try receive(context, holder: holder, back: "/") { field in
            // The map the page was drawn for: a batch still arriving after a switch of maps in
            // another tab must not land on the other map (its photos' places would be shown to its members).
            if let meant = field("map"), meant != (context.map.sharedID.map(String.init) ?? "own") { return .anotherMap }
            return .map(dropped: dropped, estimate: field("estimate") == "1")
        }
    }

    /// POST /pins/:id/own-photos: the album's "Add your photos here".
    func add(_ context: SignedInContext) throws -> HTTPResponse {
        guard let pinID = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try pins.pin(pinID, of: $0) != nil }
        guard let pin = try pins.pin(pinID, of: holder) else { throw HTTPError.notFound }
        // Read once for all the request's files: one deleted meanwhile is refused by the insert (noPin).
        return try receive(context, holder: holder, back: "/pins/\(pinID)#own-photos") { _ in .pin(pin) }
    }

    /// Both routes' files, one at a time through `addOne`. The script sends a file as the body
    /// (its name in X-File-Name, percent-encoded; its fields in the query) and gets JSON; the plain
    /// form sends its files and fields as multipart/form-data and is sent `back` with a message
    /// naming each file that was not added. `destination` reads the request's fields.
    private func receive(_ context: SignedInContext, holder: Int64, back: String,
                         destination: (_ field: (String) -> String?) -> Destination) throws -> HTTPResponse {
        let type = context.request.headers["Content-Type"]?.lowercased() ?? ""
        guard type.hasPrefix("multipart/form-data") else {
            let target = destination { context.request.queryValue($0) }
            if case .anotherMap = target {
                return .jsonValue(OwnPhotoAdded(id: nil, added: false, message: Self.anotherMap, figure: nil), status: .conflict)
            }
            let name = context.request.headers["X-File-Name"].flatMap { $0.removingPercentEncoding } ?? "photo"
            let body = try context.request.spooled ?? SpooledBody.holding(context.request.body, directory: spoolDirectory)
            let outcome = try addOne(body, 0..<body.count, name: name, holder: holder, to: target, context: context)
            var response = HTTPResponse.jsonValue(outcome.json, status: outcome.status)
            // The script sends a file refused for a full line again after this.
            if outcome.status == .serviceUnavailable { response.waitFor(.seconds(2)) }
            return response
        }
        let form: MultipartForm
        do throws(MultipartForm.Failure) {
            guard let parsed = try MultipartForm(context.request) else { throw MultipartForm.Failure(description: "not a form") }
            form = parsed
        } catch {
            return .redirect(to: back, flash: "The photos could not be read: \(error.description).", secure: secure)
        }
        let target = destination { form.value($0) }
        if case .anotherMap = target { return .redirect(to: back, flash: Self.anotherMap, secure: secure) }
        let files = form.parts.filter { $0.name == "file" && $0.filename.map { !$0.isEmpty } == true }
        guard !files.isEmpty else { return .redirect(to: back, flash: "No photo was chosen.", secure: secure) }
        var added = 0, refusals: [String] = []
        let body: SpooledBody
        switch form.source {
        case .spooled(let spooled): body = spooled
        case .memory(let bytes): body = try SpooledBody.holding(bytes, directory: spoolDirectory)
        }
        for file in files {
            let outcome = try addOne(body, file.range, name: file.filename ?? "photo", holder: holder, to: target, context: context)
            if outcome.json.added { added += 1 } else { refusals.append(outcome.json.message) }
        }
        let summary = (added == 1 ? "1 photo added" : "\(added) photos added") + (back == "/" ? " to the map." : ".")
        // A flash is a cookie (4 KB at most in browsers): the first few refusals, and how many more.
        let shown = refusals.prefix(4) + (refusals.count > 4 ? ["\(refusals.count - 4) more were not added."] : [])
        return .redirect(to: back, flash: ([summary] + shown).map { String($0.prefix(300)) }.joined(separator: " "), secure: secure)
    }

    static let anotherMap = "These photos were meant for another map: you switched maps since the page was opened. Open that map and add them again."

    struct Outcome {
        let json: OwnPhotoAdded
        let status: HTTPStatus
    }

    /// One file, bytes `range` of an upload's spooled body: refused for what is cheap to see first
    /// (empty, too large, already on the pin), then read and its versions made (`prepare`), put
    /// where it goes, and stored from the spool. Every refusal is a sentence that names the file.
    private func addOne(_ body: SpooledBody, _ range: Range<Int>, name: String, holder: Int64, to destination: Destination,
                        context: SignedInContext) throws -> Outcome {
        let shown = OwnPhotoStore.cleanName(name)
        func refused(_ message: String, _ status: HTTPStatus = .unprocessableContent, later: Bool = false) -> Outcome {
            var json = OwnPhotoAdded(id: nil, added: false, message: message, figure: nil)
            if later { json.later = true }
            return Outcome(json: json, status: status)
        }
        guard !range.isEmpty else { return refused("\(shown) is empty.") }
        guard range.count <= maxFileBytes else {
            return refused("\(shown) is larger than \(maxFileBytes / (1024 * 1024)) MB, the most a photo may be.", .contentTooLarge)
        }
        // Hashed from its file a megabyte at a time.
        guard let hash = try? SHA256.hex(of: body, range) else {
            return refused("\(shown) was not added: the server could not read it back; send it again in a moment.", .serviceUnavailable)
        }
        if case .pin(let pin) = destination, try ownPhotos.existing(original: hash, pinID: pin.id, holder: holder) != nil {
            return Outcome(json: OwnPhotoAdded(id: nil, added: false, message: "\(shown) is already in this album.", figure: nil), status: .ok)
        }
        do {
            var prepared: OwnPhotoStore.Prepared
            switch try ownPhotos.prepare(BlobFile(body: body, offset: range.lowerBound, count: range.count, hash: hash), by: context.user.id) {
            case .refused(let refusal): return refused("\(shown) \(refusal.description).", refusal.isTooLarge ? .contentTooLarge : .unprocessableContent)
            case .quotaReached(let reached): return refused("\(shown) was not added: \(reached.description)")
            case .ready(let found): prepared = found
            }
            // Where it goes is decided first (a photo with nowhere to go stores nothing); then its
            // blobs, before a pin is made for it (a store that cannot take them leaves no pin).
            let pin: Pin, made: Bool, placed: OwnPhoto.Placement
            switch try place(&prepared, to: destination, holder: holder, context: context) {
            case .refused(let message, let later): return refused("\(shown) \(message)", later: later)
            case .placed(let found, let new, let how): (pin, made, placed) = (found, new, how)
            }
            let onMap: Bool = if case .map = destination { true } else { false }
            let estimated = placed == .estimated ? " (its place estimated from your photos taken minutes apart)" : ""
            // A pin made for this photo does not stay without it (unless another photo joined it
            // meanwhile); a failure to remove it is the first failure's.
            func unmake() { if made { _ = try? pins.delete(pin.id, of: holder, unlessItHasOwnPhotos: true) } }
            let stored: OwnPhotoStore.Added
            do {
                stored = try ownPhotos.store(prepared, fileName: shown, pinID: pin.id, holder: holder, by: context.user.id, placed: placed)
            } catch {
                unmake()
                throw error
            }
            if case .added = stored {} else { unmake() }
            switch stored {
            case .added(let id):
                // On the album page its figure, for the page's grid; on the map its pin.
                let figure = onMap ? nil : try ownPhotos.photo(id, holder: holder).map {
                    String(decoding: OwnPhotoPages.figure($0, csrf: context.csrfToken, mayRemove: mayRemove($0, context)).bytes, as: UTF8.self)
                }
                var json = OwnPhotoAdded(id: id, added: true, message: onMap ? "\(shown) added to \(pin.title)\(estimated)." : "\(shown) added.", figure: figure)
                if onMap { (json.pin, json.newPin) = (PinJSON(pin), made) }
                return Outcome(json: json, status: .created)
            case .alreadyHere(let id):
                var json = OwnPhotoAdded(id: id, added: false, message: onMap ? "\(shown) is already at \(pin.title)." : "\(shown) is already in this album.", figure: nil)
                if onMap { (json.pin, json.newPin) = (PinJSON(pin), false) }
                return Outcome(json: json, status: .ok)
            case .noPin:
                return refused("\(shown) was not added: its pin was deleted meanwhile; add it again.", .conflict)
            case .notAMember:
                return refused("\(shown) was not added: you are no longer an editor of this map.", .forbidden)
            case .refused(let refusal): return refused("\(shown) \(refusal.description).")
            case .quotaReached(let reached): return refused("\(shown) was not added: \(reached.description)")
            }
        } catch let reached as QuotaReached {
            return refused("\(shown) was not added: \(reached.description)")
        } catch let busy as PhotoProcessing.Busy {
            return refused("\(shown) was not added: \(busy.description).", .serviceUnavailable)
        } catch let error as PhotoStoreError where error.unavailable {
            // Troubleshooting: own photo not stored
            ownPhotoLogger.warning("own photo not stored: \(error)")
            return refused("\(shown) was not added: the photo store cannot take it right now; try it again in a moment.", .serviceUnavailable)
        }
    }

    enum Placement {
        case placed(Pin, new: Bool, OwnPhoto.Placement)
        /// What follows the file's name; `later`: it may find its place once the rest of its batch is in.
        case refused(String, later: Bool)
    }

    /// Minutes apart a photo without a position may be from the person's photo it is put beside.
    static let estimateMinutes = 10

    /// The pin a prepared photo goes to. On the map: where its GPS says, else (when asked) beside
    /// the person's photo with a position taken nearest in time within `estimateMinutes`, else
    /// where it was dropped; there, the map's nearest pin within `pinRadius` or a new one, one
    /// placement at a time per map (the place's name looked up first: the index's first use loads it).
    private func place(_ prepared: inout OwnPhotoStore.Prepared, to destination: Destination, holder: Int64,
                       context: SignedInContext) throws -> Placement {
        let dropped: (lat: Double, lon: Double)?, estimate: Bool
        switch destination {
        case .pin(let pin):
            try ownPhotos.putBlobs(&prepared)
            return .placed(pin, new: false, .person)
        case .map(let point, let wanted): (dropped, estimate) = (point, wanted)
        case .anotherMap: return .refused("was not added: " + Self.anotherMap, later: false)
        }
        let tags = prepared.versions.tags
        let point: (lat: Double, lon: Double, placed: OwnPhoto.Placement)
        if let lat = tags.latitude, let lon = tags.longitude {
            point = (lat, lon, .file)
        } else if estimate, let taken = tags.takenLocal,
                  let beside = try ownPhotos.pinBeside(holder: holder, person: context.user.id, takenLocal: taken, offset: tags.offsetMinutes,
                                                       within: Self.estimateMinutes),
                  let pin = try pins.pin(beside, of: holder) {
            try ownPhotos.putBlobs(&prepared)
            return .placed(pin, new: false, .estimated)
        } else if let dropped {
            point = (dropped.lat, dropped.lon, .person)
        } else if estimate {
            return .refused(tags.takenLocal == nil
                ? "has no position and no time in it: drop it on the map where it was taken, or add it from the album of a pin."
                : "has no position in it, and none of your photos with one was taken within \(Self.estimateMinutes) minutes of it: drop it on the map where it was taken, or add it from the album of a pin.",
                later: tags.takenLocal != nil)
        } else {
            return .refused("has no position in it: drop it on the map where it was taken, or add it from the album of a pin.", later: false)
        }
        let name = places().nearest(lat: point.lat, lon: point.lon).map { $0.place.label }
        try ownPhotos.putBlobs(&prepared)
        return try placement.withLock(holder: holder) {
            if let near = try ownPhotos.nearestPin(holder: holder, lat: point.lat, lon: point.lon, within: pinRadius),
               let pin = try pins.pin(near, of: holder) {
                return .placed(pin, new: false, point.placed)
            }
            return .placed(try pins.drop(for: holder, by: context.user.id, lat: point.lat, lon: point.lon, placeName: name), new: true, point.placed)
        }
    }

    /// Who may remove a photo: who added it, and the map's owners.
    func mayRemove(_ photo: OwnPhoto, _ context: SignedInContext) -> Bool {
        photo.addedBy == context.user.id || context.map.role == .owner
    }

    /// Who may have the original (with its location): who added it, and the map's owners.
    func mayDownloadOriginal(_ photo: OwnPhoto, _ context: SignedInContext) -> Bool {
        photo.addedBy == context.user.id || context.map.role == .owner
    }

    /// GET /own-photos/:id: the display version; ?w=256|512 a thumbnail; ?original=1 the file as
    /// it came (its location in it), only to who may download it, as an attachment.
    func bytes(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request), let photo = try ownPhotos.photo(id, holder: context.map.forReading) else {
            throw HTTPError.notFound
        }
        let wantsOriginal = context.request.queryValue("original") == "1"
        if wantsOriginal && !mayDownloadOriginal(photo, context) {
            throw HTTPError(.forbidden, "Only who added this photo and the map's owners may download its original. The photo itself is shown to you without its location.")
        }
        let served = photo.served(original: wantsOriginal, holder: context.map.forReading)
        guard var response = try WebPipeline.photoResponse(context.request, served, width: wantsOriginal ? nil : WebPipeline.photoWidth(context.request),
                                                           store: ownPhotos.store, mayBlock: true) else { throw HTTPError.notFound }
        if wantsOriginal {
            // Never shown inline: whatever else the bytes might also be read as, they are a download.
            // The name's stem when it is plain (letters, digits, space, . _ - ( )), and always the
            // extension of the format the bytes are: never a type the uploader chose (.html, .hta).
            let parts = photo.fileName.split(separator: ".", omittingEmptySubsequences: false)
            let stem = String((parts.count > 1 ? parts.dropLast().joined(separator: ".") : photo.fileName).prefix(100))
            let plain = !stem.isEmpty && stem.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || " _-()".unicodeScalars.contains($0)) }
            let name = (plain ? stem : "photo") + "." + photo.format.fileExtension
            response.headers.set("Content-Disposition", "attachment; filename=\"\(name)\"")
            // Not kept in the browser's cache (a shared computer's): it holds where the photo was taken.
            response.headers.set("Cache-Control", "private, no-store")
        }
        return response
    }

    /// GET /own-photos/:id/view: the photo's page.
    func view(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request),
              let (photos, pinTitle) = try ownPhotos.siblings(of: id, holder: context.map.forReading),
              let index = photos.firstIndex(where: { $0.id == id }) else { throw HTTPError.notFound }
        let photo = photos[index]
        return .page(OwnPhotoPages.viewer(photo, pinTitle: pinTitle, previous: index > 0 ? photos[index - 1].id : nil,
                                          next: index + 1 < photos.count ? photos[index + 1].id : nil, index: index, count: photos.count,
                                          mayDownload: mayDownloadOriginal(photo, context), mayRemove: mayRemove(photo, context),
                                          chrome: context.chrome))
    }

    func remove(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        _ = try removing(id, context)
        return HTTPResponse(status: .noContent)
    }

    func removeForm(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let pinID = try removing(id, context)
        return .redirect(to: "/pins/\(pinID)#own-photos", flash: "Photo removed.", secure: secure)
    }

    private func removing(_ id: Int64, _ context: SignedInContext) throws -> Int64 {
        let holder = context.map.forReading
        guard let photo = try ownPhotos.photo(id, holder: holder) else { throw HTTPError.notFound }
        // Who added it may remove it whatever their role now (a member made a viewer later too).
        guard mayRemove(photo, context) else {
            throw HTTPError(.forbidden, "Only who added this photo and the map's owners may remove it. Nothing was changed.")
        }
        guard let pinID = try ownPhotos.remove(id, holder: holder, by: context.user.id, mayRemoveAny: context.map.role == .owner) else {
            throw HTTPError.notFound
        }
        return pinID
    }
}

extension ImageRefusal {
    var isTooLarge: Bool { if case .tooManyPixels = self { true } else { false } }
}
