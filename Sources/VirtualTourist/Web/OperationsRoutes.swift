import AlbumWing
import Domain
import Foundation
import HTTPServer
import Postgres

/// The operator's routes: /healthz (the process answers), /readyz (ready for traffic) and /metrics
/// (with its token; the token-less one is on METRICS_PORT alone, `App.metricsHandler`).
extension WebPipeline {
    mutating func addOperationsRoutes(_ routes: OperationsRoutes) {
        plain("/healthz", routes.healthz)
        plain("/readyz", routes.readyz)
        plain("/metrics", routes.metrics)
    }
}

/// One handler per route (the table is `WebPipeline.addOperationsRoutes`).
struct OperationsRoutes: Sendable {
    let pool: PostgresPool
    let migrations: String
    let storeCheck: StoreCheck
    /// The provider pages ask (its budget's recent trouble is reported by /readyz).
    let provider: any PhotoProvider
    let token: String?
    /// The /metrics text, as App.metricsResponse makes it.
    let render: @Sendable () throws -> HTTPResponse

    func healthz(_ request: HTTPRequest) throws -> HTTPResponse { .text("ok \(Version.number)") }

    /// Ready for traffic: the database answers and every migration is applied. Pages need nothing
    /// else, so a photo store outage (shared by every instance) is reported here as degraded,
    /// never as a 503 that would take every instance out of the balancer.
    func readyz(_ request: HTTPRequest) throws -> HTTPResponse {
        do {
            let upToDate = try pool.withConnection { try Migrator(directory: migrations).isUpToDate($0) }
            guard upToDate else { return .text("not ready: migrations are pending", status: .serviceUnavailable) }
            var text = "ready"
            if let problem = storeCheck.problem() {
                let photos = storeCheck.breaker?.status.reads == false ? "photos answer 503" : "photos are served"
                text += " (degraded)\nphoto store \(storeCheck.name): \(problem); \(photos), albums wait for it"
            }
            // A provider's trouble does not make the instance unready, but the operator reads it here.
            if let note = provider.budget?.recentProblem() { text += "\n\(provider.name): \(note)" }
            return .text(text)
        } catch let error as PostgresError {
            var response = HTTPResponse.text("not ready: the database cannot be reached: \(error.unavailableReason)",
                                             status: .serviceUnavailable)
            response.waitFor(DatabaseUnavailable.retryAfter)
            return response
        } catch {
            return .text("not ready: \(error)", status: .serviceUnavailable)
        }
    }

    /// On the public port only with the token: behind a reverse proxy every request comes from the
    /// proxy's (local) address, so no address can stand in for it. Without a token it is served on
    /// METRICS_PORT alone (App.metricsHandler).
    func metrics(_ request: HTTPRequest) throws -> HTTPResponse {
        guard let token, !token.isEmpty, let sent = request.headers["Authorization"],
              constantTimeEqual(Array(sent.utf8), Array("Bearer \(token)".utf8)) else { throw HTTPError.notFound }
        return try render()
    }
}
