import Foundation

/// What a person may do on a map.
public enum MapRole: String, Sendable, Comparable, CaseIterable {
    /// Looks, opens albums and photos, downloads.
    case viewer
    /// And drops, renames and deletes pins, takes New Collections, removes photos, imports.
    case editor
    /// And manages members and roles, renames and deletes the map, makes share links. A person is
    /// the owner of their own map.
    case owner

    public static func < (a: MapRole, b: MapRole) -> Bool { a.rank < b.rank }
    private var rank: Int { switch self { case .viewer: 0; case .editor: 1; case .owner: 2 } }

    /// As shown on pages.
    public var label: String { switch self { case .viewer: "Viewer"; case .editor: "Editor"; case .owner: "Owner" } }

    /// A role from a form or the database; nil for anything else.
    public init?(parsing text: String) { self.init(rawValue: text) }
}

/// The map a request works on, and as what: made only by the session's statement (AccountStore,
/// which checks membership there), so a route holds a map's holder only when the person may reach
/// it (docs/architecture.md, "Shared maps"). Every row of a map's data carries its holder's id in
/// user_id: the person's own id for their own map, the shared map's for a shared one.
public struct MapAccess: Sendable, Equatable {
    /// The id every query of this map's data filters by.
    package let holder: Int64
    /// The shared map's id (the same as `holder`); nil on the person's own map.
    public let sharedID: Int64?
    public let name: String
    public let role: MapRole
    /// The map's owners let its editors make share links too.
    public var editorsShare = false

    /// The person's own map: they own it.
    package static func own(_ person: User) -> MapAccess {
        MapAccess(holder: person.id, sharedID: nil, name: "My map", role: .owner)
    }

    /// A shared map the session's statement found the person a member of.
    package static func shared(id: Int64, name: String, role: MapRole, editorsShare: Bool = false) -> MapAccess {
        MapAccess(holder: id, sharedID: id, name: name, role: role, editorsShare: editorsShare)
    }

    /// The holder to read this map's data by: every member may look.
    package var forReading: Int64 { holder }

    /// The holder to change this map's data by: editors and owners; a viewer gets 403 (they can see
    /// the map, so 404 would lie).
    package func forChanging() throws -> Int64 {
        try holder(if: role >= .editor, refusal: changeRefusal)
    }

    /// The same for one thing of the map (a pin, a photo): a viewer gets 403 only for a thing they
    /// can see, 404 for anything else, as everyone else does (`found` asks with the holder).
    package func forChanging(_ found: (Int64) throws -> Bool) throws -> Int64 {
        try holder(if: role >= .editor, found: found, refusal: changeRefusal)
    }

    /// The holder to make and revoke share links by: owners, and editors when the owners allow it.
    package func forSharing() throws -> Int64 {
        try holder(if: mayShare, refusal: shareRefusal)
    }

    /// The same for one pin's links: 403 only for a pin the person can see, 404 for any other id.
    package func forSharing(_ found: (Int64) throws -> Bool) throws -> Int64 {
        try holder(if: mayShare, found: found, refusal: shareRefusal)
    }

    package var mayShare: Bool { role == .owner || (role == .editor && editorsShare) }

    /// The one rule behind every `for…`: the holder when `allowed`; otherwise 404 for a thing
    /// `found` says is not there (without a thing: the map itself, which they see), else 403.
    private func holder(if allowed: Bool, found: (Int64) throws -> Bool = { _ in true }, refusal: () -> String) throws -> Int64 {
        if allowed { return holder }
        if try !found(holder) { throw MapAccessRefused.notFound }
        throw MapAccessRefused(description: refusal())
    }

    private func changeRefusal() -> String {
        "You can look at “\(name)” but not change it: ask one of its owners to make you an editor. Nothing was changed."
    }

    private func shareRefusal() -> String {
        role == .editor
            ? "Only the owners of “\(name)” make share links (an owner can let editors make them too). Nothing was changed."
            : "Only the owners of “\(name)” can do that. Nothing was changed."
    }
}

/// A member tried something their role does not allow: 403 with this sentence.
public struct MapAccessRefused: Error, CustomStringConvertible {
    public let description: String
    /// Not there for this person: 404, as for a thing of someone else's.
    package var isNotFound = false

    package static let notFound = MapAccessRefused(description: "", isNotFound: true)
}

/// A shared map in a person's switcher (from the session's statement).
public struct MapChoice: Sendable, Equatable, Decodable {
    public let id: Int64
    public let name: String
    public let role: String

    /// The session statement's list (a JSON array), read only when a page draws the switcher: a
    /// kept map page, /pins.json and photos compare or ignore the text and never decode it.
    package static func list(_ json: String?) -> [MapChoice] {
        guard let json else { return [] }
        return (try? JSONDecoder().decode([MapChoice].self, from: Data(json.utf8))) ?? []
    }
}
