import Foundation
import HTTPServer
import Log
import AlbumWing

extension WebPipeline {
    /// A page that asked the provider itself (the picker) and could not: the fixed phrase of the
    /// failure's class, 503 with Retry-After for a wait; the detail goes to the log only.
    static func providerPage(_ error: PhotoProviderError, provider: any PhotoProvider) -> HTTPError {
        providerPageLogger.notice("\(provider.name) for a page: \(error)")
        provider.budget?.noteProblem(error.description)
        switch error.failureClass {
        case .wait(let seconds, let reason):
            return HTTPError.unavailable(ProviderPhrases.waiting(provider.name, reason: reason, until: Date(timeIntervalSinceNow: Double(seconds))),
                                         retryAfter: .seconds(seconds))
        case let failure:
            return HTTPError(.badGateway, ProviderPhrases.failed(provider.name, failure))
        }
    }
}

private let providerPageLogger = Logger(label: "providers")
