import Foundation
import HTTPClient

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
    public let dateTaken: String?
    /// The licence deed, from the provider's licence list (LicenseStore.swift); nil when unknown.
    public var licenseURL: String? = nil
    /// The provider's own id for the licence (Flickr's "license" field), resolved to `license` and
    /// `licenseURL` through the provider's licence list; nil when the answer carried none.
    public var licenseCode: String? = nil
}

public struct PhotoSearchPage: Sendable, Equatable {
    public let photos: [RemotePhoto]
    public let page: Int
    /// Pages that can be asked for (already capped by the provider's result limit).
    public let pages: Int
    public let total: Int
}

/// Where album photos come from: Flickr, Wikimedia Commons, or the fixture (DESIGN.md).
public protocol PhotoProvider: Sendable {
    var name: String { get }
    /// Origins the browser loads picker thumbnails from (added to the Content-Security-Policy).
    var imageOrigins: [String] { get }
    var photosPerPage: Int { get }
    func search(lat: Double, lon: Double, page: Int) throws -> PhotoSearchPage
    /// Images of one album downloaded at once, when the provider asks for restraint.
    var downloadConcurrency: Int? { get }
    /// The only hosts images are fetched or shown from (ImageHosts.swift).
    var imageHosts: HostPolicy { get }
    /// Where connections are opened ahead of an album's images, while the search runs.
    var warmUpOrigin: String? { get }
}

extension PhotoProvider {
    public var downloadConcurrency: Int? { nil }
}

public enum PhotoProviderError: Error, Equatable, CustomStringConvertible {
    case invalidKey
    case service(code: Int, message: String)
    case unexpectedStatus(Int)
    case malformed(String)
    case transport(String)

    public var description: String {
        switch self {
        case .invalidKey: return "invalid Flickr API key"
        case .service(let code, let message): return "the photo service refused the search (\(code): \(message))"
        case .unexpectedStatus(let status): return "the photo service answered HTTP \(status)"
        case .malformed(let detail): return "the photo service sent an answer that could not be read (\(detail))"
        case .transport(let detail): return "the photo service could not be reached (\(detail))"
        }
    }

    /// Worth trying again later (the service or network may recover); a bad key will not.
    public var isTransient: Bool {
        switch self {
        case .invalidKey: return false
        // Flickr's 105 is "service currently unavailable"; other codes describe the request.
        case .service(let code, _): return code == 105
        case .unexpectedStatus(let status): return status >= 500 || status == 429
        case .malformed, .transport: return true
        }
    }
}

/// Flickr's REST API (flickr.photos.search), or anything that speaks it (the fixture).
public struct FlickrProvider: PhotoProvider {
    public let name = "flickr"
    public let apiKey: String
    public let apiURL: String
    public let client: HTTPClient
    /// Flickr's display guidelines ask for at most 30 photos per page of an app.
    public let photosPerPage = 30
    /// Flickr returns at most 4,000 results for a search, whatever "pages" says.
    static let resultCap = 4000
    public let radiusKilometres = 5

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

    public func search(lat: Double, lon: Double, page: Int) throws -> PhotoSearchPage {
        var components = URLComponents(string: apiURL)
        components?.queryItems = [
            ("method", "flickr.photos.search"), ("api_key", apiKey),
            ("lat", String(format: "%.6f", lat)), ("lon", String(format: "%.6f", lon)),
            ("radius", String(radiusKilometres)), ("radius_units", "km"),
            ("per_page", String(photosPerPage)), ("page", String(page)),
            ("extras", "url_q,url_z,url_m,owner_name,license,date_taken"),
            ("safe_search", "1"), ("content_type", "1"), ("media", "photos"),
            ("format", "json"), ("nojsoncallback", "1"),
        ].map { URLQueryItem(name: $0.0, value: $0.1) }
        guard let url = components?.url?.absoluteString else { throw PhotoProviderError.malformed("bad FLICKR_API_URL") }
        let page = try Self.parse(try fetchAnswer(url, client: client), perPage: photosPerPage)
        return licenses.map { $0.credit(page) } ?? page
    }

    /// Reads a photos.search answer. Flickr is loose with types ("150" or 150, "" for 0), so
    /// numbers are read leniently.
    static func parse(_ body: [UInt8], perPage: Int) throws -> PhotoSearchPage {
        guard let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
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
        let total = lenientInt(photos["total"]) ?? list.count
        let pages = min(lenientInt(photos["pages"]) ?? 1, max(1, resultCap / perPage))
        let page = lenientInt(photos["page"]) ?? 1
        let found: [RemotePhoto] = list.compactMap { item in
            guard let id = lenientString(item["id"]),
                  let image = lenientString(item["url_z"]) ?? lenientString(item["url_m"]) ?? lenientString(item["url_q"]) else { return nil }
            let owner = lenientString(item["owner"])
            return RemotePhoto(
                provider: "flickr", remoteID: id,
                title: lenientString(item["title"]) ?? "",
                ownerName: lenientString(item["ownername"]) ?? "",
                license: licenseName(lenientInt(item["license"]) ?? 0),
                pageURL: owner.map { "https://www.flickr.com/photos/\($0)/\(id)" },
                imageURL: image,
                thumbnailURL: lenientString(item["url_q"]) ?? image,
                dateTaken: lenientString(item["datetaken"]), licenseCode: lenientString(item["license"]))
        }
        return PhotoSearchPage(photos: found, page: page, pages: max(pages, found.isEmpty ? 0 : 1), total: total)
    }

    /// flickr.photos.licenses.getInfo, which rarely changes.
    static func licenseName(_ id: Int) -> String {
        switch id {
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
        default: return "All rights reserved"
        }
    }
}

/// One provider request: the body of a 200 answer, or the error a provider reports.
func fetchAnswer(_ url: String, client: HTTPClient) throws -> [UInt8] {
    let response: HTTPClientResponse
    do {
        response = try client.get(url)
    } catch {
        throw PhotoProviderError.transport("\(error)")
    }
    guard response.status == 200 else { throw PhotoProviderError.unexpectedStatus(response.status) }
    return response.body
}

/// scheme://host[:port] of an address, for the Content-Security-Policy.
func origin(of address: String) -> String? {
    guard let url = URL(string: address), let scheme = url.scheme, let host = url.host else { return nil }
    return "\(scheme)://\(host)\(url.port.map { ":\($0)" } ?? "")"
}

func lenientInt(_ value: Any?) -> Int? {
    if let number = value as? NSNumber { return number.intValue }
    if let text = value as? String { return Int(text.trimmingCharacters(in: .whitespaces)) ?? (text.isEmpty ? 0 : nil) }
    return nil
}

func lenientString(_ value: Any?) -> String? {
    if let text = value as? String { return text.isEmpty ? nil : text }
    if let number = value as? NSNumber { return number.stringValue }
    return nil
}
