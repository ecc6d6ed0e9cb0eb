// The project's HTTP server with the two benchmark routes: GET /hello (2 KiB from memory) and
// static files from the folder given as the second argument. Usage: bench-ours PORT DIR
import Dispatch
import HTTPServer

let arguments = CommandLine.arguments
let port = Int(arguments[1]) ?? 8081
let body = String(repeating: "Virtual Tourist! ", count: 128)  // 17 × 128 = 2,176 bytes ≈ 2 KiB

var router = Router()
router.get("/hello") { _ in .text(body) }
router.fallback = StaticFiles(root: arguments[2])
var configuration = ServerConfiguration()
configuration.port = port
// The peer logs nothing per request by default; compare like with like.
configuration.accessLog = nil
let server = HTTPServer(configuration: configuration, handler: router)
try server.start()
print("bench-ours listening on \(server.port)")
dispatchMain()
