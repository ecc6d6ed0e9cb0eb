import Foundation
import HTTPClient

/// Wikimedia Commons, a keyless provider: files (namespace 6) near a point, with thumbnails and
/// author and licence from extmetadata. Two requests per page, one after the other, as Wikimedia's
/// API etiquette asks (no parallel API requests; a User-Agent that says who we are).
public struct CommonsProvider: PhotoProvider {
    public let name = "commons"
    public let apiURL: String
    public let client: HTTPClient
    public let photosPerPage = 30
    /// GeoSearch answers at most 500 results and has no paging of its own: we page through them.
    static let resultCap = 500
    public let radiusMetres = 10_000
    /// Wikimedia asks for moderate request rates to upload.wikimedia.org.
    public var downloadConcurrency: Int? { 4 }

    public static let defaultAPIURL = "https://commons.wikimedia.org/w/api.php"

    public init(apiURL: String = CommonsProvider.defaultAPIURL, client: HTTPClient) {
        self.apiURL = apiURL
        self.client = client
    }

    public var imageOrigins: [String] {
        if apiURL.hasPrefix("https://commons.wikimedia.org") { return ["https://upload.wikimedia.org"] }
        return origin(of: apiURL).map { [$0] } ?? []
    }

    public func search(lat: Double, lon: Double, page: Int) throws -> PhotoSearchPage {
        // 1. The files near the point, nearest first.
        let list = try get([
            ("action", "query"), ("format", "json"), ("formatversion", "2"), ("list", "geosearch"),
            ("gscoord", String(format: "%.6f|%.6f", lat, lon)), ("gsradius", String(radiusMetres)),
            ("gsnamespace", "6"), ("gslimit", String(Self.resultCap)),
        ])
        guard let query = list["query"] as? [String: Any], let found = query["geosearch"] as? [[String: Any]] else {
            throw PhotoProviderError.malformed("no geosearch in the answer")
        }
        let titles = found.compactMap { $0["title"] as? String }
        let pages = (titles.count + photosPerPage - 1) / photosPerPage
        let slice = titles.dropFirst((page - 1) * photosPerPage).prefix(photosPerPage)
        guard !slice.isEmpty else { return PhotoSearchPage(photos: [], page: page, pages: pages, total: titles.count) }

        // 2. Their image URLs and credits.
        let info = try get([
            ("action", "query"), ("format", "json"), ("formatversion", "2"), ("titles", slice.joined(separator: "|")),
            ("prop", "imageinfo"), ("iiprop", "url|mime|extmetadata"), ("iiurlwidth", "640"),
            ("iiextmetadatafilter", "Artist|LicenseShortName|DateTimeOriginal|ObjectName"),
        ])
        let infoPages = ((info["query"] as? [String: Any])?["pages"] as? [[String: Any]]) ?? []
        var byTitle: [String: RemotePhoto] = [:]
        for item in infoPages {
            guard let title = item["title"] as? String, let image = (item["imageinfo"] as? [[String: Any]])?.first,
                  let mime = image["mime"] as? String, ["image/jpeg", "image/png", "image/gif", "image/webp"].contains(mime),
                  let url = image["thumburl"] as? String ?? image["url"] as? String else { continue }
            let meta = image["extmetadata"] as? [String: Any] ?? [:]
            func value(_ key: String) -> String? {
                ((meta[key] as? [String: Any])?["value"] as? String).map(Self.plainText).flatMap { $0.isEmpty ? nil : $0 }
            }
            let name = title.hasPrefix("File:") ? String(title.dropFirst(5)) : title
            byTitle[title] = RemotePhoto(
                provider: "commons", remoteID: Self.remoteID(pageID: lenientInt(item["pageid"]), title: title),
                title: value("ObjectName") ?? (name as NSString).deletingPathExtension,
                ownerName: value("Artist") ?? "", license: value("LicenseShortName") ?? "see the file page",
                pageURL: image["descriptionurl"] as? String, imageURL: url, thumbnailURL: url,
                dateTaken: value("DateTimeOriginal"))
        }
        // In distance order, as the search gave them.
        let photos = slice.compactMap { byTitle[$0] }
        return PhotoSearchPage(photos: photos, page: page, pages: pages, total: titles.count)
    }

    private func get(_ parameters: [(String, String)]) throws -> [String: Any] {
        var components = URLComponents(string: apiURL)
        components?.queryItems = parameters.map { URLQueryItem(name: $0.0, value: $0.1) }
        guard let url = components?.url?.absoluteString else { throw PhotoProviderError.malformed("bad COMMONS_API_URL") }
        guard let json = (try? JSONSerialization.jsonObject(with: Data(try fetchAnswer(url, client: client)))) as? [String: Any] else {
            throw PhotoProviderError.malformed("not JSON")
        }
        if let error = json["error"] as? [String: Any] {
            throw PhotoProviderError.service(code: 0, message: error["info"] as? String ?? "unknown error")
        }
        return json
    }

    /// The file's page id, or its title when an answer lacks one (file names are unique on Commons).
    /// Never `hashValue`: it changes with every process, so saved photos would not be recognised.
    static func remoteID(pageID: Int?, title: String) -> String {
        pageID.map(String.init) ?? title
    }

    /// extmetadata values are HTML fragments ("<a href=…>Jane</a>"): keep the text.
    static func plainText(_ html: String) -> String {
        var text = ""
        var inTag = false
        for character in html {
            if character == "<" { inTag = true } else if character == ">" { inTag = false } else if !inTag { text.append(character) }
        }
        return text.replacingOccurrences(of: "&amp;", with: "&").replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&lt;", with: "<")
            .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&nbsp;", with: " ")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
