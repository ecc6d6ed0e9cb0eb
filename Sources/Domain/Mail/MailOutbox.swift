import Foundation
import HTTPClient
import Log
import Postgres
import Waiting

/// Mail the app sends (password resets, invitations), through the `mail_outbox` table (migration
/// 0125): a request only queues a row, in its own transaction, so a mail server that is down or
/// hangs blocks no request and loses no mail; `MailSender` delivers. Bounded: past `maxWaiting`
/// unsent rows nothing more is queued (and the log says so), so a flood of reset requests cannot
/// fill the database.
public struct MailOutbox: Sendable {
    public enum Kind: String, Sendable { case passwordReset = "password_reset", mapInvitation = "map_invitation" }

    package static let maxWaiting = 10_000

    /// Queues a message in the caller's transaction; false when the queue is full (nothing queued).
    /// Not sent after `discardAfter` seconds (a reset link that expired is not worth sending).
    @discardableResult
    package static func enqueue(_ db: PostgresConnection, _ kind: Kind, to: String, subject: String, body: String,
                        discardAfter: Int = 2 * 24 * 3600) throws -> Bool {
        let queued = try db.query("""
            INSERT INTO mail_outbox (kind, to_address, subject, body, discard_after)
            SELECT $1, $2, $3, $4, now() + make_interval(secs => $5::int)
            WHERE (SELECT count(*) FROM mail_outbox WHERE sent_at IS NULL AND failed_at IS NULL) < $6
            """, [kind.rawValue, to, subject, body, discardAfter, maxWaiting]).affectedRows == 1
        if !queued {
            // Troubleshooting: the mail queue is full
            Logger(label: "mail").warning("the mail queue is full (\(maxWaiting) unsent): a \(kind.rawValue) mail was not queued; is the mail server answering?")
        }
        return queued
    }
}

/// Delivers `mail_outbox`: takes due rows (FOR UPDATE SKIP LOCKED, so each instance takes its
/// own), pushes each one's next try forward before sending (a sender killed mid-send tries again
/// after the backoff, never never), sends, and marks it sent (its body emptied) or failed. Backoff
/// doubles from `retryBase` to an hour; a mail is given up when the server refuses it for good
/// (5xx), when it is past its `discard_after`, or after `maxAttempts`. One thread, woken by
/// `wake()` (a request that queued mail) or every `poll`.
public final class MailSender: Sendable {
    package let pool: PostgresPool
    package let client: SMTPClient
    package let retryBase: Double
    package let poll: Double
    package static let maxAttempts = 20
    /// Wake-ups asked for (mail queued), and whether the sender is stopping.
    private let signal = Waitable((wakeups: 0, stopped: false))
    private let logger = Logger(label: "mail")

    public init(pool: PostgresPool, client: SMTPClient, retryBase: Double = 30, poll: Double = 5) {
        self.pool = pool
        self.client = client
        self.retryBase = retryBase
        self.poll = poll
    }

    public func start() {
        let thread = Thread { [self] in run() }
        thread.name = "mail-sender"
        thread.start()
    }

    public func stop() {
        signal.change { $0.stopped = true }
    }

    /// Something was queued: look now rather than at the next poll.
    public func wake() { signal.change { $0.wakeups += 1 } }

    private func run() {
        while true {
            let (seen, stopped) = signal.withLock { ($0.wakeups, $0.stopped) }
            if stopped { return }
            var sentSome = false
            do { sentSome = try sendDue() } catch {
                // Troubleshooting: mail sender
                logger.warning("mail sender: the database did not answer (\(error)); trying again shortly")
            }
            if !sentSome { _ = signal.wait(for: { $0.wakeups != seen || $0.stopped ? true : nil }, timeout: .seconds(poll)) }
        }
    }

    package struct Due { let id: Int64; let to: String; let subject: String; let body: String; let attempts: Int; let expired: Bool }

    /// One round: up to 10 due mails. True when there may be more due.
    package func sendDue() throws -> Bool {
        let due = try pool.query("""
            UPDATE mail_outbox m
            SET attempts = attempts + 1,
                next_attempt_at = now() + make_interval(secs => least(3600, $1 * power(2, m.attempts)))
            WHERE id IN (SELECT id FROM mail_outbox WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
                         ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED)
            RETURNING id, to_address, subject, body, attempts, discard_after < now() AS expired
            """, [retryBase]).map { row in
            Due(id: try row.decode("id"), to: try row.decode("to_address"), subject: try row.decode("subject"),
                body: try row.decode("body"), attempts: try row.decode("attempts"), expired: try row.decode("expired"))
        }
        for mail in due.sorted(by: { $0.id < $1.id }) {
            if mail.expired {
                try finish(mail.id, sent: false, error: "not sent before it expired")
                continue
            }
            do {
                try client.send(.init(to: mail.to, subject: mail.subject, body: mail.body))
                try finish(mail.id, sent: true, error: nil)
            } catch let failure as SMTPClient.Failure {
                let giveUp = failure.permanent || mail.attempts >= Self.maxAttempts
                // Troubleshooting: mail to
                logger.warning("mail to \(mail.to) not sent (try \(mail.attempts)): \(failure)\(giveUp ? "; given up" : "; tried again later")")
                if giveUp { try finish(mail.id, sent: false, error: failure.description) } else {
                    try pool.query("UPDATE mail_outbox SET last_error = $2 WHERE id = $1", [mail.id, failure.description])
                }
            }
        }
        return due.count == 10
    }

    private func finish(_ id: Int64, sent: Bool, error: String?) throws {
        try pool.query("""
            UPDATE mail_outbox SET body = '', last_error = coalesce($3, last_error),
                   sent_at = CASE WHEN $2 THEN now() END, failed_at = CASE WHEN $2 THEN NULL ELSE now() END
            WHERE id = $1
            """, [id, sent, error])
    }
}
