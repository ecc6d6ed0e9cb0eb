// The peer: Hummingbird 2 on SwiftNIO with the same two routes as bench-ours.
// Usage: bench-hummingbird PORT DIR
import Hummingbird

let arguments = CommandLine.arguments
let port = Int(arguments[1]) ?? 8082
let body = String(repeating: "Virtual Tourist! ", count: 128)

let router = Router()
router.middlewares.add(FileMiddleware(arguments[2], searchForIndexHtml: false))
router.get("hello") { _, _ in body }
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
print("bench-hummingbird listening on \(port)")
try await app.runService()
