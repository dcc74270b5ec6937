"""The two value classes that describe a service: what data it holds and how it misbehaves.

Both are frozen and validated on construction, so a bad value fails where it is written
(a test, a flag) with the field name, the value and what is allowed, not deep in a request.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

DEFAULT_BOTS = 200
DEFAULT_SEED = 1
DEFAULT_HISTORY_DAYS = 90
DEFAULT_STATS_PER_DAY = 1
DEFAULT_MAX_PAGE_SIZE = 100
# Ids keep the bot/user index in their 22 low bits (see _data.snowflake), which bounds the
# directory; a million listed bots leaves room for three million churn insertions.
MAX_BOTS = 1_000_000
SECONDS_PER_DAY = 86_400
# The record keys the interface leaves open, named as botstats' [fields] names them, as the
# interface's examples spell them.
FIELD_DEFAULTS = {"bot_id": "id", "bot_name": "name", "stat_id": "id", "stat_time": "timestamp",
                  "custom_name": "name", "custom_value": "value", "user_id": "id",
                  "server_id": "id", "webhook_id": "id"}
# The other keys of a bot and a stat record, which a renamed field must not take over.
BOT_KEYS = ("username", "prefix", "short_description", "library", "tags", "owners", "created_at",
            "server_count", "shard_count", "points", "monthly_points", "certified", "invite",
            "website", "avatar")
STAT_KEYS = ("bot_id", "users", "guilds", "shards", "memory_load", "cpu_load",
             "commands_executed", "custom")
# The families of headers a rate-limited service tells its limit with (see _quota.py).
RATE_LIMIT_HEADERS = ("retry-after", "retry-after-date", "x-reset-after", "x-reset-epoch",
                      "x-reset-epoch-ms", "x-reset-delta", "http-date", "github-403", "ratelimit",
                      "ratelimit-policy", "none")
STATS_ORDERS = ("oldest", "newest")
# How the list endpoints that page are asked for a part and answer it (see _conventions.py):
# the families of paging parameters, and what a page size above the cap gets.
PAGINGS = ("skip", "offset", "page", "link", "next-url", "cursor")
TOKEN_PAGINGS = ("next-url", "cursor")  # their next page is told in the answer's object
OVER_CAPS = ("cap", "400")
# The keys an enveloped list answer holds beside the list, which the list's key must not take.
ENVELOPE_KEYS = ("total", "count", "limit", "offset", "page", "per_page", "next", "next_cursor",
                 "has_more")
USER_KEYS = ("username", "avatar", "bio", "created_at", "bot_ids")
SERVER_KEYS = ("name", "member_count", "owner_id", "tags")
WEBHOOK_KEYS = ("bot_id", "url", "events", "created_at")
# The other keys of each record, which a renamed field must not take over.
_OTHER_KEYS = {"bot": BOT_KEYS, "stat": STAT_KEYS, "custom": (), "user": USER_KEYS,
               "server": SERVER_KEYS, "webhook": WEBHOOK_KEYS}
# How the service spells what the interface leaves open (ServiceConfig's shape block): the
# allowed values of each setting, the default first.
SHAPE_CHOICES: dict[str, tuple[Any, ...]] = {
    "id_type": ("text", "integer"),
    "stat_ids": ("composite", "hex", "integer", "none"),
    "time_format": ("iso", "epoch-s", "epoch-ms", "epoch-us", "epoch-ns", "http-date"),
    "custom_shape": ("list", "object"),
    "error_style": ("json", "problem", "text", "empty"),
    "not_found_status": (404, 400, 410, 422),
    "auth_status": (401, 403),
}


class InvalidSetting(ValueError):
    """A value of :class:`ServiceConfig` or :class:`Faults` that is not allowed; ``field`` names
    it (``stats_per_day``, ``rate_limit``) and ``problem`` says what is wrong with it."""

    def __init__(self, owner: str, field: str, value: object, allowed: str) -> None:
        self.field = field
        self.problem = f"{value!r} is not allowed: {allowed}"
        super().__init__(f"{owner}{field}={self.problem}")


def _check(ok: bool, name: str, value: object, allowed: str, owner: str = "") -> None:
    if not ok:
        raise InvalidSetting(owner, name, value, allowed)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


@dataclass(frozen=True)
class Faults:
    """Misbehaviour of the interface endpoints; every field off (zero/False) by default.

    Applied in this order to each request of the interface (never to ``/_admin/*``):
    redirect -> rate limit (429) -> latency -> random 5xx -> the endpoint (where churn,
    malformed records, bad JSON, ignore_skip, the listing faults and the body faults live).
    """

    rate_limit: float = 0.0  # requests/second over all requests (token bucket); 0 = unlimited
    error_rate: float = 0.0  # probability of a random 500/502/503
    latency_ms: float = 0.0  # added to every response
    latency_jitter_ms: float = 0.0  # plus uniform(0, jitter)
    churn_every: int = 0  # every N-th GET /bots: one bot added at the front, one removed
    malformed_rate: float = 0.0  # share of generated stat records that are malformed
    bad_json_rate: float = 0.0  # share of bots whose /stats body is never valid JSON
    ignore_skip: bool = False  # GET /bots always returns the first page
    live_interval: float = 0.0  # seconds per virtual stat interval; 0 = clock moves only on advance
    # GET /bots shows only the first (1 - P) of the listing, answering 200 (1 = an empty list):
    # an outage that looks like a directory emptying.
    listing_cut: float = 0.0
    duplicate_every: int = 0  # GET /bots repeats a bot after every N-th position (same or earlier page)
    # Every interface request is answered 307 to this origin (same path and query).
    redirect_to: str = ""
    stall_rate: float = 0.0  # share of bots whose /stats body stops half-way for stall_seconds
    stall_seconds: float = 30.0
    gzip_cut_rate: float = 0.0  # share of bots whose /stats body is gzip cut in half
    # How many /stats answers per bot the body faults (stall, gzip cut) spoil before it is
    # answered whole; 0 = every one.
    body_fault_times: int = 0
    # The rate limit's bucket and how it is told (22b): the tokens the bucket holds (0: a
    # second's worth, at least 1), and the family of headers it answers with (RATE_LIMIT_HEADERS).
    rate_burst: float = 0.0
    rate_limit_headers: str = "retry-after"
    # Planted events (issue 23): every 4th bot's name, and its custom fields' names, are
    # hostile strings (markup, a script end tag, an SVG onload, template expressions).
    hostile_names: bool = False

    def __post_init__(self) -> None:
        for name in ("rate_limit", "latency_ms", "latency_jitter_ms", "live_interval",
                     "stall_seconds"):
            value = getattr(self, name)
            _check(_is_number(value) and value >= 0, name, value,
                   "a finite number >= 0", "Faults.")
        for name in ("error_rate", "malformed_rate", "bad_json_rate", "listing_cut", "stall_rate",
                     "gzip_cut_rate"):
            value = getattr(self, name)
            _check(_is_number(value) and 0 <= value <= 1, name, value,
                   "a probability between 0 and 1", "Faults.")
        _check(_is_int(self.churn_every) and self.churn_every >= 0, "churn_every",
               self.churn_every, "an integer >= 0 (0 = no churn)", "Faults.")
        _check(isinstance(self.ignore_skip, bool), "ignore_skip", self.ignore_skip,
               "True or False", "Faults.")
        _check(isinstance(self.hostile_names, bool), "hostile_names", self.hostile_names,
               "True or False", "Faults.")
        for name in ("duplicate_every", "body_fault_times"):
            value = getattr(self, name)
            _check(_is_int(value) and value >= 0, name, value, "an integer >= 0", "Faults.")
        _check(isinstance(self.redirect_to, str) and (
            not self.redirect_to or self.redirect_to.startswith(("http://", "https://"))),
            "redirect_to", self.redirect_to, "'' or an http(s) URL", "Faults.")
        _check(_is_number(self.rate_burst) and self.rate_burst >= 0, "rate_burst",
               self.rate_burst, "a finite number >= 0 (0 = a second's worth)", "Faults.")
        _check(self.rate_limit_headers in RATE_LIMIT_HEADERS, "rate_limit_headers",
               self.rate_limit_headers, f"one of {', '.join(RATE_LIMIT_HEADERS)}", "Faults.")

    def active(self) -> dict[str, object]:
        """The fault fields that are switched on, for logs and the health endpoint."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != f.default}


@dataclass(frozen=True)
class ServiceConfig:
    """What the directory holds. Same config (seed and ``end`` included) -> same data."""

    bots: int = DEFAULT_BOTS
    users: int = 0  # 0 = bots // 5, at least 1
    seed: int = DEFAULT_SEED
    history_days: int = DEFAULT_HISTORY_DAYS
    stats_per_day: int = DEFAULT_STATS_PER_DAY
    max_page_size: int = DEFAULT_MAX_PAGE_SIZE
    # 0: GET /bots/:id/stats sends the whole list. N: it pages like GET /bots (in `paging`'s
    # family; page size default and cap N), in stats_order, as a service may: the interface
    # leaves it open.
    stats_page_size: int = 0
    # The same for a user's bots, servers and webhooks (0: whole lists).
    user_lists_page_size: int = 0
    # The bot read endpoints want `Authorization: Bearer <user token>` too (the interface
    # leaves their auth open).
    bot_reads_need_token: bool = False
    # The record keys the interface leaves open that this service spells otherwise, named as
    # FIELD_DEFAULTS names them ({"stat_time": "created_at", "stat_id": "_id"}), so it can play
    # a service that names them apart from the defaults.
    field_names: dict[str, str] = field(default_factory=dict)
    # How it spells the rest of what the interface leaves open (choices in SHAPE_CHOICES):
    # bot/user/server/webhook ids (and references to them) as text or JSON integers; stat ids
    # as "<bot>-<n>", 24 hex digits, 60-bit integers or none at all; stat times as ISO 8601 or
    # epoch seconds/milliseconds; custom fields as a list of {name, value} or one object; error
    # bodies as {"error", "details"}, RFC 7807 problem+json, plain text or nothing; the status
    # of an unknown bot or user (404 by default) and of refused credentials (401).
    id_type: str = "text"
    stat_ids: str = "composite"
    time_format: str = "iso"
    custom_shape: str = "list"
    error_style: str = "json"
    not_found_status: int = 404
    auth_status: int = 401
    end: datetime | None = None  # the virtual clock at start (UTC); None = now, truncated to the hour
    faults: Faults = field(default_factory=Faults)
    # How GET /bots/:id/stats orders a bot's records, paged or whole (22b): "oldest" first, or
    # "newest" first as some services do (GET /stat is the newest record either way).
    stats_order: str = "oldest"
    # Planted events (issue 23): the share of bots with one to three labelled events (spikes,
    # drops, level shifts, outages, counter resets; as many again drift slowly, which is not
    # an event), served as truth by GET /_admin/events. 0 = the series' own unlabelled noise.
    events: float = 0.0
    # How the lists that page (GET /bots; /stats and the user lists when their page size is
    # set) are asked for a part and answered, as real services do (see _conventions.py): the
    # family of paging parameters (PAGINGS); the key of the object a list is answered in ("":
    # a bare array), beside "total", "count" and the family's own keys; X-Total-Count on every
    # list answer; a page size above the cap capped silently or answered 400 (OVER_CAPS).
    paging: str = "skip"
    list_envelope: str = ""
    total_header: bool = False
    over_cap: str = "cap"
    # A family of its own for GET /bots/:id/stats ("" = `paging`'s), as a service whose listing
    # and records were built apart may page them apart.
    stats_paging: str = ""
    # The share of bots that post one record per shard: each of their records has a twin at
    # the same time, the two told apart by "shard_id" (0, 1) and their figures.
    repeated_times: float = 0.0

    def __post_init__(self) -> None:
        _check(_is_int(self.bots) and 1 <= self.bots <= MAX_BOTS, "bots", self.bots,
               f"an integer from 1 to {MAX_BOTS}")
        _check(_is_int(self.users) and 0 <= self.users <= MAX_BOTS, "users", self.users,
               f"an integer from 0 (= bots // 5) to {MAX_BOTS}")
        _check(_is_int(self.seed), "seed", self.seed, "an integer")
        _check(_is_int(self.history_days) and 1 <= self.history_days <= 3650, "history_days",
               self.history_days, "an integer from 1 to 3650")
        _check(_is_int(self.stats_per_day) and 1 <= self.stats_per_day <= 1440
               and SECONDS_PER_DAY % self.stats_per_day == 0, "stats_per_day",
               self.stats_per_day, "an integer from 1 to 1440 that divides 86400 "
               "(e.g. 1, 2, 4, 6, 12, 24, 96)")
        _check(_is_int(self.max_page_size) and self.max_page_size >= 1, "max_page_size",
               self.max_page_size, "an integer >= 1")
        _check(_is_int(self.stats_page_size) and self.stats_page_size >= 0, "stats_page_size",
               self.stats_page_size, "an integer >= 0 (0 = whole lists)")
        _check(_is_int(self.user_lists_page_size) and self.user_lists_page_size >= 0,
               "user_lists_page_size", self.user_lists_page_size,
               "an integer >= 0 (0 = whole lists)")
        _check(isinstance(self.bot_reads_need_token, bool), "bot_reads_need_token",
               self.bot_reads_need_token, "a boolean")
        unknown = sorted(set(self.field_names) - set(FIELD_DEFAULTS))
        _check(not unknown, "field_names", unknown, f"keys among {', '.join(FIELD_DEFAULTS)}")
        for record, others in _OTHER_KEYS.items():
            keys = [key for key in FIELD_DEFAULTS if key.startswith(f"{record}_")]
            for key in keys:
                value = self.field_name(key)
                _check(isinstance(value, str) and bool(value.strip()) and value not in others,
                       f"{key}_field", value,
                       "a non-empty name" + (f" other than {', '.join(others)}" if others else ""))
            if len(keys) == 2:
                _check(self.field_name(keys[0]) != self.field_name(keys[1]), f"{keys[1]}_field",
                       self.field_name(keys[1]), f"a name apart from {keys[0]}_field")
        for name, allowed in SHAPE_CHOICES.items():
            value = getattr(self, name)
            _check(value in allowed and type(value) is type(allowed[0]), name, value,
                   "one of " + ", ".join(map(str, allowed)))
        _check(self.stats_order in STATS_ORDERS, "stats_order", self.stats_order,
               f"one of {', '.join(STATS_ORDERS)}")
        if self.end is not None:
            _check(isinstance(self.end, datetime), "end", self.end, "a datetime or None")
        _check(isinstance(self.faults, Faults), "faults", self.faults, "a Faults instance")
        _check(_is_number(self.events) and 0 <= self.events <= 1, "events", self.events,
               "a share between 0 and 1 (0 = no planted events)")
        self._check_conventions()

    def _check_conventions(self) -> None:
        _check(self.paging in PAGINGS, "paging", self.paging, f"one of {', '.join(PAGINGS)}")
        _check(self.stats_paging in ("", *PAGINGS), "stats_paging", self.stats_paging,
               f"'' (= paging) or one of {', '.join(PAGINGS)}")
        _check(bool(self.list_envelope) or self.stats_paging not in TOKEN_PAGINGS,
               "list_envelope", self.list_envelope,
               f"a key (e.g. 'results'): stats_paging={self.stats_paging!r} tells the next page "
               f"in the answer's object")
        envelope = self.list_envelope
        _check(isinstance(envelope, str) and envelope == envelope.strip() and "." not in envelope
               and envelope not in ENVELOPE_KEYS, "list_envelope", envelope,
               "'' (a bare array) or one key without dots or spaces at its ends, other than "
               + ", ".join(ENVELOPE_KEYS))
        _check(bool(envelope) or self.paging not in TOKEN_PAGINGS, "list_envelope", envelope,
               f"a key (e.g. 'results'): paging={self.paging!r} tells the next page in the "
               "answer's object")
        _check(isinstance(self.total_header, bool), "total_header", self.total_header,
               "a boolean")
        _check(self.over_cap in OVER_CAPS, "over_cap", self.over_cap,
               f"one of {', '.join(OVER_CAPS)}")
        _check(_is_number(self.repeated_times) and 0 <= self.repeated_times <= 1,
               "repeated_times", self.repeated_times,
               "a share between 0 and 1 (0 = every bot posts one record at a time)")

    @functools.cached_property
    def stats_config(self) -> ServiceConfig:
        """The config GET /bots/:id/stats pages by: this one, in ``stats_paging``'s family."""
        if not self.stats_paging or self.stats_paging == self.paging:
            return self
        return replace(self, paging=self.stats_paging, stats_paging="")

    @property
    def user_count(self) -> int:
        return self.users or max(1, self.bots // 5)

    @property
    def interval_seconds(self) -> int:
        return SECONDS_PER_DAY // self.stats_per_day

    def field_name(self, key: str) -> str:
        """How this service spells the record key ``key`` of FIELD_DEFAULTS."""
        return self.field_names.get(key, FIELD_DEFAULTS[key])

    def start_clock(self) -> datetime:
        """The virtual clock at start: ``end`` as UTC, else now truncated to the hour."""
        if self.end is None:
            return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        # A naive datetime is taken as UTC: tests write datetime(2024, 6, 1) and mean UTC.
        end = self.end if self.end.tzinfo else self.end.replace(tzinfo=UTC)
        return end.astimezone(UTC).replace(microsecond=0)
