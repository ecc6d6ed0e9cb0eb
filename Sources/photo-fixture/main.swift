// A Flickr-compatible photo service for offline demos and benchmarks (script/server --demo,
// script/bench album). Usage: photo-fixture [--port N] [--host H] [--latency SECONDS] [--connect-latency SECONDS]
// [--hostile CANARY_PORT] [--photos DIR] [--distinct N]
// --distinct N: one of N distinct 640 × 480 images (Flickr url_z size) per photo id instead of the ten samples.
import Dispatch
import Foundation
import PhotoFixture

var options = PhotoFixture.Options()
options.port = 8090
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    let value = arguments.next() ?? ""
    switch argument {
    case "--port": options.port = Int(value) ?? options.port
    case "--host": options.host = value
    case "--latency": options.latency = Double(value) ?? 0
    case "--connect-latency": options.connectLatency = Double(value) ?? 0
    case "--hostile": options.hostileCanaryPort = Int(value)
    case "--pages": options.pages = Int(value) ?? options.pages
    case "--photos": options.photosDirectory = value
    case "--distinct":
        options.distinctPhotos = Int(value) ?? 0
        options.prepareDistinctPhotos = true
    default:
        FileHandle.standardError.write(Data("unknown option \(argument)\n".utf8))
        exit(2)
    }
}
let fixture = try PhotoFixture(options: options)
print("photo fixture: FLICKR_API_URL=\(fixture.apiURL)")
dispatchMain()
