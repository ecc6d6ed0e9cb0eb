import Domain

/// The page shell every HTML page shares: head, header with the person's name and sign-out, flash
/// message, main content, footer.
enum Layout {
    struct Chrome {
        var user: User?
        var csrfToken: String?
        var flash: String?
        /// The map the page works on, and the shared maps the person may switch to.
        var map: MapAccess?
        var maps: [MapChoice] = []
    }

    static func page(title: String, chrome: Chrome, bodyClass: String = "", head: HTML = .empty, main: HTML) -> HTML {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(text: title) · Virtual Tourist</title>
        <link rel="stylesheet" href="/css/app.css">
        <link rel="icon" href="/favicon.svg" type="image/svg+xml">
        \(head)
        </head>
        <body class="\(text: bodyClass)">
        <a class="skip-link" href="#main">Skip to content</a>
        \(header(chrome))
        \(flash(chrome.flash))
        <main id="main">
        \(main)
        </main>
        <footer class="site-footer"><p>Virtual Tourist \(text: Version.number) — your places, your photos, your server.</p></footer>
        </body>
        </html>
        """
    }

    static func header(_ chrome: Chrome) -> HTML {
        let account: HTML
        if let user = chrome.user, let csrf = chrome.csrfToken {
            account = """
                <div class="account">
                <span class="who" title="\(text: user.displayName)">\(text: user.displayName)</span>
                <form method="post" action="/sign-out" class="inline">
                \(csrfField(csrf))
                <button type="submit" class="link-button">Sign out</button>
                </form>
                </div>
                """
        } else {
            account = """
                <nav class="account"><a href="/sign-in">Sign in</a> <a class="button small" href="/sign-up">Create account</a></nav>
                """
        }
        return """
            <header class="site-header">
            <a class="brand" href="/"><img src="/favicon.svg" alt="" width="24" height="24"> Virtual Tourist</a>
            \(switcher(chrome))
            \(account)
            </header>
            """
    }

    /// The map switcher: a plain form (a select and a button), so it works without script, from
    /// the keyboard and with a screen reader; no script, no change of page on select.
    static func switcher(_ chrome: Chrome) -> HTML {
        guard let map = chrome.map, let csrf = chrome.csrfToken else { return .empty }
        // Nothing to switch between yet: the way to the maps page only.
        if chrome.maps.isEmpty && map.sharedID == nil { return "<a href=\"/maps\" class=\"maps-link\">Shared maps</a>" }
        let selected: HTML = " selected"
        let shared = HTML.each(chrome.maps) { choice in
            "<option value=\"\(choice.id)\"\(choice.id == map.sharedID ? selected : .empty)>\(text: choice.name)</option>"
        }
        let manage: HTML = map.sharedID == nil ? "Shared maps" : "Members"
        return """
            <form class="map-switcher" method="post" action="/maps/switch">
            \(csrfField(csrf))
            <label for="map-switch">Map</label>
            <select id="map-switch" name="map"><option value="own"\(map.sharedID == nil ? selected : .empty)>My map</option>\(shared)</select>
            <button type="submit" class="small">Open</button>
            <a href="/maps" class="maps-link">\(manage)</a>
            </form>
            """
    }

    static func flash(_ message: String?) -> HTML {
        guard let message, !message.isEmpty else { return .empty }
        return "<div class=\"flash\" role=\"status\">\(text: message)</div>"
    }

    static func csrfField(_ token: String) -> HTML {
        "<input type=\"hidden\" name=\"_csrf\" value=\"\(text: token)\">"
    }

    /// Friendly error pages (403, 404, 500…) in the site's own look. They never show internals:
    /// the message is the error's public message.
    /// `code` and `reason` are the HTTP status's (Views know no HTTP types; Web/ passes them in).
    static func errorPage(code: Int, reason: String, message: String, chrome: Chrome = Chrome()) -> HTML {
        let heading: String
        switch code {
        case 403: heading = "That is not allowed"
        case 404: heading = "Page not found"
        case 405: heading = "Not available that way"
        case 413: heading = "That is too large"
        case 429: heading = "Please wait a moment"
        case 500...599: heading = "Something went wrong"
        default: heading = reason
        }
        return page(title: heading, chrome: chrome, bodyClass: "error-page", main: """
            <section class="card narrow">
            <p class="status-code">\(code)</p>
            <h1>\(text: heading)</h1>
            <p>\(text: message)</p>
            <p><a class="button" href="/">Back to your map</a></p>
            </section>
            """)
    }
}
