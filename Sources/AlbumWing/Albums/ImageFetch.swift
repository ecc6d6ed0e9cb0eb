import Foundation
import HTTPClient

/// One image fetched for an album: its outcome as the album's machine reads it.
extension AlbumWorkers {
    package enum Fetch {
        /// `retried`: the host failed it first (a sign of trouble at the host).
        case success(([UInt8], ImageInfo), retried: Bool)
        /// This photo cannot be had (404, 410, not an image, too large): it fails, the album goes on.
        case failure(String)
        /// Outside the provider's image hosts or on an internal address (first request or a redirect).
        case refused(String)
        /// The image host is down, overloaded or asks for a wait (5xx, 429, 408, a reset, a
        /// timeout): the photo stays pending and the album waits, as for the search.
        case unavailable(String, retryAfter: Int?)
    }

    /// One image, tried again at once on a blip; never trusts the Content-Type.
    package func fetchImage(_ url: String, hosts: HostPolicy? = nil) -> Fetch {
        var outcome = Fetch.unavailable("not downloaded", retryAfter: nil)
        for attempt in 1...max(1, settings.imageAttempts) {
            do {
                let response = try client.get(url, hosts: hosts ?? provider.imageHosts)
                if response.status == 200 {
                    guard let info = ImageInspector.inspect(response.body) else {
                        return .failure("not an image (JPEG, PNG, GIF or WebP)")
                    }
                    return .success((response.body, info), retried: attempt > 1)
                }
                let reason = "the photo server answered HTTP \(response.status)"
                guard response.status >= 500 || response.status == 429 || response.status == 408 else { return .failure(reason) }
                let retryAfter = ProviderCall.retryAfter(response.headers["retry-after"])
                // A wait named: honoured, not retried over.
                if retryAfter != nil || response.status == 429 { return .unavailable(reason, retryAfter: retryAfter ?? 60) }
                outcome = .unavailable(reason, retryAfter: nil)
            } catch let error as HTTPClientError {
                switch error {
                case .refused(let reason): return .refused("\(reason) (\(url))")
                case .unsupportedURL, .tooLarge, .tooManyRedirects, .unreadableBody: return .failure(error.description)
                case .timedOut, .transport: outcome = .unavailable(error.description, retryAfter: nil)
                }
            } catch {
                outcome = .unavailable("\(error)", retryAfter: nil)
            }
            if attempt < settings.imageAttempts { usleep(UInt32(200_000 * attempt)) }
        }
        return outcome
    }

}
