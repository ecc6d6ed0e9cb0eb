"""An aiosmtpd handler for MailTests: a server that refuses some recipients for good and others
for a while, and keeps what it accepts in a Maildir, as aiosmtpd's own Mailbox handler does.

    python -m aiosmtpd -n -l 127.0.0.1:PORT -c refusing.Refusing MAILDIR   (PYTHONPATH=this folder)

  gone@…  550 5.1.1 on RCPT, every time (a mailbox that does not exist: trying again cannot help)
  busy@…  451 4.3.0 on RCPT the first two times, then accepted (greylisting, a full spool)
"""
from aiosmtpd.handlers import Mailbox


class Refusing(Mailbox):
    def __init__(self, maildir):
        super().__init__(maildir)
        self.tries = {}

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0].lower()
        if local == "gone":
            return "550 5.1.1 <%s>: no such mailbox here" % address
        if local == "busy":
            self.tries[address] = self.tries.get(address, 0) + 1
            if self.tries[address] <= 2:
                return "451 4.3.0 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"
