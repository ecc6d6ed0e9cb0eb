import Foundation
import HTTPServer
import Synchronization

/// A Flickr-compatible photo service for tests, benchmarks and offline demos. It answers
/// flickr.photos.search for any coordinate with made-up photos whose images are the sample
/// photos in Photos/ (public domain and CC0, see Photos/SOURCES.md), and it can misbehave on
/// purpose: latency, errors, empty areas, garbage, truncated, slow, oversized or non-image bodies.
public final class PhotoFixture: Sendable {
    public enum SearchFault: String, Sendable {
        case none, garbage, truncated, html, invalidKey
        /// Flickr's code 201 "Sorry, the Flickr API service is not currently available." (JSON).
        case apiUnavailable
        /// Flickr answering XML although JSON was asked for: code 105, then code 100 (recorded answers
        /// of this shape are in Tests/Fixtures/recorded/flickr).
        case xmlUnavailable, xmlInvalidKey
        /// HTTP 503 without Retry-After: the service (or its load balancer) is down.
        case serviceUnavailable
        /// HTTP 429 with Retry-After: 1, a throttled client.
        case tooManyRequests
    }

    public enum ImageFault: Sendable, Equatable {
        case none
        case notAnImage                 // an HTML page with 200 and Content-Type image/jpeg
        case truncated                  // Content-Length promises more than is sent
        case oversized(bytes: Int)      // a valid JPEG start followed by padding
        case slow(bytesPerSecond: Int)
        case redirect(to: String)       // e.g. file:///etc/passwd
        case status(Int)
        /// 503 with Retry-After (seconds) when given: the image host down, or asking for a wait.
        case unavailable(retryAfter: Int?)
    }

    public struct Options: Sendable {
        /// Seconds to wait before every answer (search and image).
        public var latency: Double = 0
        /// Extra seconds per position in the page for images (image n of a page waits n × this), so
        /// an album's photos arrive one after another instead of all at once.
        public var imageStagger: Double = 0
        /// Pages of results for any coordinate.
        public var pages = 40
        /// South of this latitude there are no photos (the Southern Ocean), for "No photos found".
        public var emptyBelowLatitude: Double = -60
        /// Fraction of all requests answered with 500.
        public var errorRate: Double = 0
        /// The first N searches answer 500 (then all is well): for retry tests.
        public var failFirstSearches = 0
        /// What those first N searches answer instead of 500 (e.g. .apiUnavailable for Flickr's 201).
        public var firstSearchesFault: SearchFault?
        /// The rules the real services keep (ProviderRules.swift): Flickr's limiting agent and result
        /// window, Wikimedia's thumbnail steps, rate limits and maxlag.
        public var rules = ProviderRules()
        public var searchFault: SearchFault = .none
        public var imageFault: ImageFault = .none
        /// Apply `imageFault` to every Nth image only (1: all of them).
        public var faultyImageEvery = 1
        /// Every search page names one photo twice (its second photo again in place of its
        /// sixth), as Flickr's search is known to: the answer still has `per_page` entries.
        public var repeatsAPhoto = false
        /// The image at this position of every page always answers 503 (no Retry-After), while
        /// the rest of its host is fine: one bad image, not an outage.
        public var brokenImagePosition: Int?
        public var photosDirectory = PhotoFixture.bundledPhotos
        public var host = "127.0.0.1"
        public var port = 0
        /// Seconds charged once per new connection, before its first request is read (a TCP + TLS
        /// handshake), next to `latency`, which every request pays.
        public var connectLatency: Double = 0
        /// A hostile provider: when set, the first photos of every search page point at this port
        /// on loopback (and at other internal or non-http addresses, or redirect there); the rest
        /// of the page is good. Tests listen on the port and count hits (HostileImages.swift).
        public var hostileCanaryPort: Int?
        /// Serve one of this many distinct images per photo id, 640 × 480 (Flickr's url_z), instead of the ten
        /// sample photos (DistinctPhotos.swift); 0: the samples.
        public var distinctPhotos = 0
        /// Make every piece of the distinct images before listening (otherwise on first use).
        public var prepareDistinctPhotos = false
        public init() {}
    }

    /// The sample photos next to this source file.
    public static var bundledPhotos: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Photos").path
    }

    public let options: Options
    /// The search fault in force; starts as options.searchFault and can change while running.
    private let currentSearchFault: Mutex<SearchFault>
    /// The image fault and how often it applies, switchable while the fixture runs.
    private let currentImageFault: Mutex<(fault: ImageFault, every: Int)>
    private let server: HTTPServer
    let images: [[UInt8]]
    /// With `distinctPhotos`: the images photo ids get instead of `images`.
    let distinct: DistinctPhotos?
    private let counters = Mutex((searches: 0, images: 0, licenseLists: 0))
    /// Requests seen and rule counters (ProviderRules.swift).
    let ruleState = Mutex(RuleState())

    public var port: Int { server.port }
    public var baseURL: String { "http://\(options.host):\(port)" }
    /// Give this to the app as FLICKR_API_URL.
    public var apiURL: String { baseURL + "/services/rest/" }
    public var searchCount: Int { counters.withLock { $0.searches } }
    public var imageCount: Int { counters.withLock { $0.images } }
    /// flickr.photos.licenses.getInfo calls (not searches).
    public var licenseListCount: Int { counters.withLock { $0.licenseLists } }
    /// Connections accepted so far: with keep-alive and a shared connection cache, far fewer than requests.
    public var connectionCount: Int { server.acceptedConnections }

    public init(options: Options = Options()) throws {
        self.options = options
        currentSearchFault = Mutex(options.searchFault)
        currentImageFault = Mutex((options.imageFault, options.faultyImageEvery))
        let files = (try FileManager.default.contentsOfDirectory(atPath: options.photosDirectory))
            .filter { $0.hasSuffix(".jpg") }.sorted()
        images = try files.map { Array(try Data(contentsOf: URL(fileURLWithPath: options.photosDirectory + "/" + $0))) }
        guard !images.isEmpty else { throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: options.photosDirectory]) }
        distinct = options.distinctPhotos > 0 ? DistinctPhotos(count: options.distinctPhotos, samples: images) : nil
        if options.prepareDistinctPhotos { distinct?.prepareAll() }
        var configuration = ServerConfiguration()
        configuration.host = options.host
        configuration.port = options.port
        configuration.accessLog = nil
        configuration.handlerConcurrency = 64
        configuration.connectionSetupDelay = options.connectLatency
        var router = Router()
        let fixture = Unchecked()
        // For the container's healthcheck (`virtual-tourist healthcheck --port 8090` in docker-compose.yml,
        // which asks /readyz); the fixture has nothing to wait for, so both answer at once.
        router.get("/healthz") { _ in HTTPResponse(status: .ok, headers: ["Content-Type": "text/plain"], body: Array("ok\n".utf8)) }
        router.get("/readyz") { _ in HTTPResponse(status: .ok, headers: ["Content-Type": "text/plain"], body: Array("ready\n".utf8)) }
        router.get("/services/rest") { request in try fixture.value!.search(request) }
        router.get("/photos/:file") { request in try fixture.value!.image(request) }
        router.get("/w/api.php") { request in try fixture.value!.commons(request) }
        // Wikimedia's upload layout: originals and thumbnails at /wikipedia/commons/… (ProviderRules.swift).
        router.get("/wikipedia/*file") { request in try fixture.value!.commonsImage(request) }
        router.get("/recorded/*file") { request in try fixture.value!.recordedImage(request) }
        router.get("/hostile-redirect/:file") { request in try fixture.value!.hostileRedirect(request) }
        server = HTTPServer(configuration: configuration, handler: router)
        fixture.value = self
        try server.start()
    }

    public func stop() { server.shutdown(gracePeriod: 1) }

    /// Starts (or stops) misbehaving on searches, e.g. after a good album has been made.
    public func setSearchFault(_ fault: SearchFault) { currentSearchFault.withLock { $0 = fault } }
    /// Images answer `fault` from now on (every `every`th one).
    public func setImageFault(_ fault: ImageFault, every: Int = 1) { currentImageFault.withLock { $0 = (fault, every) } }

    /// A weak reference handed to the server's handler; set once, before the server starts.
    private final class Unchecked: @unchecked Sendable { weak var value: PhotoFixture? }

    // MARK: Search

    private func search(_ request: HTTPRequest) throws -> HTTPResponse {
        if request.queryValue("method") == "flickr.photos.licenses.getInfo" {
            counters.withLock { $0.licenseLists += 1 }
            wait()
            return .json(Self.licensesAnswer)
        }
        let count = counters.withLock { $0.searches += 1; return $0.searches }
        log(request)
        wait()
        if count <= options.failFirstSearches, let fault = options.firstSearchesFault, let answer = Self.faultAnswer(fault) {
            return answer
        }
        if count <= options.failFirstSearches || Double.random(in: 0..<1) < options.errorRate {
            return .text("Internal Server Error", status: .internalServerError)
        }
        if let recorded = options.rules.recordedFlickrSearch { return replay(recorded, request) }
        guard request.queryValue("method") == "flickr.photos.search" else {
            return .json(#"{"stat":"fail","code":112,"message":"Method not found"}"#)
        }
        let key = request.queryValue("api_key") ?? ""
        let fault = currentSearchFault.withLock { $0 }
        if key.isEmpty || fault == .invalidKey {
            return .json(#"{"stat":"fail","code":100,"message":"Invalid API Key (Key has invalid format)"}"#)
        }
        if let answer = Self.faultAnswer(fault) { return answer }
        switch fault {
        case .apiUnavailable, .xmlUnavailable, .xmlInvalidKey, .serviceUnavailable, .tooManyRequests: break
        case .garbage: return .json("{\"photos\": [1, 2, ")
        case .html: return .html("<html><body>Gateway error</body></html>")
        case .truncated:
            var response = HTTPResponse.json(#"{"photos":{"page":1,"pages":"3","#)
            response.headers.set("Content-Length", "500")
            return truncatedStream(response, body: Array(#"{"photos":{"page":1,"pages":"3","#.utf8), promised: 500)
        case .none, .invalidKey: break
        }
        guard let lat = request.queryValue("lat").flatMap(Double.init), let lon = request.queryValue("lon").flatMap(Double.init) else {
            return .json(#"{"stat":"fail","code":3,"message":"Parameterless searches have been disabled."}"#)
        }
        let perPage = min(max(Int(request.queryValue("per_page") ?? "") ?? 100, 1), 500)
        let askedPage = max(Int(request.queryValue("page") ?? "") ?? 1, 1)
        var pages = lat < options.emptyBelowLatitude ? 0 : options.pages
        var page = askedPage
        var shown = perPage
        if options.rules.flickr && !Self.hasLimitingAgent(request) {
            // Flickr: without a limiting agent a geo query returns only photos added in the last 12 hours.
            pages = min(pages, 1)
            shown = min(perPage, options.rules.photosOfTheLast12Hours)
        }
        if options.rules.flickr && (page - 1) * perPage >= ProviderRules.flickrResultWindow {
            page = 1  // past the 4,000-result window Flickr repeats results already given
        }
        let place = Self.placeNumber(lat: lat, lon: lon)
        // Image addresses on the host the client used, so they work behind Docker's names too.
        let origin = request.headers["Host"].map { "http://\($0)" } ?? baseURL
        // Which photos of the place this page shows: (page, index) of the unfiltered list, so a
        // photo keeps its id (and date) whatever the question.
        var entries: [(page: Int, index: Int)] = page <= pages ? (0..<shown).map { (page, $0) } : []
        var total = pages == 1 ? shown : pages * perPage
        let minTaken = FixtureDate.bound(request.queryValue("min_taken_date")), maxTaken = FixtureDate.bound(request.queryValue("max_taken_date"))
        if minTaken != nil || maxTaken != nil {
            // Flickr compares datetaken, at whatever granularity: a date it does not know is the
            // upload time there, and is matched as such.
            // The place's photos are its pages of 30 (the app's page size), whatever this request's
            // per_page: a count asked with per_page=1 counts the same photos.
            let all = pages == 0 ? [] : (1...min(pages, ProviderRules.flickrResultWindow / 30)).flatMap { p in (0..<30).map { (page: p, index: $0) } }
            let matching = all.filter { entry in
                let date = FixtureDate.of(id: place * 1_000_000 + entry.page * 1000 + entry.index).datetaken
                return (minTaken.map { date >= $0 } ?? true) && (maxTaken.map { date <= $0 } ?? true)
            }
            total = matching.count
            pages = (matching.count + perPage - 1) / perPage
            entries = Array(matching.dropFirst((page - 1) * perPage).prefix(perPage))
        }
        var photos: [String] = []
        for (page, index) in entries {
            let id = place * 1_000_000 + page * 1000 + (options.repeatsAPhoto && index == 5 && shown > 5 ? 1 : index)
            let image = "\(origin)/photos/\(id)"
            if let port = options.hostileCanaryPort, index < Self.hostileAddresses(canaryPort: port, origin: origin, id: id).count {
                photos.append(hostilePhoto(id: id, index: index, page: page, canaryPort: port, origin: origin))
                continue
            }
            // Flickr's own quirks: numbers as strings, some extras missing.
            let taken = FixtureDate.of(id: id)
            photos.append("""
                {"id":"\(id)","owner":"\(10_000 + id % 97)@N0\(id % 7)","secret":"f1x","server":"65535","farm":66,\
                "title":"Fixture photo \(page)-\(index + 1)","ispublic":1,"isfriend":0,"isfamily":0,\
                "license":"\(id % 18)","ownername":"Fixture Photographer \(id % 13)",\
                "datetaken":"\(taken.datetaken)","datetakengranularity":"\(taken.granularity)"\(taken.unknown ? ",\"datetakenunknown\":\"1\"" : ""),\
                "url_q":"\(image)_q.jpg","height_q":150,"width_q":"150",\
                "url_m":"\(image)_m.jpg"\(index % 3 == 0 ? "" : ",\"url_z\":\"\(image)_z.jpg\"")}
                """)
        }
        return .json("""
            {"photos":{"page":\(askedPage),"pages":"\(pages)","perpage":\(perPage),"total":"\(total == 0 ? "" : String(total))","photo":[\(photos.joined(separator: ","))]},"stat":"ok"}
            """)
    }

    /// A stable number for a place (two decimals, about a kilometre), so the same pin sees the
    /// same photos and different pins see different ones.
    public static func placeNumber(lat: Double, lon: Double) -> Int {
        let a = Int(((lat + 90) * 100).rounded()), b = Int(((lon + 180) * 100).rounded())
        return (a * 36_001 + b) % 9_000 + 1000
    }

    // MARK: Wikimedia Commons (action=query: list=geosearch, then prop=imageinfo)

    private func commons(_ request: HTTPRequest) throws -> HTTPResponse {
        counters.withLock { $0.searches += 1 }
        log(request)
        wait()
        return commonsAnswer(request)
    }

    // MARK: Images

    private func image(_ request: HTTPRequest) throws -> HTTPResponse {
        let count = counters.withLock { $0.images += 1; return $0.images }
        wait()
        if Double.random(in: 0..<1) < options.errorRate { return .text("Internal Server Error", status: .internalServerError) }
        let name = request.parameters["file"] ?? ""
        guard let id = Int(name.prefix { $0.isNumber }) else { throw HTTPError.notFound }
        if options.imageStagger > 0 { usleep(UInt32(options.imageStagger * Double(id % 1000) * 1_000_000)) }
        if let broken = options.brokenImagePosition, id % 1000 == broken {
            return .text("Service Unavailable", status: HTTPStatus(503))
        }
        // Vary with the page too, so New Collection looks different, not just numbered differently.
        let bytes = distinct.flatMap { $0.image(forID: id) } ?? images[(id % 1000 + id / 1000) % images.count]
        let (fault, every) = currentImageFault.withLock { $0 }
        let faulty = fault != .none && count % max(every, 1) == 0
        guard faulty else { return HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"], body: bytes) }
        switch fault {
        case .none:
            return HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"], body: bytes)
        case .notAnImage:
            return HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"],
                                body: Array("<!doctype html><html><body>Not a photo</body></html>".utf8))
        case .truncated:
            return truncatedStream(HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"]),
                                   body: Array(bytes.prefix(bytes.count / 2)), promised: bytes.count)
        case .oversized(let size):
            var body = bytes
            body += [UInt8](repeating: 0, count: max(0, size - bytes.count))
            return HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"], body: body)
        case .slow(let rate):
            var response = HTTPResponse(status: .ok, headers: ["Content-Type": "image/jpeg"])
            response.headers.set("Content-Length", String(bytes.count))
            response.body = .stream(heartbeat: nil) { stream in
                let chunk = max(1, rate / 10)
                var offset = 0
                while offset < bytes.count, stream.isOpen {
                    stream.write(Array(bytes[offset..<min(bytes.count, offset + chunk)]))
                    offset += chunk
                    usleep(100_000)
                }
                stream.close()
            }
            return response
        case .redirect(let target):
            return HTTPResponse(status: .found, headers: ["Location": target])
        case .status(let code):
            return .text("status \(code)", status: HTTPStatus(code))
        case .unavailable(let retryAfter):
            var response = HTTPResponse.text("Service Unavailable", status: HTTPStatus(503))
            if let retryAfter { response.headers.set("Retry-After", String(retryAfter)) }
            return response
        }
    }

    func truncatedStream(_ head: HTTPResponse, body: [UInt8], promised: Int) -> HTTPResponse {
        var response = head
        response.headers.set("Content-Length", String(promised))
        response.body = .stream(heartbeat: nil) { stream in
            stream.write(body)
            stream.close()
        }
        return response
    }

    func wait() {
        if options.latency > 0 { usleep(UInt32(options.latency * 1_000_000)) }
    }
}
