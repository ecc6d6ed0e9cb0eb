import Foundation
import HTTPServer
import Domain

/// Shared maps: the list and the switcher's target (/maps, /maps/switch), a map's page and its
/// owners' forms (/maps/:id/…), invitation links (/maps/join/:code). Who may do what is checked by
/// SharedMaps in the statement that does it; here its refusals become 404, 403 or a flash.
extension WebPipeline {
    mutating func addMapsRoutes(_ routes: MapsRoutes) {
        signedIn("GET", "/maps", routes.mapsPage)
        signedIn("POST", "/maps", routes.createMap)
        signedIn("POST", "/maps/switch", routes.switchMap)
        signedIn("GET", "/maps/:id", routes.mapSettings)
        signedIn("POST", "/maps/:id/rename", routes.renameMap)
        signedIn("POST", "/maps/:id/sharing", routes.changeSharing)
        signedIn("POST", "/maps/:id/delete", routes.deleteMap)
        signedIn("POST", "/maps/:id/members", routes.addMember)
        signedIn("POST", "/maps/:id/invitations", routes.invite)
        signedIn("POST", "/maps/:id/invitations/withdraw", routes.withdrawInvitations)
        signedIn("POST", "/maps/:id/invitations/:invitation/withdraw", routes.withdrawInvitation)
        signedIn("POST", "/maps/:id/members/:member/role", routes.changeRole)
        signedIn("POST", "/maps/:id/members/:member/remove", routes.removeMember)
        signedIn("POST", "/maps/:id/leave", routes.leaveMap)
        signedIn("POST", "/maps/invitations/:invitation/accept", routes.acceptInvitation)
        signedIn("POST", "/maps/invitations/:invitation/decline", routes.declineInvitation)
        signedIn("GET", "/maps/join/:code", routes.joinPage)
        signedIn("POST", "/maps/join/:code", routes.join)
    }
}

/// Shared maps' pages and forms: one handler per route (the table is `WebPipeline.addMapsRoutes`).
struct MapsRoutes: Sendable {
    let maps: SharedMaps
    /// PUBLIC_URL without its trailing slash, for the links in invitation mails.
    let base: String?
    var mail: MailSender?
    let secure: Bool

    /// Runs a change and goes to `done` (else `back`) with its sentence; a problem becomes a flash
    /// on `back`, the page the form was on (other refusals answer for themselves: DomainErrors).
    func changing(_ context: SignedInContext, back: String, done: String? = nil, _ body: () throws -> String) throws -> HTTPResponse {
        do {
            return .redirect(to: done ?? back, flash: try body(), secure: secure)
        } catch SharedMaps.Refusal.problem(let why) {
            return .redirect(to: back, flash: why, secure: secure)
        }
    }

    func mapID(_ request: HTTPRequest) throws -> Int64 {
        guard let id = WebPipeline.pinID(request) else { throw HTTPError.notFound }
        return id
    }

    func memberID(_ request: HTTPRequest) throws -> Int64 {
        guard let id = request.parameters["member"].flatMap({ Int64($0) }), id > 0 else { throw HTTPError.notFound }
        return id
    }

    func invitationID(_ request: HTTPRequest) throws -> Int64 {
        guard let id = request.parameters["invitation"].flatMap({ Int64($0) }), id > 0 else { throw HTTPError.notFound }
        return id
    }

    func role(_ request: HTTPRequest) throws -> MapRole {
        guard let role = request.formValue("role").flatMap(MapRole.init(parsing:)) else {
            throw HTTPError(.unprocessableContent, "Choose a role: owner, editor or viewer. Nothing was changed.")
        }
        return role
    }

    func mapsPage(_ context: SignedInContext) throws -> HTTPResponse {
        .page(MapsPages.list(try maps.maps(of: context.user.id), current: context.map, chrome: context.chrome,
                             invited: try maps.invitations(for: context.user.id)))
    }

    func createMap(_ context: SignedInContext) throws -> HTTPResponse {
        switch SharedMaps.name(context.request.formValue("name")) {
        case .failure(let refusal):
            return .page(MapsPages.list(try maps.maps(of: context.user.id), current: context.map, chrome: context.chrome,
                                        formError: refusal.description, name: context.request.formValue("name") ?? ""),
                         status: .unprocessableContent)
        case .success(let name):
            do {
                let id = try maps.create(name: name, by: context.user.id)
                return .redirect(to: "/maps/\(id)", flash: "“\(name)” is ready and shown on your map. Add members below.", secure: secure)
            } catch let refusal as SharedMaps.Refusal {
                return .page(MapsPages.list(try maps.maps(of: context.user.id), current: context.map, chrome: context.chrome,
                                            formError: refusal.description, name: name), status: .unprocessableContent)
            }
        }
    }

    /// The header's switcher and the Open buttons: "own" or a map id; back to the map.
    func switchMap(_ context: SignedInContext) throws -> HTTPResponse {
        let value = context.request.formValue("map") ?? ""
        if value == "own" {
            try maps.show(nil, to: context.user.id)
            return .redirect(to: "/")
        }
        guard let id = Int64(value), id > 0, try maps.show(id, to: context.user.id) else { throw HTTPError.notFound }
        return .redirect(to: "/")
    }

    func mapSettings(_ context: SignedInContext) throws -> HTTPResponse {
        guard let detail = try maps.detail(try mapID(context.request), for: context.user.id) else { throw HTTPError.notFound }
        return .page(MapsPages.detail(detail, me: context.user.id, chrome: context.chrome))
    }

    func renameMap(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request)
        return try changing(context, back: "/maps/\(id)") {
            let name = try SharedMaps.name(context.request.formValue("name")).get()
            try maps.rename(id, to: name, by: context.user.id)
            return "Renamed to “\(name)”."
        }
    }

    func changeSharing(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request)
        let allowed = context.request.formValue("editors_share") == "1"
        return try changing(context, back: "/maps/\(id)") {
            try maps.setEditorsShare(allowed, on: id, by: context.user.id)
            return allowed ? "Editors can now make share links of this map." : "Only owners make share links of this map now."
        }
    }

    func deleteMap(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request)
        guard context.request.formValue("confirm") == "1" else {
            return .redirect(to: "/maps/\(id)", flash: "Tick the box to confirm; the map was not deleted.", secure: secure)
        }
        return try changing(context, back: "/maps/\(id)", done: "/maps") {
            try maps.delete(id, by: context.user.id)
            return "The map was deleted."
        }
    }

    func addMember(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request), role = try role(context.request)
        let email = (context.request.formValue("email") ?? "").trimmingCharacters(in: .whitespaces)
        return try changing(context, back: "/maps/\(id)") {
            if let problem = User.emailProblem(email) { throw SharedMaps.Refusal.problem(problem) }
            // Consent: an invitation they accept, and an answer that never says whether the
            // address has an account here.
            // With mail set up (and PUBLIC_URL, which the mail links to), they are told by mail too.
            try maps.inviteByEmail(email, role: role, to: id, by: context.user.id, mailTo: mail == nil ? nil : base)
            mail?.wake()
            return SharedMaps.invitedByEmail
        }
    }

    func invite(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request), role = try role(context.request)
        do {
            let code = try maps.invite(to: id, role: role, by: context.user.id)
            guard let detail = try maps.detail(id, for: context.user.id) else { throw HTTPError.notFound }
            // Shown on this answer only, never in a redirect's cookie or URL.
            var response = HTTPResponse.page(MapsPages.detail(detail, me: context.user.id, chrome: context.chrome,
                                                              invitation: (base ?? "") + "/maps/join/" + code), status: .created)
            response.headers.set("Cache-Control", "no-store")
            return response
        } catch SharedMaps.Refusal.problem(let why) {
            return .redirect(to: "/maps/\(id)", flash: why, secure: secure)
        }
    }

    func withdrawInvitations(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request)
        return try changing(context, back: "/maps/\(id)") {
            let count = try maps.withdrawInvitations(of: id, by: context.user.id)
            return count == 1 ? "1 invitation link withdrawn." : "\(count) invitation links withdrawn."
        }
    }

    func withdrawInvitation(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request)
        let invitation = try invitationID(context.request)
        return try changing(context, back: "/maps/\(id)") {
            try maps.withdrawInvitation(invitation, of: id, by: context.user.id)
                ? "Invitation link withdrawn: it lets nobody in any more."
                : "That invitation was already used, withdrawn or expired."
        }
    }

    func changeRole(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request), member = try memberID(context.request), role = try role(context.request)
        return try changing(context, back: "/maps/\(id)") {
            try maps.setRole(role, of: member, on: id, by: context.user.id)
            return "Role changed to \(role.label.lowercased())."
        }
    }

    func removeMember(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request), member = try memberID(context.request)
        return try changing(context, back: "/maps/\(id)") {
            try maps.remove(member, from: id, by: context.user.id)
            return "Member removed: they no longer see this map."
        }
    }

    func leaveMap(_ context: SignedInContext) throws -> HTTPResponse {
        let id = try mapID(context.request)
        return try changing(context, back: "/maps/\(id)", done: "/maps") {
            try maps.remove(context.user.id, from: id, by: context.user.id)
            return "You left the map."
        }
    }

    /// An invitation by email, on the Maps page of the person it is for: accept, or decline
    /// (and, with block=1, keep the map's owners from inviting them again). Someone else's
    /// invitation answers as one that does not exist.
    func acceptInvitation(_ context: SignedInContext) throws -> HTTPResponse {
        let invitation = try invitationID(context.request)
        return try changing(context, back: "/maps", done: "/") {
            let joined: SharedMaps.Joined
            do {
                joined = try maps.accept(invitation: invitation, person: context.user.id)
            } catch SharedMaps.Refusal.problem(SharedMaps.deadInvitation) {
                // Not theirs, or no longer open: as if it had never been.
                throw HTTPError(.notFound, SharedMaps.deadInvitation)
            }
            switch joined {
            case .joined(_, let name): return "Welcome to “\(name)”: it is shown now."
            case .alreadyMember(_, let name): return "You are already a member of “\(name)”."
            }
        }
    }

    func declineInvitation(_ context: SignedInContext) throws -> HTTPResponse {
        let invitation = try invitationID(context.request)
        let block = context.request.formValue("block") == "1"
        return try changing(context, back: "/maps") {
            guard try maps.decline(invitation: invitation, person: context.user.id, block: block) else {
                throw HTTPError(.notFound, SharedMaps.deadInvitation)
            }
            return block ? "Invitation declined. This map's owners cannot invite you again." : "Invitation declined."
        }
    }

    /// An invitation: GET shows what it joins (and changes nothing), POST joins.
    func joinPage(_ context: SignedInContext) throws -> HTTPResponse {
        let code = context.request.parameters["code"] ?? ""
        guard let found = try maps.invitation(code: code, person: context.user.id) else {
            throw HTTPError(.notFound, SharedMaps.deadInvitation)
        }
        var response = HTTPResponse.page(MapsPages.join(code: code, name: found.name, role: found.role, chrome: context.chrome))
        response.headers.set("Referrer-Policy", "no-referrer")
        return response
    }

    func join(_ context: SignedInContext) throws -> HTTPResponse {
        let code = context.request.parameters["code"] ?? ""
        do {
            switch try maps.join(code: code, person: context.user.id) {
            case .joined(_, let name): return .redirect(to: "/", flash: "Welcome to “\(name)”: it is shown now.", secure: secure)
            case .alreadyMember(_, let name): return .redirect(to: "/", flash: "You are already a member of “\(name)”.", secure: secure)
            }
        } catch let refusal as SharedMaps.Refusal {
            throw HTTPError(.notFound, refusal.description)
        }
    }
}
