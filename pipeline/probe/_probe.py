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
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

from ..core import ApiError, ConfigError, Settings, first_line
from ..harvester import Candidate, decided_id, id_candidates
from ..interface import Client, Reply
from ._accepts import not_proposed, read_acceptance
from ._paging import Paging, brief, failed, items, probe_paging, settings_of
from ._reading import (
    read_bot_shape,
    read_head,
    read_limits,
    read_stat_key,
    read_stat_shape,
    read_stats_order,
)
from ._report import (
    DEFAULT_MAX_REQUESTS,
    ID_TRIES,
    KEY_BOTS,
    NO_ANSWER,
    STAT_BOTS,
    Finding,
    ProbeReport,
    Proposal,
)


class _Spent(Exception):
    """The request budget is spent: report what was found so far."""


class _Prober:
    def __init__(self, client: Client, settings: Settings, max_requests: int) -> None:
        self.client = client
        self.settings = settings
        self.max_requests = max_requests
        self.replies: list[Reply] = []
        self.read_auth = "read"
        self.seen: dict[str, list[Any]] = {}  # records read, by kind ("bot", "stat", ...)
        self.ids: dict[str, set[str]] = {"bot": set(), "user": set()}  # known, for references
        self.pagings: list[Paging] = []  # how each list answers and pages

    async def get(self, path: str, params: dict[str, Any] | None = None, *,
                  auth: str | None = None, method: str = "GET", payload: Any = None) -> Reply:
        if self.client.stats.requests >= self.max_requests:
            raise _Spent(f"the request budget ({self.max_requests}, --max-requests) is spent")
        auth = auth or self.read_auth
        try:
            reply = await self.client.fetch(method, path, params=params, auth=auth,
                                            payload=payload)
        except ApiError as exc:  # no answer after every retry: a finding of "unknown"
            query = f"?{urlencode(params)}" if params else ""
            reply = Reply(method=method, url=f"{path}{query}", auth=auth, status=NO_ANSWER,
                          headers={}, body=first_line(exc), seconds=0.0)
        self.replies.append(reply)
        return reply

    async def addressed(self, kind: str, records: list[Any], candidates: list[Candidate],
                        auth: str | None = None) -> tuple[Candidate | None, list[Reply]]:
        """The first candidate whose value (in the first record) the service's ``/<kind>s/<it>``
        answers with that same record's value, and the reads made (at most ID_TRIES)."""
        tried: list[Reply] = []
        first = records[0] if records and isinstance(records[0], dict) else {}
        for candidate in candidates[:ID_TRIES]:
            value = str(first.get(candidate.field, "")).strip()
            reply = await self.get(f"/{kind}s/{quote(value, safe='')}", auth=auth)
            tried.append(reply)
            got = reply.json() if reply.status == 200 else None
            if isinstance(got, dict) and str(got.get(candidate.field, "")).strip() == value:
                return candidate, tried
        return None, tried


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
            report.proposals += settings_of(prober.pagings)
            report.findings += read_acceptance(prober.seen, settings.fields, report.proposals)
            report.proposals += not_proposed(settings, report.proposals, report.stopped)
            for proposal in report.proposals:
                section, key = proposal.key.split(".", 1)
                current = getattr(getattr(settings, section), key)
                # A list of names is a tuple in the settings, a list in TOML and JSON.
                proposal.current = list(current) if isinstance(current, tuple) else current
            report.requests = client.stats.requests
            report.rate_limited = client.stats.rate_limited
            report.findings += read_limits(prober.replies, client.stats.rate_limited)
    return report


async def _probe(p: _Prober, settings: Settings, report: ProbeReport,
                 post_bot: str | None) -> None:
    token = bool(settings.user_token)
    # Auth of bot reads: without a token first.
    default = await p.get("/bots", auth="none")
    if default.status in (401, 403) and not default.rate_limited:
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
    elif default.rate_limited:
        raise ApiError(f"{brief(default)}: the service's rate limit still refused GET /bots "
                       f"after [retry].attempts tries. Probe again later, or raise "
                       f"[retry].attempts or [retry].max_retry_after.")
    else:
        raise ApiError(f"{brief(default)}: not the bot-listing service's answer to GET /bots. "
                       f"Check --base-url.")
    listing = await probe_paging(p.get, "bots", "/bots", default)
    p.pagings.append(listing)
    page = listing.records
    p.seen["bot"] = page
    candidates = id_candidates(page, "bot")
    bot_field, tried = await p.addressed("bot", page, candidates)
    id_field = bot_field.field if bot_field else None
    again = await p.get("/bots", _head_query(listing)) if listing.family else None
    report.findings += listing.findings()
    report.findings += read_head(page, again, id_field)
    report.proposals += listing.proposals()
    bot_ids = [str(r[id_field]).strip() for r in page
               if id_field and isinstance(r, dict) and id_field in r]
    p.ids["bot"].update(bot_ids)
    shape_found, shape_proposals = read_bot_shape(page, candidates, bot_field, tried, settings)
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
    read: list[tuple[str, Reply]] = []  # (bot id, its /stats), the bots read
    for bot_id in bot_ids[:STAT_BOTS]:
        read.append((bot_id, await p.get(f"/bots/{quote(bot_id, safe='')}/stats")))
        if len(items(read[-1][1])) > 2:
            break
    if not read or not items(read[-1][1]):
        why = ("no stat record was read" if bot_ids else
               "no bot id was decided to read /stats with")
        report.findings.append(Finding("stats", "records", why,
                                       [brief(read[-1][1])] if read else []))
        for key in ("stat_id", "stat_key", "stat_key_fields", "stat_time", "custom_name",
                    "custom_value"):
            report.proposals.append(Proposal(f"fields.{key}", None, why,
                                             getattr(settings.fields, key)))
        for key in ("stats_page_size", "stats_paging", "stats_list_path"):
            report.proposals.append(Proposal(f"service.{key}", None, why))
        return
    bot_id, whole = read[-1]
    path = f"/bots/{quote(bot_id, safe='')}/stats"
    records = items(whole)
    found, proposals, time_field = read_stat_shape(
        records, whole, settings, foreign=p.ids["bot"] | p.ids["user"])
    report.findings += found
    report.proposals += proposals
    id_field = next((x.value or None for x in proposals if x.key == "fields.stat_id"), None)
    if any(x.key == "fields.stat_id" and x.value == "" for x in proposals):
        # No id: whether records repeat a time shows only at the bots that do it, so more
        # bots are read than it took to find records.
        for more in bot_ids[len(read):KEY_BOTS]:
            read.append((more, await p.get(f"/bots/{quote(more, safe='')}/stats")))
        key_found, key_proposals = read_stat_key(
            [items(reply) for _, reply in read if items(reply)],
            [reply for _, reply in read], time_field, settings)
        report.findings += key_found
        report.proposals += key_proposals
    p.seen["stat"] = [(bot, items(reply)) for bot, reply in read if items(reply)]
    last = await p.get(f"/bots/{quote(bot_id, safe='')}/stat")
    newest = last.json() if last.status == 200 else None
    paging = await probe_paging(p.get, "stats", path, whole, newest=newest)
    p.pagings.append(paging)
    report.findings += paging.findings()
    report.proposals += paging.proposals()
    report.findings += read_stats_order(records, paging.family not in (None, "whole"), last,
                                        time_field, id_field)


# The user's lists: (path, [fields] key of their id, kind of record the id rules read).
class UserList(NamedTuple):
    """A list of the user's: its path under ``/users/<id>/``, the [fields] key of its records'
    id, and the kind of record it holds."""

    what: str
    key: str
    kind: str


_USER_LISTS = (UserList("bots", "bot_id", "bot"), UserList("servers", "server_id", "server"),
               UserList("webhooks", "webhook_id", "webhook"))


async def _probe_user(p: _Prober, settings: Settings, report: ProbeReport) -> None:
    fields = settings.fields
    if not settings.user_token:
        why = "no user token (BOTSTATS_USER_TOKEN, --user-token) to read the user with"
        report.findings.append(Finding("user lists", "paging", f"not probed: {why}"))
        for key in ("fields.user_id", "fields.server_id", "fields.webhook_id",
                    "service.user_lists_page_size", "service.user_lists_paging",
                    "service.user_lists_path"):
            report.proposals.append(Proposal(key, None, why))
        return
    me = await p.get("/users/@me", auth="user")
    record = me.json()
    if me.status != 200 or not isinstance(record, dict):
        why = f"GET /users/@me answered {me.status}"
        report.findings.append(Finding("user lists", "the current user", f"answered "
                                       f"{me.status}", [brief(me)]))
        for key in ("fields.user_id", "fields.server_id", "fields.webhook_id",
                    "service.user_lists_page_size", "service.user_lists_paging",
                    "service.user_lists_path"):
            report.proposals.append(Proposal(key, None, why))
        return
    p.seen["user"] = [record]
    candidates = id_candidates([record], "user", foreign=p.ids["bot"])
    user_field, tried = await p.addressed("user", [record], candidates, auth="user")
    if user_field is not None:
        user_id = str(record[user_field.field]).strip()
        p.ids["user"].add(user_id)
        report.findings.append(Finding("user lists", "user id", f"'{user_field.field}' (GET "
                                       f"/users/<it> answers with the current user)",
                                       [brief(r) for r in tried]))
        report.proposals.append(Proposal("fields.user_id", user_field.field,
                                         "GET /users/<it> answers with the current user",
                                         fields.user_id))
    else:
        user_id = "@me"
        why = (f"GET /users/<it> answers with the current user for none of "
               f"{', '.join(repr(c.field) for c in candidates)}" if candidates else
               "no field of the user record has an id's shape")
        report.findings.append(Finding("user lists", "user id", f"unknown: {why}",
                                       [brief(r) for r in tried]))
        report.proposals.append(Proposal("fields.user_id", None, why, fields.user_id))
    decided: Paging | None = None
    unknown: Paging | None = None

    async def get(path: str, params: dict[str, Any] | None) -> Reply:
        return await p.get(path, params, auth="user")

    for user_list in _USER_LISTS:
        what, key, kind = user_list
        path = f"/users/{quote(user_id, safe='@')}/{what}"
        whole = await p.get(path, auth="user")
        listed = items(whole)
        p.seen[{"bots": "user bot"}.get(what, kind)] = listed
        if kind == "bot":
            p.ids["bot"].update(str(r[fields.bot_id]) for r in listed
                                if isinstance(r, dict) and fields.bot_id in r)
        else:
            report.proposals.append(_list_id(user_list, whole, listed, p.ids["bot"] | p.ids["user"],
                                             getattr(fields, key)))
        if decided is not None:
            continue
        paging = await probe_paging(get, "user_lists", path, whole)
        if paging.family is not None and (len(listed) >= 3 or paging.family != "whole"):
            decided = paging
        elif unknown is None or paging.family is None:
            unknown = paging
    chosen = decided or unknown
    if chosen is None:
        return
    p.pagings.append(chosen)
    report.findings += chosen.findings()
    report.proposals += chosen.proposals()


def _list_id(user_list: UserList, whole: Reply, listed: list[Any], foreign: set[str],
             current: str) -> Proposal:
    """The id of a user's servers or webhooks: botstats' id rules over the list (references to
    the bots and the user read, ``foreign``, are not ids); ``current``: the setting's value."""
    what, key, kind = user_list
    if failed(whole):
        return Proposal(f"fields.{key}", None, f"a read failed ({brief(whole)})", current)
    if len(listed) < 2:
        return Proposal(f"fields.{key}", None, f"fewer than two {what} read: too few to tell "
                        f"an id", current)
    found = id_candidates(listed, kind, foreign=foreign)
    chosen = decided_id(found, kind)
    if chosen is not None:
        return Proposal(f"fields.{key}", chosen.field, chosen.why, current)
    why = (f"several fields could be the id: {', '.join(repr(c.field) for c in found)}" if found
           else f"no field of the {what} passes botstats' rules for an id")
    return Proposal(f"fields.{key}", None, why, current)


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


def _head_query(listing: Paging) -> dict[str, Any] | None:
    """The query that reads the listing's head again, as its family asks a first page."""
    size = listing.cap or 100
    params = listing.params
    if listing.family == "offset":
        return {params["limit_param"]: size, params["offset_param"]: 0}
    if listing.family in ("page", "link"):
        return {params["page_param"]: params["first_page"], params["size_param"]: size}
    return None


def run_probe(settings: Settings, *, max_requests: int = DEFAULT_MAX_REQUESTS,
              post_bot: str | None = None) -> ProbeReport:
    """:func:`probe`, from synchronous code."""
    if max_requests < 1:
        raise ConfigError(f"--max-requests must be at least 1, got {max_requests}.")
    if post_bot and not settings.bot_key:  # before any request
        raise ConfigError("--post needs the bot's API key: set BOTSTATS_BOT_KEY or pass --bot-key.")
    return asyncio.run(probe(settings, max_requests=max_requests, post_bot=post_bot))
