import Foundation
import HTTPServer
import Testing
import PhotoFixture
import TestSupport
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// Every route, every number a request can carry, at the edges of what parses: the server answers
/// each with a status below 500 and keeps serving. A trap here (an overflow, a conversion of NaN)
/// would take the test process with it, so this test cannot pass by accident. Both providers,
/// because each does its own arithmetic on the page number.
@Suite(.serialized, .tags(.slow)) struct ExtremeInputTests {
    static let extremes = ["9223372036854775807", "-9223372036854775808", "99999999999999999999999", "-1", "0",
                           "1e308", "-1e308", "NaN", "inf", "", "0x10", "1.5", "２"]
    static let numberFields = ["page", "lat", "lon", "zoom", "w", "bbox", "limit", "q", "place"]

    @Test(arguments: ["commons", "fixture"]) func extremeNumbersNeverFailTheServer(provider: String) throws {
        // A budget big enough for the hundreds of picker calls below (TestApp has no limit on new
        // connections, which the test's client opens one per request, hundreds a second).
        let app = try TestApp(configure: { $0.photoProvider = provider; $0.providerCallsPerHour = 1_000_000; $0.providerCallBurst = 100_000 })
        let owner = try app.signedUp(email: "edge-\(provider)@example.org")
        // Someone else's pins and album, which nothing below may touch.
        let bystander = try app.signedUp(email: "bystander-\(provider)@example.org")
        _ = try AlbumTests.dropPin(bystander)
        let bystanderID = Int64(try app.count("SELECT id FROM users WHERE email = $1", ["bystander-\(provider)@example.org"]))
        func bystanderRows() throws -> String {
            try app.pool.query("""
                SELECT (SELECT coalesce(string_agg(id || ':' || lat || ':' || lon || ':' || status || ':' || generation, ',' ORDER BY id), '') FROM pins WHERE user_id = $1)
                    || '|' || (SELECT count(*) FROM photos WHERE user_id = $1) || '|' || (SELECT count(*) FROM album_jobs WHERE user_id = $1)
                    || '|' || (SELECT count(*) FROM map_regions WHERE user_id = $1) || '|' || (SELECT count(*) FROM sessions WHERE user_id = $1) AS rows
                """, [bystanderID])[0].decode("rows")
        }
        let before = try bystanderRows()
        let resources = try RouteCoverageTests.resourcePaths(app: app, owner: owner)
        let token = try #require(try owner.get("/").csrfToken)
        let routes = app.app.routes.filter { $0.pattern != "/sign-out" }
        var asked = 0
        for route in routes {
            let key = "\(route.method) \(route.pattern)"
            let streaming = RouteCoverageTests.streamingRoutes.contains(key)
            let method = streaming ? "HEAD" : route.method
            // The owner's own resource, and the same route with each extreme as its id.
            var paths = [resources[key] ?? RouteCoverageTests.path(for: route.pattern)]
            if route.pattern.contains(":") {
                paths += Self.extremes.filter { !$0.isEmpty }.map {
                    RouteCoverageTests.path(for: route.pattern, parameters: ["id": Browser.encode($0), "z": Browser.encode($0),
                                                                            "x": Browser.encode($0), "y": Browser.encode($0),
                                                                            "level": Browser.encode($0), "cell": Browser.encode($0)])
                }
            }
            for path in paths {
                for value in Self.extremes {
                    let fields = Self.numberFields.map { ($0, $0 == "bbox" ? [value, value, value, value].joined(separator: ",") : value) }
                    let query = RouteCoverageTests.encode(fields)
                    let page: Browser.Page
                    if method == "GET" || method == "HEAD" {
                        page = try owner.request(method, path + "?" + query)
                    } else {
                        page = try owner.request(method, path, body: Array(RouteCoverageTests.encode(fields + [("_csrf", token)]).utf8),
                                                 headers: [("Content-Type", "application/x-www-form-urlencoded"), ("X-CSRF-Token", token)])
                    }
                    asked += 1
                    #expect(page.status < 500, "\(method) \(path) with \(value.isEmpty ? "\"\"" : value): \(page.status)")
                }
            }
        }
        #expect(asked > 500)
        #expect(try bystanderRows() == before, "another person's rows changed")
        // Still serving, and still serving this person.
        #expect(try app.browser().get("/healthz").status == 200)
        #expect(try owner.get("/").status == 200)
    }
}
