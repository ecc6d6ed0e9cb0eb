import CTurboJPEG
import Foundation
import HTTPClient
import Testing
@testable import PhotoFixture
@testable import VirtualTourist
@testable import AlbumWing
@testable import Domain

/// The fixture's never-seen photos (`photo-fixture --distinct N`, DistinctPhotos.swift): an image
/// per photo id, at a real host's sizes, decodable, and different from every other id's, so the
/// album benchmark measures downloads that are neither thumbnail-cache nor store-dedup hits.
@Suite struct DistinctPhotoTests {
    /// Over HTTP through the real search and client: an album page's photos all differ, in bytes
    /// and in their thumbnails; the same URL gives the same bytes again.
    @Test func anAlbumPageHasThirtyDifferentPhotos() throws {
        var options = PhotoFixture.Options()
        options.distinctPhotos = 1_000_000
        let fixture = try PhotoFixture(options: options)
        defer { fixture.stop() }
        var clientOptions = HTTPClient.Options()
        clientOptions.internalOrigins = [fixture.baseURL]
        let client = HTTPClient(options: clientOptions)
        let provider = FlickrProvider(apiKey: "k", apiURL: fixture.apiURL, client: client)
        let page = try provider.search(lat: 35.0, lon: 135.7, page: 1)
        #expect(page.photos.count == 30)
        // The search answer is the ten-photo fixture's (only the image bytes change).
        #expect(page.photos.allSatisfy { $0.imageURL.hasPrefix(fixture.baseURL + "/photos/") })

        var hashes = Set<String>(), thumbnailHashes = Set<String>()
        for photo in page.photos.prefix(8) {
            let response = try client.get(photo.imageURL, hosts: provider.imageHosts)
            #expect(response.status == 200)
            let bytes = response.body
            let info = try #require(ImageInspector.inspect(bytes))
            #expect(info.contentType == "image/jpeg")
            #expect(info.width == 640 && info.height == 480, "\(info.width)x\(info.height)")
            #expect((40_000...200_000).contains(bytes.count), "\(bytes.count) bytes")  // 64–123 KB measured
            #expect(Self.decodes(bytes, width: info.width, height: info.height))
            hashes.insert(SHA256.hex(bytes))
            let thumbnail = try #require(Thumbnailer.thumbnails(of: bytes)[256])
            thumbnailHashes.insert(SHA256.hex(thumbnail))
            #expect(try client.get(photo.imageURL, hosts: provider.imageHosts).body == bytes)
        }
        #expect(hashes.count == 8)
        #expect(thumbnailHashes.count == 8)
    }

    /// Numbers that take the same variant of the same sample (the hardest case: everything but
    /// the spliced rows is shared) still give different, valid images; the same number, the same.
    @Test func numbersOfOneVariantGiveDifferentImages() throws {
        let samples = try FileManager.default.contentsOfDirectory(atPath: PhotoFixture.bundledPhotos).filter { $0.hasSuffix(".jpg") }.sorted()
            .map { Array(try Data(contentsOf: URL(fileURLWithPath: PhotoFixture.bundledPhotos + "/" + $0))) }
        let photos = DistinctPhotos(count: 1_000_000, samples: samples)
        let stride = samples.count * DistinctPhotos.variants.count
        var hashes = Set<String>()
        let numbers = (0..<200).map { 3 + $0 * stride }
        for number in numbers {
            let bytes = try #require(photos.image(number: number))
            hashes.insert(SHA256.hex(bytes))
        }
        #expect(hashes.count == numbers.count)
        let first = try #require(photos.image(number: numbers[0]))
        #expect(photos.image(number: numbers[0]) == first)
        let info = try #require(ImageInspector.inspect(first))
        #expect(Self.decodes(first, width: info.width, height: info.height))
        // Neighbouring numbers' pixels differ, not only their bytes.
        let second = try #require(photos.image(number: numbers[1]))
        #expect(Self.pixels(first, width: info.width, height: info.height) != Self.pixels(second, width: info.width, height: info.height))
        // Photo ids map onto the numbers evenly and stay in range.
        let mapped = Set((0..<1000).map { photos.number(forID: 1_234_001_000 + $0) })
        #expect(mapped.count > 990)
        #expect(mapped.allSatisfy { (0..<1_000_000).contains($0) })
    }

    /// The whole image decodes with libjpeg-turbo without a warning (a restart marker out of
    /// place or short entropy-coded data is one).
    static func decodes(_ jpeg: [UInt8], width: Int, height: Int) -> Bool {
        pixels(jpeg, width: width, height: height) != nil
    }

    static func pixels(_ jpeg: [UInt8], width: Int, height: Int) -> [UInt8]? {
        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        let result = jpeg.withUnsafeBufferPointer { source in
            pixels.withUnsafeMutableBufferPointer { target in
                tjDecompress2(handle, source.baseAddress, UInt(source.count), target.baseAddress, Int32(width), Int32(width * 3),
                              Int32(height), Int32(TJPF_RGB.rawValue), TJFLAG_STOPONWARNING)
            }
        }
        return result == 0 ? pixels : nil
    }
}
