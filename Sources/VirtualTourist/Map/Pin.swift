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

    /// "Kyoto, Japan", or the coordinates when no place is near.
    public var title: String { placeName ?? coordinates }
    public var coordinates: String { String(format: "%.4f, %.4f", lat, lon) }
}

/// Where a person's map was left: centre and zoom.
public struct MapRegion: Sendable, Codable, Equatable {
    public var lat: Double
    public var lon: Double
    public var zoom: Double

    /// A new person sees the whole world, centred a little north so the continents fill the view.
    public static let world = MapRegion(lat: 25, lon: 10, zoom: 2)

    public var isValid: Bool {
        lat.isFinite && lon.isFinite && zoom.isFinite && (-85.06...85.06).contains(lat) && (-180...180).contains(lon) && (0...18).contains(zoom)
    }
}
