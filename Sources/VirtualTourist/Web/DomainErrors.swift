import HTTPServer
import AlbumWing
import Domain

// What the domain's refusals are in HTTP, in one place (as Hummingbird's HTTPResponseError): a
// handler lets them fly and the server renders the status and sentence. Only where the answer
// depends on the page the person was on (a form shown again, a redirect with its message) does a
// handler catch one itself.

/// A map the person may not see (404, as for anything of someone else's) or not change (403).
extension MapAccessRefused: HTTPResponseError {
    public var status: HTTPStatus { isNotFound ? .notFound : .forbidden }
    public var publicMessage: String { isNotFound ? HTTPError.notFound.publicMessage : description }
}

/// A shared map's refusal: not a member (404), a role that does not allow it (403), or a request
/// that cannot be done as asked (422).
extension SharedMaps.Refusal: HTTPResponseError {
    public var status: HTTPStatus {
        switch self {
        case .notFound: .notFound
        case .notAllowed: .forbidden
        case .problem: .unprocessableContent
        }
    }

    public var publicMessage: String {
        switch self {
        case .notFound: HTTPError.notFound.publicMessage
        case .notAllowed(let why): why + " Nothing was changed."
        case .problem(let why): why
        }
    }
}

/// Every picker slot is searching: try again in a few seconds.
extension PickerSearches.Busy: HTTPResponseError {
    public var status: HTTPStatus { .serviceUnavailable }
    public var publicMessage: String { "Many people are browsing photos right now. Try again in a few seconds." }
    public var headers: HTTPHeaders { HTTPError.waitHeaders(.seconds(5)) }
}

/// The provider did not answer the picker in time; its answer lands in the cache for the reload.
extension PickerSearches.TimedOut: HTTPResponseError {
    public var status: HTTPStatus { .gatewayTimeout }
    public var publicMessage: String { "The photo service is slow to answer. Try again in a moment; the answer may be ready by then." }
}
