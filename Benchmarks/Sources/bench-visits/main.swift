// The load generator of `script/bench visits`: N virtual people, each on its own keep-alive
// connection to 127.0.0.1, visiting in a loop with no pause: GET / (gzip), three /pins.json
// viewports (the world, the person's region, close to their album's pin), the album page and its
// thirty thumbnails (GET /photos/:id?w=256, one after another on the one connection), and the
// region beacon where the map was left; one visit in twenty (counted over everyone) also drops a
// pin (POST /pins as the map script sends it). Every person reuses the session cookie they signed
// in with. Stops starting visits after DURATION seconds or MAX visits, whichever comes first, and
// prints visits/s and each step's latency (p50, p99) plus its own CPU use, so a run can show that
// the generator was not the bottleneck.
//
// A thread per person with blocking sockets: simple, and at a few hundred threads the cost is
// the system calls the requests need anyway.
//
// Usage: bench-visits PORT PEOPLE_FILE DURATION_SECONDS MAX_VISITS
//   PEOPLE_FILE: a line per person, tab-separated: session token, CSRF token, album pin id, its
//   photo ids (comma-separated), the person's region lat, lon.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 5, let port = UInt16(arguments[1]), let duration = Double(arguments[3]), let maxVisits = Int(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: bench-visits PORT PEOPLE_FILE DURATION_SECONDS MAX_VISITS\n".utf8))
    exit(2)
}

let people: [Person] = try String(contentsOfFile: arguments[2], encoding: .utf8).split(separator: "\n").map { line in
    let f = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    return Person(token: f[0], csrf: f[1], pin: Int64(f[2])!, photos: f[3].split(separator: ",").map { Int64($0)! },
                  lat: Double(f[4])!, lon: Double(f[5])!)
}

let counter = Counter(maxVisits: maxVisits)
let began = now()
let deadline = began + duration
var tallies: [Tally] = []
let finished = DispatchGroup()


for (index, person) in people.enumerated() {
    let tally = Tally()
    tallies.append(tally)
    finished.enter()
    let thread = Thread {
        defer { finished.leave() }
        let connection = Connection(port: port)
        let gzip = "Accept-Encoding: gzip, deflate\r\n"
        let json = "Accept: application/json\r\nX-CSRF-Token: \(person.csrf)\r\n"
        // The three viewports a visit looks at: the world, the person's region, close to the album.
        let near = (lat: person.lat, lon: person.lon)
        let views = [("-180,-85,180,85", 2.0),
                     ("\(fmt(near.lon - 20)),\(fmt(near.lat - 12)),\(fmt(near.lon + 20)),\(fmt(near.lat + 12))", 5.0),
                     ("\(fmt(near.lon - 1)),\(fmt(near.lat - 0.6)),\(fmt(near.lon + 1)),\(fmt(near.lat + 0.6))", 9.0)]
        var drops = 0
        func timed(_ step: Step, _ bytes: [UInt8], expect: Int) -> Bool {
            let t0 = now()
            do {
                let (status, _) = try connection.send(bytes)
                tally.latencies[step.rawValue].append(now() - t0)
                if status != expect {
                    tally.errors[step.rawValue] += 1
                    tally.statuses["\(step.name) \(status)", default: 0] += 1
                }
                return true
            } catch {
                tally.errors[step.rawValue] += 1
                tally.statuses["\(step.name) \(error)", default: 0] += 1
                connection.shut()
                return false
            }
        }
        // People start spread over the first 100 ms rather than all at one instant.
        usleep(UInt32(index % 100) * 1000)
        while now() < deadline, let number = counter.next() {
            let t0 = now()
            _ = timed(.map, request("GET", "/", person, port: port, extra: gzip), expect: 200)
            for (box, zoom) in views {
                _ = timed(.pinsJSON, request("GET", "/pins.json?bbox=\(box)&zoom=\(zoom)", person, port: port, extra: gzip), expect: 200)
            }
            _ = timed(.album, request("GET", "/pins/\(person.pin)", person, port: port, extra: gzip), expect: 200)
            let t1 = now()
            for photo in person.photos {
                _ = timed(.thumbnail, request("GET", "/photos/\(photo)?w=256", person, port: port), expect: 200)
            }
            tally.latencies[Step.thumbnails.rawValue].append(now() - t1)
            // Where the map was left: a different view each visit (people pan), so the next visit's
            // map page is not the kept one.
            let (box, zoom) = views[number % 3]
            let edges = box.split(separator: ",").compactMap { Double($0) }
            let centre = (lat: (edges[1] + edges[3]) / 2 + Double(number % 7) * 0.01, lon: (edges[0] + edges[2]) / 2)
            _ = timed(.region, request("POST", "/region", person, port: port,
                                       body: "lat=\(fmt(centre.lat))&lon=\(fmt(centre.lon))&zoom=\(fmt(zoom, 3))&_csrf=\(person.csrf)"),
                      expect: 204)
            if number % 20 == 0 {
                drops += 1
                let lat = max(-80, min(80, person.lat + Double(drops % 10) * 0.37 - 1.7)), lon = max(-179, min(179, person.lon + Double(drops / 10) * 0.41 - 2))
                _ = timed(.dropPin, request("POST", "/pins", person, port: port, body: "lat=\(fmt(lat))&lon=\(fmt(lon))&_csrf=\(person.csrf)", extra: json),
                          expect: 201)
            }
            tally.latencies[Step.visit.rawValue].append(now() - t0)
            tally.visits += 1
        }
        connection.shut()
    }
    thread.stackSize = 1 << 20
    thread.start()
}
finished.wait()
let elapsed = now() - began

var usage = rusage()
getrusage(RUSAGE_SELF.rawValue, &usage)
let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6

func percentile(_ sorted: [Double], _ q: Double) -> Double {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)]
}

// Machine-readable for script/bench.d/visits: "visits N SECONDS CPU_SECONDS", then a line per step.
let visits = tallies.reduce(0) { $0 + $1.visits }
print("visits \(visits) \(fmt(elapsed, 3)) \(fmt(cpu, 3)) \(people.count)")
for step in Step.allCases {
    let all = tallies.flatMap { $0.latencies[step.rawValue] }.sorted()
    let errors = tallies.reduce(0) { $0 + $1.errors[step.rawValue] }
    print("step\t\(step.rawValue)\t\(step.name)\t\(all.count)\t\(fmt(percentile(all, 0.5) * 1000, 2))\t\(fmt(percentile(all, 0.99) * 1000, 2))\t\(errors)")
}
var statuses: [String: Int] = [:]
for tally in tallies { statuses.merge(tally.statuses, uniquingKeysWith: +) }
for (what, count) in statuses.sorted(by: { $0.key < $1.key }) { print("unexpected\t\(what)\t\(count)") }
