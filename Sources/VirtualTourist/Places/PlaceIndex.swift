import Foundation
import Zlib
import Synchronization

/// A populated place from GeoNames (population ≥ 5,000; Public/geo/places.tsv.gz, made by
/// script/tools/convert-geo.py).
public struct Place: Sendable, Codable, Equatable {
    public let name: String
    public let country: String
    public let countryCode: String
    public let lat: Double
    public let lon: Double
    public let population: Int
    /// The capital of its country (the search puts capitals before other cities).
    public var capital = false

    /// "Kyoto, Japan".
    public var label: String { country.isEmpty ? name : "\(name), \(country)" }
}

/// Offline place search and reverse geocoding, in memory. Search is by prefix of any word of the
/// name, accent- and case-insensitive, largest places first; nearest-place lookups use a grid of
/// one-degree cells.
public final class PlaceIndex: Sendable {
    public let places: [Place]
    /// (folded word-start key, place index), sorted by key: binary search finds every prefix match.
    private let keys: [(key: String, index: Int32)]
    /// One-degree cells: (lat + 90) * 360 + (lon + 180) → place indexes.
    private let cells: [Int: [Int32]]

    public init(places: [Place]) {
        self.places = places
        var keys: [(key: String, index: Int32)] = []
        var cells: [Int: [Int32]] = [:]
        for (i, place) in places.enumerated() {
            let folded = Self.fold(place.name)
            keys.append((folded, Int32(i)))
            // Also from each later word: "york" finds New York, "paulo" finds São Paulo.
            var previous: Character = " "
            for (offset, character) in folded.enumerated() where offset > 0 {
                if (previous == " " || previous == "-") && character != " " {
                    keys.append((String(folded.dropFirst(offset)), Int32(i)))
                }
                previous = character
            }
            cells[Self.cell(place.lat, place.lon), default: []].append(Int32(i))
        }
        keys.sort { $0.key < $1.key }
        self.keys = keys
        self.cells = cells
    }

    /// Loads a places file: gzip-compressed TSV (name, lat, lon, country code, country, population).
    public convenience init(contentsOf path: String) throws {
        let compressed = try Data(contentsOf: URL(fileURLWithPath: path))
        guard let bytes = Gzip.decompress(Array(compressed), limit: 64 * 1024 * 1024) else {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: path])
        }
        let text = String(decoding: bytes, as: UTF8.self)
        var places: [Place] = []
        places.reserveCapacity(70_000)
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let f = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard f.count >= 6, let lat = Double(f[1]), let lon = Double(f[2]), let population = Int(f[5]) else { continue }
            places.append(Place(name: String(f[0]), country: String(f[4]), countryCode: String(f[3]),
                                lat: lat, lon: lon, population: population, capital: f.count > 6 && f[6] == "1"))
        }
        self.init(places: places)
    }

    private static let loaded = Mutex<[String: PlaceIndex]>([:])

    /// One index per file for the whole process (tests start many apps).
    public static func shared(path: String) -> PlaceIndex {
        loaded.withLock { cache in
            if let index = cache[path] { return index }
            let index = (try? PlaceIndex(contentsOf: path)) ?? PlaceIndex(places: [])
            cache[path] = index
            return index
        }
    }

    /// English names of cities GeoNames lists under their local name (the places file has no
    /// alternate names): without them "Cologne" found only a village in Italy and "Seville" two
    /// small towns in Ohio and Australia. Folded English name → the name in the file.
    static let englishNames: [String: String] = [
        "cologne": "Köln", "seville": "Sevilla", "hanover": "Hannover", "brunswick": "Braunschweig",
        "saragossa": "Zaragoza", "marseilles": "Marseille", "lyons": "Lyon", "corunna": "A Coruña",
        "aix-la-chapelle": "Aachen", "ghent": "Gent", "bruges": "Brugge", "louvain": "Leuven",
        "lucerne": "Luzern", "berne": "Bern", "bangalore": "Bengaluru", "calcutta": "Kolkata",
        "madras": "Chennai", "bombay": "Mumbai", "saigon": "Ho Chi Minh City",
    ]

    /// Places whose name (or a word of it, or its English name) starts with `query`: names equal to
    /// the query first ("Paris" before "Parisot"), each group largest first, so "Seville" is the
    /// city of 690,000 before the two towns of 2,000 that share the English name.
    public func search(_ query: String, limit: Int = 8) -> [Place] {
        let folded = Self.fold(query.trimmingCharacters(in: .whitespacesAndNewlines))
        guard !folded.isEmpty else { return [] }
        var matches = prefixMatches(folded)
        var exact = matches.filter { Self.fold(places[Int($0)].name) == folded }
        if folded.count >= 3 {
            for (english, local) in Self.englishNames where english.hasPrefix(folded) {
                let target = Self.fold(local)
                let named = prefixMatches(target).filter { Self.fold(places[Int($0)].name) == target }
                matches.formUnion(named)
                if english == folded { exact.formUnion(named) }
            }
        }
        return matches.sorted { a, b in
            let ea = exact.contains(a), eb = exact.contains(b)
            if ea != eb { return ea }
            // Then capitals, then size.
            let ca = places[Int(a)].capital, cb = places[Int(b)].capital
            if ca != cb { return ca }
            return places[Int(a)].population > places[Int(b)].population
        }.prefix(limit).map { places[Int($0)] }
    }

    /// Indexes of the places with a name, or a word of one, starting with `folded`.
    private func prefixMatches(_ folded: String) -> Set<Int32> {
        var low = 0, high = keys.count
        while low < high {
            let mid = (low + high) / 2
            if keys[mid].key < folded { low = mid + 1 } else { high = mid }
        }
        var matches = Set<Int32>()
        var i = low
        while i < keys.count, keys[i].key.hasPrefix(folded) {
            matches.insert(keys[i].index)
            i += 1
        }
        return matches
    }

    /// The place a point is best named after: near, and preferring larger places a little, so a
    /// pin in a city centre is named after the city rather than a suburb.
    public func nearest(lat: Double, lon: Double, withinKilometres limit: Double = 300) -> (place: Place, kilometres: Double)? {
        var best: (place: Place, kilometres: Double, score: Double)?
        for radius in 0...4 {
            for dlat in -radius...radius {
                for dlon in -radius...radius where max(abs(dlat), abs(dlon)) == radius {
                    for index in cells[Self.cell(lat + Double(dlat), lon + Double(dlon))] ?? [] {
                        let place = places[Int(index)]
                        let km = Self.kilometres(lat, lon, place.lat, place.lon)
                        // A town must be much nearer than a city to win: "near Zürich", not
                        // "near Zürich (Kreis 1)" a few hundred metres away.
                        let weight = log10(Double(max(place.population, 10)))
                        let score = (km + 2) / (weight * weight)
                        if km <= limit, best == nil || score < best!.score { best = (place, km, score) }
                    }
                }
            }
            // Cells further out are at least `radius` degrees (~111 km × radius) away.
            if let best, best.kilometres < Double(radius) * 80 { break }
        }
        return best.map { ($0.place, $0.kilometres) }
    }

    static func fold(_ text: String) -> String {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive, .widthInsensitive], locale: nil)
    }

    private static func cell(_ lat: Double, _ lon: Double) -> Int {
        let la = Int(floor(max(-90, min(89.999, lat)))) + 90
        var lo = Int(floor(lon)) + 180
        lo = ((lo % 360) + 360) % 360
        return la * 360 + lo
    }

    static func kilometres(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let r = 6371.0
        let p1 = lat1 * .pi / 180, p2 = lat2 * .pi / 180
        let dp = p2 - p1, dl = (lon2 - lon1) * .pi / 180
        let a = sin(dp / 2) * sin(dp / 2) + cos(p1) * cos(p2) * sin(dl / 2) * sin(dl / 2)
        return 2 * r * asin(min(1, sqrt(a)))
    }
}
