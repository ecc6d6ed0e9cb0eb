import Foundation
import HTTPServer
import WebText
import Log

/// Where /tiles/{z}/{x}/{y} gets its tiles: a PMTiles archive (TILES_FILE) or a raster tile
/// server behind our caching proxy (TILE_URL). With neither, the map draws only the built-in basemap.
public protocol TileSource: Sendable {
    var info: TileInfo { get }
    /// The tile's response (200, 304 or 404); `request` gives If-None-Match and Accept-Encoding.
    func response(z: Int, x: Int, y: Int, request: HTTPRequest) throws -> HTTPResponse
    /// Only for signed-in people (a source that costs someone else's resources per request).
    var needsSignIn: Bool { get }
}

extension TileSource {
    public var needsSignIn: Bool { false }
}

/// What the map script needs to know before asking for tiles (served as /tiles.json).
public struct TileInfo: Sendable, Codable, Equatable {
    /// mvt, png, jpg, webp or avif.
    public var format: String
    public var minzoom: Int
    public var maxzoom: Int
    /// west, south, east, north in degrees.
    public var bounds: [Double]
    /// Plain text (tags stripped): the page escapes it like any other string.
    public var attribution: String
    /// Pixels of one tile's side; 512 px raster tiles are drawn at half their size per zoom.
    public var tileSize: Int

    public var isVector: Bool { format == "mvt" }
}

enum TileSources {
    static let log = Logger(label: "tiles")

    /// The configured source, or nil for the built-in map. A TILES_FILE that cannot be read is
    /// logged with the reason and the app runs on without it: everything else keeps working.
    static func make(settings: AppSettings) -> (any TileSource)? {
        if let path = settings.tilesFile, !path.isEmpty {
            do {
                let archive = try PMTilesArchive(path: path, directoryCacheEntries: settings.tileDirectoryCacheEntries)
                let source = ArchiveTileSource(archive: archive, fallbackAttribution: settings.tileAttribution)
                log.notice("map tiles from \(path): \(source.info.format), zoom \(source.info.minzoom)–\(source.info.maxzoom)")
                return source
            } catch {
                // Troubleshooting: TILES_FILE X is not used
                log.error("TILES_FILE \(path) is not used: \(error). The map shows the built-in basemap.")
                return nil
            }
        }
        if settings.tileURL != "none" && !settings.tileURL.isEmpty {
            do {
                return try TileProxy(settings: settings)
            } catch {
                // Troubleshooting: TILE_URL X is not used
                log.error("TILE_URL \(settings.tileURL) is not used: \(error). The map shows the built-in basemap.")
                return nil
            }
        }
        return nil
    }

    /// Attribution HTML from archive metadata as text: tags dropped, entities people use decoded.
    static func plainText(_ html: String) -> String { HTMLText.plain(html) }

    /// If-None-Match lists the tag (or is *).
    static func matches(_ request: HTTPRequest, etag: String) -> Bool {
        guard let header = request.headers["If-None-Match"] else { return false }
        return header.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == etag || $0.trimmingCharacters(in: .whitespaces) == "*" }
    }

    static func acceptsGzip(_ request: HTTPRequest) -> Bool {
        guard let header = request.headers["Accept-Encoding"] else { return false }
        // Every tile request passes here: the common "gzip, deflate, br" answers without parsing.
        let lower = header.lowercased()
        guard lower.contains("gzip") else { return false }
        if !lower.contains("q=") { return true }
        return lower.split(separator: ",").contains { part in
            let fields = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            return fields.first == "gzip" && !fields.dropFirst().contains { $0.replacingOccurrences(of: " ", with: "") == "q=0" }
        }
    }

    static func notFound() -> HTTPResponse {
        var response = HTTPResponse(status: .notFound, body: Array("no such tile\n".utf8))
        response.headers.set("Content-Type", "text/plain; charset=utf-8")
        // Absent tiles stay absent for as long as the archive does.
        response.headers.set("Cache-Control", "public, max-age=3600")
        return response
    }
}

/// Tiles straight from a PMTiles archive.
final class ArchiveTileSource: TileSource {
    let archive: PMTilesArchive
    let info: TileInfo
    /// Tiles do not change while the archive does not; its fingerprint is in every ETag, so
    /// replacing the file gives new tags and a day is a safe time to keep them.
    static let cacheControl = "public, max-age=86400"

    init(archive: PMTilesArchive, fallbackAttribution: String) {
        self.archive = archive
        let h = archive.header
        let meta = archive.metadata
        let attribution = (meta["attribution"] as? String).map(TileSources.plainText) ?? ""
        let size = (meta["tileSize"] as? String).flatMap(Int.init) ?? (meta["tileSize"] as? Double).map { Int($0) } ?? (h.tileType == .mvt ? 512 : 256)
        info = TileInfo(format: h.tileType.name, minzoom: h.minZoom, maxzoom: h.maxZoom,
                        bounds: [h.bounds.0, h.bounds.1, h.bounds.2, h.bounds.3],
                        attribution: attribution.isEmpty ? fallbackAttribution : attribution,
                        tileSize: [256, 512].contains(size) ? size : 256)
    }

    func response(z: Int, x: Int, y: Int, request: HTTPRequest) throws -> HTTPResponse {
        guard let tile = try archive.tile(z: z, x: x, y: y) else { return TileSources.notFound() }
        let etag = archive.etagPrefix + String(tile.offset, radix: 36) + "\""
        var response: HTTPResponse
        if TileSources.matches(request, etag: etag) {
            response = HTTPResponse(status: .notModified)
        } else {
            var body = tile.bytes
            response = HTTPResponse(status: .ok)
            if archive.header.tileCompression == .gzip {
                response.headers.set("Vary", "Accept-Encoding")
                if TileSources.acceptsGzip(request) {
                    response.headers.set("Content-Encoding", "gzip")
                } else {
                    guard let plain = Gzip.decompress(body) else { throw PMTilesError.corrupt("tile \(z)/\(x)/\(y) is not valid gzip") }
                    body = plain
                }
            }
            response.body = .bytes(body)
            response.headers.set("Content-Type", archive.header.tileType.contentType)
        }
        response.headers.set("ETag", etag)
        response.headers.set("Cache-Control", Self.cacheControl)
        return response
    }
}
