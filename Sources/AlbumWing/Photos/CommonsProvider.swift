import Foundation
import Domain
import WebText
import HTTPClient
import Log

private let logger = Logger(label: "commons")

/// Wikimedia Commons, a keyless provider: files (namespace 6) near a point, with thumbnails and
/// author and licence from extmetadata. Two requests per page, one after the other, as Wikimedia's
/// API etiquette asks (no parallel API requests; a User-Agent that says who we are).
public struct CommonsProvider: PhotoProvider {
    public let name = "commons"
    public let apiURL: String
    public let client: HTTPClient
    public let photosPerPage = 30
    /// GeoSearch answers at most 500 results and has no paging of its own: we page through them.
    package static let resultCap = 500
    public var lastPage: Int { (Self.resultCap + photosPerPage - 1) / photosPerPage }
    public let radiusMetres = 10_000
    /// Wikimedia's rate-limit best practices: 3 concurrent requests or fewer.
    public var downloadConcurrency: Int? { 3 }
    /// Standard thumbnail steps (docs/providers.md): the picker's tiles, and the image an album
    /// stores and shows in full view. Other widths are refused by upload.wikimedia.org.
    public static let tileWidth = 330
    public static let fullViewWidth = 960
    /// The shared call budget (nil: calls are not counted).
    public var budget: ProviderBudget?
    /// Album workers' calls are background work: they send maxlag, so a lagging wiki tells them to wait.
    public var background = false
    /// Wikimedia's recommended maxlag for non-interactive clients.
    package static let maxlag = 5
    /// An original is downloaded only when no thumbnail step fits and it is at most this large.
    public var originalCap = 2 * 1024 * 1024

    public static let defaultAPIURL = "https://commons.wikimedia.org/w/api.php"

    public init(apiURL: String = CommonsProvider.defaultAPIURL, client: HTTPClient) {
        self.apiURL = apiURL
        self.client = client
    }

    public var imageOrigins: [String] {
        if apiURL.hasPrefix("https://commons.wikimedia.org") { return ["https://upload.wikimedia.org"] }
        return origin(of: apiURL).map { [$0] } ?? []
    }

    /// Commons cannot be asked for a date: with an era, each page reads the dates of a window
    /// of this many nearby files, 50 a request (the API's limit of titles), and keeps those taken
    /// in the era, stopping when the page is full: at most 1 + 4 calls a page (docs/providers.md).
    package static let eraWindow = 200
    package static let titlesPerRequest = 50

    public func search(lat: Double, lon: Double, page requested: Int, era: Era?) throws -> PhotoSearchPage {
        // Clamped here too, not only in the route: `(page - 1) * photosPerPage` below must not trap.
        let page = min(max(requested, 1), lastPage)
        // 1. The files near the point, nearest first.
        let titles = try nearestTitles(lat: lat, lon: lon)
        if let era { return try eraPage(titles, page: page, era: era) }
        let pages = (titles.count + photosPerPage - 1) / photosPerPage
        let slice = titles.dropFirst((page - 1) * photosPerPage).prefix(photosPerPage)
        guard !slice.isEmpty else { return PhotoSearchPage(photos: [], page: page, pages: pages, total: titles.count) }

        // 2. Their image URLs and credits.
        let photos = try imageInfo(Array(slice))
        return PhotoSearchPage(photos: photos, page: page, pages: pages, total: titles.count)
    }

    /// The strip's counts: Commons cannot count by date, so the dates of all the nearest files
    /// (500 at most) are read, 50 a call: 1 + 10 calls for every decade at once.
    public func decadeCounts(lat: Double, lon: Double, decades: [Era]) throws -> [Int: Int] {
        var titles = try nearestTitles(lat: lat, lon: lon)[...]
        var counts = Dictionary(uniqueKeysWithValues: decades.map { ($0.from, 0) })
        while !titles.isEmpty {
            let batch = Array(titles.prefix(Self.titlesPerRequest))
            titles = titles.dropFirst(batch.count)
            for photo in try imageInfo(batch) {
                if let decade = decades.first(where: { TakenDate.belongs(photo.takenYears, in: $0) }) { counts[decade.from, default: 0] += 1 }
            }
        }
        return counts
    }

    /// The files within `radiusMetres`, nearest first (500 at most, GeoSearch's cap), each once: a
    /// repeat would shift every later page and fill a slot twice.
    private func nearestTitles(lat: Double, lon: Double) throws -> [String] {
        let list = try get([
            ("action", "query"), ("format", "json"), ("formatversion", "2"), ("list", "geosearch"),
            ("gscoord", String(format: "%.6f|%.6f", lat, lon)), ("gsradius", String(radiusMetres)),
            ("gsnamespace", "6"), ("gslimit", String(Self.resultCap)),
        ])
        guard let query = list["query"] as? [String: Any], let found = query["geosearch"] as? [[String: Any]] else {
            throw PhotoProviderError.malformed("no geosearch in the answer")
        }
        var seen = Set<String>()
        return found.compactMap { $0["title"] as? String }.filter { seen.insert($0).inserted }
    }

    /// An era's page: the window of candidates for `page`, read 50 at a time until a page of
    /// photos taken in the era is found or the window ends.
    private func eraPage(_ titles: [String], page asked: Int, era: Era) throws -> PhotoSearchPage {
        let pages = (titles.count + Self.eraWindow - 1) / Self.eraWindow
        let page = min(asked, max(pages, 1))
        var window = titles.dropFirst((page - 1) * Self.eraWindow).prefix(Self.eraWindow)
        var kept: [RemotePhoto] = []
        while kept.count < photosPerPage, !window.isEmpty {
            let batch = Array(window.prefix(Self.titlesPerRequest))
            window = window.dropFirst(batch.count)
            kept += try imageInfo(batch).filter { TakenDate.belongs($0.takenYears, in: era) }
        }
        return PhotoSearchPage(photos: Array(kept.removingRepeats().prefix(photosPerPage)), page: page, pages: pages, total: titles.count)
    }

    private func imageInfo(_ titles: [String]) throws -> [RemotePhoto] {
        let info = try get([
            ("action", "query"), ("format", "json"), ("formatversion", "2"), ("titles", titles.joined(separator: "|")),
            ("prop", "imageinfo"), ("iiprop", "url|size|mime|extmetadata"), ("iiurlwidth", String(Self.fullViewWidth)),
            ("iiextmetadatafilter", "Artist|LicenseShortName|DateTimeOriginal|ObjectName"),
        ])
        return Self.photos(in: info, order: titles, originalCap: originalCap)
    }

    /// The files of an imageinfo answer that can be shown, in `order` (the search's distance order).
    package static func photos(in info: [String: Any], order: [String], originalCap: Int) -> [RemotePhoto] {
        let infoPages = ((info["query"] as? [String: Any])?["pages"] as? [[String: Any]]) ?? []
        var byTitle: [String: RemotePhoto] = [:]
        for item in infoPages {
            guard let title = item["title"] as? String, let image = (item["imageinfo"] as? [[String: Any]])?.first else { continue }
            let choice = Self.image(image, originalCap: originalCap)
            guard case .use(let url, let tile) = choice else {
                if case .skip(let reason) = choice { logger.info("skipping \(title): \(reason)") }
                continue
            }
            let meta = image["extmetadata"] as? [String: Any] ?? [:]
            func value(_ key: String) -> String? {
                ((meta[key] as? [String: Any])?["value"] as? String).map(Self.plainText).flatMap { $0.isEmpty ? nil : $0 }
            }
            let name = title.hasPrefix("File:") ? String(title.dropFirst(5)) : title
            // The date as a machine wrote it, where the file page's template gives one
            // (<time datetime="2012-05-03">), before the words around it.
            let machine = ((meta["DateTimeOriginal"] as? [String: Any])?["value"] as? String)
                .flatMap { $0.prefix(4096).firstMatch(of: /datetime="(\d{4}(?:-\d{2}(?:-\d{2})?)?)"/).map { String($0.1) } }
            let taken = (machine ?? value("DateTimeOriginal")).map(TakenDate.commons)
            byTitle[title] = RemotePhoto(
                provider: "commons", remoteID: Self.remoteID(pageID: lenientInt(item["pageid"]), title: title),
                title: value("ObjectName") ?? (name as NSString).deletingPathExtension,
                ownerName: value("Artist") ?? "", license: value("LicenseShortName") ?? "see the file page",
                pageURL: image["descriptionurl"] as? String, imageURL: url, thumbnailURL: tile,
                dateTaken: taken?.label, takenYears: taken?.years)
        }
        return order.compactMap { byTitle[$0] }.removingRepeats()
    }

    package enum ImageChoice: Equatable {
        case use(url: String, tile: String)
        case skip(String)
    }

    /// Which image of a file to download: the API's thumbnail at the full-view step; without one
    /// (seen for SVGs and some JPEGs) a thumbnail URL built at a standard step; the original only
    /// when it is no wider than that step and no larger than the cap. Never a large original.
    package static func image(_ image: [String: Any], originalCap: Int) -> ImageChoice {
        guard let mime = image["mime"] as? String, shownTypes.contains(mime) else {
            return .skip("not a photo (\(image["mime"] as? String ?? "no type"))")
        }
        if let thumb = image["thumburl"] as? String {
            return .use(url: thumb, tile: tileURL(fromThumb: thumb) ?? thumb)
        }
        guard let original = image["url"] as? String else { return .skip("no thumbnail and no file URL in the answer") }
        let width = lenientInt(image["width"]) ?? 0, size = lenientInt(image["size"])
        if mime == "image/svg+xml" || width > fullViewWidth {
            guard let built = thumbURL(original: original, width: fullViewWidth, mime: mime) else {
                return .skip("no thumbnail, and \(original) is not a Wikimedia upload address")
            }
            return .use(url: built, tile: thumbURL(original: original, width: tileWidth, mime: mime) ?? built)
        }
        guard let size, size <= originalCap else {
            return .skip("no thumbnail, and the original (\(size.map(String.init) ?? "unknown") bytes) is above the \(originalCap)-byte cap")
        }
        let tile = width > tileWidth ? thumbURL(original: original, width: tileWidth, mime: mime) ?? original : original
        return .use(url: original, tile: tile)
    }

    package static let shownTypes: Set<String> = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/svg+xml"]

    /// Wikimedia's thumbnail address for an original: …/wikipedia/commons/a/ab/Name.jpg becomes
    /// …/wikipedia/commons/thumb/a/ab/Name.jpg/960px-Name.jpg (an SVG's thumbnail is a PNG).
    package static func thumbURL(original: String, width: Int, mime: String) -> String? {
        guard var components = URLComponents(string: original) else { return nil }
        var parts = components.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // […, "wikipedia", "commons", "a", "ab", "Name.jpg"] (behind a prefix on a mirror or the fixture)
        guard parts.count >= 6, let file = parts.last, parts[parts.count - 5] == "wikipedia",
              parts[parts.count - 3].count == 1, parts[parts.count - 2].count == 2 else { return nil }
        parts.insert("thumb", at: parts.count - 3)
        let thumbName = "\(width)px-\(file)" + (mime == "image/svg+xml" ? ".png" : "")
        components.percentEncodedPath = (parts + [thumbName]).joined(separator: "/")
        return components.string
    }

    /// The tile-step address of a thumbnail the API gave at another step.
    package static func tileURL(fromThumb thumb: String) -> String? {
        guard let range = thumb.range(of: "/\(fullViewWidth)px-", options: .backwards) else { return nil }
        return thumb.replacingCharacters(in: range, with: "/\(tileWidth)px-")
    }

    private func get(_ parameters: [(String, String)]) throws -> [String: Any] {
        var components = URLComponents(string: apiURL)
        let all = parameters + (background ? [("maxlag", String(Self.maxlag))] : [])
        components?.queryItems = all.map { URLQueryItem(name: $0.0, value: $0.1) }
        guard let url = components?.url?.absoluteString else { throw PhotoProviderError.malformed("bad COMMONS_API_URL") }
        let response = try ProviderCall(client: client, budget: budget).get(url)
        guard let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] else {
            throw PhotoProviderError.malformed("not JSON")
        }
        if let (code, info) = Self.apiError(json) {
            // maxlag and ratelimited name a wait: every instance holds off that long.
            if code == "maxlag" || code == "ratelimited" {
                let seconds = ProviderCall.retryAfter(response.headers["retry-after"]) ?? (code == "maxlag" ? 5 : 60)
                let reason: ProviderBudget.WaitReason = code == "maxlag" ? .lagged : .rateLimited
                try? budget?.pause(seconds: seconds, reason: reason)
                throw PhotoProviderError.mustWait(seconds: seconds, reason: reason)
            }
            throw PhotoProviderError.mediaWiki(code: code, info: info)
        }
        return json
    }

    /// A MediaWiki API error in either form: `{"error": {"code", "info"}}` (the default) or
    /// `{"errors": [{"code", "text"}]}` (errorformat=plaintext and friends).
    package static func apiError(_ json: [String: Any]) -> (code: String, info: String)? {
        if let error = json["error"] as? [String: Any] {
            return (error["code"] as? String ?? "unknown", error["info"] as? String ?? "unknown error")
        }
        if let errors = json["errors"] as? [[String: Any]], let first = errors.first {
            return (first["code"] as? String ?? "unknown", first["text"] as? String ?? first["html"] as? String ?? "unknown error")
        }
        return nil
    }

    /// The file's page id, or its title when an answer lacks one (file names are unique on Commons).
    /// Never `hashValue`: it changes with every process, so saved photos would not be recognised.
    package static func remoteID(pageID: Int?, title: String) -> String {
        pageID.map(String.init) ?? title
    }

    /// extmetadata values are HTML fragments ("<a href=…>Jane</a>"): keep the text.
    package static func plainText(_ html: String) -> String { HTMLText.plain(html) }
}
