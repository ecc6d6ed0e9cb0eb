// libFuzzer entry point for the HTTP request parser (script/fuzz builds and runs it).
//
// Compiled together with the parser's own source files, not through SwiftPM, because libFuzzer needs
// the whole program built with -sanitize=fuzzer. Besides "does not crash" (AddressSanitizer catches
// memory errors), it checks the property pipelining relies on: the parser gives the same answer
// whether the bytes arrive at once or split at an arbitrary point. Each request's query and form
// are then decoded (percent-decoding, `+`, pairs) and every value is read as the app reads numbers
// (InputNumber: a page clamped into range, a decimal that is finite and in range), so the paths
// that take text from strangers are fuzzed too, not only the framing.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var limits = HTTPLimits()
    limits.maxBodyBytes = 4096
    limits.maxRequestLineBytes = 512
    limits.maxHeaderBytes = 2048

    let whole = outcome(of: [bytes[...]], limits: limits)
    if size > 1 {
        let split = Int(bytes[0]) % size
        let pieces = [bytes[..<split], bytes[split...]]
        let piecewise = outcome(of: pieces, limits: limits)
        if piecewise != whole {
            fatalError("split at \(split) changed the result:\n\(whole)\nvs\n\(piecewise)")
        }
    }
    return 0
}

/// Everything the parser produced, as text, so two runs can be compared.
private func outcome(of pieces: [ArraySlice<UInt8>], limits: HTTPLimits) -> [String] {
    var parser = RequestParser(limits: limits)
    var events: [String] = []
    for piece in pieces {
        parser.append(Array(piece))
        while true {
            do {
                guard let event = try parser.next() else { break }
                switch event {
                case .request(let request):
                    precondition(request.body.count <= limits.maxBodyBytes, "body over the limit")
                    events.append("\(request.method) \(request.target) \(request.headers.count) \(request.body.count)")
                    checkFields(request)
                case .expectContinue:
                    // Only meaningful while the body is incomplete, which depends on the split.
                    continue
                }
            } catch {
                events.append("error \(error.status.code)")
                return events
            }
        }
    }
    return events
}

/// Query and form decoding, and the numbers the app reads from them.
private func checkFields(_ request: HTTPRequest) {
    let query = request.queryItems
    let form = request.formItems
    precondition(query.count <= request.target.utf8.count + 1, "more query pairs than bytes")
    precondition(form.count <= request.body.count + 1, "more form pairs than bytes")
    for item in query + form {
        let page = InputNumber.page(item.value, last: 133)
        precondition((1...133).contains(page), "page \(page) outside 1…133")
        if let degrees = InputNumber.decimal(item.value, in: -180...180) {
            precondition(degrees.isFinite && (-180...180).contains(degrees), "decimal \(degrees) outside its range")
        }
    }
}
