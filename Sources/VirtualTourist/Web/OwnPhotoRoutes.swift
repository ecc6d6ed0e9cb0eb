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
                          refusal: "photos of up to \(maxBytes / (1024 * 1024)) MB can be added (the form without JavaScript sends all its files at once, together at most that)")
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
}

/// One placement at a time per map on this instance: two photos of one new place arriving
/// together make one pin, not two (the second finds the first's); other maps' placements go on.
/// Instances sharing a database may still make two, a few metres apart, which a person merges by
/// deleting one.
final class PlacementLock: @unchecked Sendable {
    // @unchecked: the set is only touched inside the Waitable, which locks it.
    private let placing = Waitable(Set<Int64>())

    func withLock<T>(holder: Int64, _ body: () throws -> T) rethrows -> T {
        placing.wait { state -> Bool? in state.insert(holder).inserted ? true : nil }
        defer { placing.change(wake: .all) { _ = $0.remove(holder) } }
        return try body()
    }
}

struct OwnPhotoRoutes: Sendable {
    let ownPhotos: OwnPhotoStore
    let albums: AlbumStore
    let pins: PinStore
    let places: @Sendable () -> PlaceIndex
    let maxFileBytes: Int
    /// A photo joins the map's nearest pin within this many metres, else makes a pin of its own.
    let pinRadius: Double
    let placement = PlacementLock()
    let secure: Bool

    /// POST /own-photos: the map's "Add photos". Each photo goes where its GPS says (or, without
    /// one, where it was dropped on the map: `lat`, `lon`), to the map's nearest pin within
    /// `pinRadius`, else to a new pin named after the nearest place, whose album then fills with
    /// the world's photos as a dropped pin's does. So a trip's batch makes a handful of pins.
    func addToMap(_ context: SignedInContext) throws -> HTTPResponse {
        let holder = try context.map.forChanging()
        // The map the page was drawn for: a batch still arriving after a switch of maps in another
        // tab must not land on the other map (its photos' places would be shown to its members).
        let current = context.map.sharedID.map(String.init) ?? "own"
        let type = context.request.headers["Content-Type"]?.lowercased() ?? ""
        let meant = type.hasPrefix("multipart/form-data") ? (try? MultipartForm(context.request))?.value("map") : context.request.queryValue("map")
        if let meant, meant != current {
            let message = "These photos were meant for another map: you switched maps since the page was opened. Open that map and add them again."
            if type.hasPrefix("multipart/form-data") { return .redirect(to: "/", flash: message, secure: secure) }
            return .jsonValue(OwnPhotoAdded(id: nil, added: false, message: message, figure: nil), status: .conflict)
        }
        let dropped: (lat: Double, lon: Double)? = {
            guard let lat = InputNumber.decimal(context.request.queryValue("lat"), in: -90...90),
                  let lon = InputNumber.decimal(context.request.queryValue("lon"), in: -180...180) else { return nil }
            return (lat, lon)
        }()
        var files: [(name: String, bytes: [UInt8])] = []
        if type.hasPrefix("multipart/form-data") {
            let form: MultipartForm?
            do throws(MultipartForm.Failure) { form = try MultipartForm(context.request) } catch {
                return .redirect(to: "/", flash: "The photos could not be read: \(error.description).", secure: secure)
            }
            files = (form?.parts ?? []).filter { $0.name == "file" && $0.filename.map { !$0.isEmpty } == true }.map { ($0.filename ?? "photo", Array($0.body)) }
            guard !files.isEmpty else { return .redirect(to: "/", flash: "No photo was chosen.", secure: secure) }
        } else {
            files = [(context.request.headers["X-File-Name"].flatMap { $0.removingPercentEncoding } ?? "photo", Array(context.request.body))]
        }
        var outcomes: [Outcome] = []
        for file in files {
            outcomes.append(try placeOne(file.bytes, name: file.name, dropped: dropped, holder: holder, context: context))
        }
        if type.hasPrefix("multipart/form-data") {
            let added = outcomes.filter { $0.json.added }.count
            let refusals = outcomes.filter { !$0.json.added }.map(\.json.message)
            let summary = added == 1 ? "1 photo added to the map." : "\(added) photos added to the map."
            let shown = refusals.prefix(4) + (refusals.count > 4 ? ["\(refusals.count - 4) more were not added."] : [])
            return .redirect(to: "/", flash: ([summary] + shown).map { String($0.prefix(300)) }.joined(separator: " "), secure: secure)
        }
        let outcome = outcomes[0]
        var response = HTTPResponse.jsonValue(outcome.json, status: outcome.status)
        if outcome.status == .serviceUnavailable { response.waitFor(.seconds(2)) }
        return response
    }

    private func placeOne(_ bytes: [UInt8], name: String, dropped: (lat: Double, lon: Double)?, holder: Int64,
                          context: SignedInContext) throws -> Outcome {
        let shown = OwnPhotoStore.cleanName(name)
        func refused(_ message: String, _ status: HTTPStatus) -> Outcome {
            Outcome(json: OwnPhotoAdded(id: nil, added: false, message: message, figure: nil), status: status)
        }
        guard !bytes.isEmpty else { return refused("\(shown) is empty.", .unprocessableContent) }
        guard bytes.count <= maxFileBytes else {
            return refused("\(shown) is larger than \(maxFileBytes / (1024 * 1024)) MB, the most a photo may be.", .contentTooLarge)
        }
        do {
            let prepared: OwnPhotoStore.Prepared
            switch try ownPhotos.prepare(bytes, by: context.user.id) {
            case .refused(let refusal): return refused("\(shown) \(refusal.description).", refusal.isTooLarge ? .contentTooLarge : .unprocessableContent)
            case .quotaReached(let reached): return refused("\(shown) was not added: \(reached.description)", .unprocessableContent)
            case .ready(let found): prepared = found
            }
            let tags = prepared.versions.tags
            let point: (lat: Double, lon: Double, placed: OwnPhoto.Placement)
            if let lat = tags.latitude, let lon = tags.longitude {
                point = (lat, lon, .file)
            } else if let dropped {
                point = (dropped.lat, dropped.lon, .person)
            } else {
                return refused("\(shown) has no position in it: drop it on the map where it was taken, or add it from the album of a pin.", .unprocessableContent)
            }
            // The nearest pin within the radius, else a new one: one placement at a time per map.
            // The place's name is looked up first (the index's first use loads it).
            let name = places().nearest(lat: point.lat, lon: point.lon).map { $0.place.label }
            let (pin, made): (Pin, Bool) = try placement.withLock(holder: holder) {
                if let near = try ownPhotos.nearestPin(holder: holder, lat: point.lat, lon: point.lon, within: pinRadius),
                   let album = try albums.album(pinID: near, userID: holder) {
                    return (album.pin, false)
                }
                return (try pins.drop(for: holder, by: context.user.id, lat: point.lat, lon: point.lon, placeName: name), true)
            }
            switch try ownPhotos.store(prepared, fileName: shown, pinID: pin.id, holder: holder, by: context.user.id, placed: point.placed) {
            case .added(let id):
                return Outcome(json: OwnPhotoAdded(id: id, added: true, message: "\(shown) added to \(pin.title).", figure: nil,
                                                   pin: PinJSON(pin), newPin: made), status: .created)
            case .alreadyHere(let id):
                return Outcome(json: OwnPhotoAdded(id: id, added: false, message: "\(shown) is already at \(pin.title).", figure: nil,
                                                   pin: PinJSON(pin), newPin: false), status: .ok)
            case .noPin: return refused("\(shown) was not added: its pin was deleted meanwhile; add it again.", .conflict)
            case .refused(let refusal): return refused("\(shown) \(refusal.description).", .unprocessableContent)
            case .quotaReached(let reached): return refused("\(shown) was not added: \(reached.description)", .unprocessableContent)
            }
        } catch let reached as QuotaReached {
            return refused("\(shown) was not added: \(reached.description)", .unprocessableContent)
        } catch let busy as PhotoProcessing.Busy {
            return refused("\(shown) was not added: \(busy.description).", .serviceUnavailable)
        } catch let error as PhotoStoreError where error.unavailable {
            // Troubleshooting: own photo not stored
            ownPhotoLogger.warning("own photo not stored: \(error)")
            return refused("\(shown) was not added: the photo store cannot take it right now; try it again in a moment.", .serviceUnavailable)
        }
    }

    /// POST /pins/:id/own-photos. The script sends a file as the body (its name in X-File-Name,
    /// percent-encoded) and gets JSON; the plain form sends multipart/form-data with its files
    /// and gets the album back with a message naming each file that was not added.
    func add(_ context: SignedInContext) throws -> HTTPResponse {
        guard let pinID = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        let holder = try context.map.forChanging { try albums.album(pinID: pinID, userID: $0) != nil }
        guard try albums.album(pinID: pinID, userID: holder) != nil else { throw HTTPError.notFound }
        let type = context.request.headers["Content-Type"]?.lowercased() ?? ""
        if type.hasPrefix("multipart/form-data") {
            return try addForm(context, pinID: pinID, holder: holder)
        }
        let name = context.request.headers["X-File-Name"].flatMap { $0.removingPercentEncoding } ?? "photo"
        let outcome = try addOne(Array(context.request.body), name: name, pinID: pinID, holder: holder, person: context.user.id, context: context)
        var response = HTTPResponse.jsonValue(outcome.json, status: outcome.status)
        // The script sends a file refused for a full line again after this.
        if outcome.status == .serviceUnavailable { response.waitFor(.seconds(2)) }
        return response
    }

    struct Outcome {
        let json: OwnPhotoAdded
        let status: HTTPStatus
    }

    private func addOne(_ bytes: [UInt8], name: String, pinID: Int64, holder: Int64, person: Int64, context: SignedInContext) throws -> Outcome {
        let shown = OwnPhotoStore.cleanName(name)
        guard !bytes.isEmpty else {
            return Outcome(json: OwnPhotoAdded(id: nil, added: false, message: "\(shown) is empty.", figure: nil), status: .unprocessableContent)
        }
        guard bytes.count <= maxFileBytes else {
            return Outcome(json: OwnPhotoAdded(id: nil, added: false, message: "\(shown) is larger than \(maxFileBytes / (1024 * 1024)) MB, the most a photo may be.", figure: nil),
                           status: .contentTooLarge)
        }
        let added: OwnPhotoStore.Added
        do {
            added = try ownPhotos.add(bytes, fileName: shown, pinID: pinID, holder: holder, by: person)
        } catch let busy as PhotoProcessing.Busy {
            return Outcome(json: OwnPhotoAdded(id: nil, added: false, message: "\(shown) was not added: \(busy.description).", figure: nil),
                           status: .serviceUnavailable)
        } catch let error as PhotoStoreError where error.unavailable {
            // Troubleshooting: own photo not stored
            ownPhotoLogger.warning("own photo not stored: \(error)")
            return Outcome(json: OwnPhotoAdded(id: nil, added: false, message: "\(shown) was not added: the photo store cannot take it right now; try it again in a moment.", figure: nil),
                           status: .serviceUnavailable)
        }
        switch added {
        case .added(let id), .alreadyHere(let id):
            let photo = try ownPhotos.photo(id, holder: holder)
            let figure = photo.map { OwnPhotoPages.figure($0, csrf: context.csrfToken, mayRemove: mayRemove($0, context)).bytes }.map { String(decoding: $0, as: UTF8.self) }
            if case .alreadyHere = added {
                return Outcome(json: OwnPhotoAdded(id: id, added: false, message: "\(shown) is already in this album.", figure: nil), status: .ok)
            }
            return Outcome(json: OwnPhotoAdded(id: id, added: true, message: "\(shown) added.", figure: figure), status: .created)
        case .refused(let refusal):
            return Outcome(json: OwnPhotoAdded(id: nil, added: false, message: "\(shown) \(refusal.description).", figure: nil),
                           status: refusal.isTooLarge ? .contentTooLarge : .unprocessableContent)
        case .quotaReached(let reached):
            return Outcome(json: OwnPhotoAdded(id: nil, added: false, message: "\(shown) was not added: \(reached.description)", figure: nil),
                           status: .unprocessableContent)
        case .noPin:
            throw HTTPError.notFound
        }
    }

    private func addForm(_ context: SignedInContext, pinID: Int64, holder: Int64) throws -> HTTPResponse {
        let form: MultipartForm
        do throws(MultipartForm.Failure) {
            guard let parsed = try MultipartForm(context.request) else { throw MultipartForm.Failure(description: "not a form") }
            form = parsed
        } catch {
            return .redirect(to: "/pins/\(pinID)", flash: "The photos could not be read: \(error.description).", secure: secure)
        }
        let files = form.parts.filter { $0.name == "file" && $0.filename.map { !$0.isEmpty } == true }
        guard !files.isEmpty else {
            return .redirect(to: "/pins/\(pinID)", flash: "No photo was chosen.", secure: secure)
        }
        var added = 0, refusals: [String] = []
        for file in files {
            let outcome = try addOne(Array(file.body), name: file.filename ?? "photo", pinID: pinID, holder: holder, person: context.user.id, context: context)
            if outcome.json.added { added += 1 } else { refusals.append(outcome.json.message) }
        }
        let summary = added == 1 ? "1 photo added." : "\(added) photos added."
        // A flash is a cookie (4 KB at most in browsers): the first few refusals, and how many more.
        let shown = refusals.prefix(4) + (refusals.count > 4 ? ["\(refusals.count - 4) more were not added."] : [])
        return .redirect(to: "/pins/\(pinID)#own-photos", flash: ([summary] + shown).map { String($0.prefix(300)) }.joined(separator: " "), secure: secure)
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
        }
        return response
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
