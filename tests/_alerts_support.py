"""Real receivers on loopback for the alerts tests: an HTTP server that records every webhook
POST and answers from a script (429s with Discord's JSON ``retry_after`` or Slack's
``Retry-After``, 5xx, or 204), and an SMTP server (aiosmtpd) in plain, STARTTLS or TLS mode
with a login, trusting a throwaway certificate made here."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import ssl
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


@dataclass(frozen=True)
class Answer:
    status: int = 204
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def discord_429(retry_after: float) -> Answer:
    body = json.dumps({"message": "You are being rate limited.", "retry_after": retry_after,
                       "global": False}).encode()
    return Answer(429, body, {"Content-Type": "application/json",
                              "X-RateLimit-Reset-After": str(retry_after)})


def slack_429(seconds: int) -> Answer:
    return Answer(429, b"rate_limited", {"Retry-After": str(seconds)})


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]
    body: Any
    status: int  # what the receiver answered


class Receiver:
    """Records every POST; answers each from the script of its path (``answer``), else with
    that path's standing answer (``always``), else 204."""

    def __init__(self) -> None:
        self.posts: list[Post] = []
        self._script: dict[str, deque[Answer]] = {}
        self._always: dict[str, Answer] = {}
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer = receiver._next(self.path)
                with receiver._lock:
                    receiver.posts.append(Post(self.path, dict(self.headers.items()),
                                               json.loads(raw or b"null"), answer.status))
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def _next(self, path: str) -> Answer:
        with self._lock:
            queue = self._script.get(path)
            if queue:
                return queue.popleft()
            return self._always.get(path, Answer())

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def answer(self, path: str, *answers: Answer) -> None:
        with self._lock:
            self._script.setdefault(path, deque()).extend(answers)

    def always(self, path: str, answer: Answer | None) -> None:
        with self._lock:
            if answer is None:
                self._always.pop(path, None)
            else:
                self._always[path] = answer

    def received(self, path: str) -> list[Any]:
        """The bodies of the posts to ``path`` that were answered 2xx."""
        with self._lock:
            return [p.body for p in self.posts if p.path == path and 200 <= p.status < 300]

    def tries(self, path: str) -> list[int]:
        with self._lock:
            return [p.status for p in self.posts if p.path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (and its key), made for this test only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "smtp-cert.pem", folder / "smtp-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    message: Message
    login: str | None


class MailServer:
    """An SMTP server on loopback (aiosmtpd) in ``security`` mode (none, starttls, tls) that
    accepts the login user/pw, records each mail, and answers the next ones from ``replies``
    (e.g. "451 try later") before accepting."""

    def __init__(self, security: str, folder: Path, user: str = "alerts@example.com",
                 password: str = "smtp-pw-not-shown") -> None:
        self.mails: list[Mail] = []
        self.replies: deque[str] = deque()
        self.logins: list[tuple[str, bool]] = []
        self.cert, key = self_signed(folder)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, key)
        server = self

        class Handler:
            async def handle_DATA(self, _srv: Any, session: Any, envelope: Any) -> str:
                if server.replies:
                    return server.replies.popleft()
                login = session.auth_data.login.decode() if session.auth_data else None
                server.mails.append(Mail(envelope.mail_from, list(envelope.rcpt_tos),
                                         message_from_bytes(envelope.content), login))
                return "250 OK queued"

        def authenticate(_srv: Any, _session: Any, _env: Any, _mech: str, data: Any) -> AuthResult:
            ok = data.login.decode() == user and data.password.decode() == password
            self.logins.append((data.login.decode(), ok))
            return AuthResult(success=ok, handled=False, auth_data=data if ok else None)

        # aiosmtpd counts only STARTTLS as TLS for AUTH, and its LOGIN mechanism and smtplib's
        # disagree on a failed login (smtplib then waits out its timeout): PLAIN only.
        kwargs: dict[str, Any] = {"authenticator": authenticate,
                                  "auth_require_tls": security == "starttls",
                                  "auth_exclude_mechanism": ["LOGIN"]}
        if security == "starttls":
            kwargs |= {"tls_context": context, "require_starttls": True}
        elif security == "tls":
            kwargs["ssl_context"] = context
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=free_port(), **kwargs)
        self.controller.start()
        self.port = int(self.controller.port)

    def close(self) -> None:
        self.controller.stop()
