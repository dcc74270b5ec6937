"""Checking the settings for what types alone do not catch (ranges, choices, URLs, the catalog,
the schedule), each error blamed on the file, variable or flag that set the value.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urlsplit

from ._crontab import parse_crontab
from ._dsn import parse_dsn
from ._errors import ConfigError
from ._settings import FieldSettings, Settings

# How a service may page a list: the families botstats knows (docs/probe.md, Conventions).
PAGING_FAMILIES = ("offset", "page", "link", "next", "cursor")
# What tells stat records apart (docs/harvest.md#identity).
STAT_KEYS = ("id", "time", "fields", "content")
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("log", "format"): ("text", "json"),
    ("log", "level"): ("debug", "info", "warning", "error"),
    ("exports", "compression"): ("zstd", "snappy", "lz4", "gzip", "uncompressed"),
    ("store", "s3_url_style"): ("vhost", "path"),
    ("service", "bots_paging"): PAGING_FAMILIES,
    ("service", "stats_paging"): PAGING_FAMILIES,
    ("service", "user_lists_paging"): PAGING_FAMILIES,
    ("fields", "stat_key"): STAT_KEYS,
}


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """'90m', '2h', '1d', '45s' (or plain seconds) as a duration; ValueError says what is wrong."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not match:
        raise ValueError(f"{text!r} is not a duration: use a number with s, m, h or d, like 90m or 2h")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2] or "s"])


def suggest(word: str, options: typing.Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" Did you mean '{match[0]}'?" if match else ""


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
                f"got {value!r}.{suggest(str(value), allowed)}"
            )
    for key in ("bot_id", "stat_time", "custom_name", "custom_value"):
        if not getattr(settings.fields, key):
            raise ConfigError(f"{where(f'fields.{key}')}: [fields].{key} must name a record field, "
                              f"got ''.")
    _validate_stat_key(settings.fields, where)
    if settings.report.compare and not 2 <= len(settings.report.bot_list) <= 4:
        raise ConfigError(f"{where('report.compare')}: [report].compare needs 2 to 4 bot ids in "
                          f"[report].bots, got {len(settings.report.bot_list)}.")
    if not settings.store.db:
        raise ConfigError(f"{where('store.db')}: [store].db must be a file path, got ''.")
    _validate_catalog(settings, where)
    _validate_schedule(settings, where)
    _validate_alerts(settings, where)
    return settings


def _validate_stat_key(fields: FieldSettings, where: Callable[[str], str]) -> None:
    names = fields.stat_key_fields
    if fields.stat_key == "fields" and not names:
        raise ConfigError(
            f"{where('fields.stat_key')}: [fields].stat_key = \"fields\" needs the fields that "
            f"tell stat records apart in [fields].stat_key_fields, like [\"{fields.stat_time}\", "
            f"\"shard_id\"] (`botstats probe` finds them), got [].")
    if names and fields.stat_key != "fields":
        raise ConfigError(
            f"{where('fields.stat_key_fields')}: [fields].stat_key_fields is read only with "
            f"[fields].stat_key = \"fields\", which is {fields.stat_key!r}: set stat_key = "
            f"\"fields\" or remove stat_key_fields.")
    if any(not name.strip() for name in names) or len(set(names)) < len(names):
        raise ConfigError(
            f"{where('fields.stat_key_fields')}: [fields].stat_key_fields must name distinct "
            f"record fields, got {list(names)!r}.")


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


def _validate_alerts(settings: Settings, where: Callable[[str], str]) -> None:
    alerts = settings.alerts

    def refuse(key: str, what: str) -> ConfigError:
        return ConfigError(f"{where(f'alerts.{key}')}: [alerts].{key} {what}")

    for key in ("stale_after", "lock_after", "repeat_interval", "give_up_after"):
        text = getattr(alerts, key)
        try:
            if text or key in ("repeat_interval", "give_up_after"):
                parse_duration(text)
        except ValueError as exc:
            raise refuse(key, f"{exc}.") from None
    for key in ("budget", "timeout", "event_days"):
        if getattr(alerts, key) <= 0:
            raise refuse(key, f"must be greater than 0, got {getattr(alerts, key)}.")
    for key in ("min_severity", "forecast_days"):
        if getattr(alerts, key) < 0:
            raise refuse(key, f"must be 0 or more, got {getattr(alerts, key)}.")
    if alerts.events not in ("all", "watched"):
        raise refuse("events", f"must be one of all, watched, got {alerts.events!r}."
                               f"{suggest(alerts.events, ('all', 'watched'))}")
    if alerts.events == "watched" and not alerts.watch_list:
        raise refuse("events", 'is "watched": name the bots in [alerts].watch, like '
                               'watch = "123, 456".')
    try:
        _ = alerts.milestone_list
    except ValueError as exc:
        raise refuse("milestones", f"{exc}.") from None
