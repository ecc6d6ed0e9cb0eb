import Foundation

/// A dropped pin and the state of its album.
public struct Pin: Sendable, Codable, Equatable {
    public let id: Int64
    public let lat: Double
    public let lon: Double
    public let placeName: String?
    /// Where its album stands (docs/architecture.md, Albums).
    public let status: PinStatus
    /// Photos downloaded and kept.
    public let photoCount: Int
    public let createdAt: Date
    /// The years its album's photos were taken in (nil: any time); the exports name it.
    public var era: Era? = nil

    /// Pins as JSON keep the fields they always had (the map page's data).
    private enum CodingKeys: String, CodingKey { case id, lat, lon, placeName, status, photoCount, createdAt }

    /// "Kyoto, Japan", or the coordinates when no place is near.
    public var title: String { placeName ?? coordinates }
    public var coordinates: String { Self.fourDecimals(lat) + ", " + Self.fourDecimals(lon) }

    /// What "%.4f" prints, without Foundation's formatter (the map list shows 50 of these a page).
    package static func fourDecimals(_ value: Double) -> String {
        guard value.isFinite, abs(value) < 1e12 else { return String(value) }
        // printf rounds the exact binary value: the product's rounding error (from an FMA) decides
        // the cases that sit near a half (135.76815 is just below one, 0.00005 just above).
        let magnitude = abs(value)
        let product = magnitude * 10_000
        let residual = (-product).addingProduct(magnitude, 10_000)
        let floor = product.rounded(.down)
        let beyondHalf = (product - floor) - 0.5  // exact: both differences are representable
        var units = Int(floor)
        if beyondHalf > 0 || (beyondHalf == 0 && (residual > 0 || (residual == 0 && units % 2 == 1))) { units += 1 }
        let whole = units / 10_000, fraction = units % 10_000
        let digits = String(fraction)
        return (value < 0 ? "-" : "") + String(whole) + "." + String(repeating: "0", count: 4 - digits.count) + digits
    }
}

/// Where a person's map was left: centre and zoom.
public struct MapRegion: Sendable, Codable, Equatable {
    public var lat: Double
    public var lon: Double
    public var zoom: Double

    public init(lat: Double, lon: Double, zoom: Double) {
        self.lat = lat
        self.lon = lon
        self.zoom = zoom
    }

    /// A new person sees the whole world, centred a little north so the continents fill the view.
    public static let world = MapRegion(lat: 25, lon: 10, zoom: 2)

    public var isValid: Bool {
        lat.isFinite && lon.isFinite && zoom.isFinite && (-85.06...85.06).contains(lat) && (-180...180).contains(lon) && (0...18).contains(zoom)
    }
}
