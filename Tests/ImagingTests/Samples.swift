import Foundation
import Testing
@testable import Imaging
import TestSupport

enum Samples {
    /// A real photograph ("Chelsea the cat", CC0, Stefan van der Walt), 451 × 300, no tags.
    static func chelsea() throws -> [UInt8] { try file("chelsea.jpg").bytes }

    /// A file of Photos/ (SOURCES.md), its bytes and where it is (for exiftool).
    static func file(_ name: String) throws -> (bytes: [UInt8], path: String) {
        let url = try #require(Bundle.module.url(forResource: "Photos/\(name)", withExtension: nil))
        return (Array(try Data(contentsOf: url)), url.path)
    }
}
