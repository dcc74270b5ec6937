"""Alerts, the sending: webhooks and mail against real receivers on loopback: a 429 waits
exactly what Discord's JSON or Slack's header says, 5xx and refused connections are retried
with backoff within the time budget, other refusals are not, and no answer holds a secret."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _alerts_support import (
    Answer,
    MailServer,
    Receiver,
    discord_429,
    free_port,
    receiver,
    slack_429,
)

from pipeline.alerts._alert import sample
from pipeline.alerts._messages import render
from pipeline.alerts._send import MAX_TRIES, Delivery, send, send_all
from pipeline.core import Destination, Secret

__all__ = ["receiver"]  # the fixture

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
TOKEN = "tok3nSECRETdoNotShow0123456789"
PATH = f"/api/webhooks/1234567890/{TOKEN}"


def hook(receiver: Receiver, kind: str = "discord", path: str = PATH) -> Destination:
    return Destination("team", kind, url=Secret(receiver.url(path)))


def deliver(dest: Destination, budget: float = 30.0) -> tuple[list[float], Delivery]:
    waits: list[float] = []
    messages = render(dest.type, [sample(dest.name, NOW)], "botstats on test", NOW)
    (delivery,) = send(dest, messages, deadline=time.monotonic() + budget, timeout=5.0,
                       sleep=waits.append)
    return waits, delivery


def test_a_discord_429_waits_its_json_retry_after_exactly_then_delivers(receiver: Receiver) -> None:
    slow_header = discord_429(0.25)
    slow_header.headers["X-RateLimit-Reset-After"] = "9"  # the JSON body is what Discord means
    receiver.answer(PATH, slow_header, discord_429(1.5))
    waits, delivery = deliver(hook(receiver))
    assert waits == [0.25, 1.5]  # exactly, no jitter on top
    assert delivery == Delivery(True, 3, "HTTP 429 (wait 0.25 s), then HTTP 429 (wait "
                                               "1.5 s), then HTTP 204")
    assert receiver.tries(PATH) == [429, 429, 204]
    (body,) = receiver.received(PATH)
    assert body["embeds"][0]["title"] == "botstats alerts test: this destination works"


def test_a_slack_429_waits_its_retry_after_header(receiver: Receiver) -> None:
    receiver.answer("/services/T0/B0/x", slack_429(2))
    waits, delivery = deliver(hook(receiver, "slack", "/services/T0/B0/x"))
    assert waits == [2.0]
    assert (delivery.delivered, delivery.tries) == (True, 2)
    (body,) = receiver.received("/services/T0/B0/x")
    assert body["blocks"][0]["text"]["text"] == "botstats alerts test: this destination works"


def test_5xx_answers_are_retried_with_backoff(receiver: Receiver) -> None:
    receiver.answer(PATH, Answer(500), Answer(503, b"", {"Retry-After": "1"}))
    waits, delivery = deliver(hook(receiver, "webhook"))
    assert len(waits) == 2 and 0 <= waits[0] <= 0.5 and waits[1] == 1.0  # jittered; then told
    assert delivery.answer == "HTTP 500, then HTTP 503, then HTTP 204"
    (body,) = receiver.received(PATH)
    assert body["source"] == "botstats" and body["alerts"][0]["kind"] == "test"


@pytest.mark.parametrize(("status", "body", "words"), [
    (400, b'{"embeds": ["0"], "message": "Invalid Form Body"}', "HTTP 400: {\"embeds\": [\"0\"], "
                                                                "\"message\": \"Invalid Form Body\"}"),
    (404, b'{"message": "Unknown Webhook", "code": 10015}',
     "HTTP 404: the webhook refused it or no longer exists ({\"message\": \"Unknown Webhook\", "
     "\"code\": 10015}): check BOTSTATS_ALERTS_TEAM_URL"),
])
def test_a_refusal_is_not_retried(receiver: Receiver, status: int, body: bytes, words: str) -> None:
    receiver.always(PATH, Answer(status, body))
    waits, delivery = deliver(hook(receiver))
    assert waits == [] and receiver.tries(PATH) == [status]
    assert (delivery.delivered, delivery.tries, delivery.answer) == (False, 1, words)


def test_a_destination_down_is_tried_then_left_for_the_next_run() -> None:
    dest = Destination("team", "discord",
                       url=Secret(f"http://127.0.0.1:{free_port()}/api/webhooks/1/{TOKEN}"))
    waits, delivery = deliver(dest)
    assert len(waits) == MAX_TRIES - 1
    assert not delivery.delivered and delivery.tries == MAX_TRIES
    assert delivery.answer == "could not connect (ConnectError) (5 times) (tried again next run)"
    assert TOKEN not in delivery.answer


def test_a_wait_longer_than_the_budget_ends_the_tries_at_once(receiver: Receiver) -> None:
    receiver.answer(PATH, discord_429(120))
    waits, delivery = deliver(hook(receiver), budget=30)
    assert waits == [] and receiver.tries(PATH) == [429]
    assert delivery.answer == ("HTTP 429 (wait 120 s); told to wait 120 s, more than the 30 s "
                               "left of [alerts].budget (tried again next run)")


def test_a_webhook_without_its_url_is_not_delivered_and_says_which_variable() -> None:
    waits, delivery = deliver(Destination("team", "slack"))
    assert (delivery.delivered, delivery.tries, delivery.answer) == (
        False, 0, "no URL: set BOTSTATS_ALERTS_TEAM_URL in the environment of the job")


def test_destinations_are_sent_to_side_by_side(receiver: Receiver) -> None:
    up = Destination("up", "slack", url=Secret(receiver.url("/up")))
    down = Destination("down", "discord", url=Secret(f"http://127.0.0.1:{free_port()}/x"))
    messages = {d: render(d.type, [sample(d.name, NOW)], "here", NOW) for d in (up, down)}
    out = send_all(messages, budget=30, timeout=5, sleep=lambda _: None)
    assert [d.delivered for d in out["up"]] == [True]
    assert [d.delivered for d in out["down"]] == [False]


# --- mail ----------------------------------------------------------------------------------
@pytest.fixture
def mail_server(tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], MailServer]]:
    servers: list[MailServer] = []

    def start(security: str) -> MailServer:
        server = MailServer(security, tmp_path)
        monkeypatch.setenv("SSL_CERT_FILE", str(server.cert))  # trust the throwaway cert
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def mail_to(server: MailServer, security: str, password: str = "smtp-pw-not-shown",
            user: str = "alerts@example.com") -> Destination:
    return Destination("mail", "email", host="127.0.0.1", port=server.port, security=security,
                       user=user, sender="botstats@example.com",
                       to=("ops@example.com", "oncall@example.com"), password=Secret(password))


@pytest.mark.parametrize("security", ["starttls", "tls", "none"])
def test_mail_is_delivered_over_starttls_tls_or_plain(mail_server: Callable[[str], MailServer],
                                                      security: str) -> None:
    server = mail_server(security)
    dest = mail_to(server, security, user="" if security == "none" else "alerts@example.com")
    waits, delivery = deliver(dest)
    assert (delivery.delivered, delivery.tries, delivery.answer) == (True, 1, "SMTP 250")
    (mail,) = server.mails
    assert mail.recipients == ["ops@example.com", "oncall@example.com"]
    assert mail.sender == "botstats@example.com"
    assert mail.login == (None if security == "none" else "alerts@example.com")
    assert mail.message["Subject"] == "botstats alerts test: this destination works"
    assert "sent to destination 'mail'" in mail.message.get_payload()


def test_a_busy_mail_server_is_tried_again(mail_server: Callable[[str], MailServer]) -> None:
    server = mail_server("starttls")
    server.replies.append("451 4.3.0 try again later")
    waits, delivery = deliver(mail_to(server, "starttls"))
    assert len(waits) == 1 and len(server.mails) == 1
    assert delivery.answer == "SMTP 451 4.3.0 try again later, then SMTP 250"


def test_a_refused_login_is_not_retried_and_never_shows_the_password(
        mail_server: Callable[[str], MailServer]) -> None:
    server = mail_server("starttls")
    waits, delivery = deliver(mail_to(server, "starttls", password="wrong-pw-Do-Not-Show"))
    assert waits == [] and server.mails == [] and server.logins == [("alerts@example.com", False)]
    assert not delivery.delivered and delivery.answer.startswith("SMTP 535")
    assert "wrong-pw-Do-Not-Show" not in delivery.answer
    waits, delivery = deliver(mail_to(server, "starttls", password=""))
    assert delivery.answer == ("no password: set BOTSTATS_ALERTS_MAIL_PASSWORD in the "
                               "environment of the job")


def test_a_message_whose_turn_comes_after_the_budget_is_not_sent(receiver: Receiver) -> None:
    dest = hook(receiver)
    messages = render("discord", [sample("team", NOW)], "here", NOW) * 2
    out = send(dest, messages, deadline=time.monotonic() - 1, timeout=5.0, sleep=lambda _: None)
    assert out == [Delivery(False, 0, "not sent: [alerts].budget ran out before its turn "
                                      "(tried again next run)")] * 2
    assert receiver.tries(PATH) == []
