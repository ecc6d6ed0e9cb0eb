import Foundation
import HTTPServer
import AlbumWing
import Domain

/// /import: a GeoJSON, GPX, KML or KMZ file in, a preview kept in the database, pins out on Confirm.
/// Each pin's album is queued as a dropped pin's is (PinImportStore.confirm), so imports wait in
/// the same fair queue and spend the same provider budget.
extension WebPipeline {
    /// The upload's body limit: the file and the form around it. Larger is refused from the
    /// Content-Length alone, before the body is read (HTTPLimits.uploads).
    static let importUpload = HTTPLimits.Upload(
        method: "POST", path: "/import", maxBodyBytes: PinImport.Limits.fileBytes + 64 * 1024,
        refusal: "files of up to \(PinImport.megabytes(PinImport.Limits.fileBytes)) can be imported (GeoJSON, GPX, KML or KMZ); this one is larger")

    mutating func addImportRoutes(_ routes: ImportRoutes) {
        signedIn("GET", "/import", routes.importPage)
        signedIn("POST", "/import", routes.upload)
        signedIn("GET", "/import/:id", routes.preview)
        signedIn("POST", "/import/:id/confirm", routes.confirm)
        signedIn("POST", "/import/:id/cancel", routes.cancel)
    }

    /// The map holder a pending import `id` goes onto, once the person's role allows it (a viewer:
    /// 403 for a preview they could see, 404 for any other id).
    static func importing(_ id: Int64, _ context: SignedInContext, _ imports: PinImportStore) throws -> Int64 {
        try context.map.forChanging { try imports.pending(id, of: $0, by: context.user.id) != nil }
    }

    /// The person importing, once their role on the map allows it: pins count against them.
    static func importer(_ context: SignedInContext) throws -> Int64 {
        _ = try context.map.forChanging()
        return context.user.id
    }
}

/// Importing pins from a file: one handler per route (the table is `WebPipeline.addImportRoutes`).
struct ImportRoutes: Sendable {
    let imports: PinImportStore
    let places: @Sendable () -> PlaceIndex
    let secure: Bool

    func importPage(_ context: SignedInContext) throws -> HTTPResponse {
        .page(ImportPages.form(room: try imports.room(of: try WebPipeline.importer(context)), chrome: context.chrome))
    }

    func upload(_ context: SignedInContext) throws -> HTTPResponse {
        func refuse(_ status: HTTPStatus, _ problem: ImportPages.Problem) throws -> HTTPResponse {
            .page(ImportPages.form(room: try imports.room(of: try WebPipeline.importer(context)), problem: problem, chrome: context.chrome), status: status)
        }
        let parsed: Result<MultipartForm?, MultipartForm.Failure>
        do throws(MultipartForm.Failure) { parsed = .success(try MultipartForm(context.request)) } catch { parsed = .failure(error) }
        let form: MultipartForm
        switch parsed {
        case .failure(let failure):
            return try refuse(.badRequest, .init(message: "The upload could not be read: \(failure.description)."))
        case .success(nil):
            return try refuse(.unsupportedMediaType, .init(message: "The form must be sent as multipart/form-data, as the form on this page sends it."))
        case .success(let found?):
            form = found
        }
        guard let part = form.part("file"), part.filename != nil else {
            return try refuse(.unprocessableContent, .init(message: "No file was chosen."))
        }
        let read: Result<PinImport, PinImport.Refusal>
        do throws(PinImport.Refusal) { read = .success(try PinImport.read(form.bytes(part))) } catch { read = .failure(error) }
        let file: PinImport
        switch read {
        case .failure(let refusal):
            return try refuse(refusal.kind == .tooLarge ? .contentTooLarge : .unprocessableContent, .init(message: refusal.description))
        case .success(let found):
            file = found
        }
        guard !file.points.isEmpty else {
            let what = file.refused.isEmpty ? "The file holds no points." : "None of its points can become a pin:"
            return try refuse(.unprocessableContent, .init(message: what + (file.notes.isEmpty ? "" : " " + file.notes.joined(separator: " ")),
                                                         refused: file.refused))
        }
        let room = try imports.room(of: try WebPipeline.importer(context))
        guard file.points.count <= room.left else {
            return try refuse(.unprocessableContent, .init(message: "The file has \(file.points.count) points, and you have room for \(room.left) more pins (your limit is \(room.limit)). Delete some pins, or import a smaller file."))
        }
        let name = PinImport.cleanName(part.filename.map { String($0.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last ?? "") }) ?? "the file"
        let id = try imports.save(file, fileName: name, for: try context.map.forChanging(), by: context.user.id)
        return .redirect(to: "/import/\(id)")
    }

    func preview(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request), let pending = try imports.pending(id, of: try WebPipeline.importing(id, context, imports), by: context.user.id) else {
            throw HTTPError(.notFound, "This import is not here any more: it was confirmed, cancelled or replaced, or it expired. Upload the file again.")
        }
        return .page(ImportPages.preview(pending, room: try imports.room(of: try WebPipeline.importer(context)), chrome: context.chrome))
    }

    func confirm(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request) else { throw HTTPError.notFound }
        // The place index only for points without a name (its first use loads it).
        switch try imports.confirm(id, of: try WebPipeline.importing(id, context, imports), by: context.user.id, name: { places().nearest(lat: $0.lat, lon: $0.lon)?.place.label }) {
        case .notFound:
            throw HTTPError(.notFound, "This import is not here any more: it was confirmed, cancelled or replaced, or it expired. Upload the file again.")
        case .quotaReached(let reached):
            throw HTTPError(.unprocessableContent, reached.description)
        case .created(let pinIDs, let fileName):
            let count = pinIDs.count == 1 ? "1 pin" : "\(pinIDs.count) pins"
            return .redirect(to: "/", flash: "Imported \(count) from \(fileName). Their albums are being collected.", secure: secure)
        }
    }

    func cancel(_ context: SignedInContext) throws -> HTTPResponse {
        guard let id = WebPipeline.pinID(context.request), try imports.cancel(id, of: try WebPipeline.importing(id, context, imports), by: context.user.id) else { throw HTTPError.notFound }
        return .redirect(to: "/import", flash: "Import cancelled: nothing was added.", secure: secure)
    }
}
