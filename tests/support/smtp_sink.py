"""A real SMTP server (aiosmtpd) for dawnpost's tests.

Usage: python3 smtp_sink.py PORT DIR

Answers per recipient by local part: "busy*" gets 451 at RCPT on its first try, "bad*" always
gets 550, anyone else is accepted. Each accepted message is written to DIR as
<n>-<recipient>.eml. Prints READY once listening; stops when stdin closes.
"""
import os
import sys
import threading

from aiosmtpd.controller import Controller


class Handler:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.tries = {}
        self.count = 0
        self.lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0]
        with self.lock:
            self.tries[address] = self.tries.get(address, 0) + 1
            n = self.tries[address]
        if local.startswith("bad"):
            return "550 5.1.1 <%s>: mailbox unavailable" % address
        if local.startswith("busy") and n == 1:
            return "451 4.7.1 greylisted, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            n = self.count
        for rcpt in envelope.rcpt_tos:
            path = os.path.join(self.out_dir, "%d-%s.eml" % (n, rcpt))
            with open(path, "wb") as f:
                f.write(envelope.original_content or envelope.content)
        return "250 OK queued"


def main():
    port = int(sys.argv[1])
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    controller = Controller(Handler(out_dir), hostname="127.0.0.1", port=port)
    controller.start()
    print("READY", flush=True)
    try:
        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
