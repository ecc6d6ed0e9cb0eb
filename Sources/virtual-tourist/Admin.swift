#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import VirtualTourist
import AlbumWing
import Domain

/// `virtual-tourist admin <command>`: the common administration tasks on the database DATABASE_URL
/// names, the same one the app uses. Each command has an SQL recipe in docs/admin.md doing the
/// same. Exit codes: 0 done, 1 it could not be done (nobody has that email, the database is away),
/// 2 the command line is wrong (what to type instead goes to standard error).
enum Admin {
    struct Option: Sendable {
        let name: String
        /// What the value stands for in the help (nil: a flag without a value).
        let value: String?
        let help: String
        var required = false
    }

    struct Command: Sendable {
        let name: String
        let summary: String
        let options: [Option]
        let run: @Sendable (Context, [String: String]) throws -> Void
    }

    /// A wrong command line: said with the command's help, exit code 2.
    struct UsageError: Error {
        let message: String
    }

    struct Context {
        let configuration: Configuration
        let pool: PostgresPool
        var accounts: AccountStore { AccountStore(pool: pool) }
        var people: PeopleAdmin { PeopleAdmin(pool: pool) }
    }

    static let email = Option(name: "email", value: "EMAIL", help: "the person's sign-in email (any letter case)", required: true)
    static let passwordStdin = Option(name: "password-stdin", value: nil,
                                      help: "read the password from the first line of standard input instead of making one up")

    static let commands: [Command] = [
        Command(name: "create-person", summary: "make an account (whatever SIGN_UP says)",
                options: [email, Option(name: "name", value: "NAME", help: "the name shown in the app", required: true), passwordStdin]) { context, options in
            let address = options["email"]!.trimmingCharacters(in: .whitespaces)
            if let problem = User.emailProblem(address) { throw UsageError(message: "--email: \(problem)") }
            let name = options["name"]!.trimmingCharacters(in: .whitespaces)
            guard (1...100).contains(name.count), !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw UsageError(message: "--name must be 1–100 characters on one line, without control characters")
            }
            let (password, made) = try password(options)
            do {
                let user = try context.accounts.createUser(email: address, displayName: name, password: password)
                print("created person \(user.id) <\(printable(user.email))>")
                if made { print("temporary password: \(password)") }
            } catch AccountStore.SignUpError.emailTaken {
                throw Failure(message: "an account with the email \(printable(address)) exists already")
            }
        },
        Command(name: "reset-password", summary: "set a new password and sign the person out everywhere",
                options: [email, passwordStdin]) { context, options in
            let (password, made) = try password(options)
            try context.people.setPassword(email: options["email"]!, password: password)
            print("new password set for \(printable(options["email"]!)); their sessions have ended")
            if made { print("temporary password: \(password)") }
        },
        Command(name: "invite", summary: "make a single-use invitation link for SIGN_UP=invite",
                options: [Option(name: "days", value: "N", help: "how long it works (\(AccountStore.invitationDays); 1–365)"),
                          Option(name: "note", value: "TEXT", help: "who it is for, kept for you in invitations.note")]) { context, options in
            var days = AccountStore.invitationDays
            if let text = options["days"] {
                guard let n = Int(text), (1...365).contains(n) else { throw UsageError(message: "--days must be a whole number of days, 1–365, not \(text)") }
                days = n
            }
            let note = options["note"]
            if let note, note.count > 200 || note.contains(where: \.isNewline) { throw UsageError(message: "--note must be one line of at most 200 characters") }
            let code = try context.accounts.createInvitation(days: days, note: note)
            let base = context.configuration.app.publicBase ?? ""
            print("\(base)/sign-up?invite=\(code)")
            if base.isEmpty { warn("PUBLIC_URL is not set: put your site's address in front of that path") }
            warn("works once, for \(days) day\(days == 1 ? "" : "s")")
            if context.configuration.app.signUp != .invite {
                warn("SIGN_UP is \(context.configuration.app.signUp.rawValue) here; invitations are accepted only with SIGN_UP=invite")
            }
        },
        Command(name: "list", summary: "everyone, with their pins, photos and stored bytes, then the shared maps", options: []) { context, _ in
            let people = try context.people.list()
            guard !people.isEmpty else { print("nobody has an account yet"); return }
            // BYTES: their own map's; CHARGED: what their photo quota counts, on every map; OWN: the
            // photos they brought in themselves, on every map (in CHARGED too).
            var rows = [["ID", "EMAIL", "NAME", "PINS", "PHOTOS", "BYTES", "CHARGED", "OWN", "CREATED", "LAST SEEN", "STATUS"]]
            for p in people {
                rows.append([String(p.id), printable(p.email), printable(p.displayName), String(p.pins), String(p.photos),
                             String(p.photoBytes), String(p.chargedBytes), String(p.ownPhotoBytes), p.created, p.lastSeen ?? "-", p.disabled ? "disabled" : "active"])
            }
            printTable(rows)
            let maps = try MapsAdmin(pool: context.pool).list()
            guard !maps.isEmpty else { return }
            print("")
            var mapRows = [["MAP", "NAME", "PINS", "PHOTOS", "BYTES", "MEMBERS", "OWNERS", "CREATED"]]
            for m in maps {
                mapRows.append([String(m.id), printable(m.name), String(m.pins), String(m.photos), String(m.photoBytes), String(m.members),
                                printable(m.owners ?? "none (docs/admin.md: give it an owner)"), m.created])
            }
            printTable(mapRows)
        },
        Command(name: "jobs", summary: "album downloads queued, running or waiting, and those failed or parked in the last 7 days",
                options: []) { context, _ in
            let jobs = try AlbumJobsAdmin(pool: context.pool).list()
            guard !jobs.isEmpty else { print("no album is queued, running or failed lately"); return }
            var rows = [["JOB", "EMAIL", "PIN", "STATE", "ATTEMPTS", "LAPSES", "NOT BEFORE (UTC)", "LAST ERROR"]]
            for job in jobs {
                rows.append([String(job.id), printable(job.email), String(job.pinID), job.parked ? "parked" : job.state,
                             String(job.attempts), String(job.lapses), job.runAfter, printable(job.lastError ?? "-")])
            }
            printTable(rows)
        },
        Command(name: "disable", summary: "stop a person signing in and end their sessions now (their pins stay)",
                options: [email]) { context, options in
            try context.people.disable(email: options["email"]!)
            print("disabled \(printable(options["email"]!)); their sessions have ended")
        },
        Command(name: "enable", summary: "let a disabled person sign in again", options: [email]) { context, options in
            try context.people.enable(email: options["email"]!)
            print("enabled \(printable(options["email"]!))")
        },
        Command(name: "delete", summary: "delete a person and everything of theirs, for good",
                options: [email, Option(name: "yes", value: nil, help: "confirm: pins, albums, photos and sessions go too; take a backup first")]) { context, options in
            guard options["yes"] != nil else {
                throw UsageError(message: "delete removes \(printable(options["email"]!)) and all their pins and photos for good; add --yes to confirm")
            }
            try context.people.delete(email: options["email"]!)
            print("deleted \(printable(options["email"]!)) and everything of theirs")
        },
    ]

    /// Something the command could not do, said as it is: exit code 1.
    struct Failure: Error {
        let message: String
    }

    static var usage: String {
        var text = """
            usage: virtual-tourist admin <command> [options]

            Works on the database DATABASE_URL names (the one the app uses); PUBLIC_URL makes invitation
            links whole. Each command has an SQL equivalent in docs/admin.md.

            commands:

            """
        let width = commands.map(\.name.count).max() ?? 0
        for command in commands {
            text += "  \(command.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(command.summary)\n"
        }
        text += "\n`virtual-tourist admin <command> --help` says what each one takes.\n"
        return text
    }

    static func help(_ command: Command) -> String {
        let synopsis = command.options.map { option in
            let text = "--\(option.name)" + (option.value.map { " \($0)" } ?? "")
            return option.required ? text : "[\(text)]"
        }
        var text = "usage: virtual-tourist admin \(([command.name] + synopsis).joined(separator: " "))\n\n\(command.summary)\n"
        if !command.options.isEmpty {
            text += "\n"
            let width = command.options.map { $0.name.count + ($0.value.map { $0.count + 1 } ?? 0) + 2 }.max() ?? 0
            for option in command.options {
                let name = "--\(option.name)" + (option.value.map { " \($0)" } ?? "")
                text += "  \(name.padding(toLength: width, withPad: " ", startingAt: 0))  \(option.help)\n"
            }
        }
        return text
    }

    /// Runs `arguments` (what follows `admin`) and exits.
    static func main(_ arguments: [String], configuration: Configuration) -> Never {
        guard let name = arguments.first, !["help", "-h", "--help"].contains(name) else {
            if arguments.isEmpty { usageError("which command?", help: usage) }
            print(usage, terminator: "")
            exit(0)
        }
        guard let command = commands.first(where: { $0.name == name }) else {
            usageError("unknown admin command \(name)", help: usage)
        }
        let options: [String: String]
        do {
            options = try parse(Array(arguments.dropFirst()), for: command)
        } catch let error as UsageError {
            usageError(error.message, help: help(command))
        } catch {
            usageError("\(error)", help: help(command))
        }
        if options["help"] != nil {
            print(help(command), terminator: "")
            exit(0)
        }
        guard let url = configuration.databaseURL else {
            failure("DATABASE_URL is not set: point it at the app's database (under Compose: docker compose exec app virtual-tourist admin …)")
        }
        let pool = PostgresPool(url: url, maxConnections: 2)
        do {
            let migrator = try? Migrator(directory: configuration.app.migrationsDirectory)
            if let migrator, try !pool.withConnection({ try migrator.isUpToDate($0) }) {
                failure("the database has migrations pending: run `virtual-tourist migrate` (or start the app) first")
            }
            try command.run(Context(configuration: configuration, pool: pool), options)
        } catch let error as UsageError {
            usageError(error.message, help: help(command))
        } catch let error as Failure {
            failure(error.message)
        } catch let error as PeopleAdmin.Failure {
            failure(error.description)
        } catch {
            failure("\(error)")
        }
        pool.close()
        exit(0)
    }

    /// `--name value`, `--name=value`, flags; `--help` anywhere. Throws UsageError for anything else.
    static func parse(_ arguments: [String], for command: Command) throws -> [String: String] {
        var options: [String: String] = [:]
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            if argument == "--help" || argument == "-h" { return ["help": ""] }
            guard argument.hasPrefix("--") else { throw UsageError(message: "unexpected argument \(argument)") }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard let option = command.options.first(where: { $0.name == name }) else {
                throw UsageError(message: "\(command.name) has no option --\(name)")
            }
            if option.value == nil {
                guard value == nil else { throw UsageError(message: "--\(name) takes no value") }
                value = ""
            } else if value == nil {
                i += 1
                guard i < arguments.count else { throw UsageError(message: "--\(name) needs a value (\(option.value!))") }
                value = arguments[i]
            }
            guard options[name] == nil else { throw UsageError(message: "--\(name) given twice") }
            options[name] = value
            i += 1
        }
        for option in command.options where option.required && options[option.name] == nil {
            throw UsageError(message: "\(command.name) needs --\(option.name) \(option.value ?? "")")
        }
        if let email = options["email"], email.trimmingCharacters(in: .whitespaces).isEmpty {
            throw UsageError(message: "--email is empty")
        }
        return options
    }

    /// The password from standard input (--password-stdin) or a new temporary one; true when made up.
    static func password(_ options: [String: String]) throws -> (String, Bool) {
        guard options["password-stdin"] != nil else { return (PeopleAdmin.temporaryPassword(), true) }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw UsageError(message: "--password-stdin: nothing on standard input (pipe the password in, one line)")
        }
        if let problem = Password.problem(with: line) { throw UsageError(message: "--password-stdin: \(problem)") }
        return (line, false)
    }

    /// Text from the database shown on a terminal: control characters (an escape sequence in a
    /// display name) become "?".
    /// Columns padded to their widest cell, two spaces apart.
    static func printTable(_ rows: [[String]]) {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            print(row.indices.map { row[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces))
        }
    }

    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : Character($0) })
    }

    static func warn(_ message: String) {
        FileHandle.standardError.write(Data("virtual-tourist admin: \(message)\n".utf8))
    }

    static func usageError(_ message: String, help: String) -> Never {
        FileHandle.standardError.write(Data("virtual-tourist admin: \(message)\n\n\(help)".utf8))
        exit(2)
    }

    static func failure(_ message: String) -> Never {
        FileHandle.standardError.write(Data("virtual-tourist admin: \(message)\n".utf8))
        exit(1)
    }
}
