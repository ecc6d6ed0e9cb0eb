/// The signed-in home page. The map page replaces its main content.
enum HomeView {
    static func render(user: User, chrome: Layout.Chrome) -> HTML {
        Layout.page(title: "Your map", chrome: chrome, bodyClass: "home-page", main: """
            <section class="card">
            <h1>Hello, \(user.displayName)</h1>
            <p>Your map is on its way: pins and albums arrive with the next release.</p>
            </section>
            """)
    }
}
