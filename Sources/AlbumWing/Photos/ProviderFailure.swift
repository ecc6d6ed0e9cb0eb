import Foundation
import HTTPClient

/// What the app does about a failed provider call (docs/providers.md, "Errors"): every error a
/// provider can give falls in one of these classes, and each class has one fixed phrase for people.
/// The provider's own words go to the log, album_jobs.last_error and /readyz, never to the page.
public enum ProviderFailureClass: Equatable, Sendable {
    /// The provider named a wait, or our own budget is spent: wait that long, without using up an
    /// attempt, and say when the album resumes.
    case wait(seconds: Int, reason: ProviderBudget.WaitReason)
    /// The service is down, says so, or cannot be reached: wait it out with backoff, up to the
    /// outage horizon (hours), then fail.
    case unavailable
    /// An answer we cannot read: retried a few times with backoff, then the album fails.
    case unreadable
    /// Only the administrator can fix it: fail at once, no Retry button.
    case invalidKey
    /// The provider refused this request as made (a changed API, a bug of ours): fail, keep Retry.
    case refused
}

extension PhotoProviderError {
    public var failureClass: ProviderFailureClass {
        switch self {
        case .invalidKey: return .invalidKey
        case .mustWait(let seconds, let reason): return .wait(seconds: seconds, reason: reason)
        // Flickr: 105 "Service currently unavailable", 201 "API not currently available", 10 "the
        // Flickr search API is not currently available"; everything else describes our request.
        case .service(let code, _): return [10, 105, 201].contains(code) ? .unavailable : .refused
        case .mediaWiki(let code, _):
            // Read-only mode and internal errors pass; other codes describe our request.
            return code == "readonly" || code.hasPrefix("internal_api_error") ? .unavailable : .refused
        case .unexpectedStatus(let status): return status >= 500 || status == 429 || status == 408 ? .unavailable : .refused
        case .transport: return .unavailable
        case .malformed: return .unreadable
        }
    }
}

/// The fixed phrases people read about an album's provider (one per class; docs/providers.md).
public enum ProviderPhrases {
    /// "Flickr", "Wikimedia Commons": the name people know the service by.
    public static func serviceName(_ provider: String) -> String {
        provider == "commons" ? "Wikimedia Commons" : "Flickr"
    }

    public static func waiting(_ provider: String, reason: ProviderBudget.WaitReason?, until: Date) -> String {
        let service = serviceName(provider), at = clockTime(until)
        switch reason {
        case .budget: return "Waiting for \(service): the hourly limit is reached; resumes at \(at)."
        case .rateLimited: return "Waiting for \(service): it asked us to slow down; resumes at \(at)."
        case .lagged: return "Waiting for \(service): its servers are busy; resumes at \(at)."
        case nil: return "\(service) is unavailable; trying again at \(at)."
        }
    }

    public static func failed(_ provider: String, _ failure: ProviderFailureClass) -> String {
        let service = serviceName(provider)
        switch failure {
        case .invalidKey: return "The administrator must set a valid Flickr API key."
        case .refused: return "\(service) could not answer this search. Please try again later."
        case .unavailable, .unreadable, .wait: return "\(service) is unavailable right now. Please try again later."
        }
    }

    /// 14:05 UTC: the server does not know the reader's time zone.
    package static func clockTime(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "HH:mm"
        return formatter.string(from: date) + " UTC"
    }
}

/// One provider API call: drawn from the shared budget first, then made; a 429 or 503 that names
/// a wait pauses the budget for every instance.
package struct ProviderCall {
    package let client: HTTPClient
    package let budget: ProviderBudget?

    package func get(_ url: String) throws -> HTTPClientResponse {
        if let budget, case .wait(let seconds, let reason) = try budget.draw() {
            throw PhotoProviderError.mustWait(seconds: seconds, reason: reason)
        }
        let response: HTTPClientResponse
        do {
            response = try client.get(url)
        } catch {
            throw PhotoProviderError.transport("\(error)")
        }
        if response.status == 429 || response.status == 503, let seconds = Self.retryAfter(response.headers["retry-after"]) {
            try? budget?.pause(seconds: seconds, reason: .rateLimited)
            throw PhotoProviderError.mustWait(seconds: seconds, reason: .rateLimited)
        }
        if response.status == 429 {
            // No Retry-After: a minute, as Wikimedia's rate-limit page suggests for a start.
            try? budget?.pause(seconds: 60, reason: .rateLimited)
            throw PhotoProviderError.mustWait(seconds: 60, reason: .rateLimited)
        }
        guard response.status == 200 else { throw PhotoProviderError.unexpectedStatus(response.status) }
        return response
    }

    /// Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, read into 1 s … 1 h.
    package static func retryAfter(_ value: String?) -> Int? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value) { return min(max(seconds, 1), 3600) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return min(max(Int(date.timeIntervalSinceNow.rounded(.up)), 1), 3600)
    }
}
