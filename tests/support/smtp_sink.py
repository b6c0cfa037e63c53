"""A real SMTP server (aiosmtpd) for dawnpost's tests.

Usage: python3 smtp_sink.py PORT DIR [--size N] [--tls-dir TLSDIR] [--log FILE]

Answers per recipient by local part: "busy*" gets 451 at RCPT on its first try, "bad*" always
gets 550, anyone else is accepted. Each accepted message is written to DIR as
<n>-<recipient>.eml. Prints READY once listening; stops when stdin closes.

--size N        announce SIZE N (RFC 1870) and refuse larger messages with 552
--tls-dir D     make a CA (trustme), write D/ca.pem, and require STARTTLS with a certificate it
                signed for 127.0.0.1 and localhost
--ca-as-server  with --tls-dir: present the CA's own certificate instead of one it signed
--log FILE      append "EHLO <name>" and "MAIL <options>" for every EHLO and MAIL FROM
"""
import argparse
import os
import threading

from aiosmtpd.controller import Controller


class Handler:
    def __init__(self, out_dir, log):
        self.out_dir = out_dir
        self.log = log
        self.tries = {}
        self.count = 0
        self.lock = threading.Lock()

    def note(self, line):
        if self.log:
            with self.lock, open(self.log, "a") as f:
                f.write(line + "\n")

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        session.host_name = hostname
        self.note("EHLO %s" % hostname)
        return responses

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        self.note("MAIL %s" % " ".join(mail_options))
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

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
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("out_dir")
    parser.add_argument("--size", type=int, default=None)
    parser.add_argument("--tls-dir", default=None)
    parser.add_argument("--ca-as-server", action="store_true")
    parser.add_argument("--log", default=None)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    options = {}
    if args.size is not None:
        options["data_size_limit"] = args.size
    if args.tls_dir:
        import ssl

        import trustme

        ca = trustme.CA()
        os.makedirs(args.tls_dir, exist_ok=True)
        ca.cert_pem.write_to_path(os.path.join(args.tls_dir, "ca.pem"))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if args.ca_as_server:
            ca.configure_trust(context)
            with ca.cert_pem.tempfile() as c, ca.private_key_pem.tempfile() as k:
                context.load_cert_chain(c, k)
        else:
            ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        options["tls_context"] = context
        options["require_starttls"] = True
    controller = Controller(
        Handler(args.out_dir, args.log), hostname="127.0.0.1", port=args.port, **options
    )
    controller.start()
    print("READY", flush=True)
    try:
        import sys

        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
