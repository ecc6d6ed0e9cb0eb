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
        // epoll and eventfd for HTTPServer's event loops (Glibc's module leaves them out).
        .systemLibrary(name: "CEpoll"),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "Log"),
        // The least-recently-used order every bounded table uses (caches, rate limiters).
        .target(name: "LRU"),
        .target(name: "HTTPClient", dependencies: ["CCurl"]),
        // gzip for whoever needs it: static files (HTTPServer) and the places file (VirtualTourist).
        .target(name: "Zlib", dependencies: ["CZlib"]),
        // Text written into responses: the one HTML escaper (the app's views and the server's own
        // error page) and integers as digits (pages and JSON).
        .target(name: "WebText"),
        .target(name: "HTTPServer", dependencies: ["CEpoll", "Zlib", "Log", "WebText", "LRU"]),
        .target(name: "Postgres", dependencies: ["CLibPQ", "Log"]),
        .target(name: "VirtualTourist", dependencies: ["HTTPServer", "HTTPClient", "Postgres", "Zlib", "WebText", "CCrypt", "CTurboJPEG", "CLibCrypto", "Log", "LRU"]),
        // The Flickr-compatible fixture: a library so tests start it in-process, and an executable
        // for demos and benchmarks.
        .target(name: "PhotoFixture", dependencies: ["HTTPServer", "CTurboJPEG"], exclude: ["Photos"]),
        .executableTarget(name: "photo-fixture", dependencies: ["PhotoFixture"]),
        .executableTarget(name: "virtual-tourist", dependencies: ["VirtualTourist", "HTTPServer", "HTTPClient", "Postgres", "Log"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "TestSupport"]),
        // Shared by the test targets: throwaway databases and clusters, processes, polling.
        .target(name: "TestSupport", dependencies: ["Postgres"], path: "Tests/TestSupport"),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "VirtualTouristTests", dependencies: ["VirtualTourist", "HTTPServer", "HTTPClient", "Postgres", "PhotoFixture", "TestSupport", "CTurboJPEG"]),
    ],
    swiftLanguageModes: [.v6]
)
