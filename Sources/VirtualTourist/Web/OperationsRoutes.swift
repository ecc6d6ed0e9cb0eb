import AlbumWing
import Domain
import Foundation
import HTTPServer
import Postgres

/// The operator's routes: /healthz (the process answers), /readyz (ready for traffic) and /metrics
/// (with its token; the token-less one is on METRICS_PORT alone, `App.metricsHandler`).
extension WebPipeline {
    mutating func addOperationsRoutes(pool: PostgresPool, migrations: String, storeCheck: StoreCheck, provider interactive: any PhotoProvider,
                                      metrics: Metrics, connections counter: ConnectionGauge, token: String?,
                                      caches: @escaping @Sendable () -> String) {
        plain("/healthz") { _ in .text("ok \(Version.number)") }
        // Ready for traffic: the database answers and every migration is applied. Pages need
        // nothing else, so a photo store outage (shared by every instance) is reported here as
        // degraded, never as a 503 that would take every instance out of the balancer.
        plain("/readyz") { _ in
            do {
                let upToDate = try pool.withConnection { try Migrator(directory: migrations).isUpToDate($0) }
                guard upToDate else { return .text("not ready: migrations are pending", status: .serviceUnavailable) }
                var text = "ready"
                if let problem = storeCheck.problem() {
                    let photos = storeCheck.breaker?.status.reads == false ? "photos answer 503" : "photos are served"
                    text += " (degraded)\nphoto store \(storeCheck.name): \(problem); \(photos), albums wait for it"
                }
                // A provider's trouble does not make the instance unready, but the operator reads it here.
                if let note = interactive.budget?.recentProblem() { text += "\n\(interactive.name): \(note)" }
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
        let render: @Sendable () throws -> HTTPResponse = {
            try App.metricsResponse(pool: pool, metrics: metrics, openConnections: counter.read(), store: storeCheck, caches: caches())
        }
        // On the public port only with the token: behind a reverse proxy every request comes from
        // the proxy's (local) address, so no address can stand in for it. Without a token it is
        // served on METRICS_PORT alone (App.metricsHandler).
        plain("/metrics") { request in
            guard let token, !token.isEmpty, let sent = request.headers["Authorization"],
                  constantTimeEqual(Array(sent.utf8), Array("Bearer \(token)".utf8)) else { throw HTTPError.notFound }
            return try render()
        }
    }
}
