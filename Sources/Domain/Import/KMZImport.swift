import Zlib

/// KMZ: a zip holding one KML file and the images it names
/// (developers.google.com/kml/documentation/kmzarchives). Only the KML is inflated and read, by
/// KMLImport as a .kml upload is; the images and anything else in the archive are counted and never
/// inflated. The KML is the one Google Earth opens: `doc.kml` at the root, else the first .kml at
/// the root, else the first .kml anywhere.
package enum KMZImport {
    package static func read(_ bytes: [UInt8]) throws(PinImport.Refusal) -> PinImport {
        let archive: ZipReader
        do throws(ZipReader.Failure) {
            archive = try ZipReader(bytes, maxEntries: PinImport.Limits.kmzEntries)
        } catch {
            throw refusal(error)
        }
        let files = archive.entries.filter { !$0.isDirectory }
        guard let entry = kmlEntry(files) else {
            throw .unreadable("This zip archive holds no .kml file, so it is not a KMZ file that can be imported.")
        }
        let name = displayName(entry.name)
        let kml: [UInt8]
        do throws(ZipReader.Failure) {
            kml = try archive.contents(of: entry, maxBytes: PinImport.Limits.fileBytes)
        } catch {
            throw refusal(error)
        }
        var start = kml.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while start < kml.count, [0x20, 0x09, 0x0A, 0x0D].contains(kml[start]) { start += 1 }
        // A .kml that is itself a zip or JSON is not read further: one level of archive, and KML only.
        guard start < kml.count, kml[start] == UInt8(ascii: "<") || kml.starts(with: [0xFE, 0xFF]) || kml.starts(with: [0xFF, 0xFE]) else {
            throw .unreadable(kml.isEmpty ? "“\(name)” in this KMZ file is empty." : "“\(name)” in this KMZ file is not KML: it does not start with “<”.")
        }
        var file: PinImport
        do throws(PinImport.Refusal) {
            file = try PinImport.xml(kml)
        } catch {
            throw PinImport.Refusal(kind: error.kind, description: "In “\(name)” in this KMZ file: \(error.description)")
        }
        guard file.format == .kml else {
            throw .unreadable("“\(name)” in this KMZ file is \(file.format.rawValue), not KML.")
        }
        let others = files.count - 1
        file.notes.insert("Read from “\(name)” in the KMZ file" + (others == 0 ? "." : "; \(ImportNumber.count(others, "other file")) in it (images and the like) left aside."), at: 0)
        return file
    }

    /// The KML Google Earth would open. Names that climb out of the archive or start at the root of
    /// a disk are never taken: nothing is written anywhere, but such a name is a trick, not a KML.
    /// Nor are macOS's AppleDouble copies ("__MACOSX/…", "._doc.kml"), which are not KML.
    package static func kmlEntry(_ files: [ZipReader.Entry]) -> ZipReader.Entry? {
        let candidates: [(entry: ZipReader.Entry, path: [Substring])] = files.compactMap { entry in
            guard !entry.isDirectory, !entry.name.contains("\0"), !entry.name.hasPrefix("/"), !entry.name.hasPrefix("\\") else { return nil }
            let path = entry.name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).filter { $0 != "." }
            guard let last = path.last, last.lowercased().hasSuffix(".kml"), !last.hasPrefix("._"),
                  !path.contains(".."), path.first != "__MACOSX", path.first?.contains(":") != true else { return nil }
            return (entry, path)
        }
        return (candidates.first { $0.path.count == 1 && $0.path[0].lowercased() == "doc.kml" }
            ?? candidates.first { $0.path.count == 1 }
            ?? candidates.first)?.entry
    }

    /// An entry's name as the person is shown it: cleaned as a pin's name is, and never empty.
    package static func displayName(_ name: String) -> String { PinImport.cleanName(name) ?? "the .kml file" }

    package static func refusal(_ failure: ZipReader.Failure) -> PinImport.Refusal {
        let limit = PinImport.megabytes(PinImport.Limits.fileBytes)
        switch failure {
        case .damaged(let why):
            return .unreadable("This zip (KMZ) file could not be read: it is damaged (\(why)).")
        case .zip64:
            return .unreadable("This zip (KMZ) file has a ZIP64 directory, which is not read; a KMZ file small enough to import never needs one.")
        case .tooManyEntries(let count, let limit):
            return .unreadable("This zip (KMZ) file holds \(count.formatted()) files; at most \(limit.formatted()) can be in a KMZ file that is imported.")
        case .encrypted(let name):
            return .unreadable("“\(displayName(name))” in this KMZ file is encrypted. Save the KMZ without a password and import it again.")
        case .unsupportedMethod(let name, let method):
            return .unreadable("“\(displayName(name))” in this KMZ file is compressed with zip method \(method); only stored and deflated files can be read. Unzip the KMZ and import the .kml file inside.")
        case .tooLarge(let name, _):
            return .unreadable("“\(displayName(name))” in this KMZ file is larger than \(limit) uncompressed; KML files of up to \(limit) can be imported.")
        case .corrupt(let name, let why):
            return .unreadable("“\(displayName(name))” in this KMZ file is damaged: \(why).")
        }
    }
}
