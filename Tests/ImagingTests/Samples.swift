import Foundation
import Testing
@testable import Imaging
import TestSupport

enum Samples {
    /// A real photograph ("Chelsea the cat", CC0, Stefan van der Walt), 451 × 300, no tags.
    static func chelsea() throws -> [UInt8] {
        let url = try #require(Bundle.module.url(forResource: "Photos/chelsea", withExtension: "jpg"))
        return Array(try Data(contentsOf: url))
    }
}
