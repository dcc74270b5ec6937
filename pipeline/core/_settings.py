"""The settings' schema: one frozen section per ``[table]`` of ``config.toml``, with its defaults,
and :class:`Settings` that holds them (and the secrets, in :class:`Secret`, that never print).

Reading them (file < environment < flags) is ``_loading``'s; the checks that types alone do not
make are ``_validation``'s.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

AUTO = "auto"  # [service].concurrency adapted as the run goes
AUTO_OR_INT = int | str
NAMES = tuple[str, ...]  # a list of field names (a TOML array of strings)


class Secret:
    """A token or key: compares and hashes by value, never shows it in repr/str/logs."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret('***')" if self._value else "Secret('')"

    __str__ = __repr__


@dataclass(frozen=True)
class ServiceSettings:
    """How to reach the bot-listing service."""

    base_url: str = "http://127.0.0.1:8000"
    timeout: float = 10.0  # seconds for a whole request (read/write/pool)
    connect_timeout: float = 5.0
    max_connections: int = 32
    max_keepalive: int = 32  # httpx leaves keep-alive unbounded unless set
    # Requests in flight during a harvest: "auto" adapts it (interface/_concurrency: grows while
    # latency holds, backs off on 429 and 5xx, within max_connections); a number fixes it.
    concurrency: int | str = "auto"
    page_size: int = 100  # `limit` asked of GET /bots; the service may return fewer
    # `limit` asked of GET /bots/:id/stats when the service pages it (the interface leaves it
    # open); 0 = it sends each bot's whole list in one answer, as the embedded service does.
    stats_page_size: int = 0
    # The same for a user's bots, servers and webhooks (the snapshot a user token takes).
    user_lists_page_size: int = 0
    # Where each list endpoint's answer holds its list: "" = the answer is the array; else the
    # key of an object that holds it ("results"; dotted for nesting: "data.items").
    bots_list_path: str = ""
    stats_list_path: str = ""
    user_lists_path: str = ""
    # How each list endpoint pages (PAGING_FAMILIES): "offset" (limit + offset_param), "page"
    # (page_param + size_param), "link" (pages named in a Link header), "next" (a next URL in
    # the answer), "cursor" (an opaque cursor in the answer, sent back as cursor_param).
    bots_paging: str = "offset"
    stats_paging: str = "offset"
    user_lists_paging: str = "offset"
    # The names those families use, shared by every list endpoint.
    limit_param: str = "limit"
    offset_param: str = "skip"
    page_param: str = "page"
    size_param: str = "per_page"
    first_page: int = 1
    cursor_param: str = "cursor"
    next_path: str = "next"
    cursor_path: str = "next_cursor"
    # Where the service says how long the whole list is, if it does: a key of the answer's
    # object ("total"; dotted for nesting) and/or a header ("X-Total-Count"); "" = not said.
    total_path: str = ""
    total_header: str = ""
    # Send the user token (`Authorization: Bearer`) on the bot reads too: the interface leaves
    # their auth open, and some services want it there.
    token_on_bot_reads: bool = False
    request_budget: float = 0.0  # requests per second across the run; 0 = no client-side limit
    user_agent: str = "botstats/0.1"


@dataclass(frozen=True)
class RetrySettings:
    """Retries of idempotent requests on 429, 5xx and transport errors."""

    attempts: int = 5  # total tries per request, the first included
    backoff_base: float = 0.25  # seconds; doubles each try, with full jitter
    backoff_max: float = 30.0
    max_retry_after: float = 300.0  # a Retry-After longer than this gives up instead of waiting


@dataclass(frozen=True)
class FieldSettings:
    """Record field names the interface leaves open; defaults fit the embedded service."""

    bot_id: str = "id"
    bot_name: str = "name"
    stat_id: str = "id"  # "" = the service gives no id: key by sha1(bot_id, timestamp)
    stat_time: str = "timestamp"
    # What tells stat records apart (STAT_KEYS): "id" (the field stat_id; with stat_id = "" the
    # time, as "time"), "time" (one record per bot and time), "fields" (the values of
    # stat_key_fields), "content" (a hash of the record's canonical JSON).
    stat_key: str = "id"
    stat_key_fields: tuple[str, ...] = ()
    custom_name: str = "name"
    custom_value: str = "value"
    user_id: str = "id"
    server_id: str = "id"
    webhook_id: str = "id"
    # A stat stamped further than this after botstats received it goes to `rejects`: a clock
    # ahead of time would otherwise become the bot's newest record and a future day in trends.
    max_future_skew: str = "1d"

    @property
    def stat_keying(self) -> str:
        """How stat records are keyed in effect: ``stat_key``, where "id" without a
        ``stat_id`` (the older spelling of "no id") is "time"."""
        return "time" if self.stat_key == "id" and not self.stat_id else self.stat_key


@dataclass(frozen=True)
class HarvestSettings:
    """What a harvest believes of the service."""

    # A complete listing that would mark more than this share of the archive's live bots
    # removed is not believed (the run ends partial, nothing is marked); an empty listing of
    # an archive with bots never is. `--accept-removals` believes it once.
    max_removed_share: float = 0.5


@dataclass(frozen=True)
class StoreSettings:
    """The DuckDB archive."""

    db: str = "data/archive.ducklake"
    # One DuckDB row group: a batch that fills one is written straight into the file, not
    # through the WAL and a checkpoint, which costs less write CPU than smaller batches.
    batch_rows: int = 122_880  # stat rows buffered before one INSERT
    open_timeout: float = 30.0  # seconds to keep retrying while another process commits
    memory_limit: str = "2GB"
    threads: int = 0  # 0 = DuckDB's default
    # Beyond one machine (docs/archive.md): a PostgreSQL connection string for a catalog many
    # workers share ("" = the SQLite catalog file `db`), and the data files' folder every
    # worker mounts, or s3://bucket/prefix/ ("" = <db>.files beside the SQLite catalog).
    catalog: str = ""
    data_path: str = ""
    s3_endpoint: str = ""  # "" = AWS; else e.g. http://minio:9000 (http: no TLS)
    s3_region: str = ""
    s3_url_style: str = "vhost"  # vhost | path (MinIO and most S3-compatible stores)


@dataclass(frozen=True)
class ExportSettings:
    """Parquet exports of the trend datasets."""

    dir: str = "data/exports"
    compression: str = "zstd"


@dataclass(frozen=True)
class TrendSettings:
    """Thresholds of the trend jobs."""

    movers_min_guilds: int = 100  # a bot smaller than this at the window start is not a mover
    movers_top: int = 10  # gainers and losers kept per window and measure
    anomaly_window: int = 28  # days before a day that tell its usual level (spread: twice)
    anomaly_threshold: float = 5.0  # an event is this many usual spreads off the usual level
    anomaly_min_days: int = 14  # fewer days of history than this: no event yet
    health_threshold: float = 80.0  # percent cpu/memory load that counts as a hot day
    anomaly_min_pct: float = 20.0  # a smaller change (up or down, percent) is not an event
    anomaly_min_guilds: int = 10  # nor a change of fewer guilds than this
    anomaly_min_users: int = 100  # nor of fewer users (or commands per day) than this
    anomaly_outage_days: int = 2  # days without a record that make an outage


@dataclass(frozen=True)
class ReportSettings:
    """`botstats report`, and the report `botstats run` refreshes after each run."""

    file: str = ""  # where `botstats run` writes the report after trends; "" = no report
    bots: str = ""  # bot ids with a section of their own, separated by commas or spaces
    days: int = 90  # days of history shown
    compare: bool = False  # also the bots side by side (2 to 4 of them)

    @property
    def bot_list(self) -> list[str]:
        return self.bots.replace(",", " ").split()


@dataclass(frozen=True)
class ScheduleSettings:
    """`botstats schedule`: standard crontab expressions (0 or 7 = Sunday)."""

    timezone: str = "UTC"
    harvest: str = "0 * * * *"
    trends: str = "15 * * * *"
    misfire_grace_time: int = 300  # seconds late a run may still start
    jitter: int = 0


@dataclass(frozen=True)
class RunSettings:
    """`botstats run`: the lock that keeps two runs from overlapping."""

    lock_timeout: float = 60.0  # seconds a second run waits before giving up (exit 75)
    lock_file: str = ""  # "" = <db>.lock beside the archive
    # `botstats run` builds the trends and the report in a fresh process image (exec) after
    # the harvest, so that they do not stack on the harvest's heap; False: all in one process.
    fresh_process: bool = True


@dataclass(frozen=True)
class LogSettings:
    format: str = "text"  # text | json
    level: str = "info"  # debug | info | warning | error
    file: str = ""  # also append logs here ("" = terminal only)


# [alerts]: every kind of alert, in the order a message shows them, and the destinations' types.
ALERT_KINDS = ("failed", "partial", "lock", "stale", "resolved", "event", "milestone")
DESTINATION_TYPES = ("discord", "slack", "webhook", "email")
SMTP_PORTS = {"starttls": 587, "tls": 465, "none": 25}  # by [alerts.destinations.*].security
MILESTONE_METRICS = ("guilds", "users")
ALERTS_ENV = "BOTSTATS_ALERTS_"  # + <NAME>_URL, <NAME>_PASSWORD: a destination's secrets


@dataclass(frozen=True)
class Destination:
    """Where alerts go (``[alerts.destinations.NAME]``): a Discord or Slack webhook, a JSON POST,
    or mail over SMTP, with the kinds of alert it receives. Its URL (a webhook's path carries
    its credential) and its SMTP password come from the environment only."""

    name: str
    type: str  # discord | slack | webhook | email
    kinds: tuple[str, ...] = ALERT_KINDS
    host: str = ""  # email: the SMTP server
    port: int = 0  # 0 = the usual port of ``security``
    security: str = "starttls"  # starttls | tls | none
    user: str = ""  # the SMTP login ("" = none)
    sender: str = ""  # the From address ("" = user)
    to: tuple[str, ...] = ()
    url: Secret = field(default_factory=lambda: Secret(""), compare=False)
    password: Secret = field(default_factory=lambda: Secret(""), compare=False)

    @property
    def url_env(self) -> str:
        return f"{ALERTS_ENV}{self.name.upper()}_URL"

    @property
    def password_env(self) -> str:
        return f"{ALERTS_ENV}{self.name.upper()}_PASSWORD"

    @property
    def is_email(self) -> bool:
        return self.type == "email"

    @property
    def smtp_port(self) -> int:
        return self.port or SMTP_PORTS[self.security]

    def takes(self, kind: str) -> bool:
        return kind in self.kinds

    def missing(self) -> str:
        """Why it cannot be reached as configured ('' when it can): a webhook whose URL
        variable is unset (not a config error: its alerts are recorded undelivered)."""
        if not self.is_email and not self.url:
            return f"no URL: set {self.url_env} in the environment of the job"
        return ""

    def where(self) -> str:
        """Where it goes, for messages, without its secret."""
        if self.is_email:
            return f"mail via {self.host}:{self.smtp_port} to {', '.join(self.to)}"
        host = urlsplit(self.url.get()).hostname if self.url else None
        return f"{self.type} webhook at {host}" if host else f"{self.type} webhook (no URL)"

    def as_dict(self) -> dict[str, Any]:
        """As plain data, its secrets shown only as set/unset."""
        out: dict[str, Any] = {"name": self.name, "type": self.type, "kinds": list(self.kinds)}
        if self.is_email:
            return out | {"host": self.host, "port": self.smtp_port, "security": self.security,
                          "user": self.user, "sender": self.sender or self.user,
                          "to": list(self.to), "password": "set" if self.password else "unset"}
        return out | {"url": "set" if self.url else "unset"}


@dataclass(frozen=True)
class AlertSettings:
    """What is told, and when (docs/alerts.md). Durations like ``6h`` (s, m, h, d); "" turns a
    condition off. ``destinations`` come from ``[alerts.destinations.NAME]`` tables."""

    destinations: tuple[Destination, ...] = ()
    stale_after: str = "6h"  # no complete harvest within this: a stale alert
    lock_after: str = "2h"  # another job holding the archive lock longer: a lock alert
    repeat_interval: str = "24h"  # a condition that goes on reminds at most this often
    min_severity: float = 4.0  # anomaly events at or above this severity (log10 user-days)
    events: str = "all"  # all | watched: the bots whose events are told
    event_days: int = 7  # events (and milestones reached) of the last this many days
    watch: str = ""  # watched bot ids: "123, 456"
    milestones: str = "guilds:10000"  # sizes told for watched bots: "guilds:10000, users:1000000"
    forecast_days: int = 30  # a watched bot forecast to reach a size within this; 0 = not told
    budget: float = 30.0  # seconds all sending of one run may take, retries included
    timeout: float = 10.0  # seconds for one request or SMTP conversation
    give_up_after: str = "3d"  # an alert still undelivered this long after its first try

    @property
    def watch_list(self) -> tuple[str, ...]:
        return tuple(self.watch.replace(",", " ").split())

    @property
    def milestone_list(self) -> tuple[tuple[str, int], ...]:
        """(metric, size) of each milestone; ValueError for one that is not metric:size."""
        out = []
        for item in self.milestones.replace(",", " ").split():
            metric, _, size = item.partition(":")
            if metric not in MILESTONE_METRICS or not size.isdigit() or int(size) <= 0:
                raise ValueError(f"{item!r} is not a milestone: write metric:size with a metric "
                                 f"of {', '.join(MILESTONE_METRICS)}, like guilds:10000")
            out.append((metric, int(size)))
        return tuple(out)

    def secrets(self) -> list[str]:
        return [s for d in self.destinations for s in (d.url.get(), d.password.get()) if s]

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return out | {"destinations": [d.as_dict() for d in self.destinations]}


@dataclass(frozen=True)
class S3Keys:
    """Object storage credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN."""

    key_id: Secret = field(default_factory=lambda: Secret(""))
    secret: Secret = field(default_factory=lambda: Secret(""))
    session_token: Secret = field(default_factory=lambda: Secret(""))

    def values(self) -> list[str]:
        return [self.key_id.get(), self.secret.get(), self.session_token.get()]


@dataclass(frozen=True)
class Settings:
    service: ServiceSettings = field(default_factory=ServiceSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    fields: FieldSettings = field(default_factory=FieldSettings)
    harvest: HarvestSettings = field(default_factory=HarvestSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    exports: ExportSettings = field(default_factory=ExportSettings)
    trends: TrendSettings = field(default_factory=TrendSettings)
    report: ReportSettings = field(default_factory=ReportSettings)
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    run: RunSettings = field(default_factory=RunSettings)
    log: LogSettings = field(default_factory=LogSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    # Secrets: environment or flags only.
    user_token: Secret = field(default_factory=lambda: Secret(""))
    bot_key: Secret = field(default_factory=lambda: Secret(""))
    # The password of [store].catalog, taken out of the connection string (core/_dsn.py).
    catalog_password: Secret = field(default_factory=lambda: Secret(""))
    # Keys for an s3:// data path, from the standard AWS_* environment variables only.
    s3_keys: S3Keys = field(default_factory=S3Keys)
    # Where the settings came from, for messages ("" = defaults only).
    source: str = ""
    # Where each value set by other than the config file came from ("service.base_url" ->
    # "flag --base-url"), so a bad value is blamed on what the user typed.
    origins: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def db_path(self) -> Path:
        return Path(self.store.db)

    @property
    def export_dir(self) -> Path:
        return Path(self.exports.dir)

    @property
    def shared_catalog(self) -> bool:
        """Whether the catalog is a PostgreSQL database (else the SQLite file [store].db)."""
        return bool(self.store.catalog)

    @property
    def archive_name(self) -> str:
        """The archive, for messages: its catalog file, or its PostgreSQL catalog."""
        return self.store.catalog if self.shared_catalog else self.store.db

    @property
    def lock_path(self) -> Path:
        return Path(self.run.lock_file) if self.run.lock_file else Path(self.store.db + ".lock")


SECTIONS: dict[str, type] = {
    name: tp
    for name, tp in typing.get_type_hints(Settings).items()
    if name not in ("user_token", "bot_key", "catalog_password", "s3_keys", "source", "origins")
}
