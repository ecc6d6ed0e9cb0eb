import Foundation
import Domain

/// Shared maps: the list of a person's maps with the form that makes one, a map's own page (its
/// name and members, and for owners the forms that manage them), and an invitation's page.
/// Plain forms throughout: every action works without script, from the keyboard.
enum MapsPages {
    static let stylesheet: HTML = "<link rel=\"stylesheet\" href=\"/css/maps.css\">"

    static func list(_ maps: [SharedMaps.Summary], current: MapAccess, chrome: Layout.Chrome, formError: String? = nil,
                     name: String = "", invited: [SharedMaps.Invited] = []) -> HTML {
        let rows = HTML.each(maps) { map in
            let shown: HTML = map.id == current.sharedID ? " <span class=\"badge\">shown</span>" : .empty
            let pins: HTML = map.pins == 1 ? "1 pin" : "\(map.pins) pins"
            let members: HTML = map.members == 1 ? "1 member" : "\(map.members) members"
            return """
                <li><a href="/maps/\(map.id)">\(text: map.name)</a>\(shown)
                <span class="muted">· \(text: map.role.label) · \(members) · \(pins)</span>
                \(switchButton(map.id, label: "Open “\(map.name)”", csrf: chrome.csrfToken ?? ""))</li>
                """
        }
        let none: HTML = maps.isEmpty ? "<p class=\"muted\">You are not on any shared map yet. Make one below, or open an invitation link someone sent you.</p>" : .empty
        let ownShown: HTML = current.sharedID == nil ? " <span class=\"badge\">shown</span>" : .empty
        let problem: HTML = formError.map { "<p class=\"form-error\" id=\"new-map-error\" role=\"alert\">\(text: $0)</p>" } ?? .empty
        let described: HTML = formError == nil ? .empty : " aria-describedby=\"new-map-error\" aria-invalid=\"true\""
        return Layout.page(title: "Maps", chrome: chrome, bodyClass: "maps-page", head: stylesheet, main: """
            <nav class="breadcrumbs" aria-label="Breadcrumb"><a href="/">← Back to the map</a></nav>
            <section class="card">
            <h1>Maps</h1>
            \(invitationsForYou(invited, csrf: chrome.csrfToken ?? ""))
            <p>Your own map is yours alone. A shared map is one a household or a club keeps together: its members drop pins and fill albums on it, and everyone sees them live.</p>
            <h2>Your maps</h2>
            <ul class="map-list">
            <li>My map\(ownShown) <span class="muted">· only you</span> \(switchButton(nil, label: "Open my map", csrf: chrome.csrfToken ?? ""))</li>
            \(rows)
            </ul>
            \(none)
            <h2>Make a shared map</h2>
            \(problem)
            <form method="post" action="/maps" class="stacked">
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            <label for="new-map-name">Name</label>
            <input type="text" id="new-map-name" name="name" required maxlength="\(SharedMaps.maxNameLength)" value="\(text: name)"
                   placeholder="Summer in Kyoto"\(described)>
            <button type="submit" class="button primary">Make the map</button>
            </form>
            </section>
            """)
    }

    /// Invitations by email waiting for this person: accept, decline, or decline and block.
    static func invitationsForYou(_ invited: [SharedMaps.Invited], csrf: String) -> HTML {
        guard !invited.isEmpty else { return .empty }
        let rows = HTML.each(invited) { invitation in
            let role: HTML = invitation.role == .editor ? "an editor (you drop pins and fill albums)" : "a viewer (you look at it and its albums)"
            return """
                <li class="invited" data-invitation="\(invitation.id)" data-map="\(invitation.mapID)">
                <p><strong>\(text: invitation.invitedBy)</strong> invited you to “\(text: invitation.mapName)” as \(role). <span class="muted">Open until \(text: SharePages.day(invitation.expiresAt)).</span></p>
                <form method="post" action="/maps/invitations/\(invitation.id)/accept" class="inline">\(Layout.csrfField(csrf))
                <button type="submit" class="button primary small">Accept<span class="visually-hidden"> the invitation to “\(text: invitation.mapName)”</span></button></form>
                <form method="post" action="/maps/invitations/\(invitation.id)/decline" class="inline">\(Layout.csrfField(csrf))
                <button type="submit" class="button small">Decline<span class="visually-hidden"> the invitation to “\(text: invitation.mapName)”</span></button></form>
                <form method="post" action="/maps/invitations/\(invitation.id)/decline" class="inline">\(Layout.csrfField(csrf))<input type="hidden" name="block" value="1">
                <button type="submit" class="link-button">Decline and don’t let this map invite me again<span class="visually-hidden"> (“\(text: invitation.mapName)”)</span></button></form>
                </li>
                """
        }
        return """
            <section class="invitations-for-you" aria-labelledby="invited-heading">
            <h2 id="invited-heading">\(invited.count == 1 ? "An invitation for you" : "Invitations for you" as HTML)</h2>
            <ul class="invited-list">\(rows)</ul>
            </section>
            """
    }

    static func switchButton(_ id: Int64?, label: String, csrf: String) -> HTML {
        let value: HTML = id.map { "\($0)" } ?? "own"
        return """
            <form method="post" action="/maps/switch" class="inline">\(Layout.csrfField(csrf))<input type="hidden" name="map" value="\(value)"><button type="submit" class="small" aria-label="\(text: label)">Open</button></form>
            """
    }

    /// A map's page. `invitation`: a link just made, shown this once.
    static func detail(_ detail: SharedMaps.Detail, me: Int64, chrome: Layout.Chrome, invitation: String? = nil) -> HTML {
        let map = detail.summary
        let owner = map.role == .owner
        let csrf = chrome.csrfToken ?? ""
        let checked: HTML = " checked"
        let members = HTML.each(detail.members) { member in
            let you: HTML = member.id == me ? " <span class=\"badge\">you</span>" : .empty
            let controls: HTML = owner ? memberControls(member, mapID: map.id, me: me, csrf: csrf) : "<span>\(text: member.role.label)</span>"
            return """
                <li class="member"><span class="member-name">\(text: member.name)\(you)\(member.email.map { " <span class=\"muted\">\(text: $0)</span>" as HTML } ?? .empty)</span>
                \(controls)</li>
                """
        }
        let created: HTML = invitation.map {
            """
            <div class="created-link" role="status">
            <p>Send this link to the person you are inviting. It works once, for \(SharedMaps.invitationDays) days, for someone signed in to this server; it is shown only now.</p>
            <input type="text" readonly value="\(text: $0)" aria-label="Invitation link" class="copy-field">
            </div>
            """
        } ?? .empty
        let manage: HTML = owner ? """
            <h2>Add members</h2>
            <form method="post" action="/maps/\(map.id)/members" class="stacked">
            \(Layout.csrfField(csrf))
            <label for="member-email">Their email address</label>
            <input type="email" id="member-email" name="email" required maxlength="320" autocomplete="off" aria-describedby="member-email-help">
            <p class="muted" id="member-email-help">They are invited, and join when they accept on their Maps page.</p>
            <label for="member-role">Role</label>
            \(roleSelect(id: "member-role", selected: .editor, owner: false))
            <button type="submit" class="button">Invite</button>
            </form>
            <h3>Or invite with a link</h3>
            \(created)
            <form method="post" action="/maps/\(map.id)/invitations" class="stacked">
            \(Layout.csrfField(csrf))
            <label for="invite-role">Role</label>
            \(roleSelect(id: "invite-role", selected: .editor, owner: false))
            <button type="submit" class="button">Make an invitation link</button>
            </form>
            \(detail.openInvitations > 0 ? invitations(detail.invitations, mapID: map.id, csrf: csrf) : .empty)
            <h2>Share links</h2>
            <form method="post" action="/maps/\(map.id)/sharing" class="stacked">
            \(Layout.csrfField(csrf))
            <p>Owners make read-only links to this map or to one album (<a href="/shares">share links</a>), for people without an account.</p>
            <label class="check"><input type="checkbox" name="editors_share" value="1"\(detail.editorsShare ? checked : .empty)> Editors may make share links too</label>
            <button type="submit" class="button">Save</button>
            </form>
            <h2>Name</h2>
            <form method="post" action="/maps/\(map.id)/rename" class="stacked">
            \(Layout.csrfField(csrf))
            <label for="map-name">Map name</label>
            <input type="text" id="map-name" name="name" required maxlength="\(SharedMaps.maxNameLength)" value="\(text: map.name)">
            <button type="submit" class="button">Rename</button>
            </form>
            <h2>Delete</h2>
            <form method="post" action="/maps/\(map.id)/delete" class="stacked">
            \(Layout.csrfField(csrf))
            <p>Deletes the map, its \(map.pins == 1 ? "pin" : "\(map.pins) pins" as HTML) and their albums for every member. This cannot be undone.</p>
            <label class="check"><input type="checkbox" name="confirm" value="1" required> I understand: delete “\(text: map.name)”</label>
            <button type="submit" class="button danger-outline">Delete the map</button>
            </form>
            """ : .empty
        let rights: HTML
        switch map.role {
        case .owner: rights = "You are an owner: you manage members and roles, rename and delete the map, and make share links."
        case .editor: rights = detail.editorsShare
            ? "You are an editor: you drop and delete pins, take New Collections, remove photos, import and make share links."
            : "You are an editor: you drop and delete pins, take New Collections, remove photos and import."
        case .viewer: rights = "You are a viewer: you look at the map, open albums and photos and download them."
        }
        return Layout.page(title: map.name, chrome: chrome, bodyClass: "map-detail-page", head: stylesheet, main: """
            <nav class="breadcrumbs" aria-label="Breadcrumb"><a href="/maps">← Maps</a></nav>
            <section class="card">
            <h1>\(text: map.name)</h1>
            <p class="muted">\(map.pins == 1 ? "1 pin" : "\(map.pins) pins" as HTML) · \(detail.members.count == 1 ? "1 member" : "\(detail.members.count) members" as HTML)</p>
            <p>\(rights)</p>
            \(switchButton(map.id, label: "Open “\(map.name)”", csrf: csrf))
            <h2>Members</h2>
            <ul class="member-list">\(members)</ul>
            \(manage)
            <h2>Leave</h2>
            <form method="post" action="/maps/\(map.id)/leave" class="stacked">
            \(Layout.csrfField(csrf))
            <p>You stop seeing this map; the pins you dropped stay on it for the others, and the photos of your own you added to it are deleted.</p>
            <button type="submit" class="button danger-outline">Leave “\(text: map.name)”</button>
            </form>
            </section>
            """)
    }

    /// The open invitations: who made each, the role it gives, until when; withdraw one or all.
    /// (One dies by itself when its maker is no longer an owner: it is not listed then.)
    private static func invitations(_ list: [SharedMaps.Invitation], mapID: Int64, csrf: String) -> HTML {
        let rows = HTML.each(list) { invitation in
            """
            <tr data-invitation="\(invitation.id)"><td data-label="For">\(invitation.inviteeEmail.map { "\(text: $0)" as HTML } ?? "anyone with the link")</td>
            <td data-label="Made by">\(text: invitation.madeBy)</td><td data-label="Role">\(text: invitation.role.label)</td>
            <td data-label="Expires">\(text: SharePages.day(invitation.expiresAt))</td>
            <td><form method="post" action="/maps/\(mapID)/invitations/\(invitation.id)/withdraw" class="inline">\(Layout.csrfField(csrf))
            <button type="submit" class="link-button">Withdraw<span class="visually-hidden"> the \(text: invitation.role.label.lowercased()) invitation \(invitation.inviteeEmail.map { "for \(text: $0) " as HTML } ?? .empty)made by \(text: invitation.madeBy)</span></button></form></td></tr>
            """
        }
        return """
            <table class="invitations"><caption>Open invitations</caption>
            <thead><tr><th scope="col">For</th><th scope="col">Made by</th><th scope="col">Role</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
            <tbody>\(rows)</tbody></table>
            \(withdraw(mapID, count: list.count, csrf: csrf))
            """
    }

    private static func withdraw(_ mapID: Int64, count: Int, csrf: String) -> HTML {
        """
        <form method="post" action="/maps/\(mapID)/invitations/withdraw" class="inline">\(Layout.csrfField(csrf))
        <span class="muted">\(count == 1 ? "1 invitation is" : "\(count) invitations are" as HTML) still open.</span>
        <button type="submit" class="link-button">Withdraw \(count == 1 ? "it" : "them" as HTML)</button></form>
        """
    }

    private static func memberControls(_ member: SharedMaps.Member, mapID: Int64, me: Int64, csrf: String) -> HTML {
        let id = "role-\(member.id)"
        let remove: HTML = member.id == me ? .empty : """
            <form method="post" action="/maps/\(mapID)/members/\(member.id)/remove" class="inline">\(Layout.csrfField(csrf))
            <button type="submit" class="link-button" aria-label="Remove \(text: member.name)" title="Their own photos on this map go with them">Remove</button></form>
            """
        return """
            <form method="post" action="/maps/\(mapID)/members/\(member.id)/role" class="inline">\(Layout.csrfField(csrf))
            <label for="\(text: id)" class="visually-hidden">Role of \(text: member.name)</label>
            \(roleSelect(id: id, selected: member.role, owner: true))
            <button type="submit" class="small" aria-label="Change the role of \(text: member.name)">Change</button></form>
            \(remove)
            """
    }

    private static func roleSelect(id: String, selected: MapRole, owner: Bool) -> HTML {
        let roles = MapRole.allCases.reversed().filter { owner || $0 != .owner }
        let marked: HTML = " selected"
        return """
            <select id="\(text: id)" name="role">\(HTML.each(roles) { "<option value=\"\(text: $0.rawValue)\"\($0 == selected ? marked : .empty)>\(text: $0.label)</option>" })</select>
            """
    }

    /// An invitation link opened: what it joins, and the button that does (a GET changes nothing).
    static func join(code: String, name: String, role: MapRole, chrome: Layout.Chrome) -> HTML {
        Layout.page(title: "Join \(name)", chrome: chrome, bodyClass: "join-page", head: stylesheet, main: """
            <section class="card narrow">
            <h1>Join “\(text: name)”</h1>
            <p>You have been invited to this shared map as \(text: role == .editor ? "an editor: you can drop pins and fill albums on it" : "a viewer: you can look at it and its albums").</p>
            <form method="post" action="/maps/join/\(text: code)">
            \(Layout.csrfField(chrome.csrfToken ?? ""))
            <button type="submit" class="button primary">Join the map</button>
            <a href="/" class="button">Not now</a>
            </form>
            </section>
            """)
    }
}
