/// Previous and next links (rel=prev and rel=next) for every page that steps through something:
/// the pin list, an album's photos, the picker's result pages. With nowhere to step to, a
/// disabled button keeps the link's place, so the row does not jump from page to page.
struct Pager {
    /// Where each link goes; nil: there is no previous (next) page.
    var previous: String?
    var next: String?
    var previousLabel: HTML
    var nextLabel: HTML
    /// The links' ids, for pages whose script or tests find them by id.
    var previousID: HTML? = nil
    var nextID: HTML? = nil
    var buttonClass: HTML = "button"

    var previousLink: HTML { step(previous, rel: "prev", id: previousID, label: previousLabel) }
    var nextLink: HTML { step(next, rel: "next", id: nextID, label: nextLabel) }

    private func step(_ href: String?, rel: HTML, id: HTML?, label: HTML) -> HTML {
        guard let href else { return "<span class=\"\(buttonClass) disabled\" aria-disabled=\"true\">\(label)</span>" }
        let idAttribute: HTML = id.map { " id=\"\($0)\"" } ?? .empty
        return "<a class=\"\(buttonClass)\" rel=\"\(rel)\"\(idAttribute) href=\"\(text: href)\">\(label)</a>"
    }
}
