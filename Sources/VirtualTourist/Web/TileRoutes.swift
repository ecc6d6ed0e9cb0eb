import Foundation
import HTTPServer

/// /tiles/{z}/{x}/{y} and /tiles.json: the map's tiles from our own origin, whatever feeds them
/// (docs/architecture.md, "Street-level maps"). Archive tiles are public like the basemap cells:
/// the same for everyone, local, and no session lookup on the map's busiest route. Proxied tiles
/// need a signed-in person: otherwise anyone could make the server fetch any of 4^19 tiles from
/// the upstream in its name and fill the cache.
extension WebPipeline {
    mutating func addTileRoutes(source: (any TileSource)?) {
        plain("/tiles.json") { _ in
            guard let source else { throw HTTPError.notFound }
            var response = HTTPResponse.json(String(decoding: try JSONEncoder().encode(source.info), as: UTF8.self))
            response.headers.set("Cache-Control", "no-cache")
            return response
        }
        let serve: @Sendable (HTTPRequest) throws -> HTTPResponse = { request in
            guard let source, let (z, x, y) = Self.tileAddress(request.parameters) else { return TileSources.notFound() }
            return try source.response(z: z, x: x, y: y, request: request)
        }
        if source?.needsSignIn == true {
            signedIn("GET", "/tiles/:z/:x/:y") { context in try serve(context.request) }
        } else {
            plain("/tiles/:z/:x/:y", serve)
        }
    }

    /// Digits only, zoom 0–26, x and y inside the zoom's grid.
    static func tileAddress(_ p: [String: String]) -> (Int, Int, Int)? {
        func number(_ s: String?) -> Int? {
            guard let s, !s.isEmpty, s.count <= 9, s.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
            return Int(s)
        }
        guard let z = number(p["z"]), z <= PMTilesTileID.maxZoom, let x = number(p["x"]), let y = number(p["y"]),
              x < 1 << z, y < 1 << z else { return nil }
        return (z, x, y)
    }
}
