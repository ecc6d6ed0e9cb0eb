// swift-tools-version:6.0
// Virtual Tourist: a self-hosted photo-map web app. The product depends only on Foundation and system
// libraries (libpq, libcurl, zlib, libcrypt); docs/architecture.md says why each one is here.
import PackageDescription

let package = Package(
    name: "VirtualTourist",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .library(name: "Postgres", targets: ["Postgres"]),
        .library(name: "Domain", targets: ["Domain"]),
        .library(name: "AlbumWing", targets: ["AlbumWing"]),
        .library(name: "VirtualTourist", targets: ["VirtualTourist"]),
        .library(name: "PhotoFixture", targets: ["PhotoFixture"]),
        .executable(name: "virtual-tourist", targets: ["virtual-tourist"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "CCrypt",
            providers: [.apt(["libcrypt-dev"])]
        ),
        .systemLibrary(
            name: "CLibCrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CTurboJPEG",
            providers: [.apt(["libturbojpeg0-dev"])]
        ),
        // A person's own photos: their tags, HEIC, PNG and WebP (docs/architecture.md, "Dependencies").
        .systemLibrary(name: "CExif", pkgConfig: "libexif", providers: [.apt(["libexif-dev"])]),
        .systemLibrary(name: "CHeif", pkgConfig: "libheif", providers: [.apt(["libheif-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CWebP", pkgConfig: "libwebp", providers: [.apt(["libwebp-dev"])]),
        // epoll and eventfd for HTTPServer's event loops (Glibc's module leaves them out).
        .systemLibrary(name: "CEpoll"),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "Log"),
        // Waitable: the one way a thread of ours waits for another (pthread mutex and condition).
        .target(name: "Waiting"),
        // The least-recently-used order every bounded table uses (caches, rate limiters).
        .target(name: "LRU"),
        .target(name: "HTTPClient", dependencies: ["CCurl", "Waiting"]),
        // gzip for whoever needs it: static files (HTTPServer) and the places file (VirtualTourist).
        .target(name: "Zlib", dependencies: ["CZlib"]),
        // Text written into responses: the one HTML escaper (the app's views and the server's own
        // error page) and integers as digits (pages and JSON).
        .target(name: "WebText"),
        .target(name: "HTTPServer", dependencies: ["Waiting", "CEpoll", "Zlib", "Log", "WebText", "LRU"]),
        .target(name: "Postgres", dependencies: ["Waiting", "CLibPQ", "Log"]),
        // The app in three layers, each target depending only on those below it, so a circle is a
        // compile error (docs/architecture.md, "Layers"): the domain (people, maps, pins, mail),
        // the album wing (albums, providers, the photo store) and the web (routes, views, the app).
        .target(name: "Domain", dependencies: ["Waiting", "Postgres", "HTTPClient", "Zlib", "CCrypt", "Log"]),
        // Imaging: a person's photo in any of the formats phones write, out as versions without
        // its location; no database, no HTTP.
        .target(name: "Imaging", dependencies: ["CTurboJPEG", "CExif", "CHeif", "CPNG", "CWebP"]),
        .target(name: "AlbumWing", dependencies: ["Imaging", "Domain", "Waiting", "HTTPServer", "HTTPClient", "Postgres", "Zlib", "WebText", "CTurboJPEG", "CLibCrypto", "Log", "LRU"]),
        .target(name: "VirtualTourist", dependencies: ["Waiting", "LRU", "AlbumWing", "Domain", "HTTPServer", "HTTPClient", "Postgres", "Zlib", "WebText", "Log"]),
        // The Flickr-compatible fixture: a library so tests start it in-process, and an executable
        // for demos and benchmarks.
        .target(name: "PhotoFixture", dependencies: ["HTTPServer", "CTurboJPEG"], exclude: ["Photos"]),
        .executableTarget(name: "photo-fixture", dependencies: ["PhotoFixture"]),
        .executableTarget(name: "virtual-tourist", dependencies: ["VirtualTourist", "AlbumWing", "Domain", "HTTPServer", "HTTPClient", "Postgres", "Log", "Imaging"]),
        // The small modules' own tests (their users' suites test them too, through the app).
        .testTarget(name: "WebTextTests", dependencies: ["WebText"]),
        .testTarget(name: "LRUTests", dependencies: ["LRU"]),
        .testTarget(name: "ZlibTests", dependencies: ["Zlib"]),
        .testTarget(name: "ImagingTests", dependencies: ["Imaging", "CTurboJPEG", "TestSupport"], resources: [.copy("Photos")]),
        .testTarget(name: "WaitingTests", dependencies: ["Waiting"]),
        .testTarget(name: "HTTPClientTests", dependencies: ["HTTPClient", "CCurl"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "TestSupport"]),
        // Shared by the test targets: throwaway databases and clusters, processes, polling.
        .target(name: "TestSupport", dependencies: ["Postgres"], path: "Tests/TestSupport"),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "VirtualTouristTests", dependencies: ["VirtualTourist", "AlbumWing", "Domain", "HTTPServer", "HTTPClient", "Postgres", "PhotoFixture", "TestSupport", "CTurboJPEG", "Imaging"]),
    ],
    swiftLanguageModes: [.v6]
)
