// swift-tools-version:6.0
// Benchmarks, kept out of the product package so its peers (Hummingbird) never reach the app's
// build or CI. script/bench builds this in release mode and drives it with wrk and pgbench.
import Foundation
import PackageDescription

// A path dependency is known by its folder's name, which is wherever the repository was cloned.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().lastPathComponent

let package = Package(
    name: "VirtualTouristBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", exact: "2.1.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", exact: "1.33.2"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", exact: "1.5.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
    ],
    targets: [
        .executableTarget(name: "bench-ours", dependencies: [
            .product(name: "HTTPServer", package: root),
        ]),
        .executableTarget(name: "bench-hummingbird", dependencies: [
            .product(name: "Hummingbird", package: "hummingbird"),
        ]),
        // The app's five hot routes on Hummingbird 2 + PostgresNIO + swift-mustache (script/bench app).
        .executableTarget(name: "bench-app-peer", dependencies: [
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "Mustache", package: "swift-mustache"),
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "CompressNIO", package: "compress-nio"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
        ]),
        .executableTarget(name: "bench-app-ours", dependencies: [
            .product(name: "VirtualTourist", package: root),
            .product(name: "HTTPServer", package: root),
            .product(name: "Postgres", package: root),
        ]),
        .executableTarget(name: "bench-album", dependencies: [
            .product(name: "VirtualTourist", package: root),
            .product(name: "Domain", package: root),
            .product(name: "PhotoFixture", package: root),
            .product(name: "Postgres", package: root),
        ]),
        // The load generator of script/bench visits: no dependencies, plain sockets.
        .executableTarget(name: "bench-visits"),
        .executableTarget(name: "bench-db", dependencies: [
            .product(name: "Postgres", package: root),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
