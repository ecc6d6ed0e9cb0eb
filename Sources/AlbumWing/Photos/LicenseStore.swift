import Foundation
import HTTPClient
import Log
import Postgres
import Synchronization
import Waiting

/// Licences as the provider states them (docs/architecture.md, "Licences"). Flickr photos carry a
/// licence id; its name and deed come from flickr.photos.licenses.getInfo, fetched once, kept in
/// PostgreSQL (provider_licenses) so every instance shows the same names, and fetched again when a
/// day old. An id the list does not know, or a photo without one, is credited "see the photo page"
/// and links no deed: a wrong licence is a false statement about someone's work.
public final class LicenseStore: Sendable {
    public struct License: Sendable, Equatable {
        public let name: String
        public let url: String?
        public init(name: String, url: String?) {
            self.name = name
            self.url = url
        }
    }

    /// What a photo whose licence is not known is credited with.
    public static let unknown = "see the photo page"

    package let pool: PostgresPool
    package let provider: String
    package let maxAge: Double
    private let fetch: @Sendable () throws -> [String: License]
    private let logger = Logger(label: "licenses")
    /// The list in memory and when it was fetched from the provider (a wall-clock date: the stored
    /// list's age counts across restarts); when a fetch last failed.
    private let cache = Mutex<(licenses: [String: License], fetchedAt: Date?, lastFailure: ContinuousClock.Instant?)>(([:], nil, nil))
    /// True while the list is loaded or fetched, so concurrent searches wait for one fetch.
    private let refreshing = Waitable(false)

    /// `fetch` asks the provider for its list (e.g. `FlickrProvider.licenseList`).
    public init(pool: PostgresPool, provider: String = "flickr", maxAge: Double = 86_400,
                fetch: @escaping @Sendable () throws -> [String: License]) {
        self.pool = pool
        self.provider = provider
        self.maxAge = maxAge
        self.fetch = fetch
    }

    /// The page with every photo of this provider credited from the list.
    public func credit(_ page: PhotoSearchPage) -> PhotoSearchPage {
        let list = licenses()
        let photos = page.photos.map { photo -> RemotePhoto in
            guard photo.provider == provider else { return photo }
            var credited = photo
            let license = photo.licenseCode.flatMap { list[$0] }
            credited.license = license?.name ?? Self.unknown
            credited.licenseURL = license?.url
            return credited
        }
        return PhotoSearchPage(photos: photos, page: page.page, pages: page.pages, total: page.total)
    }

    /// The current list: from memory while fresh, else from the database, else from the provider.
    /// A stale list is still used while a new one cannot be had.
    public func licenses() -> [String: License] {
        if let fresh = freshInMemory() { return fresh }
        // One caller fetches; the others wait for its list rather than crediting with none.
        refreshing.wait(for: { busy -> Void? in
            if busy { return nil }
            busy = true
            return ()
        })
        defer { refreshing.change(wake: .one) { $0 = false } }
        if let fresh = freshInMemory() { return fresh }
        if let stored = try? load(), !stored.licenses.isEmpty, Date().timeIntervalSince(stored.fetchedAt) < maxAge {
            cache.withLock { $0.licenses = stored.licenses; $0.fetchedAt = stored.fetchedAt }
            return stored.licenses
        }
        let (current, failed) = cache.withLock { ($0.licenses, $0.lastFailure) }
        if let failed, ContinuousClock.now - failed < .seconds(60) { return current }  // one try a minute while it fails
        return fetchAndStore() ?? cache.withLock { $0.licenses }
    }

    private func freshInMemory() -> [String: License]? {
        cache.withLock { state in
            guard let fetched = state.fetchedAt, Date().timeIntervalSince(fetched) < maxAge else { return nil }
            return state.licenses
        }
    }

    /// Fetches the list from the provider and stores it (called with `refreshing` held). Nil when
    /// nothing new was fetched; the list in hand (the database's, even if old) is then kept.
    private func fetchAndStore() -> [String: License]? {
        do {
            let list = try fetch()
            guard !list.isEmpty else { throw PhotoProviderError.malformed("an empty licence list") }
            try pool.transaction { db in
                // Instances refreshing at once take turns, so one's inserts never meet the other's.
                try db.query("SELECT pg_advisory_xact_lock(hashtext('provider_licenses:' || $1))", [provider])
                try db.query("DELETE FROM provider_licenses WHERE provider = $1", [provider])
                for (code, license) in list {
                    try db.query("INSERT INTO provider_licenses (provider, code, name, url) VALUES ($1, $2, $3, $4)",
                                 [provider, code, license.name, license.url])
                }
            }
            cache.withLock { $0.licenses = list; $0.fetchedAt = Date(); $0.lastFailure = nil }
            logger.info("\(provider) licence list: \(list.count) licences")
            return list
        } catch {
            let stored = try? load()
            cache.withLock { state in
                state.lastFailure = .now
                if state.licenses.isEmpty, let stored { state.licenses = stored.licenses }
            }
            // Troubleshooting: licence list failed
            logger.warning("fetching the \(provider) licence list failed: \(error)")
            return nil
        }
    }

    private func load() throws -> (licenses: [String: License], fetchedAt: Date) {
        let rows = try pool.query("""
            SELECT code, name, url, extract(epoch FROM fetched_at)::float8 AS fetched FROM provider_licenses WHERE provider = $1
            """, [provider])
        var list: [String: License] = [:]
        var oldest = Date()
        for row in rows {
            list[try row.decode("code")] = License(name: try row.decode("name"), url: try row.decode("url"))
            oldest = min(oldest, Date(timeIntervalSince1970: try row.decode("fetched", as: Double.self)))
        }
        return (list, oldest)
    }
}

extension FlickrProvider {
    /// flickr.photos.licenses.getInfo (https://www.flickr.com/services/api/flickr.photos.licenses.getInfo.html):
    /// every licence id with its name and URL. Ids are numbers or strings; an empty URL means none.
    public func licenseList() throws -> [String: LicenseStore.License] {
        var components = URLComponents(string: apiURL)
        components?.queryItems = [("method", "flickr.photos.licenses.getInfo"), ("api_key", apiKey),
                                  ("format", "json"), ("nojsoncallback", "1")].map { URLQueryItem(name: $0.0, value: $0.1) }
        guard let url = components?.url?.absoluteString else { throw PhotoProviderError.malformed("bad FLICKR_API_URL") }
        return try Self.parseLicenses(try ProviderCall(client: client, budget: budget).get(url).body)
    }

    package static func parseLicenses(_ body: [UInt8]) throws -> [String: LicenseStore.License] {
        guard let json = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw PhotoProviderError.malformed("not JSON")
        }
        if (json["stat"] as? String) == "fail" {
            let code = lenientInt(json["code"]) ?? 0
            if code == 100 { throw PhotoProviderError.invalidKey }
            throw PhotoProviderError.service(code: code, message: json["message"] as? String ?? "unknown error")
        }
        guard let list = (json["licenses"] as? [String: Any])?["license"] as? [[String: Any]] else {
            throw PhotoProviderError.malformed("no licenses in the answer")
        }
        var licenses: [String: LicenseStore.License] = [:]
        for item in list {
            guard let id = lenientInt(item["id"]), (0...10_000).contains(id),
                  let name = lenientString(item["name"])?.trimmingCharacters(in: .whitespacesAndNewlines), !name.isEmpty else { continue }
            // Only web addresses become links; anything else is dropped rather than linked.
            let url = lenientString(item["url"]).flatMap { ProviderLinks.safe($0) }
            licenses[String(id)] = LicenseStore.License(name: String(name.prefix(200)), url: url)
        }
        return licenses
    }
}
