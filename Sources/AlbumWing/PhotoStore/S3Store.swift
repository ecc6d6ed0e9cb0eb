import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPClient
import HTTPServer
import Postgres

/// Where an S3-compatible object store is and how to sign for it (PHOTO_STORE=s3://bucket[/prefix]
/// and the S3_* settings; docs/architecture.md, PhotoStore).
public struct S3Settings: Sendable, Equatable {
    /// scheme://host[:port] without a path, e.g. http://127.0.0.1:9000 or https://s3.eu-west-1.amazonaws.com.
    public var endpoint: String
    public var bucket: String
    /// Keys are `prefix/<sha256>`, or just `<sha256>` with an empty prefix.
    public var prefix: String
    public var region: String
    public var accessKeyID: String
    public var secretAccessKey: String

    public init(endpoint: String, bucket: String, prefix: String = "", region: String = "us-east-1",
                accessKeyID: String, secretAccessKey: String) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.prefix = prefix
        self.region = region
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
    }

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    /// From PHOTO_STORE (`s3://bucket[/prefix]`) and the other settings; nil endpoint is AWS's for
    /// the region. Refuses what would only fail later, with the setting to fix named.
    public static func parse(store: String, endpoint: String?, region: String?, accessKeyID: String?,
                             secretAccessKey: String?) throws -> S3Settings {
        // Troubleshooting: PHOTO_STORE must start with s3://
        guard store.hasPrefix("s3://") else { throw Invalid(description: "PHOTO_STORE must start with s3:// for an object store, not \(store)") }
        let rest = store.dropFirst("s3://".count).split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let bucket = rest.first, isBucketName(bucket) else {
            // Troubleshooting: the bucket name must be 3–63 characters
            throw Invalid(description: "PHOTO_STORE=s3://BUCKET[/prefix]: the bucket name must be 3–63 characters of a–z, 0–9, '.' and '-' (got \(store))")
        }
        let prefix = rest.dropFirst().joined(separator: "/")
        guard prefix.utf8.allSatisfy({ isKeyCharacter($0) }) else {
            // Troubleshooting: PHOTO_STORE's prefix may hold
            throw Invalid(description: "PHOTO_STORE's prefix may hold letters, digits and . _ - / only (got \(prefix))")
        }
        let region = (region?.isEmpty == false ? region! : "us-east-1")
        guard !region.isEmpty, region.utf8.allSatisfy({ isKeyCharacter($0) && $0 != 0x2F }) else {
            // Troubleshooting: S3_REGION must be a region name
            throw Invalid(description: "S3_REGION must be a region name such as us-east-1, not \(region)")
        }
        let endpoint = (endpoint?.isEmpty == false ? endpoint! : "https://s3.\(region).amazonaws.com")
        guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = url.host, !host.isEmpty, url.user == nil, url.query == nil, url.path.isEmpty || url.path == "/" else {
            // Troubleshooting: S3_ENDPOINT must be an http:// or https:// address without a path
            throw Invalid(description: "S3_ENDPOINT must be an http:// or https:// address without a path, e.g. http://127.0.0.1:9000 (got \(endpoint))")
        }
        guard let key = accessKeyID, !key.isEmpty, let secret = secretAccessKey, !secret.isEmpty else {
            // Troubleshooting: needs S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY
            throw Invalid(description: "an s3:// PHOTO_STORE needs S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
        }
        guard !key.contains(":"), !key.contains(where: \.isNewline), !secret.contains(where: \.isNewline) else {
            // Troubleshooting: S3_ACCESS_KEY_ID may not contain ':'
            throw Invalid(description: "S3_ACCESS_KEY_ID may not contain ':' or line breaks")
        }
        let trimmed = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        return S3Settings(endpoint: trimmed, bucket: bucket, prefix: prefix, region: region, accessKeyID: key, secretAccessKey: secret)
    }

    package static func isBucketName(_ name: String) -> Bool {
        (3...63).contains(name.utf8.count)
            && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D }
    }

    package static func isKeyCharacter(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x2E || c == 0x5F || c == 0x2D || c == 0x2F
    }
}

/// Blobs as objects in an S3-compatible store (MinIO, Garage, Ceph RGW, AWS S3), addressed
/// path-style: `endpoint/bucket/prefix/<sha256>`. Requests go through HTTPClient and are signed
/// by libcurl (CURLOPT_AWS_SIGV4); `x-amz-content-sha256` is the blob's SHA-256, which is its name,
/// so a PUT costs no second hash.
///
/// **put vs the collector.** S3 has no lock file, and every instance shares the bucket; they also
/// share the database, so PostgreSQL advisory locks stand in for FileStore's flock: put holds the
/// blob's lock shared around "refresh" (CopyObject onto itself, which moves LastModified on) and
/// delete holds it exclusive around "check LastModified, DELETE". A put that finds no object
/// creates it without the lock: the new object is younger than any cutoff, and an object can only
/// have gone missing through a delete whose exclusive section has ended (S3 reads its writes).
/// The lock is a transaction-level lock on a small pool of its own, so a hanging store can tie up
/// at most that pool, never the connections pages need.
///
/// **Failures.** Transport errors and 500/502/503/504 (SlowDown included) are retried twice, after
/// 0.2 s and 0.6 s; timeouts are not (each would add the whole timeout again). What is left is a
/// PhotoStoreError naming the operation, the status and S3's error code — a download fails that
/// photo with the reason in the log, /photos/:id answers 503.
///
/// `@unchecked Sendable`: the tuning `var`s below are set once, before the store is shared (tests).
public final class S3Store: PhotoStore, @unchecked Sendable {
    public let settings: S3Settings
    package let client: HTTPClient
    package let signing: HTTPClient.AWSSigV4
    /// For the advisory locks, owned by the store; nil only in tests that exercise the store alone.
    package let locks: PostgresPool?
    /// Keys per ListObjectsV2 page (1000 is S3's maximum; tests use a few to walk the pages).
    package var pageSize = 1000
    /// Pause before each retry of a transient failure.
    package var retryDelays: [Double] = [0.2, 0.6]
    /// The whole time a read (GET, the bucket check) may take, waiting for a connection included:
    /// a person's photo request holds a handler slot meanwhile, where a write only holds a
    /// download slot (the client's total timeout, up to 20 s).
    package var readTimeout: Double = 5

    /// The namespace of the advisory locks (two-int4 form: never collides with the bigint keys the
    /// migrator and the rate limits use). "VTS3".
    package static let lockNamespace: Int32 = 0x5654_5333

    public init(settings: S3Settings, locks: PostgresPool?, client options: HTTPClient.Options = HTTPClient.Options()) {
        self.settings = settings
        var options = options
        // The operator configured this endpoint: it may be on loopback or the LAN (MinIO next to
        // the app), like a provider URL they set. Everything else stays behind the address guard.
        options.internalOrigins = [settings.endpoint]
        // Short: a page waiting for an image should not wait long for a store that is down, and a
        // blocked download slot holds up a whole album.
        options.connectTimeout = min(options.connectTimeout, 3)
        options.totalTimeout = min(options.totalTimeout, 20)
        client = HTTPClient(options: options)
        signing = HTTPClient.AWSSigV4(provider: "aws:amz:\(settings.region):s3", accessKeyID: settings.accessKeyID,
                                      secretAccessKey: settings.secretAccessKey)
        self.locks = locks
    }

    /// The store owns `locks` (App makes a pool for it alone) and closes it with its connections.
    deinit {
        client.shutdown()
        locks?.close()
    }

    package func key(_ hash: String) -> String { settings.prefix.isEmpty ? hash : settings.prefix + "/" + hash }

    // MARK: PhotoStore

    public func put(_ bytes: [UInt8]) throws -> String {
        let hash = SHA256.hex(bytes)
        let key = key(hash)
        let head = try send("HEAD", key: key)
        switch head.status {
        case 200:
            // Stored already: refresh its age, or store it again if it was removed meanwhile.
            if try !refresh(hash) { try upload(bytes, hash: hash, key: key) }
        default:
            // 404: not there. Anything else (a HEAD answer has no body to say why): the PUT
            // either works (a key allowed to write but not to read) or says why it does not.
            try upload(bytes, hash: hash, key: key)
        }
        return hash
    }

    /// Copies the object onto itself (CopyObject, metadata replaced), which moves its
    /// LastModified on, under the shared lock: a sweep that judged it old cannot remove it after
    /// this returns.
    public func refresh(_ hash: String) throws -> Bool {
        guard isPhotoHash(hash) else { return false }
        let key = key(hash)
        return try withLock(hash, exclusive: false) {
            let copy = try send("PUT", key: key, headers: [
                "x-amz-copy-source": "/\(settings.bucket)/\(key)",
                "x-amz-metadata-directive": "REPLACE",
                "Content-Type": "application/octet-stream",
            ], body: [])
            if copy.status == 404 && errorCode(copy) == "NoSuchKey" { return false }
            try expect(copy, [200], "refresh (CopyObject) of \(key)")
            // CopyObject may answer 200 with an error in the body (S3 does, mid-copy).
            if errorCode(copy) != nil { throw failure(copy, "refresh (CopyObject) of \(key)") }
            return true
        }
    }

    /// An upload's bytes sent from its file as curl reads them (one PUT: S3 takes up to 5 GB so,
    /// far past any photo's limit).
    public func put(_ file: BlobFile) throws -> String {
        let key = key(file.hash)
        let upload = { [self] in
            let response = try send("PUT", key: key, headers: ["Content-Type": "application/octet-stream"],
                                    file: UploadFile(descriptor: file.body.descriptor, offset: file.offset, count: file.count), payloadHash: file.hash)
            try expect(response, [200], "PUT of \(key)")
        }
        if try send("HEAD", key: key).status == 200 {
            if try !refresh(file.hash) { try upload() }
        } else {
            try upload()
        }
        return file.hash
    }

    private func upload(_ bytes: [UInt8], hash: String, key: String) throws {
        let response = try send("PUT", key: key, headers: ["Content-Type": "application/octet-stream"], body: bytes, payloadHash: hash)
        try expect(response, [200], "PUT of \(key)")
    }

    public func get(_ hash: String) throws -> [UInt8]? {
        guard isPhotoHash(hash) else { return nil }
        let response = try send("GET", key: key(hash), timeout: readTimeout)
        if response.status == 404 && errorCode(response) != "NoSuchBucket" { return nil }
        try expect(response, [200], "GET of \(key(hash))")
        return response.body
    }

    public func list() throws -> [(hash: String, modified: Date)] {
        var result: [(hash: String, modified: Date)] = []
        var token: String?
        let keyPrefix = settings.prefix.isEmpty ? "" : settings.prefix + "/"
        // A bucket of a billion objects is 1,000,000 pages; past that an endless loop is the
        // likelier story (a server repeating itself).
        for _ in 0..<1_000_000 {
            var query = [("list-type", "2"), ("max-keys", String(pageSize))]
            // The prefix without its last '/': keys are filtered below anyway, and a '/' in a
            // query value is where S3-compatible servers disagree about signing (moto's server
            // re-encodes it; docs/architecture.md).
            if !settings.prefix.isEmpty { query.append(("prefix", settings.prefix)) }
            if let token { query.append(("continuation-token", token)) }
            let response = try send("GET", key: nil, query: query)
            try expect(response, [200], "listing of \(settings.bucket)")
            let page = try S3ListPage(parsing: response.body)
            for object in page.objects where object.key.hasPrefix(keyPrefix) {
                let hash = String(object.key.dropFirst(keyPrefix.count))
                if isPhotoHash(hash) { result.append((hash, object.modified)) }
            }
            guard page.truncated else { return result }
            guard let next = page.nextToken, !next.isEmpty, next != token else {
                throw PhotoStoreError(description: "S3 listing of \(settings.bucket): truncated without a new continuation token", unavailable: true)
            }
            token = next
        }
        throw PhotoStoreError(description: "S3 listing of \(settings.bucket): too many pages", unavailable: true)
    }

    public func delete(_ hash: String, ifNotModifiedSince olderThan: Date) throws -> Bool {
        guard isPhotoHash(hash) else { return false }
        let key = key(hash)
        return try withLock(hash, exclusive: true) {
            let head = try send("HEAD", key: key)
            if head.status == 404 { return false }
            try expect(head, [200], "HEAD of \(key)")
            guard let text = head.headers["last-modified"], let seconds = HTTPDate.parse(text) else {
                throw PhotoStoreError(description: "S3 HEAD of \(key): no readable Last-Modified", unavailable: true)
            }
            // Last-Modified has whole seconds, rounded down: a write 0.9 s ago may read as 1.9 s.
            // Counted a second younger, a blob refreshed just now is never taken for an old one.
            guard Date(timeIntervalSince1970: Double(seconds) + 1) < olderThan else { return false }
            let response = try send("DELETE", key: key)
            try expect(response, [204, 200], "DELETE of \(key)")
            return true
        }
    }

    // MARK: Requests

    /// One signed request with retries of transient failures. `payloadHash` is the body's SHA-256
    /// (the empty body's when there is none).
    package func send(_ method: String, key: String?, query: [(String, String)] = [], headers: [String: String] = [:],
              body: [UInt8]? = nil, file: UploadFile? = nil, payloadHash: String? = nil, timeout: Double? = nil) throws -> HTTPClientResponse {
        var url = settings.endpoint + "/" + settings.bucket
        if let key { url += "/" + key }
        if !query.isEmpty {
            // Sorted by name and encoded as SigV4's canonical form wants: libcurl 7.88 signs the
            // query as written.
            url += "?" + query.sorted { $0.0 < $1.0 }.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&")
        }
        var headers = headers
        headers["x-amz-content-sha256"] = payloadHash ?? (body.map { SHA256.hex($0) } ?? Self.emptyHash)
        var attempt = 0
        while true {
            do {
                let response = try client.send(method, url, headers: headers, body: body, file: file, sigV4: signing, timeout: timeout)
                guard [500, 502, 503, 504].contains(response.status), attempt < retryDelays.count else { return response }
            } catch let error as HTTPClientError {
                switch error {
                case .transport where attempt < retryDelays.count: break
                case .transport, .timedOut:
                    // timedOut: no answer in time, or no connection of the client's came free in
                    // time (the requests ahead of it hang).
                    throw PhotoStoreError(description: "S3 \(method) \(url): \(error)", outage: true)  // url names the bucket
                default: throw PhotoStoreError(description: "S3 \(method) \(url): \(error)", unavailable: true)
                }
            }
            usleep(useconds_t(retryDelays[attempt] * 1_000_000))
            attempt += 1
        }
    }

    package static let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// RFC 3986 unreserved characters as they are, everything else %XX (SigV4's URI encoding).
    package static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            if (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E {
                out.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    private func expect(_ response: HTTPClientResponse, _ statuses: Set<Int>, _ what: String) throws {
        guard !statuses.contains(response.status) else { return }
        throw failure(response, what)
    }

    /// The error an S3 answer describes, with a hint for the settings a person can fix.
    private func failure(_ response: HTTPClientResponse, _ what: String) -> PhotoStoreError {
        let code = errorCode(response)
        let message = S3ListPage.firstElement("Message", in: response.body, limit: 512)
        var text = "S3 \(what) in bucket \(settings.bucket): HTTP \(response.status)"
        if let code { text += " \(code)" }
        if let message { text += ": \(message)" }
        switch code {
        case "SignatureDoesNotMatch": text += " (check S3_SECRET_ACCESS_KEY and S3_REGION)"
        case "InvalidAccessKeyId": text += " (check S3_ACCESS_KEY_ID)"
        case "NoSuchBucket": text += " (bucket \(settings.bucket) at \(settings.endpoint): create it, or check PHOTO_STORE)"
        case "AccessDenied": text += " (the key may not do this: check the bucket's policy and the key's permissions)"
        case "PermanentRedirect", "AuthorizationHeaderMalformed": text += " (check S3_REGION and S3_ENDPOINT)"
        case nil where response.status == 403:
            text += " (refused: check S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, S3_REGION and the key's permissions)"
        default: break
        }
        // 5xx (SlowDown included) after the retries, throttling (429, SlowDown and RequestTimeout
        // also come as 400/503 with their code), or an answer that no request can pass (no
        // bucket, keys it does not know): the store is down, overloaded or misconfigured, not
        // refusing this write, and albums wait for it. AccessDenied may be a policy on some keys only.
        let storeWide = ["NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "RequestTimeout", "SlowDown",
                         "ServiceUnavailable", "InternalError", "TooManyRequests"].contains(code ?? "")
        return PhotoStoreError(description: text, unavailable: true, outage: response.status >= 500 || response.status == 429 || storeWide)
    }

    private func errorCode(_ response: HTTPClientResponse) -> String? {
        guard response.status != 200 || response.body.count < 4096 else { return nil }
        guard let code = S3ListPage.firstElement("Code", in: response.body, limit: 128) else { return nil }
        return code.utf8.allSatisfy({ S3Settings.isKeyCharacter($0) }) ? code : nil
    }

    /// `body` under a transaction-level advisory lock on the blob (shared or exclusive), released
    /// at commit or rollback — and by the server if the connection breaks.
    ///
    /// Failing to take the lock (the pool's connections all busy for its wait, the database down,
    /// the lock itself waited out) says nothing about this blob: it is an outage of writes, so the
    /// album keeps the photo pending and waits, and the breaker stops writes while reads (which
    /// take no lock) carry on. `body`'s own errors pass as they are.
    private func withLock<T>(_ hash: String, exclusive: Bool, _ body: () throws -> T) throws -> T {
        guard let locks else { return try body() }
        let objectKey = Int32(bitPattern: UInt32(hash.prefix(8), radix: 16) ?? 0)
        do {
            return try locks.transaction { db in
                try db.query("SELECT \(exclusive ? "pg_advisory_xact_lock" : "pg_advisory_xact_lock_shared")($1::int4, $2::int4)",
                             [Int(Self.lockNamespace), Int(objectKey)])
                return try body()
            }
        } catch let error as PhotoStoreError {
            throw error
        } catch {
            throw Self.lockFailure(error, hash: hash)
        }
    }

    package static func lockFailure(_ error: any Error, hash: String) -> PhotoStoreError {
        let why = (error as? PostgresError).map { $0.meansDatabaseUnavailable ? $0.unavailableReason : "\($0)" } ?? "\(error)"
        return PhotoStoreError(description: "S3 store: cannot take the advisory lock for \(hash.prefix(8)): \(why)",
                               outage: true, writesOnly: true)
    }

    // MARK: For tests and the start-up check

    /// Creates the bucket (tests; operators create theirs with their own tools).
    package func createBucket() throws {
        let response = try send("PUT", key: nil, body: [])
        guard response.status == 200 || errorCode(response) == "BucketAlreadyOwnedByYou" else {
            throw failure(response, "creating bucket \(settings.bucket)")
        }
    }

    /// Whether the bucket answers with these credentials (HEAD bucket): nil when it does, or why not.
    public func problem() -> String? {
        do {
            let response = try send("HEAD", key: nil, timeout: readTimeout)
            switch response.status {
            case 200: return nil
            case 403: return "S3 bucket \(settings.bucket) at \(settings.endpoint): access denied (HTTP 403; check the credentials, S3_REGION and the key's permissions)"
            case 404: return "S3 bucket \(settings.bucket) at \(settings.endpoint) does not exist"
            default: return "S3 bucket \(settings.bucket) at \(settings.endpoint): HTTP \(response.status)"
            }
        } catch {
            return "\(error)"
        }
    }
}

/// One page of a ListObjectsV2 answer, read from untrusted XML with bounds: the body is capped by
/// HTTPClient (8 MB), at most 10,000 entries are read per page (S3 sends 1,000), each key and date
/// is capped, and nothing but the few elements below is looked at. No XML parser: the answer's
/// shape is flat and fixed, and a parser would also expand what we never need.
package struct S3ListPage {
    package var objects: [(key: String, modified: Date)] = []
    package var truncated = false
    package var nextToken: String?

    package init(parsing body: [UInt8]) throws {
        let text = String(decoding: body, as: UTF8.self)
        guard text.contains("<ListBucketResult") else {
            throw PhotoStoreError(description: "S3 listing: not a ListBucketResult", unavailable: true)
        }
        var rest = text[...]
        while let open = rest.range(of: "<Contents>"), let close = rest.range(of: "</Contents>", range: open.upperBound..<rest.endIndex) {
            let entry = rest[open.upperBound..<close.lowerBound]
            rest = rest[close.upperBound...]
            guard objects.count < 10_000 else { throw PhotoStoreError(description: "S3 listing: too many entries in one page", unavailable: true) }
            guard let key = Self.element("Key", in: entry, limit: 1024), let modified = Self.element("LastModified", in: entry, limit: 40),
                  let date = Self.parseISO8601(modified) else { continue }
            objects.append((Self.unescape(key), date))
        }
        // The page's own elements are outside the entries, before them (AWS, MinIO, moto) or after
        // them (Ceph RGW up to Reef, about 250 KB in for 1,000 keys): both places are read, the
        // whole body being bounded by HTTPClient's cap. Read from the first 64 KB only, a long
        // listing lost its token there and the collector stopped at the first 1,000 blobs.
        let head = text.range(of: "<Contents>").map { text[..<$0.lowerBound] } ?? text[...]
        func pageElement(_ name: String, limit: Int) -> String? {
            Self.element(name, in: head, limit: limit) ?? Self.element(name, in: rest, limit: limit)
        }
        truncated = pageElement("IsTruncated", limit: 8) == "true"
        nextToken = pageElement("NextContinuationToken", limit: 1024).map(Self.unescape)
    }

    package static func element(_ name: String, in text: Substring, limit: Int) -> String? {
        guard let open = text.range(of: "<\(name)>"), let close = text.range(of: "</\(name)>", range: open.upperBound..<text.endIndex) else { return nil }
        let value = text[open.upperBound..<close.lowerBound]
        return value.utf8.count <= limit ? String(value) : nil
    }

    package static func firstElement(_ name: String, in body: [UInt8], limit: Int) -> String? {
        element(name, in: String(decoding: body.prefix(64 * 1024), as: UTF8.self)[...], limit: limit)
    }

    package static func unescape(_ text: String) -> String {
        guard text.contains("&") else { return text }
        return text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }

    /// "2026-11-24T21:17:56.000Z" (fractions ignored; S3 keeps whole seconds).
    package static func parseISO8601(_ text: String) -> Date? {
        let u = Array(text.utf8)
        guard u.count >= 20, u[4] == 0x2D, u[7] == 0x2D, u[10] == 0x54, u[13] == 0x3A, u[16] == 0x3A, u.last == 0x5A else { return nil }
        func number(_ range: Range<Int>) -> Int32? { Int32(String(decoding: u[range], as: UTF8.self)) }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19) else { return nil }
        var tm = tm()
        tm.tm_year = year - 1900
        tm.tm_mon = month - 1
        tm.tm_mday = day
        tm.tm_hour = hour
        tm.tm_min = minute
        tm.tm_sec = second
        return Date(timeIntervalSince1970: Double(timegm(&tm)))
    }
}
