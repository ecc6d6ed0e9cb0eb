import Foundation

/// GeoJSON (RFC 7946): Point and MultiPoint geometries, alone, in a Feature, a FeatureCollection
/// or a GeometryCollection, become pins; a feature's name is its `name` (or `title`) property.
/// Other geometries are listed as refused. Coordinates are [longitude, latitude(, altitude)].
package enum GeoJSONImport {
    package static func read(_ bytes: [UInt8]) throws(PinImport.Refusal) -> PinImport {
        // Foundation's parser recurses once per level: the depth is checked before it runs.
        if let depth = nestingBeyond(PinImport.Limits.depth, in: bytes) {
            throw .unreadable("The JSON is nested more than \(PinImport.Limits.depth) levels deep (at byte \(depth)); GeoJSON needs a handful.")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(bytes))
        } catch {
            let detail = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String).map { " (\($0.prefix(120)))" } ?? ""
            throw .unreadable("The file is not valid JSON\(detail). Numbers such as NaN or Infinity are not JSON.")
        }
        guard let root = object as? [String: Any], let type = root["type"] as? String else {
            throw .unreadable("The JSON is not GeoJSON: it is not an object with a “type” member.")
        }
        var file = PinImport(format: .geoJSON)
        switch type {
        case "FeatureCollection":
            guard let features = root["features"] as? [Any] else {
                throw .unreadable("The FeatureCollection has no “features” array.")
            }
            for (offset, feature) in features.enumerated() {
                try readFeature(feature, number: offset + 1, into: &file)
            }
        case "Feature":
            try readFeature(root, number: 1, into: &file)
        case "Point", "MultiPoint", "GeometryCollection", "LineString", "MultiLineString", "Polygon", "MultiPolygon":
            try readGeometry(root, name: nil, label: "the geometry", into: &file)
        default:
            throw .unreadable("The JSON is not GeoJSON: its type “\(type.prefix(40))” is not a GeoJSON type.")
        }
        return file
    }

    package static func readFeature(_ value: Any, number: Int, into file: inout PinImport) throws(PinImport.Refusal) {
        guard let feature = value as? [String: Any], feature["type"] as? String == "Feature" else {
            try file.add(.failure("it is not a Feature object"), label: "feature \(number)")
            return
        }
        let properties = feature["properties"] as? [String: Any]
        let name = (properties?["name"] as? String) ?? (properties?["title"] as? String) ?? (properties?["Name"] as? String)
        let label = PinImport.cleanName(name) ?? "feature \(number)"
        guard let geometry = feature["geometry"], !(geometry is NSNull) else {
            try file.add(.failure("it has no geometry"), label: label)
            return
        }
        try readGeometry(geometry, name: name, label: label, into: &file)
    }

    package static func readGeometry(_ value: Any, name: String?, label: String, into file: inout PinImport,
                             depth: Int = 0) throws(PinImport.Refusal) {
        guard let geometry = value as? [String: Any], let type = geometry["type"] as? String else {
            try file.add(.failure("its geometry is not a GeoJSON geometry object"), label: label)
            return
        }
        switch type {
        case "Point":
            try file.add(point(geometry["coordinates"], name: name), label: label)
        case "MultiPoint":
            guard let positions = geometry["coordinates"] as? [Any] else {
                try file.add(.failure("its MultiPoint has no coordinates array"), label: label)
                return
            }
            for position in positions { try file.add(point(position, name: name), label: label) }
        case "GeometryCollection" where depth < 4:
            for member in geometry["geometries"] as? [Any] ?? [] {
                try readGeometry(member, name: name, label: label, into: &file, depth: depth + 1)
            }
        default:
            try file.add(.failure("it is a \(type.prefix(40)), not a point (only points become pins)"), label: label)
        }
    }

    /// A position: two or three numbers, longitude first.
    package static func point(_ value: Any?, name: String?) -> Result<PinImport.Point, PinImport.Reason> {
        guard let position = value as? [Any], position.count >= 2, position.count <= 3 else {
            return .failure("its position is not [longitude, latitude] or [longitude, latitude, altitude]")
        }
        let numbers = position.map(number)
        guard let lon = numbers[0], let lat = numbers[1] else { return .failure("its coordinates are not numbers") }
        return PinImport.point(name: name, lat: lat, lon: lon)
    }

    /// A JSON number (not a boolean, which Foundation also hands out as NSNumber).
    package static func number(_ value: Any) -> Double? {
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else { return nil }
        return number.doubleValue
    }

    /// The byte offset where arrays and objects first go deeper than `limit`, or nil.
    package static func nestingBeyond(_ limit: Int, in bytes: [UInt8]) -> Int? {
        var depth = 0, inString = false, escaped = false
        for (offset, byte) in bytes.enumerated() {
            if inString {
                if escaped { escaped = false } else if byte == 0x5C { escaped = true } else if byte == 0x22 { inString = false }
                continue
            }
            switch byte {
            case 0x22: inString = true
            case 0x5B, 0x7B:
                depth += 1
                if depth > limit { return offset }
            case 0x5D, 0x7D: depth -= 1
            default: break
            }
        }
        return nil
    }
}
