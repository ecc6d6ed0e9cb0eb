/// The release this code is. The number operators see (`virtual-tourist --version`, /healthz,
/// /metrics, the page footer, the image's label and tag) comes from here; CHANGELOG.md's newest
/// section and docker-compose.yml's image tag must name the same (VersionTests checks both, and
/// the Dockerfile refuses to label an image with another).
public enum Version {
    public static let number = "1.2.0"
}
