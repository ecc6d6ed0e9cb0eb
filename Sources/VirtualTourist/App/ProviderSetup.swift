import Foundation
import Postgres
import AlbumWing

extension App {
    /// The provider twice over, both drawing from one shared call budget: as pages use it (the
    /// picker), and as album workers use it (background calls, which send maxlag to Commons).
    static func withBudget(_ provider: any PhotoProvider, pool: PostgresPool, settings: AppSettings)
        -> (interactive: any PhotoProvider, background: any PhotoProvider) {
        func limits(_ defaults: ProviderBudget.Limits) -> ProviderBudget.Limits {
            ProviderBudget.Limits(perHour: settings.providerCallsPerHour ?? defaults.perHour,
                                  burst: settings.providerCallBurst ?? defaults.burst)
        }
        if var commons = provider as? CommonsProvider {
            commons.budget = ProviderBudget(pool: pool, provider: "commons", limits: limits(.commons))
            commons.originalCap = settings.commonsOriginalCap
            var background = commons
            background.background = true
            return (commons, background)
        }
        if var flickr = provider as? FlickrProvider {
            flickr.budget = ProviderBudget(pool: pool, provider: "flickr", secret: flickr.apiKey, limits: limits(.flickr))
            return (flickr, flickr)
        }
        return (provider, provider)
    }
}

