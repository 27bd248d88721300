#!/usr/bin/env python3
"""A real SMTP server for the end-to-end tests (aiosmtpd), that keeps every
message it accepts as one JSON file in --out (written to a temporary name,
then renamed, so a reader never sees half a file).

    smtp_sink.py --out DIR [--host H] [--port N] [--starttls CA_DIR] [--user U --password P]
                 [--tls-cert PEM --tls-key PEM]

Prints "PORT <n>" once it listens. --starttls makes a fresh test CA (trustme),
writes its certificate to CA_DIR/ca.pem, serves a certificate for 127.0.0.1
signed by it and refuses mail before STARTTLS; with --tls-cert/--tls-key it
serves that certificate instead (a CA of the caller's). --user/--password
require AUTH.
Debian: python3-aiosmtpd python3-trustme (scripts/deps.sh installs them).
"""

import argparse
import asyncio
import email
import email.policy
import json
import os
import ssl
import sys
import time

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


class Sink:
    def __init__(self, out):
        self.out = out
        self.n = 0

    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        parts = {}
        for part in msg.walk():
            ct = part.get_content_type()
            if ct in ("text/plain", "text/html") and not part.is_multipart():
                parts[ct] = part.get_content()
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "from": str(msg["From"]),
            "to": str(msg["To"]),
            "subject": str(msg["Subject"]),
            "message_id": str(msg["Message-ID"]),
            "content_type": msg.get_content_type(),
            "text": parts.get("text/plain"),
            "html": parts.get("text/html"),
            "tls": session.ssl is not None,
            "authenticated": bool(session.authenticated),
        }
        self.n += 1
        name = f"{time.time_ns()}-{os.getpid()}-{self.n}"
        tmp = os.path.join(self.out, name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(self.out, name + ".json"))
        return "250 OK"


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--starttls", metavar="CA_DIR")
    p.add_argument("--user")
    p.add_argument("--password")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)

    tls_context = None
    if a.starttls and a.tls_cert:
        tls_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls_context.load_cert_chain(a.tls_cert, a.tls_key)
    elif a.starttls:
        import trustme

        ca = trustme.CA()
        os.makedirs(a.starttls, exist_ok=True)
        ca.cert_pem.write_to_path(os.path.join(a.starttls, "ca.pem"))
        tls_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(tls_context)

    authenticator = None
    if a.user is not None:
        want = (a.user.encode(), (a.password or "").encode())

        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = isinstance(auth_data, LoginPassword) and (
                auth_data.login,
                auth_data.password,
            ) == want
            return AuthResult(success=ok)

    handler = Sink(a.out)

    def factory():
        return SMTP(
            handler,
            hostname="sink.test",
            tls_context=tls_context,
            require_starttls=tls_context is not None,
            authenticator=authenticator,
            auth_required=authenticator is not None,
            auth_require_tls=tls_context is not None,
        )

    loop = asyncio.get_running_loop()
    server = await loop.create_server(factory, host=a.host, port=a.port)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
