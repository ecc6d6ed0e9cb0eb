import Foundation
import HTTPClient
import Log

// Where each provider's images live (docs/architecture.md, "Outbound HTTP"). The album worker and
// the picker fetch or show an image only from these hosts; everything else in a provider's answer
// is dropped with a logged reason, so a compromised or misconfigured provider cannot make the
// server fetch from its own network.

extension FlickrProvider {
    /// Flickr serves photos from live.staticflickr.com (and the older farmN.staticflickr.com), over
    /// https (https://www.flickr.com/services/api/misc.urls.html). A Flickr-compatible server at a
    /// custom API URL (the fixture) serves its images itself: its own origin and nothing else.
    public var imageHosts: HostPolicy {
        apiURL == FlickrProvider.defaultAPIURL ? HostPolicy([.init("*.staticflickr.com", schemes: ["https"])])
            : HostPolicy.sameOrigin(as: apiURL)
    }

    public var warmUpOrigin: String? {
        apiURL == FlickrProvider.defaultAPIURL ? "https://live.staticflickr.com" : origin(of: apiURL)
    }
}

extension CommonsProvider {
    /// Commons files and their thumbnails are served by upload.wikimedia.org over https.
    public var imageHosts: HostPolicy {
        apiURL == CommonsProvider.defaultAPIURL ? HostPolicy([.init("upload.wikimedia.org", schemes: ["https"])])
            : HostPolicy.sameOrigin(as: apiURL)
    }

    public var warmUpOrigin: String? {
        apiURL == CommonsProvider.defaultAPIURL ? "https://upload.wikimedia.org" : origin(of: apiURL)
    }
}

extension PhotoSearchPage {
    /// The same page without the photos whose image or thumbnail lies outside `hosts`; each one
    /// dropped is logged with the address that was refused.
    package func keepingImages(from hosts: HostPolicy, provider: String) -> PhotoSearchPage {
        let kept = photos.filter { photo in
            for address in [photo.imageURL, photo.thumbnailURL] where !hosts.admits(address) {
                // Troubleshooting: is not one of its image hosts
                imageHostLogger.warning("\(provider) photo \(photo.remoteID) dropped: \(address) is not one of its image hosts (\(hosts))")
                return false
            }
            return true
        }
        return kept.count == photos.count ? self : PhotoSearchPage(photos: kept, page: page, pages: pages, total: total)
    }
}

package let imageHostLogger = Logger(label: "photos")
