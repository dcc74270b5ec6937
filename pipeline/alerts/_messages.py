"""The alerts of one run as each kind of destination takes them, within its size limits.

The alerts for one destination go out grouped: a message carries them all, a section each for
a condition or its end, one section listing the events and one the milestones, a line each.
Where a destination limits a message (Discord: 10 embeds, 4,096 characters of description and
6,000 in all; Slack: 50 blocks, 3,000 characters of section text), the sections are packed into
as few messages as fit, each alert whole in exactly one of them, so the ledger can say of each
alert whether the message that carried it was delivered.

Bot names are the service's text, untrusted: Discord's markdown and Slack's control sequences in
them are escaped, and Discord is told to ping no one (``allowed_mentions``), so a bot named
``@everyone`` reaches nobody's phone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._alert import Alert, clip

LABELS = {"failed": "run failed", "partial": "run partial", "lock": "lock held",
          "stale": "archive stale", "resolved": "resolved", "event": "event",
          "milestone": "milestone", "test": "test"}
# Embed colours, by kind.
COLORS = {"failed": 0xE74C3C, "partial": 0xE67E22, "lock": 0xF1C40F, "stale": 0xF1C40F,
          "resolved": 0x2ECC71, "event": 0x3498DB, "milestone": 0x9B59B6, "test": 0x95A5A6}
GROUPED = ("event", "milestone")  # listed a line each, under one heading


@dataclass(frozen=True)
class Limits:
    """How much one message of a destination may hold: ``text`` characters in one container
    (an embed's description, a section block), ``containers`` of them, ``total`` characters
    across them (titles included), and ``title`` characters of a container's title."""

    text: int
    containers: int
    total: int
    title: int


# Discord's documented limits (4,096 description, 10 embeds, 6,000 in all, 256 a title), less
# room for the footer; Slack's (3,000 a section's text, which also holds its title; 50 blocks:
# a header and a context block besides the sections; 40,000 characters of a message's text,
# past which Slack cuts it).
DISCORD = Limits(text=4096, containers=10, total=5800, title=256)
SLACK = Limits(text=2900, containers=48, total=40_000, title=90)
DISCORD_CONTENT = 2000
SLACK_HEADER = 150


@dataclass(frozen=True)
class Message:
    """One POST (``body``) or one mail (``subject``, ``text``), and the alerts it carries."""

    alerts: tuple[Alert, ...]
    body: dict[str, Any] | None = None
    subject: str = ""
    text: str = ""


@dataclass
class _Section:
    heading: str
    kind: str
    items: list[tuple[Alert, str]] = field(default_factory=list)


@dataclass
class _Container:
    title: str
    text: str
    kind: str
    alerts: list[Alert]


def headline(alerts: list[Alert]) -> str:
    """The message in one line: the alert's own title when there is one, else what it holds
    ("botstats: run failed · 3 events")."""
    if len(alerts) == 1:
        return alerts[0].title
    counts: dict[str, int] = {}
    for alert in alerts:
        counts[alert.kind] = counts.get(alert.kind, 0) + 1
    parts = []
    for kind, n in counts.items():
        label = LABELS.get(kind, kind)
        if kind in GROUPED:
            parts.append(f"{n} {label}{'s' if n > 1 else ''}")
        else:
            parts.append(f"{label} x{n}" if n > 1 else label)
    return "botstats: " + " · ".join(parts)


def _sections(alerts: list[Alert]) -> list[_Section]:
    out: list[_Section] = []
    grouped: dict[str, _Section] = {}
    for alert in alerts:
        if alert.kind in GROUPED:
            if alert.kind not in grouped:
                grouped[alert.kind] = _Section("", alert.kind)
                out.append(grouped[alert.kind])
            line = alert.title + (f" ({'; '.join(alert.lines)})" if alert.lines else "")
            grouped[alert.kind].items.append((alert, clip(line)))
        else:
            out.append(_Section(alert.title, alert.kind, [(alert, "\n".join(alert.lines))]))
    for section in grouped.values():
        n = len(section.items)
        section.heading = f"{n} {LABELS[section.kind]}{'s' if n > 1 else ''}"
    return out


def _pack(sections: list[_Section], limits: Limits,
          escape: Callable[[str], str]) -> list[list[_Container]]:
    """The sections as containers, packed into messages within ``limits``; a section too long
    for one container goes on in the next ("(continued)"), an alert is never split."""
    messages: list[list[_Container]] = [[]]
    used = 0
    for section in sections:
        title = clip(escape(section.heading), limits.title)
        current: _Container | None = None
        for alert, text in section.items:
            piece = _cut(escape(text), limits.text)
            if current is not None and len(current.text) + 1 + len(piece) <= limits.text \
                    and used + 1 + len(piece) <= limits.total:
                current.text += "\n" + piece
                current.alerts.append(alert)
                used += 1 + len(piece)
                continue
            heading = title if current is None else clip(f"{title} (continued)", limits.title)
            cost = len(heading) + len(piece)
            if messages[-1] and (len(messages[-1]) >= limits.containers
                                 or used + cost > limits.total):
                messages.append([])
                used = 0
            current = _Container(heading, piece, section.kind, [alert])
            messages[-1].append(current)
            used += cost
    return [m for m in messages if m]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


# Discord's markdown anywhere in a line (emphasis, code, spoilers, masked links, mentions), and
# at a line's start (headings, lists, quotes).
_DISCORD_MARKS = re.compile(r"([\\*_~`|\[\]<@])")
_DISCORD_LEADS = re.compile(r"^(\s*)([#>-])", re.M)


def discord_escape(text: str) -> str:
    """Text shown literally by Discord: its markdown, links and mentions backslash-escaped."""
    return _DISCORD_LEADS.sub(r"\1\\\2", _DISCORD_MARKS.sub(r"\\\1", text))


def slack_escape(text: str) -> str:
    """Text Slack shows literally: its control characters as entities (links and mentions
    start with '<')."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _numbered(title: str, i: int, n: int) -> str:
    return title if n == 1 else f"{title} ({i}/{n})"


def discord(alerts: list[Alert], place: str, now: datetime) -> list[Message]:
    """Discord webhook messages: the headline as ``content``, an embed per section."""
    packed = _pack(_sections(alerts), DISCORD, discord_escape)
    top = headline(alerts)
    out = []
    for i, containers in enumerate(packed, 1):
        embeds: list[dict[str, Any]] = [
            {"title": c.title, "description": c.text, "color": COLORS.get(c.kind, 0)}
            for c in containers]
        embeds[-1]["footer"] = {"text": clip(discord_escape(place), 150)}
        embeds[-1]["timestamp"] = now.isoformat(timespec="seconds")
        body = {"username": "botstats",
                "content": clip(discord_escape(_numbered(top, i, len(packed))), DISCORD_CONTENT),
                "embeds": embeds, "allowed_mentions": {"parse": []}}
        out.append(Message(tuple(a for c in containers for a in c.alerts), body))
    return out


def slack(alerts: list[Alert], place: str, now: datetime) -> list[Message]:
    """Slack incoming webhook messages: a header, a section block per section, a context line;
    ``text`` is the notification's fallback."""
    packed = _pack(_sections(alerts), SLACK, slack_escape)
    top = headline(alerts)
    out = []
    for i, containers in enumerate(packed, 1):
        title = _numbered(top, i, len(packed))
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": clip(title, SLACK_HEADER)}}]
        blocks += [{"type": "section",
                    "text": {"type": "mrkdwn", "text": f"*{c.title}*\n{c.text}"}}
                   for c in containers]
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn",
             "text": slack_escape(f"{place} · {now.strftime('%Y-%m-%d %H:%M UTC')}")}]})
        body = {"text": clip(slack_escape(title), 3000), "blocks": blocks}
        out.append(Message(tuple(a for c in containers for a in c.alerts), body))
    return out


def webhook(alerts: list[Alert], place: str, now: datetime) -> list[Message]:
    """The generic JSON POST: every alert as data, in one message."""
    body = {"source": "botstats", "headline": headline(alerts), "place": place,
            "sent_at": now.isoformat(timespec="seconds"),
            "alerts": [a.as_dict() for a in alerts]}
    return [Message(tuple(alerts), body)]


def email(alerts: list[Alert], place: str, now: datetime) -> list[Message]:
    """One plain-text mail: the headline as its subject, a paragraph per section."""
    paragraphs = []
    for section in _sections(alerts):
        body = "\n".join(f"  {line}" for _, text in section.items for line in text.split("\n"))
        paragraphs.append(f"{section.heading}\n{body}")
    text = ("\n\n".join(paragraphs)
            + f"\n\n-- \n{place}, {now.strftime('%Y-%m-%d %H:%M UTC')}\n"
              "Every alert and what each destination answered: botstats alerts list\n")
    return [Message(tuple(alerts), subject=clip(headline(alerts), 200), text=text)]


RENDER: dict[str, Callable[[list[Alert], str, datetime], list[Message]]] = {
    "discord": discord, "slack": slack, "webhook": webhook, "email": email}


def render(kind: str, alerts: list[Alert], place: str, now: datetime) -> list[Message]:
    """The messages that carry ``alerts`` to a destination of type ``kind``."""
    return RENDER[kind](alerts, place, now)
