"""Alerts, the messages: each destination's format, the alerts of a run grouped in as few
messages as its size limits allow, each alert whole in exactly one, and bot names (untrusted)
shown literally, pinging no one."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import pytest

from pipeline.alerts._alert import (
    Alert,
    Anomaly,
    Bot,
    Milestone,
    RunOutcome,
    event,
    failure,
    reached,
)
from pipeline.alerts._messages import discord, email, headline, render, slack, webhook

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
PLACE = "botstats on host1 · data/archive.ducklake"
HOSTILE = "@everyone **Free Nitro** [click](http://evil.example) <@&123> `x` > quote"


def events(n: int, name: str = "MegaMusic") -> list[Alert]:
    return [event(Bot(str(i), f"{name} {i}"),
                  Anomaly(date(2026, 11, 23), "spike", f"users x{2 + i % 7}.1 for 1 day",
                          4.0 + i / 100, "guilds +20%, cpu +15 points"))
            for i in range(n)]


def failed(message: str = "GET http://svc/bots could not connect; check --base-url") -> Alert:
    run = RunOutcome("20261124T090000Z-abc123", "failed", message, NOW)
    return failure(run, NOW, run.run_id or "", 1, NOW)


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def embed_chars(body: dict) -> int:
    return sum(len(e.get("title", "")) + len(e.get("description", ""))
               + len(e.get("footer", {}).get("text", "")) for e in body["embeds"])


@pytest.mark.parametrize("n", [1, 9, 45, 300])
def test_discord_messages_stay_within_its_limits_and_carry_each_alert_once(n: int) -> None:
    alerts = [failed(), *events(n)]
    messages = discord(alerts, PLACE, NOW)
    for message in messages:
        body = message.body
        assert body is not None
        assert len(body["embeds"]) <= 10 and embed_chars(body) <= 6000
        assert len(body["content"]) <= 2000
        assert body["allowed_mentions"] == {"parse": []}
        for embed in body["embeds"]:
            assert len(embed["title"]) <= 256 and len(embed["description"]) <= 4096
    carried = [a.key for m in messages for a in m.alerts]
    assert sorted(carried) == sorted(a.key for a in alerts)  # each once
    # As few as fit: 300 events of ~110 characters are ~33,000 characters, 6,000 a message.
    assert len(messages) == {1: 1, 9: 1, 45: 1, 300: 6}[n]
    if len(messages) > 1:
        assert messages[0].body and messages[0].body["content"].endswith("(1/6)")


def test_a_discord_message_of_one_run() -> None:
    (message,) = discord([failed(), *events(2)], PLACE, NOW)
    body = message.body
    assert body is not None
    first, second = body["embeds"]
    assert body["username"] == "botstats" and body["allowed_mentions"] == {"parse": []}
    assert body["content"] == "botstats: run failed · 2 events"
    assert (first["title"], first["color"]) == ("botstats run failed", 0xE74C3C)
    assert unescape(first["description"]).splitlines() == [
        "why: GET http://svc/bots could not connect; check --base-url",
        "run 20261124T090000Z-abc123: failed",
        "not complete since 2026-11-24 10:00 UTC (0s, 1 run)",
        "more: `botstats status` shows the runs and their errors"]
    assert second == {
        "title": "2 events", "color": 0x3498DB,
        "description": "MegaMusic 0: users x2.1 for 1 day (2026-11-23, spike, severity 4.0; "
                       "also guilds +20%, cpu +15 points)\n"
                       "MegaMusic 1: users x3.1 for 1 day (2026-11-23, spike, severity 4.0; "
                       "also guilds +20%, cpu +15 points)",
        "footer": {"text": PLACE}, "timestamp": "2026-11-24T10:00:00+00:00"}


def test_a_hostile_bot_name_is_shown_literally_and_pings_no_one() -> None:
    alert = reached(Bot("1", HOSTILE), Milestone("guilds", 10_000), date(2026, 11, 23), 10_250)
    (d,) = discord([alert], PLACE, NOW)
    assert d.body is not None
    text = d.body["content"] + d.body["embeds"][0]["description"]
    assert "@everyone" not in text.replace("\\@everyone", "")  # escaped, and parse: []
    assert "[click](" not in text and "**Free" not in text and "<@&" not in text
    assert unescape(d.body["content"]) == f"{HOSTILE} reached 10,000 guilds"
    (s,) = slack([alert], PLACE, NOW)
    assert s.body is not None
    header, section = s.body["blocks"][0]["text"], s.body["blocks"][1]["text"]
    assert header == {"type": "plain_text", "text": f"{HOSTILE} reached 10,000 guilds"}
    assert "<@&123>" not in section["text"] + s.body["text"]  # mrkdwn: Slack's sequences escaped
    assert "&lt;@&amp;123&gt;" in section["text"]
    (w,) = webhook([alert], PLACE, NOW)
    assert w.body is not None and w.body["alerts"][0]["name"] == HOSTILE  # data, as it is


@pytest.mark.parametrize("n", [1, 40, 600])
def test_slack_messages_stay_within_its_limits_and_carry_each_alert_once(n: int) -> None:
    alerts = [failed(), *events(n, name="<!channel> Bot")]
    messages = slack(alerts, PLACE, NOW)
    for message in messages:
        body = message.body
        assert body is not None and len(body["blocks"]) <= 50
        assert body["blocks"][0]["type"] == "header"
        assert len(body["blocks"][0]["text"]["text"]) <= 150
        for block in body["blocks"][1:-1]:
            assert block["type"] == "section" and len(block["text"]["text"]) <= 3000
        assert "<!channel>" not in body["text"] + str(body["blocks"][1:])
    assert sorted(a.key for m in messages for a in m.alerts) == sorted(a.key for a in alerts)
    assert len(messages) == (1 if n < 600 else 2)


def test_a_slack_message_of_one_run() -> None:
    (message,) = slack([failed(), *events(1)], PLACE, NOW)
    assert message.body == {
        "text": "botstats: run failed · 1 event",
        "blocks": [
            {"type": "header", "text": {"type": "plain_text",
                                        "text": "botstats: run failed · 1 event"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": (
                "*botstats run failed*\n"
                "why: GET http://svc/bots could not connect; check --base-url\n"
                "run 20261124T090000Z-abc123: failed\n"
                "not complete since 2026-11-24 10:00 UTC (0s, 1 run)\n"
                "more: `botstats status` shows the runs and their errors")}},
            {"type": "section", "text": {"type": "mrkdwn", "text": (
                "*1 event*\nMegaMusic 0: users x2.1 for 1 day (2026-11-23, spike, severity 4.0; "
                "also guilds +20%, cpu +15 points)")}},
            {"type": "context", "elements": [
                {"type": "mrkdwn", "text": f"{PLACE} · 2026-11-24 10:00 UTC"}]}]}


def test_a_long_reason_is_cut_not_the_message() -> None:
    alert = failed("x" * 20_000)
    for kind in ("discord", "slack", "webhook", "email"):
        (message,) = render(kind, [alert], PLACE, NOW)
        shown = str(message.body) + message.text
        assert "x" * 880 in shown and "x" * 1000 not in shown and "…" in shown


def test_the_webhook_and_the_mail_carry_every_alert_in_one_message() -> None:
    alerts = [failed(), *events(300)]
    (hook,) = webhook(alerts, PLACE, NOW)
    assert hook.body is not None
    assert hook.body["headline"] == "botstats: run failed · 300 events"
    assert [a["key"] for a in hook.body["alerts"]] == [a.key for a in alerts]
    assert hook.body["alerts"][1] == {
        "kind": "event", "key": "event:0:2026-11-23", "title": "MegaMusic 0: users x2.1 for 1 day",
        "lines": ["2026-11-23, spike, severity 4.0; also guilds +20%, cpu +15 points"],
        "incident": "", "since": None, "shard": "", "bot_id": "0", "name": "MegaMusic 0",
        "severity": 4.0, "reminder": False,
        "facts": {"day": "2026-11-23", "event": "spike", "summary": "users x2.1 for 1 day"}}
    (mail,) = email(alerts, PLACE, NOW)
    assert mail.subject == "botstats: run failed · 300 events"
    assert mail.text.startswith("botstats run failed\n  why: GET http://svc/bots could not "
                                "connect; check --base-url\n")
    assert "300 events\n  MegaMusic 0: users x2.1 for 1 day" in mail.text
    assert mail.text.count("\n  MegaMusic ") == 300


def test_headlines() -> None:
    assert headline([failed()]) == "botstats run failed"
    assert headline(events(1)) == "MegaMusic 0: users x2.1 for 1 day"
    assert headline(events(3)) == "botstats: 3 events"
    assert headline([failed(), *events(2)]) == "botstats: run failed · 2 events"
