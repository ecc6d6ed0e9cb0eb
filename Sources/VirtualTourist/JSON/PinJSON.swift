import Domain
/// The JSON shape of a pin for the map script.
struct PinJSON: Codable {
    let id: Int64
    let lat: Double
    let lon: Double
    let name: String
    let photos: Int
    let status: PinStatus

    init(_ pin: Pin) {
        id = pin.id
        lat = pin.lat
        lon = pin.lon
        name = pin.title
        photos = pin.photoCount
        status = pin.status
    }
}

extension PinJSON {
    /// The same JSON as JSONEncoder with sorted keys would write, written straight into bytes: the
    /// map page and /pins.json carry hundreds of pins, and the encoder's reflection cost most of
    /// their time.
    static func write(_ pins: [Pin], to out: inout [UInt8]) {
        JSONWriter.array(pins, to: &out) { pin, out in
            JSONWriter.raw(#"{"id":"#, to: &out)
            JSONWriter.integer(Int(pin.id), to: &out)
            JSONWriter.raw(#","lat":"#, to: &out)
            JSONWriter.number(pin.lat, to: &out)
            JSONWriter.raw(#","lon":"#, to: &out)
            JSONWriter.number(pin.lon, to: &out)
            JSONWriter.raw(#","name":"#, to: &out)
            JSONWriter.string(pin.title, to: &out)
            JSONWriter.raw(#","photos":"#, to: &out)
            JSONWriter.integer(pin.photoCount, to: &out)
            JSONWriter.raw(#","status":"#, to: &out)
            JSONWriter.string(pin.status.rawValue, to: &out)
            out.append(UInt8(ascii: "}"))
        }
    }
}

extension PinJSON {
    /// Clusters as {"count":N,"lat":…,"lon":…}, for the map page and /pins.json alike.
    static func write(_ clusters: [PinStore.Cluster], to out: inout [UInt8]) {
        JSONWriter.array(clusters, to: &out) { cluster, out in
            JSONWriter.raw(#"{"count":"#, to: &out)
            JSONWriter.integer(cluster.count, to: &out)
            JSONWriter.raw(#","lat":"#, to: &out)
            JSONWriter.number(cluster.lat, to: &out)
            JSONWriter.raw(#","lon":"#, to: &out)
            JSONWriter.number(cluster.lon, to: &out)
            out.append(UInt8(ascii: "}"))
        }
    }
}
