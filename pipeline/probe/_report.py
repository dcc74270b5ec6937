"""What a probe found: findings per topic, the settings it proposes with their evidence, and the report the CLI prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

DEFAULT_MAX_REQUESTS = 60


BIG_LIMIT = 1000  # asked to find a cap: a service returns at most its cap


STAT_BOTS = 3  # bots tried for one with stat records


# Bots whose /stats are read when records have no id, to see whether some repeat a time (a bot
# posting one record per shard): with half the bots doing it, six miss them once in 64.
KEY_BOTS = 6


ID_TRIES = 3  # id candidates tried with a read that addresses the record (GET /bots/<it>)


NO_ANSWER = 0  # the status of a reply that never came (the connection failed every try)


RATE_HEADERS = ("retry-after", "ratelimit", "x-ratelimit")


TOPICS = ("auth", "listing", "records", "stats", "user lists", "limits", "post")


COUNTS = ("users", "guilds", "shards", "memory_load", "cpu_load", "commands_executed")


@dataclass
class Finding:
    """One thing the probe found out, and the exchanges that show it."""

    topic: str  # listing, records, stats, user lists, auth, limits, post
    what: str
    result: str
    evidence: list[str] = field(default_factory=list)


@dataclass
class Proposal:
    """A setting the probe proposes (``value``), or could not decide (``value`` None)."""

    key: str  # "fields.stat_time"
    value: Any
    why: str
    current: Any = None

    @property
    def decided(self) -> bool:
        return self.value is not None

    @property
    def changes(self) -> bool:
        return self.decided and self.value != self.current


class FindingJson(TypedDict):
    topic: str
    what: str
    result: str
    evidence: list[str]


class ProposalJson(TypedDict):
    key: str
    value: object
    why: str
    current: object
    decided: bool
    changes: bool


class ProbeJson(TypedDict):
    """:class:`ProbeReport` as `botstats probe --json` prints it (with what it wrote)."""

    base_url: str
    requests: int
    rate_limited: int
    stopped: str | None
    findings: list[FindingJson]
    proposals: list[ProposalJson]


@dataclass
class ProbeReport:
    base_url: str
    findings: list[Finding] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    requests: int = 0
    rate_limited: int = 0
    stopped: str = ""  # why probing stopped early, if it did

    def as_dict(self) -> ProbeJson:
        return {"base_url": self.base_url, "requests": self.requests,
                "rate_limited": self.rate_limited, "stopped": self.stopped or None,
                "findings": [FindingJson(topic=f.topic, what=f.what, result=f.result,
                                         evidence=list(f.evidence)) for f in self.findings],
                "proposals": [ProposalJson(key=p.key, value=p.value, why=p.why,
                                           current=p.current, decided=p.decided,
                                           changes=p.changes) for p in self.proposals]}

    def lines(self) -> list[str]:
        """The report for a terminal: findings by topic with their evidence, then settings."""
        out = [f"probe of {self.base_url}: {self.requests} requests, {self.rate_limited} "
               f"answered 429" + (f"; stopped early: {self.stopped}" if self.stopped else "")]
        topic = None
        for f in sorted(self.findings, key=lambda f: TOPICS.index(f.topic)):
            if f.topic != topic:
                topic = f.topic
                out += ["", topic]
            out.append(f"  {f.what}: {f.result}")
            out += [f"      {e}" for e in f.evidence]
        out += ["", "proposed settings (merge them with `botstats probe --write config.toml`)"]
        for section in ("fields", "service"):
            decided = [p for p in self.proposals if p.decided and p.key.startswith(section + ".")]
            if decided:
                out.append(f"  [{section}]")
            for p in decided:
                now = "" if not p.changes else f"; now {_toml(p.current)}"
                out.append(f"  {p.key.split('.', 1)[1]} = {_toml(p.value)}    # {p.why}{now}")
        undecided: dict[str, list[str]] = {}  # why -> settings, one line per reason
        for p in self.proposals:
            if not p.decided:
                undecided.setdefault(p.why, []).append(f"[{p.key.replace('.', '].', 1)}")
        if undecided:
            out += ["", "not decided (set them yourself if they matter)"]
            out += [f"  {', '.join(keys)}: {why}" for why, keys in undecided.items()]
        return out


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return f'"{value}"' if isinstance(value, str) else str(value)
