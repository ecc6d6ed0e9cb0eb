/// Who may make an account from the sign-up page (SIGN_UP). Whatever the mode, the first account
/// of an empty instance may be made, and the admin CLI makes accounts regardless.
public enum SignUpMode: String, Sendable, CaseIterable {
    /// Anyone who finds the page (still limited per address and hour).
    case open
    /// Only with an invitation: a single-use, expiring code (`virtual-tourist admin invite`).
    case invite
    /// Nobody: accounts are made by the administrator.
    case closed
}
