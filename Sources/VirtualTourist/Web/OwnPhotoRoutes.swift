import Foundation
import HTTPServer
import AlbumWing
import Domain
import Imaging
import Log

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

    mutating func addOwnPhotoRoutes(_ routes: OwnPhotoRoutes) {
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
}

struct OwnPhotoRoutes: Sendable {
    let ownPhotos: OwnPhotoStore
    let albums: AlbumStore
    let maxFileBytes: Int
    let secure: Bool

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
