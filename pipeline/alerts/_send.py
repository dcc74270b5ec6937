"""Delivering messages: a JSON POST to a webhook, or a mail over SMTP, retried within a time
budget, and what the destination answered in words that hold no secret.

One request is retried (tenacity, as the client does) on a 429, a 5xx, a timeout or a refused
connection, and for mail on a 4xx SMTP reply or a dropped connection; a 429 waits what it says
(Discord's JSON ``retry_after``, else ``Retry-After`` or the ``X-RateLimit-*`` headers), exactly
and with no jitter on top; anything else backs off with full jitter. Every destination has the
same deadline (``[alerts].budget`` from when sending began), and a wait that would pass it ends
the tries: the message is not delivered, the ledger says so, and the next run tries again.
Other answers (400, 401, 404, a refused login) are not retried. Destinations are sent to side
by side, a thread each, so a slow one does not eat the others' budget.
"""

from __future__ import annotations

import smtplib
import ssl
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_random_exponential

from ..core import Destination, Redactor
from ..interface import read_rate_limit
from ._messages import Message

MAX_TRIES = 5  # tries of one message, the first included
BACKOFF = wait_random_exponential(multiplier=0.5, max=8.0)
USER_AGENT = "botstats-alerts"
ANSWERS_KEPT = 4  # the last answers of a message's tries said in the ledger
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class Delivery:
    """What became of one message: delivered or not, after how many tries, and the answers."""

    delivered: bool
    tries: int
    answer: str


class _Again(Exception):
    """A try that may succeed later; ``wait``: what the destination said to wait, if it did."""

    def __init__(self, answer: str, wait: float | None = None) -> None:
        super().__init__(answer)
        self.answer = answer
        self.wait = wait


class _Refused(Exception):
    """An answer no retry will change."""

    def __init__(self, answer: str) -> None:
        super().__init__(answer)
        self.answer = answer


def redactor_of(dest: Destination) -> Redactor:
    """Masks the destination's secrets: its URL whole, the parts of its path that carry the
    token, its query's values, and the SMTP password."""
    secrets = [dest.url.get(), dest.password.get()]
    parts = urlsplit(dest.url.get())
    secrets += [p for p in parts.path.split("/") if len(p) >= 8]
    secrets += [p.partition("=")[2] for p in parts.query.split("&")]
    return Redactor(secrets)


def send_all(messages: dict[Destination, list[Message]], *, budget: float, timeout: float,
             sleep: Sleep = time.sleep) -> dict[str, list[Delivery]]:
    """Every destination's messages, side by side within ``budget`` seconds; per destination
    name, a delivery per message."""
    deadline = time.monotonic() + budget
    if not messages:
        return {}
    with ThreadPoolExecutor(max_workers=len(messages), thread_name_prefix="alerts") as pool:
        futures = {dest.name: pool.submit(send, dest, msgs, deadline=deadline, timeout=timeout,
                                          sleep=sleep)
                   for dest, msgs in messages.items()}
        return {name: future.result() for name, future in futures.items()}


def send(dest: Destination, messages: list[Message], *, deadline: float, timeout: float,
         sleep: Sleep = time.sleep) -> list[Delivery]:
    """``messages`` to ``dest``, one after another, until ``deadline`` (time.monotonic())."""
    missing = dest.missing()
    if missing:
        return [Delivery(False, 0, missing) for _ in messages]
    redactor = redactor_of(dest)
    out: list[Delivery] = []
    if dest.is_email:
        for message in messages:
            out.append(_tries(partial(_mail, dest, message, deadline, timeout),
                              deadline, sleep, redactor))
        return out
    with httpx.Client(follow_redirects=False,
                      headers={"User-Agent": USER_AGENT}) as client:
        for message in messages:
            out.append(_tries(partial(_post, client, dest, message, deadline, timeout),
                              deadline, sleep, redactor))
    return out


def _tries(attempt: Callable[[], str], deadline: float, sleep: Sleep,
           redactor: Redactor) -> Delivery:
    """``attempt()`` until it answers, refuses, or the tries or the budget run out."""
    answers: list[str] = []
    tries = 0

    def stop(state: RetryCallState) -> bool:
        return (state.attempt_number >= MAX_TRIES
                or time.monotonic() + state.upcoming_sleep >= deadline)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        told = exc.wait if isinstance(exc, _Again) else None
        return told if told is not None else BACKOFF(state)

    retrying = Retrying(stop=stop, wait=wait, retry=retry_if_exception_type(_Again),
                        sleep=sleep, reraise=True)
    try:
        for attempt_ in retrying:
            with attempt_:
                if time.monotonic() >= deadline:
                    answers.append("not sent: [alerts].budget ran out before its turn "
                                   "(tried again next run)")
                    raise _Refused(answers[-1])
                tries += 1
                try:
                    answers.append(attempt())
                except (_Again, _Refused) as exc:
                    answers.append(exc.answer)
                    raise
    except _Again as exc:
        said = _said(answers, redactor)
        left = max(0.0, deadline - time.monotonic())
        if exc.wait is not None and time.monotonic() + exc.wait >= deadline:
            said += f"; told to wait {exc.wait:g} s, more than the {left:.0f} s left of " \
                    f"[alerts].budget"
        elif tries < MAX_TRIES:
            said += "; [alerts].budget ran out"
        return Delivery(False, tries, said + " (tried again next run)")
    except _Refused:
        return Delivery(False, tries, _said(answers, redactor))
    return Delivery(True, tries, _said(answers, redactor))


def _said(answers: list[str], redactor: Redactor) -> str:
    """The answers in order, a repeated one once with how many times, the last few only."""
    runs: list[list[Any]] = []
    for answer in answers:
        if runs and runs[-1][0] == answer:
            runs[-1][1] += 1
        else:
            runs.append([answer, 1])
    kept = runs[-ANSWERS_KEPT:]
    said = [f"{a} ({n} times)" if n > 1 else a for a, n in kept]
    prefix = "..., " if len(runs) > len(kept) else ""
    return redactor.text(prefix + ", then ".join(said))


def _post(client: httpx.Client, dest: Destination, message: Message, deadline: float,
          timeout: float) -> str:
    """One POST; its answer, or _Again / _Refused."""
    seconds = max(0.1, min(timeout, deadline - time.monotonic()))
    try:
        response = client.post(dest.url.get(), json=message.body, timeout=seconds)
    except httpx.TimeoutException as exc:
        raise _Again(f"no answer within {seconds:.0f} s ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise _Again(f"could not connect ({type(exc).__name__})") from exc
    code = response.status_code
    if 200 <= code < 300:
        return f"HTTP {code}"
    if code == 429:
        wait = _told_wait(response)
        raise _Again("HTTP 429" + (f" (wait {wait:g} s)" if wait is not None else ""), wait)
    if code >= 500 or code == 408:
        raise _Again(f"HTTP {code}", read_rate_limit(response.headers).wait)
    raise _Refused(f"HTTP {code}: {_why(code, response, dest)}")


def _told_wait(response: httpx.Response) -> float | None:
    """The wait a 429 tells: Discord's JSON ``retry_after`` (seconds), else the headers."""
    try:
        data: Any = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("retry_after"), int | float) \
            and not isinstance(data["retry_after"], bool) and data["retry_after"] >= 0:
        return float(data["retry_after"])
    return read_rate_limit(response.headers).retry_wait()


def _why(code: int, response: httpx.Response, dest: Destination) -> str:
    body = " ".join(response.text.split())[:300]
    if code in (401, 403, 404):
        return (f"the webhook refused it or no longer exists ({body or 'no body'}): check "
                f"{dest.url_env}")
    return body or "no body"


def _mail(dest: Destination, message: Message, deadline: float, timeout: float) -> str:
    """One SMTP conversation; the server's answer, or _Again / _Refused."""
    seconds = max(0.1, min(timeout, deadline - time.monotonic()))
    if dest.user and not dest.password:
        raise _Refused(f"no password: set {dest.password_env} in the environment of the job")
    mail = EmailMessage()
    mail["From"] = dest.sender or dest.user
    mail["To"] = ", ".join(dest.to)
    mail["Subject"] = message.subject
    mail["Date"] = format_datetime(datetime.now(UTC))
    mail["Message-ID"] = make_msgid(domain=(dest.sender or dest.user).rpartition("@")[2])
    mail.set_content(message.text)
    context = ssl.create_default_context()
    server: smtplib.SMTP | None = None
    try:
        if dest.security == "tls":
            server = smtplib.SMTP_SSL(dest.host, dest.smtp_port, timeout=seconds,
                                      context=context)
        else:
            server = smtplib.SMTP(dest.host, dest.smtp_port, timeout=seconds)
            if dest.security == "starttls":
                server.starttls(context=context)
        if dest.user:
            server.login(dest.user, dest.password.get())
        refused = server.send_message(mail)
        server.quit()
    except smtplib.SMTPResponseException as exc:
        said = f"SMTP {exc.smtp_code} {_text(exc.smtp_error)}"
        raise (_Again(said) if 400 <= exc.smtp_code < 500 else _Refused(said)) from exc
    except smtplib.SMTPRecipientsRefused as exc:
        raise _Refused(f"every recipient refused: {_text(str(exc.recipients))}") from exc
    except smtplib.SMTPNotSupportedError as exc:
        raise _Refused(f"the server does not offer it: {exc}") from exc
    except ssl.SSLError as exc:
        raise _Refused(f"TLS failed ({exc.reason or exc}): check [alerts.destinations."
                       f"{dest.name}].security and the server's certificate") from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise _Again(f"SMTP {type(exc).__name__}: {_text(str(exc))}") from exc
    finally:
        if server is not None:
            try:
                server.close()
            except OSError:
                pass
    if refused:
        return f"SMTP 250, but refused {', '.join(sorted(refused))}"
    return "SMTP 250"


def _text(value: bytes | str) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return " ".join(text.split())[:200]
