#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import HTTPServer

@Suite struct StaticFilesTests {
    /// The byte-wise If-None-Match checks answer as the String versions they replaced did.
    @Test func entityTagsMatchAsTheStringComparisonsDid() {
        func matchesAsBefore(_ ifNoneMatch: String?, _ etag: String) -> Bool {
            guard let ifNoneMatch else { return false }
            let bare = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
            let gzipped = ETag.gzipVariant(of: bare)
            for item in ifNoneMatch.split(separator: ",") {
                var tag = item.trimmingSpaces()
                if tag == "*" { return true }
                if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
                if tag == bare || tag == gzipped { return true }
            }
            return false
        }
        let tags = ["\"abc\"", "W/\"abc\"", "\"abc-gz\"", "\"ab\"", "\"\"", "x", ""]
        let headers: [String?] = [nil, "", "*", " * ", "\"abc\"", "W/\"abc\"", "\"abc-gz\"", "W/\"abc-gz\"",
                                  "\"x\", \"abc\"", "\"x\",\t\"abc-gz\" ", ",,\"abc\",", "\"abcd\"", "\"ab\"", "-gz\"",
                                  "\"abc\"\"abc-gz\"", "W/", " , "]
        for etag in tags {
            for header in headers {
                #expect(ETag.matches(header, etag) == matchesAsBefore(header, etag), "\(String(describing: header)) vs \(etag)")
                if let header {
                    #expect(ETag.mentionsGzipVariant(header, of: etag) == header.contains(ETag.gzipVariant(of: etag)),
                            "\(header) mentions the gzip form of \(etag)")
                }
            }
        }
    }

    /// A Public/ folder with a text file, a CSS file big enough to gzip, a hidden file, a nested
    /// index, and a symlink that points outside the folder.
    static func makeRoot() throws -> (root: String, outside: String) {
        let base = NSTemporaryDirectory() + "static-\(UUID().uuidString)"
        let root = base + "/Public"
        try FileManager.default.createDirectory(atPath: root + "/css", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/docs", withIntermediateDirectories: true)
        try "hello file".write(toFile: root + "/hello.txt", atomically: true, encoding: .utf8)
        try String(repeating: "body { color: #333; }\n", count: 200).write(toFile: root + "/css/app.css", atomically: true, encoding: .utf8)
        try "secret".write(toFile: root + "/.env", atomically: true, encoding: .utf8)
        try "<h1>docs</h1>".write(toFile: root + "/docs/index.html", atomically: true, encoding: .utf8)
        let outside = base + "/outside.txt"
        try "outside secret".write(toFile: outside, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: root + "/escape.txt", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: root + "/up", withDestinationPath: base)
        return (root, outside)
    }

    func server() throws -> TestServer {
        let (root, _) = try Self.makeRoot()
        return try TestServer(router: { $0.fallback = StaticFiles(root: root) })
    }

    @Test func servesFilesWithTypeValidatorsAndCaching() throws {
        let t = try server()
        let r = try TestClient.get("/hello.txt", port: t.port)
        #expect(r.status == 200)
        #expect(r.text == "hello file")
        #expect(r.headers["Content-Type"] == "text/plain; charset=utf-8")
        #expect(r.headers["ETag"]?.hasPrefix("\"") == true)
        #expect(r.headers["Last-Modified"]?.hasSuffix("GMT") == true)
        #expect(r.headers["Cache-Control"] == "public, max-age=300")
        #expect(try TestClient.get("/docs/", port: t.port).text == "<h1>docs</h1>")
    }

    @Test func javaScriptAndCSSAreServedWithoutTheirComments() throws {
        let js = """
        // The module's header.
        export const a = 1; // kept: code before it
            // indented comment
        const t = `first line
        // text inside a template, kept
        last line`;
        const url = "http://example.org/"; // a string with // in it
        """
        #expect(String(decoding: CommentStripping.javaScript(Array(js.utf8)), as: UTF8.self) == """

        export const a = 1; // kept: code before it

        const t = `first line
        // text inside a template, kept
        last line`;
        const url = "http://example.org/"; // a string with // in it
        """)
        let css = "/* header\n two lines */\nbody { color: red; } /* trailing */\na::after { content: \"/* not a comment */\"; }\n"
        #expect(String(decoding: CommentStripping.css(Array(css.utf8)), as: UTF8.self)
                == "\n\nbody { color: red; } \na::after { content: \"/* not a comment */\"; }\n")
        // Served that way; other types untouched.
        #expect(CommentStripping.served(Array("// x".utf8), contentType: "text/plain") == Array("// x".utf8))
        let (root, _) = try Self.makeRoot()
        try js.write(toFile: root + "/app.js", atomically: true, encoding: .utf8)
        let t = try TestServer(router: { $0.fallback = StaticFiles(root: root) })
        let served = try TestClient.get("/app.js", port: t.port)
        #expect(served.status == 200)
        #expect(!served.text.contains("The module's header"))
        #expect(served.text.split(separator: "\n", omittingEmptySubsequences: false).count == js.split(separator: "\n", omittingEmptySubsequences: false).count)
    }

    @Test func conditionalRequestsGet304() throws {
        let t = try server()
        let first = try TestClient.get("/hello.txt", port: t.port)
        let etag = try #require(first.headers["ETag"])
        let lastModified = try #require(first.headers["Last-Modified"])
        let byTag = try TestClient.get("/hello.txt", port: t.port, headers: "If-None-Match: \(etag)\r\n")
        #expect(byTag.status == 304)
        #expect(byTag.body.isEmpty)
        #expect(byTag.headers["ETag"] == etag)
        #expect(try TestClient.get("/hello.txt", port: t.port, headers: "If-None-Match: W/\(etag), \"other\"\r\n").status == 304)
        #expect(try TestClient.get("/hello.txt", port: t.port, headers: "If-Modified-Since: \(lastModified)\r\n").status == 304)
        #expect(try TestClient.get("/hello.txt", port: t.port, headers: "If-None-Match: \"stale\"\r\n").status == 200)
        #expect(try TestClient.get("/hello.txt", port: t.port, headers: "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n").status == 200)
    }

    @Test func gzipWhenAcceptedAndWorthIt() throws {
        let t = try server()
        let plain = try TestClient.get("/css/app.css", port: t.port)
        #expect(plain.headers["Content-Encoding"] == nil)
        #expect(plain.headers["Vary"] == "Accept-Encoding")
        let zipped = try TestClient.get("/css/app.css", port: t.port, headers: "Accept-Encoding: br, gzip;q=0.8\r\n")
        #expect(zipped.headers["Content-Encoding"] == "gzip")
        #expect(zipped.body.count < plain.body.count / 4)
        #expect(Gzip.decompress(zipped.body) == plain.body)
        #expect(zipped.headers["ETag"] != plain.headers["ETag"])
        let refused = try TestClient.get("/css/app.css", port: t.port, headers: "Accept-Encoding: gzip;q=0\r\n")
        #expect(refused.headers["Content-Encoding"] == nil)
        // Small files are not worth a gzip header.
        #expect(try TestClient.get("/hello.txt", port: t.port, headers: "Accept-Encoding: gzip\r\n").headers["Content-Encoding"] == nil)
    }

    @Test func textTypesAreCompressibleAndImagesAreNot() {
        for type in ["text/html; charset=utf-8", "application/json", "application/javascript; charset=utf-8",
                     "application/geo+json", "application/gpx+xml; charset=utf-8", "application/vnd.google-earth.kml+xml",
                     "image/svg+xml", "application/manifest+json", "Application/XML", "application/problem+json"] {
            #expect(Compression.isCompressible(type), "\(type)")
        }
        for type in ["image/jpeg", "image/png", "application/zip", "application/octet-stream", "font/woff2",
                     "application/vnd.pmtiles", "application/jsonx", "image/svg"] {
            #expect(!Compression.isCompressible(type), "\(type)")
        }
    }

    @Test func headHasLengthButNoBody() throws {
        let t = try server()
        let client = try TestClient(port: t.port)
        try client.send("HEAD /hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let head = try client.readResponse(head: true)
        #expect(head.headers["Content-Length"] == "10")
        #expect(try client.readResponse().text == "hello file")
    }

    @Test(arguments: [
        "/../outside.txt", "/%2e%2e/outside.txt", "/%2E%2E/%2e%2e/etc/passwd", "/css/..%2f..%2foutside.txt",
        "/css%2fapp.css", "/.env", "/%2eenv", "/escape.txt", "/up/outside.txt", "/hello.txt%00.css",
        "/..%5coutside.txt", "/%zz", "/nothing-here.txt", "/css/../../outside.txt",
    ])
    func traversalAndHiddenFilesAre404(_ path: String) throws {
        let t = try server()
        let r = try TestClient.get(path, port: t.port)
        #expect(r.status == 404 || r.status == 400, "\(path) gave \(r.status)")
        #expect(!r.text.contains("secret"))
    }

    @Test func changedFileIsServedFresh() throws {
        let (root, _) = try Self.makeRoot()
        let t = try TestServer(router: { $0.fallback = StaticFiles(root: root) })
        let before = try TestClient.get("/hello.txt", port: t.port)
        try "changed content".write(toFile: root + "/hello.txt", atomically: true, encoding: .utf8)
        let after = try TestClient.get("/hello.txt", port: t.port)
        #expect(after.text == "changed content")
        #expect(after.headers["ETag"] != before.headers["ETag"])
    }
}

@Suite struct RouterTests {
    func router() -> Router {
        var r = Router()
        r.get("/pins") { _ in .text("list") }
        r.get("/pins/:id") { .text("pin \($0.parameters["id"]!)") }
        r.post("/pins/:id/photos/:photo/delete") { .text("\($0.parameters["id"]!)/\($0.parameters["photo"]!)") }
        r.get("/files/*rest") { .text($0.parameters["rest"]!) }
        return r
    }

    func call(_ method: String, _ target: String) throws -> HTTPResponse {
        try router().handle(HTTPRequest(method: method, target: target, headers: ["Host": "x"]))
    }

    @Test func matchesLiteralsParametersAndRest() throws {
        #expect(try call("GET", "/pins").bodyString == "list")
        #expect(try call("GET", "/pins/").bodyString == "list")
        #expect(try call("GET", "/pins/42").bodyString == "pin 42")
        #expect(try call("GET", "/pins/K%C3%B6ln").bodyString == "pin Köln")
        #expect(try call("POST", "/pins/1/photos/2/delete").bodyString == "1/2")
        #expect(try call("GET", "/files/a/b/c.txt").bodyString == "a/b/c.txt")
        #expect(try call("HEAD", "/pins/3").bodyString == "pin 3")
    }

    @Test func missesAndWrongMethods() {
        #expect(throws: HTTPError.self) { try call("GET", "/pins/1/extra") }
        do {
            _ = try call("DELETE", "/pins/1")
            Issue.record("expected 405")
        } catch let e as HTTPError {
            #expect(e.status == .methodNotAllowed)
            #expect(e.headers["Allow"] == "GET, HEAD")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func badPercentEncodingIs400() {
        do {
            _ = try call("GET", "/pins/%zz")
            Issue.record("expected 400")
        } catch let e as HTTPError {
            #expect(e.status == .badRequest)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func middlewareWrapsInOrder() throws {
        struct Tag: Middleware {
            let name: String
            func handle(_ request: HTTPRequest, next: (HTTPRequest) throws -> HTTPResponse) throws -> HTTPResponse {
                var response = try next(request)
                response.headers.add("X-Order", name)
                return response
            }
        }
        let chain = MiddlewareChain([Tag(name: "outer"), Tag(name: "inner")], handler: router())
        let r = try chain.handle(HTTPRequest(method: "GET", target: "/pins", headers: ["Host": "x"]))
        #expect(r.headers.values("X-Order") == ["inner", "outer"])
    }

    @Test func httpDateRoundTrips() {
        #expect(HTTPDate.format(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
    }
}
