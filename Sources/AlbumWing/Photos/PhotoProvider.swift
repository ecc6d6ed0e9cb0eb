import Foundation
import HTTPClient
import Domain

/// A photo found near a pin, before it is downloaded.
public struct RemotePhoto: Sendable, Codable, Equatable {
    public let provider: String
    public let remoteID: String
    public let title: String
    public let ownerName: String
    public var license: String
    /// The photo's page at the provider (attribution links here).
    public let pageURL: String?
    /// The image we download for the album (medium size).
    public let imageURL: String
    /// A small square for the picker.
    public let thumbnailURL: String
    /// When it was taken, as the provider says it, at its precision ("1962", "circa 1920s").
    public let dateTaken: String?
    /// The licence deed, from the provider's licence list (LicenseStore.swift); nil when unknown.
    public var licenseURL: String? = nil
    /// The provider's own id for the licence (Flickr's "license" field), resolved to `license` and
    /// `licenseURL` through the provider's licence list; nil when the answer carried none.
    public var licenseCode: String? = nil
    /// The years it can have been taken in (TakenDates.swift); nil when the provider does not know.
    public var takenYears: ClosedRange<Int>? = nil
}

extension Array where Element == RemotePhoto {
    /// Each photo once, where it first appears: an answer may name a photo twice (Flickr's search
    /// is known to repeat photos), and an album holds a photo once (a unique index on the pin and
    /// the provider's id), so a repeat read here would be a placeholder that is never written.
    package func removingRepeats() -> [RemotePhoto] {
        var seen = Set<String>()
        return filter { seen.insert("\($0.provider) \($0.remoteID)").inserted }
    }
}

public struct PhotoSearchPage: Sendable, Equatable {
    public let photos: [RemotePhoto]
    public let page: Int
    /// Pages that can be asked for (already capped by the provider's result limit).
    public let pages: Int
    public let total: Int
}

/// Where album photos come from: Flickr, Wikimedia Commons, or the fixture (docs/architecture.md, Albums).
public protocol PhotoProvider: Sendable {
    var name: String { get }
    /// Origins the browser loads picker thumbnails from (added to the Content-Security-Policy).
    var imageOrigins: [String] { get }
    var photosPerPage: Int { get }
    /// The last page `search` can answer (the service's result window / photosPerPage): the bound
    /// every page number from a request is clamped to before any arithmetic.
    var lastPage: Int { get }
    /// `era`: only photos taken in those years (TakenDate.belongs), as far as the provider can
    /// be asked (docs/providers.md); nil: any time.
    func search(lat: Double, lon: Double, page: Int, era: Era?) throws -> PhotoSearchPage
    /// How many photos the provider holds around a point, for each decade (its first year → count):
    /// the album page's strip. Each call costs provider calls (docs/providers.md), so the answer
    /// is kept per pin (DecadeStore).
    func decadeCounts(lat: Double, lon: Double, decades: [Era]) throws -> [Int: Int]
    /// Images of one album downloaded at once, when the provider asks for restraint.
    var downloadConcurrency: Int? { get }
    /// The call budget its API calls draw from (ProviderBudget.swift).
    var budget: ProviderBudget? { get }
    /// The only hosts images are fetched or shown from (ImageHosts.swift).
    var imageHosts: HostPolicy { get }
    /// Where connections are opened ahead of an album's images, while the search runs.
    var warmUpOrigin: String? { get }
}

extension PhotoProvider {
    public func search(lat: Double, lon: Double, page: Int) throws -> PhotoSearchPage {
        try search(lat: lat, lon: lon, page: page, era: nil)
    }
    public var downloadConcurrency: Int? { nil }
    public var budget: ProviderBudget? { nil }
}

public enum PhotoProviderError: Error, Equatable, CustomStringConvertible {
    case invalidKey
    /// A Flickr error code (stat "fail"), from a JSON or an XML answer.
    case service(code: Int, message: String)
    /// A MediaWiki API error (`error.code` or `errors[0].code`).
    case mediaWiki(code: String, info: String)
    /// The provider named a wait (429 Retry-After, ratelimited, maxlag) or the shared budget is spent.
    case mustWait(seconds: Int, reason: ProviderBudget.WaitReason)
    case unexpectedStatus(Int)
    case malformed(String)
    case transport(String)

    /// For the log and the operator (never the page: see ProviderPhrases).
    public var description: String {
        switch self {
        case .invalidKey: return "invalid Flickr API key"
        case .service(let code, let message): return "the photo service refused the search (\(code): \(message))"
        case .mediaWiki(let code, let info): return "the photo service refused the search (\(code): \(info))"
        case .mustWait(let seconds, let reason): return "the photo service asks for a wait of \(seconds) s (\(reason.rawValue))"
        case .unexpectedStatus(let status): return "the photo service answered HTTP \(status)"
        case .malformed(let detail): return "the photo service sent an answer that could not be read (\(detail))"
        case .transport(let detail): return "the photo service could not be reached (\(detail))"
        }
    }

    /// Worth trying again later (the service or network may recover); a bad key will not.
    public var isTransient: Bool {
        switch failureClass {
        case .wait, .unavailable, .unreadable: return true
        case .invalidKey, .refused: return false
        }
    }
}

/// Flickr's REST API (flickr.photos.search), or anything that speaks it (the fixture).
/// docs/providers.md gives the reason for every parameter.
public struct FlickrProvider: PhotoProvider {
    public let name = "flickr"
    public let apiKey: String
    public let apiURL: String
    public let client: HTTPClient
    /// The shared call budget of this key (nil: calls are not counted, e.g. in unit tests).
    public var budget: ProviderBudget?
    /// Flickr's display guidelines ask for at most 30 photos per page of an app.
    public let photosPerPage = 30
    /// Flickr returns at most 4,000 results for a search, whatever "pages" says.
    package static let resultCap = 4000
    /// The last page inside the 4,000-result window.
    package static func lastPage(perPage: Int) -> Int { max(1, resultCap / perPage) }
    public var lastPage: Int { Self.lastPage(perPage: photosPerPage) }
    /// Flickr's default radius; geo queries allow at most 32 km.
    public let radiusKilometres = 5
    package static let maxRadiusKilometres = 32
    /// The limiting agent every geo search needs (without one Flickr answers only photos added in
    /// the last 12 hours): uploads since 2004-01-01, before Flickr's first, so nothing is excluded.
    /// Not min_taken_date: taken dates are unknown for many photos and older than 2004 for scans.
    package static let minUploadDate = "1072915200"
    /// Most interesting first: a stable, curated order for the first album; New Collection pages on.
    package static let sort = "interestingness-desc"

    public static let defaultAPIURL = "https://api.flickr.com/services/rest/"
    /// Names and deeds of the licences, as flickr.photos.licenses.getInfo gives them (LicenseStore.swift).
    public var licenses: LicenseStore?

    public init(apiKey: String, apiURL: String = FlickrProvider.defaultAPIURL, client: HTTPClient) {
        self.apiKey = apiKey
        self.apiURL = apiURL
        self.client = client
    }

    public var imageOrigins: [String] {
        if apiURL.hasPrefix("https://api.flickr.com") { return ["https://live.staticflickr.com", "https://*.staticflickr.com"] }
        // A Flickr-compatible server (the fixture) serves its images itself.
        return origin(of: apiURL).map { [$0] } ?? []
    }

    /// The query of one search (docs/providers.md lists it with the reason for each parameter).
    package func searchParameters(lat: Double, lon: Double, page: Int, era: Era? = nil, perPage: Int? = nil) -> [(String, String)] {
        // An era: Flickr's taken-date bounds, both included ("a mysql datetime").
        let taken = era.map { [("min_taken_date", "\($0.from)-01-01 00:00:00"), ("max_taken_date", "\($0.to)-12-31 23:59:59")] } ?? []
        return [
            ("method", "flickr.photos.search"), ("api_key", apiKey),
            ("lat", String(format: "%.6f", lat)), ("lon", String(format: "%.6f", lon)),
            ("radius", String(min(radiusKilometres, Self.maxRadiusKilometres))), ("radius_units", "km"),
            ("min_upload_date", Self.minUploadDate), ("sort", Self.sort),
            ("per_page", String(perPage ?? photosPerPage)), ("page", String(min(max(page, 1), Self.lastPage(perPage: photosPerPage)))),
            ("extras", "url_q,url_z,url_m,owner_name,license,date_taken"),
            ("safe_search", "1"), ("content_type", "1"), ("media", "photos"),
            ("format", "json"), ("nojsoncallback", "1"),
        ] + taken
    }

    /// One light search a decade: a page of one photo, for the answer's `total` (which counts
    /// a photo of unknown date by its upload time, as Flickr does: recent decades a little high).
    public func decadeCounts(lat: Double, lon: Double, decades: [Era]) throws -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for decade in decades {
            var components = URLComponents(string: apiURL)
            components?.queryItems = searchParameters(lat: lat, lon: lon, page: 1, era: decade, perPage: 1)
                .map { URLQueryItem(name: $0.0, value: $0.1) }
            guard let url = components?.url?.absoluteString else { throw PhotoProviderError.malformed("bad FLICKR_API_URL") }
            counts[decade.from] = try Self.parse(try ProviderCall(client: client, budget: budget).get(url).body, perPage: 1).total
        }
        return counts
    }

    public func search(lat: Double, lon: Double, page: Int, era: Era?) throws -> PhotoSearchPage {
        var components = URLComponents(string: apiURL)
        components?.queryItems = searchParameters(lat: lat, lon: lon, page: page, era: era).map { URLQueryItem(name: $0.0, value: $0.1) }
        guard let url = components?.url?.absoluteString else { throw PhotoProviderError.malformed("bad FLICKR_API_URL") }
        var page = try Self.parse(try ProviderCall(client: client, budget: budget).get(url).body, perPage: photosPerPage,
                                  asked: min(max(page, 1), Self.lastPage(perPage: photosPerPage)))
        if era != nil {
            // Flickr matches a date it does not know by the upload time it puts there instead, and
            // its answer is not taken on trust: each photo's own date decides.
            page = PhotoSearchPage(photos: page.photos.filter { TakenDate.belongs($0.takenYears, in: era) },
                                   page: page.page, pages: page.pages, total: page.total)
        }
        return licenses.map { $0.credit(page) } ?? page
    }

    /// Reads a photos.search answer. Flickr is loose with types ("150" or 150, "" for 0), so
    /// numbers are read leniently, then into their ranges (the page is the one asked for, never
    /// the answer's; at most `perPage` photos, each once, ids as Flickr's digits); errors may come
    /// as XML even when JSON was asked for.
    package static func parse(_ body: [UInt8], perPage: Int, asked: Int? = nil) throws -> PhotoSearchPage {
        guard let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            if let (code, message) = xmlError(body) {
                if code == 100 { throw PhotoProviderError.invalidKey }
                throw PhotoProviderError.service(code: code, message: message)
            }
            throw PhotoProviderError.malformed("not JSON")
        }
        if (json["stat"] as? String) == "fail" {
            let code = lenientInt(json["code"]) ?? 0
            if code == 100 { throw PhotoProviderError.invalidKey }
            throw PhotoProviderError.service(code: code, message: json["message"] as? String ?? "unknown error")
        }
        guard let photos = json["photos"] as? [String: Any], let list = photos["photo"] as? [[String: Any]] else {
            throw PhotoProviderError.malformed("no photos in the answer")
        }
        let total = min(max(lenientInt(photos["total"]) ?? list.count, 0), Int(Int32.max))
        let pages = min(max(lenientInt(photos["pages"]) ?? 1, 0), lastPage(perPage: perPage))
        let page = asked ?? min(max(lenientInt(photos["page"]) ?? 1, 1), lastPage(perPage: perPage))
        let found: [RemotePhoto] = list.compactMap { item in
            guard let id = lenientString(item["id"]).flatMap(flickrID),
                  let image = lenientString(item["url_z"]) ?? lenientString(item["url_m"]) ?? lenientString(item["url_q"]) else { return nil }
            let owner = lenientString(item["owner"])
            return RemotePhoto(
                provider: "flickr", remoteID: id,
                title: lenientString(item["title"]) ?? "",
                ownerName: lenientString(item["ownername"]) ?? "",
                license: FlickrCredits.licence(item["license"], names: knownLicenseName),
                pageURL: owner.map { "https://www.flickr.com/photos/\($0)/\(id)" },
                imageURL: image,
                thumbnailURL: lenientString(item["url_q"]) ?? image,
                dateTaken: FlickrCredits.taken(item["datetaken"], granularity: item["datetakengranularity"],
                                               unknown: item["datetakenunknown"]),
                licenseCode: lenientString(item["license"]),
                takenYears: FlickrCredits.takenYears(item["datetaken"], unknown: item["datetakenunknown"]))
        }.removingRepeats().prefix(perPage).map { $0 }
        return PhotoSearchPage(photos: found, page: page, pages: max(pages, found.isEmpty ? 0 : 1), total: total)
    }

    /// A photo id as Flickr writes them (digits): " 05001 " and "5001" are the same photo; anything
    /// else names none.
    package static func flickrID(_ text: String) -> String? {
        let digits = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !digits.isEmpty, digits.utf8.count <= 20, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let number = UInt64(digits) else { return nil }
        return String(number)
    }

    /// Flickr's XML error form, `<rsp stat="fail"><err code="105" msg="…" /></rsp>`.
    package static func xmlError(_ body: [UInt8]) -> (Int, String)? {
        let text = String(decoding: body.prefix(4096), as: UTF8.self)
        guard text.contains("stat=\"fail\""), let match = text.firstMatch(of: /<err\s+code="(\d+)"\s+msg="([^"]*)"/),
              let code = Int(match.1) else { return nil }
        return (code, String(match.2))
    }

    /// flickr.photos.licenses.getInfo, which rarely changes; nil for an id it does not list.
    package static func knownLicenseName(_ id: Int) -> String? {
        switch id {
        case 0: return "All rights reserved"
        case 1: return "CC BY-NC-SA 2.0"
        case 2: return "CC BY-NC 2.0"
        case 3: return "CC BY-NC-ND 2.0"
        case 4: return "CC BY 2.0"
        case 5: return "CC BY-SA 2.0"
        case 6: return "CC BY-ND 2.0"
        case 7: return "No known copyright restrictions"
        case 8: return "United States Government Work"
        case 9: return "CC0 1.0"
        case 10: return "Public Domain Mark 1.0"
        default: return nil
        }
    }
}

/// scheme://host[:port] of an address, for the Content-Security-Policy.
package func origin(of address: String) -> String? {
    guard let url = URL(string: address), let scheme = url.scheme, let host = url.host else { return nil }
    return "\(scheme)://\(host)\(url.port.map { ":\($0)" } ?? "")"
}

package func lenientInt(_ value: Any?) -> Int? {
    if let number = value as? NSNumber { return number.intValue }
    if let text = value as? String { return Int(text.trimmingCharacters(in: .whitespaces)) ?? (text.isEmpty ? 0 : nil) }
    return nil
}

package func lenientString(_ value: Any?) -> String? {
    if let text = value as? String { return text.isEmpty ? nil : text }
    if let number = value as? NSNumber { return number.stringValue }
    return nil
}

/// Links and images from a provider (a photo's page, its licence, a thumbnail): http(s) only, so a
/// javascript: URL can never become a link on our pages.
package enum ProviderLinks {
    package static func safe(_ url: String?) -> String? {
        guard let url, let scheme = URL(string: url)?.scheme?.lowercased(), scheme == "https" || scheme == "http" else { return nil }
        return url
    }
}
