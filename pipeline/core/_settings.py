"""Settings: one typed schema, read from TOML, environment and flags, validated before any I/O.

Precedence, lowest first: the defaults below < ``config.toml`` < ``BOTSTATS_*`` environment <
flags typed on the command line. Unknown keys and wrong types are refused with the file, the
key, what was expected and a did-you-mean. Secrets (user token, bot API key) come only from the
environment or a flag, are held in :class:`Secret` so they never print, and are refused in the
file so they never end up in version control.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
import tomllib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ._crontab import parse_crontab
from ._dsn import parse_dsn
from ._errors import ConfigError

log = logging.getLogger("botstats.config")

DEFAULT_CONFIG_FILE = "config.toml"
AUTO = "auto"  # [service].concurrency adapted as the run goes
AUTO_OR_INT = int | str
ENV_PREFIX = "BOTSTATS_"


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
    # Requests in flight during a harvest: "auto" adapts it (pipeline.concurrency: grows while
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
    custom_name: str = "name"
    custom_value: str = "value"
    user_id: str = "id"
    server_id: str = "id"
    webhook_id: str = "id"
    # A stat stamped further than this after botstats received it goes to `rejects`: a clock
    # ahead of time would otherwise become the bot's newest record and a future day in trends.
    max_future_skew: str = "1d"


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
    anomaly_window: int = 28  # days before a day that tell its usual level and spread
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


@dataclass(frozen=True)
class S3Keys:
    """Object storage credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN."""

    key_id: Secret = field(default_factory=lambda: Secret(""))
    secret: Secret = field(default_factory=lambda: Secret(""))
    session_token: Secret = field(default_factory=lambda: Secret(""))

    def values(self) -> list[str]:
        return [self.key_id.get(), self.secret.get(), self.session_token.get()]


S3_ENV = {"key_id": "AWS_ACCESS_KEY_ID", "secret": "AWS_SECRET_ACCESS_KEY",
          "session_token": "AWS_SESSION_TOKEN"}


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
SECRET_ENV = {"user_token": "BOTSTATS_USER_TOKEN", "bot_key": "BOTSTATS_BOT_KEY"}
# Short environment names for the settings operators change most; every setting also has
# BOTSTATS_<SECTION>_<KEY>.
ENV_ALIASES = {
    "BOTSTATS_BASE_URL": ("service", "base_url"),
    "BOTSTATS_DB": ("store", "db"),
    "BOTSTATS_EXPORT_DIR": ("exports", "dir"),
    "BOTSTATS_LOG_FORMAT": ("log", "format"),
    "BOTSTATS_LOG_LEVEL": ("log", "level"),
    "BOTSTATS_LOG_FILE": ("log", "file"),
}
# How a service may page a list: the families botstats knows (docs/probe.md).
PAGING_FAMILIES = ("offset", "page", "link", "next", "cursor")
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("log", "format"): ("text", "json"),
    ("log", "level"): ("debug", "info", "warning", "error"),
    ("exports", "compression"): ("zstd", "snappy", "lz4", "gzip", "uncompressed"),
    ("store", "s3_url_style"): ("vhost", "path"),
    ("service", "bots_paging"): PAGING_FAMILIES,
    ("service", "stats_paging"): PAGING_FAMILIES,
    ("service", "user_lists_paging"): PAGING_FAMILIES,
}


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """'90m', '2h', '1d', '45s' (or plain seconds) as a duration; ValueError says what is wrong."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not match:
        raise ValueError(f"{text!r} is not a duration: use a number with s, m, h or d, like 90m or 2h")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2] or "s"])


def _suggest(word: str, options: typing.Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" Did you mean '{match[0]}'?" if match else ""


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        tp, str(tp)
    )


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check a TOML value against a field type; ints are accepted where floats are expected."""
    if tp == AUTO_OR_INT:
        if value == AUTO or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise ConfigError(f'{where}: expected an integer or "auto", got {value!r}.')
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (str, bool) and type(value) is tp:
        return value
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__}).")


def _parse_env(raw: str, tp: Any, where: str) -> Any:
    """Environment values are strings; convert them to the field's type."""
    try:
        if tp == AUTO_OR_INT:
            return AUTO if raw.strip().lower() == AUTO else int(raw)
        if tp is bool:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        return tp(raw)
    except ValueError:
        wanted = 'an integer or "auto"' if tp == AUTO_OR_INT else _type_name(tp)
        raise ConfigError(f"{where}: expected {wanted}, got {raw!r}.") from None


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def _apply_section(section_obj: Any, values: Mapping[str, Any], where: str) -> Any:
    types_ = _field_types(type(section_obj))
    changes = {}
    for key, value in values.items():
        if key not in types_:
            raise ConfigError(
                f"{where}: unknown key '{key}'.{_suggest(key, types_)} "
                f"Allowed keys: {', '.join(types_)}."
            )
        changes[key] = _coerce(value, types_[key], f"{where}.{key}")
    return replace(section_obj, **changes)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(
            f"Config file {path} does not exist. Pass an existing file with --config, "
            f"or run without --config to use {DEFAULT_CONFIG_FILE} or the defaults."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}. Fix the file and run again.") from exc
    except UnicodeDecodeError as exc:  # TOML is UTF-8 by definition
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); TOML files "
                          f"are UTF-8. Save it as UTF-8 and run again.") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}.") from exc


def _from_mapping(settings: Settings, data: Mapping[str, Any], path: Path) -> Settings:
    changes: dict[str, Any] = {}
    for name, value in data.items():
        if name in SECRET_ENV:
            raise ConfigError(
                f"{path}: '{name}' is a secret and is not read from the config file, so it "
                f"never lands in version control. Set {SECRET_ENV[name]} in the environment "
                f"or pass --{name.replace('_', '-')} instead."
            )
        if name not in SECTIONS:
            raise ConfigError(
                f"{path}: unknown section [{name}].{_suggest(name, SECTIONS)} "
                f"Allowed sections: {', '.join(SECTIONS)}."
            )
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [{name}] must be a table of settings, got {value!r}.")
        changes[name] = _apply_section(getattr(settings, name), value, f"{path}: [{name}]")
    return replace(settings, **changes)


def _from_env(settings: Settings, env: Mapping[str, str]) -> Settings:
    known: dict[str, tuple[str, str]] = dict(ENV_ALIASES)
    for section in SECTIONS:
        for key in _field_types(type(getattr(settings, section))):
            known[f"{ENV_PREFIX}{section.upper()}_{key.upper()}"] = (section, key)
    ignored = {"BOTSTATS_CONFIG", *SECRET_ENV.values()}
    for name in env:
        if name.startswith(ENV_PREFIX) and name not in known and name not in ignored:
            # A warning, not a refusal: a user's own scripts may set BOTSTATS_BIN and the like.
            log.warning("environment: %s is not a botstats setting; ignored.%s", name,
                        _suggest(name, [*known, *ignored]))
    for name, (section, key) in known.items():
        if name in env:
            sec = getattr(settings, section)
            tp = _field_types(type(sec))[key]
            value = _parse_env(env[name], tp, f"environment: {name}")
            settings = replace(settings, **{section: replace(sec, **{key: value})},
                               origins={**settings.origins, f"{section}.{key}": f"environment: {name}"})
    secrets = {k: Secret(env[v]) for k, v in SECRET_ENV.items() if env.get(v)}
    s3 = S3Keys(**{k: Secret(env.get(v, "")) for k, v in S3_ENV.items()})
    return replace(_with_secrets(settings, secrets), s3_keys=s3)


def _with_secrets(settings: Settings, secrets: Mapping[str, Secret]) -> Settings:
    """The settings with the secrets named in ``secrets`` (user_token, bot_key) replaced."""
    return replace(settings, user_token=secrets.get("user_token", settings.user_token),
                   bot_key=secrets.get("bot_key", settings.bot_key))


def _overrides(settings: Settings, overrides: Mapping[str, Any]) -> Settings:
    """Flags typed on the command line: keys are 'section.key' or a secret name."""
    for dotted, value in overrides.items():
        if value is None:
            continue
        if dotted in SECRET_ENV:
            settings = _with_secrets(settings, {dotted: Secret(str(value))})
            continue
        section, key = dotted.split(".", 1)
        sec = getattr(settings, section)
        tp = _field_types(type(sec))[key]
        flag = f"flag --{key.replace('_', '-')}"
        typed = _coerce(value, tp, flag)
        settings = replace(settings, **{section: replace(sec, **{key: typed})},
                           origins={**settings.origins, dotted: flag})
    return settings


def validate(settings: Settings) -> Settings:
    """Check values that types alone do not catch. Returns the settings unchanged."""
    file = settings.source or "settings"

    def where(dotted: str) -> str:
        return settings.origins.get(dotted, file)

    s = settings.service
    url = urlsplit(s.base_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ConfigError(
            f"{where('service.base_url')}: [service].base_url must be an http(s) URL like "
            f"http://127.0.0.1:8000, got {s.base_url!r}."
        )
    positive = {
        "service.timeout": s.timeout,
        "service.connect_timeout": s.connect_timeout,
        "service.max_connections": s.max_connections,
        "service.concurrency": s.concurrency if isinstance(s.concurrency, int) else 1,  # or "auto"
        "service.page_size": s.page_size,
        "retry.attempts": settings.retry.attempts,
        "store.batch_rows": settings.store.batch_rows,
        "trends.anomaly_window": settings.trends.anomaly_window,
        "trends.anomaly_outage_days": settings.trends.anomaly_outage_days,
        "trends.movers_top": settings.trends.movers_top,
        "report.days": settings.report.days,
    }
    non_negative = {
        "service.max_keepalive": s.max_keepalive,
        "service.stats_page_size": s.stats_page_size,
        "service.user_lists_page_size": s.user_lists_page_size,
        "service.first_page": s.first_page,
        "service.request_budget": s.request_budget,
        "retry.backoff_base": settings.retry.backoff_base,
        "retry.backoff_max": settings.retry.backoff_max,
        "retry.max_retry_after": settings.retry.max_retry_after,
        "store.open_timeout": settings.store.open_timeout,
        "store.threads": settings.store.threads,
        "run.lock_timeout": settings.run.lock_timeout,
        "trends.movers_min_guilds": settings.trends.movers_min_guilds,
        "trends.anomaly_threshold": settings.trends.anomaly_threshold,
        "trends.anomaly_min_days": settings.trends.anomaly_min_days,
        "trends.anomaly_min_pct": settings.trends.anomaly_min_pct,
        "trends.anomaly_min_guilds": settings.trends.anomaly_min_guilds,
        "trends.anomaly_min_users": settings.trends.anomaly_min_users,
        "schedule.misfire_grace_time": settings.schedule.misfire_grace_time,
        "schedule.jitter": settings.schedule.jitter,
    }
    for dotted, value in positive.items():
        if value <= 0:
            sec, key = dotted.split(".")
            raise ConfigError(f"{where(dotted)}: [{sec}].{key} must be greater than 0, got {value}.")
    for dotted, value in non_negative.items():
        if value < 0:
            sec, key = dotted.split(".")
            raise ConfigError(f"{where(dotted)}: [{sec}].{key} must be 0 or more, got {value}.")
    if not 0 <= settings.harvest.max_removed_share <= 1:
        raise ConfigError(
            f"{where('harvest.max_removed_share')}: [harvest].max_removed_share is a share from 0 "
            f"to 1 (0.5 = half the live bots), got {settings.harvest.max_removed_share}."
        )
    try:
        parse_duration(settings.fields.max_future_skew)
    except ValueError as exc:
        raise ConfigError(f"{where('fields.max_future_skew')}: [fields].max_future_skew: {exc}."
                          ) from None
    if not 0 <= settings.trends.health_threshold <= 100:
        raise ConfigError(
            f"{where('trends.health_threshold')}: [trends].health_threshold is a percentage from 0 to 100, "
            f"got {settings.trends.health_threshold}."
        )
    for (sec, key), allowed in CHOICES.items():
        value = getattr(getattr(settings, sec), key)
        if value not in allowed:
            raise ConfigError(
                f"{where(f'{sec}.{key}')}: [{sec}].{key} must be one of {', '.join(allowed)}, "
                f"got {value!r}.{_suggest(str(value), allowed)}"
            )
    for key in ("bot_id", "stat_time", "custom_name", "custom_value"):
        if not getattr(settings.fields, key):
            raise ConfigError(f"{where(f'fields.{key}')}: [fields].{key} must name a record field, "
                              f"got ''.")
    if settings.report.compare and not 2 <= len(settings.report.bot_list) <= 4:
        raise ConfigError(f"{where('report.compare')}: [report].compare needs 2 to 4 bot ids in "
                          f"[report].bots, got {len(settings.report.bot_list)}.")
    if not settings.store.db:
        raise ConfigError(f"{where('store.db')}: [store].db must be a file path, got ''.")
    _validate_catalog(settings, where)
    _validate_schedule(settings, where)
    return settings


def _validate_catalog(settings: Settings, where: Callable[[str], str]) -> None:
    store = settings.store
    if store.catalog:
        try:
            parse_dsn(store.catalog)
        except ValueError as exc:
            raise ConfigError(
                f"{where('store.catalog')}: [store].catalog must be a PostgreSQL connection "
                f"string like postgresql://botstats@db.example:5432/botstats: {exc}.") from None
        if not store.data_path:
            raise ConfigError(
                f"{where('store.catalog')}: a PostgreSQL catalog needs [store].data_path: the "
                f"folder of the data files that every worker mounts at the same path, or an "
                f"s3://bucket/prefix/ URL.")
    if store.data_path.startswith("s3://") and len(store.data_path) <= len("s3://"):
        raise ConfigError(f"{where('store.data_path')}: [store].data_path s3:// needs a bucket, "
                          f"like s3://my-bucket/botstats/.")
    if "://" in store.data_path and not store.data_path.startswith("s3://"):
        raise ConfigError(
            f"{where('store.data_path')}: [store].data_path must be a folder or an s3:// URL, "
            f"got {store.data_path!r}.")
    endpoint = urlsplit(store.s3_endpoint)
    if store.s3_endpoint and (endpoint.scheme not in ("http", "https") or not endpoint.netloc):
        raise ConfigError(
            f"{where('store.s3_endpoint')}: [store].s3_endpoint must be an http(s) URL like "
            f"http://minio:9000, got {store.s3_endpoint!r}.")


def _take_catalog_password(settings: Settings) -> Settings:
    """A password in [store].catalog is a secret: refused in the config file (it would end up
    in version control), else moved out of the connection string into ``catalog_password``."""
    if not settings.store.catalog:
        return settings
    try:
        dsn = parse_dsn(settings.store.catalog)
    except ValueError:
        return settings  # validate() says what is wrong with it
    if not dsn.password:
        return settings
    origin = settings.origins.get("store.catalog")
    if origin is None:
        raise ConfigError(
            f"{settings.source or 'settings'}: [store].catalog carries a password, a secret, "
            f"which is not read from the config file so it never lands in version control. Put "
            f"it in PGPASSWORD or ~/.pgpass (libpq reads both), or set the whole string in "
            f"BOTSTATS_STORE_CATALOG.")
    return replace(settings, store=replace(settings.store, catalog=dsn.text),
                   catalog_password=Secret(dsn.password))


def _validate_schedule(settings: Settings, where: Callable[[str], str]) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(settings.schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{where('schedule.timezone')}: [schedule].timezone {settings.schedule.timezone!r} is not a known "
            f"IANA zone; use a name like 'UTC' or 'Europe/Berlin'."
        ) from None
    for key in ("harvest", "trends"):
        expr = getattr(settings.schedule, key)
        if expr and len(expr.split()) != 5 and not expr.startswith("@"):
            raise ConfigError(
                f"{where(f'schedule.{key}')}: [schedule].{key} must be a 5-field crontab expression like "
                f"'0 * * * *' (or '' to disable), got {expr!r}."
            )
        if expr:
            parse_crontab(expr, where=f"{where(f'schedule.{key}')}: [schedule].{key}")


def load_settings(
    config: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: defaults < config file < BOTSTATS_* environment < overrides.

    ``config`` None means ``$BOTSTATS_CONFIG`` if set, else ``./config.toml`` if it exists,
    else defaults only. An explicitly named file must exist.
    """
    env = os.environ if env is None else env
    settings = Settings()
    explicit = config if config is not None else env.get("BOTSTATS_CONFIG")
    path = Path(explicit) if explicit else Path(DEFAULT_CONFIG_FILE)
    if explicit or path.exists():
        settings = replace(_from_mapping(settings, _read_toml(path), path), source=str(path))
    settings = _from_env(settings, env)
    settings = _overrides(settings, overrides or {})
    return validate(_take_catalog_password(settings))


def as_dict(settings: Settings) -> dict[str, Any]:
    """The settings as plain data with secrets shown only as set/unset (for `botstats config`)."""
    out: dict[str, Any] = {name: dataclasses.asdict(getattr(settings, name)) for name in SECTIONS}
    out["secrets"] = {k: ("set" if getattr(settings, k) else "unset")
                      for k in (*SECRET_ENV, "catalog_password")}
    out["secrets"].update({f"s3_{k}": ("set" if getattr(settings.s3_keys, k) else "unset")
                           for k in S3_ENV})
    out["source"] = settings.source or "(defaults)"
    return out
