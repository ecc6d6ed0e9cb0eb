import Foundation
import HTTPServer
import Synchronization

/// The rules the real services keep, so a client that breaks them fails against the fixture as it
/// would in production (docs/providers.md cites where each rule is documented).
public struct ProviderRules: Sendable {
    /// Flickr's documented search rules: a geo query without a limiting agent returns only photos
    /// added in the last 12 hours; no search returns more than its first 4,000 results.
    public var flickr = true
    /// Photos "added in the last 12 hours" near any point, for a search without a limiting agent.
    public var photosOfTheLast12Hours = 2
    public static let flickrResultWindow = 4000
    /// Parameters flickr.photos.search counts as limiting agents ("a tag, for instance, … as are user
    /// defined min_date_taken and min_date_upload parameters").
    public static let limitingAgents: Set<String> = [
        "tags", "text", "machine_tags", "user_id", "group_id", "min_upload_date", "max_upload_date", "min_taken_date", "max_taken_date",
    ]

    /// Wikimedia's standard thumbnail widths; upload.wikimedia.org refuses others with 429 and the API
    /// rounds iiurlwidth up to the next one.
    public static let thumbnailSteps = [20, 40, 60, 120, 250, 330, 500, 960, 1280, 1920, 3840]
    /// The first N Commons API requests are answered 429 with Retry-After (Wikimedia's global limits).
    public var commonsRateLimitedRequests = 0
    public var commonsRetryAfter = 1
    /// The first N Commons API requests that carry maxlag below `commonsLag` get the maxlag error.
    public var commonsLaggedRequests = 0
    public var commonsLag = 7
    /// Every Nth Commons file is answered without thumburl and has a large original (11.8 MB, 5514 × 3102),
    /// as real answers are for some files. 0: never.
    public var commonsNoThumbEvery = 7
    public var commonsLargeOriginalBytes = 11_800_000

    /// Recorded answers of the real services, replayed instead of made-up ones.
    public var recordedFlickrSearch: Recorded?
    public var recordedCommonsImageInfo: Recorded?

    public init() {}
}

/// An answer a real service gave, as recorded.
public struct Recorded: Sendable {
    public var body: [UInt8]
    public var contentType: String
    public var status = 200
    /// Image hosts named in the answer ("https://upload.wikimedia.org"), pointed at the fixture's
    /// /recorded/HOST/… since tests have no network. This is the only change made to the bytes.
    public var imageHosts: [String]

    public init(body: [UInt8], contentType: String, status: Int = 200, imageHosts: [String] = []) {
        self.body = body
        self.contentType = contentType
        self.status = status
        self.imageHosts = imageHosts
    }
}

/// A request as the fixture received it, for tests that check what the app sent.
public struct LoggedRequest: Sendable {
    public let path: String
    public let query: [String: String]
    public let userAgent: String?
}

struct RuleState {
    var requests: [LoggedRequest] = []
    var commonsAPIRequests = 0
    var laggedAnswers = 0
    var largeOriginals = 0
    var refusedThumbnails = 0
}

extension PhotoFixture {
    /// Every API and image request received, in order.
    public var requests: [LoggedRequest] { ruleState.withLock { $0.requests } }
    /// Originals above 8 MB that were downloaded (a client should take a thumbnail instead).
    public var largeOriginalDownloads: Int { ruleState.withLock { $0.largeOriginals } }
    /// Thumbnail URLs refused for a width that is not a standard step.
    public var refusedThumbnails: Int { ruleState.withLock { $0.refusedThumbnails } }

    func log(_ request: HTTPRequest) {
        var query: [String: String] = [:]
        for item in request.queryItems { query[item.name] = item.value }
        let entry = LoggedRequest(path: request.path, query: query, userAgent: request.headers["User-Agent"])
        ruleState.withLock { $0.requests.append(entry) }
    }

    static func hasLimitingAgent(_ request: HTTPRequest) -> Bool {
        request.queryItems.contains { ProviderRules.limitingAgents.contains($0.name) && !$0.value.isEmpty }
    }

    /// Flickr's failure answers, as the real service sends them.
    static func faultAnswer(_ fault: SearchFault) -> HTTPResponse? {
        switch fault {
        case .apiUnavailable:
            return .json(#"{"stat":"fail","code":201,"message":"Sorry, the Flickr API service is not currently available."}"#)
        case .xmlUnavailable:
            return xml("<?xml version=\"1.0\" encoding=\"utf-8\" ?>\n<rsp stat=\"fail\">\n\t<err code=\"105\" msg=\"Service currently unavailable\" />\n</rsp>\n")
        case .xmlInvalidKey:
            return xml("<?xml version=\"1.0\" encoding=\"utf-8\" ?>\n<rsp stat=\"fail\">\n\t<err code=\"100\" msg=\"Invalid API Key (Key has invalid format)\" />\n</rsp>\n")
        case .serviceUnavailable:
            return .text("Service Unavailable", status: .serviceUnavailable)
        case .tooManyRequests:
            var response = HTTPResponse.text("Too Many Requests", status: HTTPStatus(429))
            response.headers.set("Retry-After", "1")
            return response
        default:
            return nil
        }
    }

    private static func xml(_ text: String) -> HTTPResponse {
        HTTPResponse(status: .ok, headers: ["Content-Type": "text/xml; charset=utf-8"], body: Array(text.utf8))
    }

    /// A recorded answer, with its image hosts pointed here.
    func replay(_ recorded: Recorded, _ request: HTTPRequest) -> HTTPResponse {
        var body = recorded.body
        if !recorded.imageHosts.isEmpty {
            let origin = request.headers["Host"].map { "http://\($0)" } ?? baseURL
            var text = String(decoding: body, as: UTF8.self)
            for host in recorded.imageHosts {
                let bare = host.replacingOccurrences(of: "https://", with: "")
                text = text.replacingOccurrences(of: host, with: "\(origin)/recorded/\(bare)")
                // Flickr's JSON escapes slashes.
                text = text.replacingOccurrences(of: host.replacingOccurrences(of: "/", with: "\\/"),
                                                 with: "\(origin)/recorded/\(bare)".replacingOccurrences(of: "/", with: "\\/"))
            }
            body = Array(text.utf8)
        }
        return HTTPResponse(status: HTTPStatus(recorded.status), headers: ["Content-Type": recorded.contentType], body: body)
    }

    // MARK: Wikimedia Commons

    func commonsAnswer(_ request: HTTPRequest) -> HTTPResponse {
        let rules = options.rules
        let number = ruleState.withLock { $0.commonsAPIRequests += 1; return $0.commonsAPIRequests }
        if number <= rules.commonsRateLimitedRequests {
            var response = HTTPResponse.text("Too many requests. Please respect our robot policy and rate limits: https://w.wiki/4wJS",
                                             status: HTTPStatus(429))
            response.headers.set("Retry-After", String(rules.commonsRetryAfter))
            return response
        }
        if let maxlag = request.queryValue("maxlag").flatMap(Int.init), rules.commonsLag > maxlag,
           ruleState.withLock({ state -> Bool in
               guard state.laggedAnswers < rules.commonsLaggedRequests else { return false }
               state.laggedAnswers += 1
               return true
           }) {
            return Self.maxlagAnswer(lag: rules.commonsLag, modern: request.queryValue("errorformat") != nil,
                                     retryAfter: rules.commonsRetryAfter)
        }
        let origin = request.headers["Host"].map { "http://\($0)" } ?? baseURL
        if request.queryValue("list") == "geosearch" {
            let coordinates = (request.queryValue("gscoord") ?? "").split(separator: "|").compactMap { Double($0) }
            guard coordinates.count == 2 else { return .json(#"{"error":{"code":"badcoord","info":"Invalid coordinate provided"}}"#) }
            if let recorded = rules.recordedCommonsImageInfo {
                // Lists the files of the recorded imageinfo answer, so the app asks for exactly those;
                // a recorded answer that names no files (an error) is the answer to every call.
                let titles = Self.titles(in: recorded.body)
                if titles.isEmpty { return replay(recorded, request) }
                let items = titles.enumerated().map { i, title in
                    #"{"pageid":\#(i + 1),"ns":6,"title":\#(Self.jsonString(title)),"lat":\#(coordinates[0]),"lon":\#(coordinates[1]),"dist":\#(i * 10)}"#
                }
                return .json(#"{"batchcomplete":true,"query":{"geosearch":[\#(items.joined(separator: ","))]}}"#)
            }
            let limit = min(Int(request.queryValue("gslimit") ?? "") ?? 10, 500)
            let count = coordinates[0] < options.emptyBelowLatitude ? 0 : min(limit, options.pages * 30 > 500 ? 500 : options.pages * 30)
            let place = Self.placeNumber(lat: coordinates[0], lon: coordinates[1])
            let items = (0..<count).map { i in
                #"{"pageid":\#(place * 1000 + i),"ns":6,"title":"File:Fixture \#(place)-\#(i + 1).jpg","lat":\#(coordinates[0]),"lon":\#(coordinates[1]),"dist":\#(i * 10)}"#
            }
            return .json(#"{"batchcomplete":true,"query":{"geosearch":[\#(items.joined(separator: ","))]}}"#)
        }
        if let recorded = rules.recordedCommonsImageInfo { return replay(recorded, request) }
        // The API rounds a requested width up to the next standard step.
        let asked = request.queryValue("iiurlwidth").flatMap(Int.init)
        let step = asked.map { width in ProviderRules.thumbnailSteps.first { $0 >= width } ?? 3840 }
        let titles = (request.queryValue("titles") ?? "").split(separator: "|").map(String.init)
        // The API takes at most 50 titles a request (500 for bots), and refuses more.
        if titles.count > 50 {
            return .json(#"{"error":{"code":"toomanyvalues","info":"Too many values supplied for parameter \"titles\". The limit is 50.","parameter":"titles","limit":50}}"#)
        }
        let pages = titles.compactMap { title -> String? in
            let digits = title.split(separator: " ").last?.split(separator: ".").first?.split(separator: "-")
            guard let digits, digits.count == 2, let place = Int(digits[0]), let index = Int(digits[1]) else { return nil }
            let id = place * 1000 + index - 1
            let escaped = title.replacingOccurrences(of: "\"", with: "\\\"")
            // DateTimeOriginal as a file page's {{Information}} gives it, in several precisions.
            let dateTime = FixtureDate.of(id: id).commonsText.map { #","DateTimeOriginal":{"value":"\#($0)"}"# } ?? ""
            let file = "Fixture_\(place)-\(index).jpg"
            let original = "\(origin)/wikipedia/commons/\(Self.hashPath(index))/\(file)"
            let large = rules.commonsNoThumbEvery > 0 && index % rules.commonsNoThumbEvery == 0
            var info = large ? #""size":\#(rules.commonsLargeOriginalBytes),"width":5514,"height":3102,"#
                : #""size":\#(images[(id % 1000 + id / 1000) % images.count].count),"width":451,"height":300,"#
            if let step, !large {
                info += #""thumburl":"\#(origin)/wikipedia/commons/thumb/\#(Self.hashPath(index))/\#(file)/\#(step)px-\#(file)","thumbwidth":\#(step),"thumbheight":\#(step * 2 / 3),"#
            }
            return """
                {"pageid":\(id),"ns":6,"title":"\(escaped)","imagerepository":"local","imageinfo":[{\(info)\
                "url":"\(original)","descriptionurl":"https://commons.wikimedia.org/wiki/\(escaped.replacingOccurrences(of: " ", with: "_"))",\
                "mime":"image/jpeg","extmetadata":{"Artist":{"value":"<a href=\\"https://commons.wikimedia.org/wiki/User:Fixture\\">Fixture &amp; Friends</a>"},\
                "LicenseShortName":{"value":"CC BY-SA 4.0"},"ObjectName":{"value":"Commons fixture \(index)"}\(dateTime)}}]}
                """
        }
        return .json(#"{"batchcomplete":true,"query":{"pages":[\#(pages.joined(separator: ","))]}}"#)
    }

    /// MediaWiki's maxlag error, in the old form (`error`) or the one errorformat asks for (`errors`);
    /// both come with HTTP 200, Retry-After and X-Database-Lag.
    static func maxlagAnswer(lag: Int, modern: Bool, retryAfter: Int) -> HTTPResponse {
        let info = "Waiting for 10.64.48.35: \(lag) seconds lagged."
        let body = modern
            ? #"{"errors":[{"code":"maxlag","text":"\#(info)","data":{"host":"10.64.48.35","lag":\#(lag),"type":"db"},"module":"main"}],"docref":"See https://commons.wikimedia.org/w/api.php for API usage.","servedby":"mw-api-ext"}"#
            : #"{"error":{"code":"maxlag","info":"\#(info)","host":"10.64.48.35","lag":\#(lag),"type":"db","docref":"See https://commons.wikimedia.org/w/api.php for API usage."},"servedby":"mw-api-ext"}"#
        var response = HTTPResponse.json(body)
        response.headers.set("Retry-After", String(retryAfter))
        response.headers.set("X-Database-Lag", String(lag))
        return response
    }

    /// Commons files live under /a/ab/ (from the MD5 of the name); any stable pair will do here.
    static func hashPath(_ index: Int) -> String {
        let hex = Array("0123456789abcdef")
        let a = hex[index % 16], b = hex[(index / 16) % 16]
        return "\(a)/\(a)\(b)"
    }

    static func titles(in body: [UInt8]) -> [String] {
        guard let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let query = json["query"] as? [String: Any] else { return [] }
        let pages: [[String: Any]] = (query["pages"] as? [[String: Any]]) ?? ((query["pages"] as? [String: Any])?.values.compactMap { $0 as? [String: Any] } ?? [])
        return pages.compactMap { $0["title"] as? String }
    }

    static func jsonString(_ text: String) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: [text])) ?? Data("[\"\"]".utf8), as: UTF8.self)
            .dropFirst().dropLast().description
    }

    /// upload.wikimedia.org: thumbnails at standard widths only (others: 429), originals as they are.
    func commonsImage(_ request: HTTPRequest) throws -> HTTPResponse {
        log(request)
        wait()
        let path = request.parameters["file"] ?? ""
        if let refused = refuseNonStandardThumbnail(path) { return refused }
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        let numbers = name.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        let index = numbers.last ?? 0
        let rules = options.rules
        if !path.contains("thumb/") && rules.commonsNoThumbEvery > 0 && index > 0 && index % rules.commonsNoThumbEvery == 0 {
            ruleState.withLock { $0.largeOriginals += 1 }
            var body = images[index % images.count]
            body += [UInt8](repeating: 0, count: max(0, rules.commonsLargeOriginalBytes - body.count))
            return HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"], body: body)
        }
        return HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"], body: images[index % images.count])
    }

    /// Images named by a recorded answer: a sample photo for any path, with Wikimedia's width rule.
    func recordedImage(_ request: HTTPRequest) throws -> HTTPResponse {
        log(request)
        let path = request.parameters["file"] ?? ""
        if path.hasPrefix("upload.wikimedia.org"), let refused = refuseNonStandardThumbnail(path) { return refused }
        let sum = path.utf8.reduce(0) { $0 &+ Int($1) }
        return HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"], body: images[abs(sum) % images.count])
    }

    private func refuseNonStandardThumbnail(_ path: String) -> HTTPResponse? {
        guard path.contains("thumb/"), let last = path.split(separator: "/").last,
              let px = last.range(of: "px-"), let width = Int(last[..<px.lowerBound].filter(\.isNumber)) else { return nil }
        guard !ProviderRules.thumbnailSteps.contains(width) else { return nil }
        ruleState.withLock { $0.refusedThumbnails += 1 }
        return .text("Use thumbnail steps listed on https://w.wiki/GHai", status: HTTPStatus(429))
    }
}
