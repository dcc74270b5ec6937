"""``botstats probe``: find out what a service does where the interface says "not shown", and
propose the settings that fit it.

A small, bounded, polite set of reads (at most ``max_requests``, Retry-After honoured, never a
write unless a bot key and a bot to post for are given), made through :class:`Client.fetch`.
What they show is read by pure functions over the replies (``read_*``), each returning
:class:`Finding` s, every one with its evidence (the requests and what came back), and
:class:`Proposal` s for ``[fields]`` and ``[service]``. A setting the replies cannot decide is
said so, with the reason, not guessed. :func:`write_settings` merges the decided ones into a
config file, keeping its comments (tomlkit round-trips TOML).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .client import Client, Reply
from .config import Settings, load_settings
from .errors import ApiError, BotstatsError, ConfigError
from .shapes import (
    custom_keys,
    id_candidates,
    name_candidates,
    time_candidates,
    time_kind,
    value_types,
)

DEFAULT_MAX_REQUESTS = 60
BIG_LIMIT = 1000  # asked to find a cap: a service returns at most its cap
STAT_BOTS = 3  # bots tried for one with stat records
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


@dataclass
class ProbeReport:
    base_url: str
    findings: list[Finding] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    requests: int = 0
    rate_limited: int = 0
    stopped: str = ""  # why probing stopped early, if it did

    def as_dict(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "requests": self.requests,
                "rate_limited": self.rate_limited, "stopped": self.stopped or None,
                "findings": [asdict(f) for f in self.findings],
                "proposals": [{**asdict(p), "decided": p.decided, "changes": p.changes}
                              for p in self.proposals]}

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
        undecided = [p for p in self.proposals if not p.decided]
        if undecided:
            out += ["", "not decided (set them yourself if they matter)"]
            out += [f"  [{p.key.replace('.', '].', 1)}: {p.why}" for p in undecided]
        return out


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


# --- reading replies (pure) --------------------------------------------------------------------
def brief(reply: Reply) -> str:
    """'GET http://x/bots?limit=5 -> 200, an array of 5' (the evidence of a finding)."""
    data = reply.json()
    if isinstance(data, list):
        shape = f"an array of {len(data)}"
    elif isinstance(data, dict):
        keys = ", ".join(list(data)[:8]) + (", ..." if len(data) > 8 else "")
        shape = f"an object with {keys}" if data else "an empty object"
    elif not reply.body.strip():
        shape = "an empty body"
    else:
        text = " ".join(reply.body.split())
        shape = f"text {text[:60]!r}"
    auth = {"read": "", "none": " (no token)", "user": " (user token)", "bad": " (a bad token)",
            "bot": " (bot key)"}[reply.auth]
    return f"{reply.method} {reply.url}{auth} -> {reply.status}, {shape}"


def items(reply: Reply | None) -> list[Any]:
    data = reply.json() if reply is not None and reply.status == 200 else None
    return data if isinstance(data, list) else []


def ids_of(records: Sequence[Any], id_field: str | None) -> list[str]:
    if id_field is None:
        return [repr(r) for r in records]
    return [str(r.get(id_field)) if isinstance(r, dict) else repr(r) for r in records]


def read_listing(default: Reply, cap: Reply, after_cap: Reply | None, skipped: Reply | None,
                 again: Reply | None, id_field: str | None) -> tuple[list[Finding], list[Proposal]]:
    """GET /bots: the default page size, the cap, whether ``skip`` is honoured, the order, and
    whether two reads of the head agree."""
    found: list[Finding] = []
    proposals: list[Proposal] = []
    page = items(cap)
    found.append(Finding("listing", "default page size", f"{len(items(default))} bots",
                         [brief(default)]))
    if len(page) >= BIG_LIMIT:
        found.append(Finding("listing", "page cap", f"none up to {BIG_LIMIT}", [brief(cap)]))
        proposals.append(Proposal("service.page_size", BIG_LIMIT, f"no cap up to {BIG_LIMIT}"))
    elif after_cap is not None and items(after_cap):
        found.append(Finding("listing", "page cap", f"{len(page)} bots (asked {BIG_LIMIT}; more "
                             f"follow)", [brief(cap), brief(after_cap)]))
        proposals.append(Proposal("service.page_size", len(page),
                                  f"the service's cap: asked {BIG_LIMIT}, got {len(page)}"))
    else:
        found.append(Finding("listing", "page cap", f"none seen: the whole directory "
                             f"({len(page)} bots) fits in one page", [brief(cap)]
                             + ([brief(after_cap)] if after_cap else [])))
        proposals.append(Proposal("service.page_size", None,
                                  f"no cap seen (the directory has {len(page)} bots); keep the "
                                  f"default"))
    if skipped is not None:
        got = ids_of(items(skipped), id_field)
        ids = ids_of(page, id_field)
        if got and got == ids[1:1 + len(got)]:
            result = "honoured"
        elif got and got == ids[:len(got)]:
            result = "ignored: skip=1 returns the first bots again (botstats cannot page it)"
        else:
            result = "unclear: skip=1 returned neither the next bots nor the first ones"
        found.append(Finding("listing", "skip", result, [brief(skipped)]))
    if again is not None:
        same = ids_of(items(again), id_field) == ids_of(page, id_field)
        found.append(Finding("listing", "two reads of the head",
                             "agree" if same else "differ (the listing moves, or its order is "
                             "not stable: botstats pages with an overlap and re-reads the head)",
                             [brief(again)]))
    found.append(Finding("listing", "order", listing_order(page)))
    return found, proposals


def listing_order(records: Sequence[Any]) -> str:
    """Which field, if any, the listing is sorted by (ascending or descending)."""
    objects = [r for r in records if isinstance(r, dict)]
    if len(objects) < 3:
        return "cannot tell from fewer than 3 bots"
    for name in objects[0]:
        values = [r.get(name) for r in objects]
        if not all(isinstance(v, int | float | str) and not isinstance(v, bool) for v in values):
            continue
        if len({type(v) for v in values}) > 1 or len(set(values)) < 2:
            continue
        if all(a <= b for a, b in zip(values, values[1:], strict=False)):
            return f"by '{name}', ascending"
        if all(a >= b for a, b in zip(values, values[1:], strict=False)):
            return f"by '{name}', descending"
    return "by no field of the records (the service's own order)"


def read_bot_shape(records: Sequence[Any], one: Reply | None,
                   settings: Settings) -> tuple[list[Finding], list[Proposal]]:
    """Which fields of a bot record are its id and its name."""
    fields = settings.fields
    found: list[Finding] = []
    proposals: list[Proposal] = []
    ids = id_candidates(records)
    if ids:
        evidence = [brief(one)] if one is not None else []
        confirmed = one is not None and one.status == 200
        found.append(Finding("records", "bot id", f"'{ids[0].field}' ({ids[0].why}"
                             + (", and GET /bots/<it> finds the bot)" if confirmed else ")"),
                             evidence))
        proposals.append(Proposal("fields.bot_id", ids[0].field, ids[0].why, fields.bot_id))
    else:
        proposals.append(Proposal("fields.bot_id", None, "no field is distinct in every bot "
                                  "record read", fields.bot_id))
    names = name_candidates(records, exclude=[ids[0].field] if ids else [])
    if names:
        found.append(Finding("records", "bot name", f"'{names[0].field}'"))
        proposals.append(Proposal("fields.bot_name", names[0].field, names[0].why,
                                  fields.bot_name))
    else:
        proposals.append(Proposal("fields.bot_name", None, "no text field named like a name",
                                  fields.bot_name))
    return found, proposals


def read_stat_shape(records: Sequence[Any], bot_id: str, reply: Reply,
                    settings: Settings) -> tuple[list[Finding], list[Proposal], str | None]:
    """Which fields of a stat record are its id and time, the custom fields' keys, the types of
    counts and loads; also returns the time field found (for the order of /stats)."""
    fields = settings.fields
    found: list[Finding] = []
    proposals: list[Proposal] = []
    evidence = [brief(reply)]
    not_bot = [k for r in records[:1] if isinstance(r, dict) for k, v in r.items()
               if str(v) == bot_id]
    ids = id_candidates(records, exclude=not_bot)
    if ids:
        found.append(Finding("records", "stat id", f"'{ids[0].field}' ({ids[0].why})", evidence))
        proposals.append(Proposal("fields.stat_id", ids[0].field, ids[0].why, fields.stat_id))
    else:
        found.append(Finding("records", "stat id", "none: no field is distinct in every record "
                             "(botstats then keys records by bot and time)", evidence))
        proposals.append(Proposal("fields.stat_id", "", "no field is distinct in every record: "
                                  "key by sha1(bot id, time)", fields.stat_id))
    times = time_candidates(records)
    time_field = times[0].field if times else None
    if times:
        others = ", ".join(f"'{c.field}'" for c in times[1:])
        found.append(Finding("records", "stat time", f"'{times[0].field}' ({times[0].why} in "
                             f"all {len(records)} records)" + (f"; also times: {others}" if others
                                                               else ""), evidence))
        proposals.append(Proposal("fields.stat_time", times[0].field, times[0].why,
                                  fields.stat_time))
    else:
        proposals.append(Proposal("fields.stat_time", None, "no field reads as a time in every "
                                  "record", fields.stat_time))
    keys = custom_keys(records)
    if keys:
        found.append(Finding("records", "custom fields", f"items keyed '{keys[0]}' (name) and "
                             f"'{keys[1]}' (value)"))
        proposals.append(Proposal("fields.custom_name", keys[0], "the name key of custom fields",
                                  fields.custom_name))
        proposals.append(Proposal("fields.custom_value", keys[1], "the other key of custom "
                                  "fields", fields.custom_value))
    else:
        for key in ("custom_name", "custom_value"):
            proposals.append(Proposal(f"fields.{key}", None, "no record read has custom fields",
                                      getattr(fields, key)))
    types = "; ".join(f"{name}: " + ", ".join(f"{kind} x{n}" for kind, n in
                                              value_types(records, name).items())
                      for name in COUNTS)
    found.append(Finding("records", "types of counts and loads", types))
    return found, proposals, time_field


def read_stats_paging(whole: Reply, two: Reply | None, next_two: Reply | None,
                      big: Reply | None, last: Reply | None, time_field: str | None,
                      id_field: str | None) -> tuple[list[Finding], list[Proposal]]:
    """GET /bots/:id/stats: paged or whole, oldest or newest first, and whether /stat is the
    newest record of /stats."""
    found: list[Finding] = []
    proposals: list[Proposal] = []
    records = items(whole)
    first_two = items(two)
    if two is None or len(records) <= 2:
        found.append(Finding("stats", "paging", "cannot tell: the bot has too few records",
                             [brief(whole)]))
        proposals.append(Proposal("service.stats_page_size", None,
                                  "no bot with more than 2 records was read"))
    elif len(first_two) == 2:
        cap = len(items(big)) if big is not None else len(records)
        skip_ok = ids_of(items(next_two), id_field) != ids_of(first_two, id_field)
        found.append(Finding("stats", "paging", f"paged: limit is honoured (limit=2 gave 2 of "
                             f"{len(records)}), skip {'is' if skip_ok else 'is NOT'} honoured; "
                             f"at most {cap} a page", [brief(whole), brief(two)]
                             + [brief(r) for r in (next_two, big) if r is not None]))
        proposals.append(Proposal("service.stats_page_size", cap,
                                  f"/stats is paged, at most {cap} records a page"))
    else:
        found.append(Finding("stats", "paging", f"whole: limit=2 still gave {len(first_two)} "
                             f"records", [brief(whole), brief(two)]))
        proposals.append(Proposal("service.stats_page_size", 0, "/stats sends the whole list"))
    paged = two is not None and len(first_two) == 2 and len(records) > 2
    order = None
    if time_field and len(records) >= 2:
        times = [r.get(time_field) for r in records if isinstance(r, dict)]
        stamps = [_sortable(t) for t in times]
        if None not in stamps:
            if stamps == sorted(stamps):
                order = "oldest first"
            elif stamps == sorted(stamps, reverse=True):
                order = "newest first"
            else:
                order = "in no time order"
    found.append(Finding("stats", "order of records", order or "cannot tell (no time field, or too few "
                         "records)"))
    if last is not None:
        newest = _newest(records, time_field)
        got = last.json()
        if last.status != 200 or not isinstance(got, dict):
            result = f"GET /stat answered {last.status}"
        elif newest is None:
            result = "cannot tell (no time field to find the newest record by)"
        elif got == newest or (id_field and got.get(id_field) == newest.get(id_field)):
            result = "yes: /stat is the newest record of /stats"
        elif paged:
            result = ("cannot tell: /stats is paged and its first page does not hold /stat's "
                      "record (botstats reads every page)")
        else:
            result = ("no: /stat is not the newest record read from /stats (a paged /stats may "
                      "hold it on a later page)")
        found.append(Finding("stats", "/stat is the newest record", result, [brief(last)]))
    return found, proposals


def _sortable(value: Any) -> float | None:
    from .records import Invalid, parse_time

    if time_kind(value) is None:
        return None
    try:
        return parse_time(value).timestamp()
    except Invalid:
        return None


def _newest(records: Sequence[Any], time_field: str | None) -> dict[str, Any] | None:
    if not time_field:
        return None
    dated = [(t, r) for r in records if isinstance(r, dict)
             and (t := _sortable(r.get(time_field))) is not None]
    return max(dated, key=lambda pair: pair[0])[1] if dated else None


def read_limits(replies: Sequence[Reply], rate_limited: int) -> list[Finding]:
    """Rate-limit headers seen, 429s met, and the shape of error bodies."""
    headers: dict[str, str] = {}
    for reply in replies:
        for seen in (*reply.limited, reply.headers):
            for name, value in seen.items():
                if name.lower().startswith(RATE_HEADERS):
                    headers.setdefault(name.lower(), value)
    found = [Finding("limits", "rate-limit headers",
                     ", ".join(f"{k}: {v}" for k, v in headers.items()) or "none seen"),
             Finding("limits", "429 answers", f"{rate_limited} met (each waited out)")]
    errors = [r for r in replies if r.status >= 400 and r.status != 429]
    shapes = sorted({_error_shape(r) for r in errors})
    found.append(Finding("limits", "error bodies", "; ".join(shapes) or "no error seen",
                         [brief(r) for r in errors[:3]]))
    return found


def _error_shape(reply: Reply) -> str:
    data = reply.json()
    if isinstance(data, dict):
        return "a JSON object with " + ", ".join(f"'{k}'" for k in data)
    if data is not None:
        return f"JSON {type(data).__name__}"
    return "an empty body" if not reply.body.strip() else reply.headers.get(
        "content-type", "text").split(";")[0] + " text"


# --- the reads (I/O) -----------------------------------------------------------------------------
class _Spent(Exception):
    """The request budget is spent: report what was found so far."""


class _Prober:
    def __init__(self, client: Client, settings: Settings, max_requests: int) -> None:
        self.client = client
        self.settings = settings
        self.max_requests = max_requests
        self.replies: list[Reply] = []
        self.read_auth = "read"

    async def get(self, path: str, params: dict[str, Any] | None = None, *,
                  auth: str | None = None, method: str = "GET", payload: Any = None) -> Reply:
        if self.client.stats.requests >= self.max_requests:
            raise _Spent(f"the request budget ({self.max_requests}, --max-requests) is spent")
        reply = await self.client.fetch(method, path, params=params, auth=auth or self.read_auth,
                                        payload=payload)
        self.replies.append(reply)
        return reply


async def probe(settings: Settings, *, max_requests: int = DEFAULT_MAX_REQUESTS,
                post_bot: str | None = None) -> ProbeReport:
    """Probe the service of ``settings``; see the module docstring."""
    report = ProbeReport(settings.service.base_url)
    async with Client(settings) as client:
        prober = _Prober(client, settings, max_requests)
        try:
            await _probe(prober, settings, report, post_bot)
        except _Spent as exc:
            report.stopped = str(exc)
        finally:
            for proposal in report.proposals:
                section, key = proposal.key.split(".", 1)
                proposal.current = getattr(getattr(settings, section), key)
            report.requests = client.stats.requests
            report.rate_limited = client.stats.rate_limited
            report.findings += read_limits(prober.replies, client.stats.rate_limited)
    return report


async def _probe(p: _Prober, settings: Settings, report: ProbeReport,
                 post_bot: str | None) -> None:
    token = bool(settings.user_token)
    # Auth of bot reads: without a token first.
    default = await p.get("/bots", auth="none")
    if default.status in (401, 403):
        evidence = [brief(default)]
        if not token:
            report.findings.append(Finding("auth", "bot reads without a token",
                                           f"refused ({default.status})", evidence))
            report.proposals.append(Proposal("service.token_on_bot_reads", True, "bot reads "
                                             "are refused without a token",
                                             settings.service.token_on_bot_reads))
            report.stopped = ("bot reads need a token: set BOTSTATS_USER_TOKEN (or pass "
                              "--user-token) and probe again")
            return
        p.read_auth = "user"
        default = await p.get("/bots")
        evidence.append(brief(default))
        report.findings.append(Finding("auth", "bot reads without a token",
                                       f"refused; with the user token: {default.status}", evidence))
        report.proposals.append(Proposal("service.token_on_bot_reads", True,
                                         "bot reads want the user token",
                                         settings.service.token_on_bot_reads))
    elif default.status == 200:
        report.findings.append(Finding("auth", "bot reads without a token", "work",
                                       [brief(default)]))
        report.proposals.append(Proposal("service.token_on_bot_reads", False,
                                         "bot reads work without a token",
                                         settings.service.token_on_bot_reads))
    else:
        raise ApiError(f"{brief(default)}: not the bot-listing service's answer to GET /bots. "
                       f"Check --base-url.")
    cap = await p.get("/bots", {"limit": BIG_LIMIT, "skip": 0})
    page = items(cap)
    after = (await p.get("/bots", {"limit": BIG_LIMIT, "skip": len(page)})
             if page and len(page) < BIG_LIMIT else None)
    candidates = id_candidates(page)
    bot_field = candidates[0].field if candidates else None
    skipped = await p.get("/bots", {"limit": 2, "skip": 1}) if len(page) >= 3 else None
    again = await p.get("/bots", {"limit": BIG_LIMIT, "skip": 0})
    found, proposals = read_listing(default, cap, after, skipped, again, bot_field)
    report.findings += found
    report.proposals += proposals
    bot_ids = [str(r[bot_field]) for r in page if isinstance(r, dict) and bot_field in r]
    one = await p.get(f"/bots/{bot_ids[0]}") if bot_ids else None
    shape_found, shape_proposals = read_bot_shape(page, one, settings)
    report.findings += shape_found
    report.proposals += shape_proposals
    await _probe_stats(p, settings, report, bot_ids)
    await _probe_user(p, settings, report)
    # Auth errors and error bodies: a bad token, and a bot that does not exist.
    bad = await p.get("/users/@me", auth="bad")
    report.findings.append(Finding("auth", "a bad user token", f"answered {bad.status}",
                                   [brief(bad)]))
    await p.get("/bots/botstats-probe-no-such-bot")
    if post_bot:
        await _probe_post(p, settings, report, post_bot)


async def _probe_stats(p: _Prober, settings: Settings, report: ProbeReport,
                       bot_ids: list[str]) -> None:
    whole: Reply | None = None
    bot_id = ""
    for bot_id in bot_ids[:STAT_BOTS]:
        whole = await p.get(f"/bots/{bot_id}/stats")
        if len(items(whole)) > 2:
            break
    if whole is None or not items(whole):
        report.findings.append(Finding("stats", "records", "no bot read has stat records",
                                       [brief(whole)] if whole else []))
        for key in ("stat_id", "stat_time", "custom_name", "custom_value"):
            report.proposals.append(Proposal(f"fields.{key}", None, "no stat record was read",
                                             getattr(settings.fields, key)))
        report.proposals.append(Proposal("service.stats_page_size", None,
                                         "no stat record was read"))
        return
    path = f"/bots/{bot_id}/stats"
    records = items(whole)
    found, proposals, time_field = read_stat_shape(records, bot_id, whole, settings)
    report.findings += found
    report.proposals += proposals
    id_field = next((x.value or None for x in proposals if x.key == "fields.stat_id"), None)
    two = next_two = big = None
    if len(records) > 2:
        two = await p.get(path, {"limit": 2, "skip": 0})
        if len(items(two)) == 2:
            next_two = await p.get(path, {"limit": 2, "skip": 2})
            big = await p.get(path, {"limit": BIG_LIMIT, "skip": 0})
    last = await p.get(f"/bots/{bot_id}/stat")
    found, proposals = read_stats_paging(whole, two, next_two, big, last, time_field, id_field)
    report.findings += found
    report.proposals += proposals


async def _probe_user(p: _Prober, settings: Settings, report: ProbeReport) -> None:
    fields = settings.fields
    if not settings.user_token:
        report.findings.append(Finding("user lists", "paging", "not probed: no user token "
                                       "(BOTSTATS_USER_TOKEN, --user-token)"))
        report.proposals.append(Proposal("service.user_lists_page_size", None,
                                         "no user token to read the user lists with"))
        return
    me = await p.get("/users/@me", auth="user")
    record = me.json()
    if me.status != 200 or not isinstance(record, dict):
        report.findings.append(Finding("user lists", "the current user", f"answered "
                                       f"{me.status}", [brief(me)]))
        return
    ids = id_candidates([record])
    if ids:
        report.proposals.append(Proposal("fields.user_id", ids[0].field, ids[0].why,
                                         fields.user_id))
    user_id = str(record.get(ids[0].field)) if ids else "@me"
    paged: tuple[str, int] | None = None
    decided_whole = False
    for what, key in (("bots", None), ("servers", "server_id"), ("webhooks", "webhook_id")):
        path = f"/users/{user_id}/{what}"
        whole = await p.get(path, auth="user")
        listed = items(whole)
        if key is not None:
            found = id_candidates(listed)
            if found:
                report.proposals.append(Proposal(f"fields.{key}", found[0].field, found[0].why,
                                                 getattr(fields, key)))
            else:
                report.proposals.append(Proposal(f"fields.{key}", None, f"fewer than two "
                                                 f"{what} read", getattr(fields, key)))
        if len(listed) < 2 or paged or decided_whole:
            continue
        one = await p.get(path, {"limit": 1, "skip": 0}, auth="user")
        if len(items(one)) == 1:
            big = await p.get(path, {"limit": BIG_LIMIT, "skip": 0}, auth="user")
            paged = (what, len(items(big)))
            report.findings.append(Finding("user lists", "paging", f"paged (limit=1 gave 1 of "
                                           f"{len(listed)} {what}); at most {paged[1]} a page",
                                           [brief(whole), brief(one), brief(big)]))
        else:
            decided_whole = True
            report.findings.append(Finding("user lists", "paging", f"whole (limit=1 still gave "
                                           f"{len(items(one))} {what})",
                                           [brief(whole), brief(one)]))
    if paged:
        report.proposals.append(Proposal("service.user_lists_page_size", paged[1],
                                         "the user lists are paged"))
    elif decided_whole:
        report.proposals.append(Proposal("service.user_lists_page_size", 0,
                                         "the user lists come whole"))
    else:
        report.proposals.append(Proposal("service.user_lists_page_size", None,
                                         "no user list has two items to page"))


async def _probe_post(p: _Prober, settings: Settings, report: ProbeReport, bot_id: str) -> None:
    """Post the bot's newest counts again (nothing it did not already report) and see what the
    service answers and whether /stat shows it."""
    last = (await p.get(f"/bots/{bot_id}/stat")).json()
    last = last if isinstance(last, dict) else {}
    payload = {"users": last.get("users", 0), "guilds": last.get("guilds", 0)}
    posted = await p.get(f"/bots/{bot_id}/stats", method="POST", auth="bot", payload=payload)
    after = await p.get(f"/bots/{bot_id}/stat")
    shown = posted.status < 300 and after.json() == posted.json()
    report.findings.append(Finding("post", "POST /bots/:id/stats", f"answered {posted.status}; "
                                   f"/stat {'now shows' if shown else 'does not show'} the posted "
                                   f"record", [brief(posted), brief(after)]))


def run_probe(settings: Settings, *, max_requests: int = DEFAULT_MAX_REQUESTS,
              post_bot: str | None = None) -> ProbeReport:
    """:func:`probe`, from synchronous code."""
    if max_requests < 1:
        raise ConfigError(f"--max-requests must be at least 1, got {max_requests}.")
    if post_bot and not settings.bot_key:  # before any request
        raise ConfigError("--post needs the bot's API key: set BOTSTATS_BOT_KEY or pass --bot-key.")
    return asyncio.run(probe(settings, max_requests=max_requests, post_bot=post_bot))


# --- writing the proposals ------------------------------------------------------------------------
def write_settings(report: ProbeReport, path: Path) -> list[str]:
    """Merge the decided proposals into the config file at ``path`` (created if missing),
    keeping its comments and everything else; returns the keys written. The result is checked
    as botstats reads it before it replaces the file."""
    import tomlkit

    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        doc = tomlkit.parse(text)
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise ConfigError(f"{path}: cannot read it to merge the probe's settings into: {exc}. "
                          f"Fix the file, or --write another one.") from exc
    written = []
    for proposal in report.proposals:
        if not proposal.decided:
            continue
        section, key = proposal.key.split(".", 1)
        if section not in doc:
            doc.add(section, tomlkit.table())
        doc[section][key] = proposal.value  # type: ignore[index]
        written.append(proposal.key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(tomlkit.dumps(doc), encoding="utf-8")
        load_settings(tmp, env={})  # what botstats will read: refuse to write a broken file
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}.") from exc
    except BotstatsError as exc:
        raise ConfigError(f"the merged settings would not load ({exc}); {path} is left as "
                          f"it was.") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return written


__all__ = ["DEFAULT_MAX_REQUESTS", "Finding", "ProbeReport", "Proposal", "probe", "run_probe",
           "write_settings"]
