"""Both sides of "the archive equals the service" for a service of any shape (tests of issue 22:
test_truth.py, test_profiles.py): what the embedded service serves, read with its own config
(key names, id and time formats, custom shape), and what the archive holds, row by row."""

from __future__ import annotations

import email.utils
import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from conftest import query

from pipeline.core import Settings
from pipeline.service import RunningService

SMALL: dict[str, Any] = {"bots": 24, "users": 4, "history_days": 3, "stats_per_day": 2}
PROFILES: dict[str, dict[str, Any]] = {
    # Ids of every kind as JSON integers (64-bit) under other keys, integer stat ids, epoch
    # seconds, custom fields {key, val}, reads that need the token, paged user lists, RFC 7807
    # errors and 403 for refused credentials.
    "integers": {
        "id_type": "integer", "stat_ids": "integer", "time_format": "epoch-s",
        "bot_reads_need_token": True, "user_lists_page_size": 2, "error_style": "problem",
        "auth_status": 403,
        "field_names": {"bot_id": "botId", "bot_name": "displayName", "stat_id": "statId",
                        "stat_time": "createdAt", "custom_name": "key", "custom_value": "val",
                        "user_id": "userId", "server_id": "guildId", "webhook_id": "hookId"}},
    # 24-hex stat ids under _id, epoch milliseconds, custom fields as one object, /stats paged
    # oldest first, plain-text errors and 410 for an unknown id.
    "mongo": {
        "stat_ids": "hex", "time_format": "epoch-ms", "custom_shape": "object",
        "stats_page_size": 4, "error_style": "text", "not_found_status": 410,
        "field_names": {"bot_id": "_id", "stat_id": "_id", "stat_time": "ts", "user_id": "uid",
                        "server_id": "serverId", "webhook_id": "webhookId"}},
    # No stat id at all (records told apart by time), custom fields {label, data}, a page cap
    # of 7, empty error bodies and 400 for an unknown id.
    "bare": {
        "stat_ids": "none", "max_page_size": 7, "error_style": "empty", "not_found_status": 400,
        "field_names": {"bot_id": "client_id", "custom_name": "label", "custom_value": "data",
                        "server_id": "uuid", "webhook_id": "hook_id"}},
}


_PER_SECOND = {"epoch-s": 1, "epoch-ms": 10**3, "epoch-us": 10**6, "epoch-ns": 10**9}


def _when(value: Any, time_format: str) -> datetime:
    if isinstance(value, int):
        micros = value * 10**6 // _PER_SECOND[time_format]
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    if time_format == "http-date":
        return email.utils.parsedate_to_datetime(value).astimezone(UTC)
    return datetime.fromisoformat(value).astimezone(UTC)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def served_rows(svc: RunningService) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(stat rows, custom rows) the archive must hold for every valid record the service serves
    to its listed bots, in the shapes of :func:`archived_rows`, sorted."""
    cfg = svc.config
    stats, custom = [], []
    for bot_id in svc.directory.bot_ids():
        for r in svc.directory.valid_stats(bot_id):
            when = _when(r[cfg.field_name("stat_time")], cfg.time_format)
            if cfg.stat_ids == "none":
                key = hashlib.sha1(f"{bot_id}\x1f{when.isoformat()}".encode()).hexdigest()
            else:
                key = str(r[cfg.field_name("stat_id")])
            stats.append((bot_id, key, when, r["users"], r["guilds"], r["shards"],
                          _num(r["memory_load"]), _num(r["cpu_load"]), r["commands_executed"]))
            items = r.get("custom") or []
            pairs = items.items() if isinstance(items, dict) else [
                (i[cfg.field_name("custom_name")], i.get(cfg.field_name("custom_value")))
                for i in items]
            custom += [(bot_id, key, when, name, _text(value), _num(value))
                       for name, value in pairs]
    return sorted(stats), sorted(custom)


def archived_rows(settings: Settings) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    stats = query(settings, "SELECT bot_id, stat_id, recorded_at, users, guilds, shards, "
                            "memory_load, cpu_load, commands_executed FROM bot_stats")
    custom = query(settings, "SELECT bot_id, stat_id, recorded_at, name, value_text, value_num "
                             "FROM bot_stat_custom")
    return sorted(stats), sorted(custom)


def user_with_lists(svc: RunningService, least: int = 2) -> tuple[str, str]:
    """(user id, token) of a user with at least ``least`` servers and webhooks."""
    directory = svc.directory
    for index, (user_id, token) in enumerate(directory.user_tokens().items()):
        if min(len(directory.user_servers(index)), len(directory.user_webhooks(index))) >= least:
            return user_id, token
    raise AssertionError(f"no user has {least} servers and webhooks: make the directory larger")


def served_snapshot(svc: RunningService, user_id: str) -> dict[str, list[tuple[str, Any]]]:
    """The user's snapshot as the service serves it: per table, (id as text, record) sorted."""
    cfg, directory = svc.config, svc.directory
    index = directory.users().index(user_id)
    user = directory.user_record(index)
    return {
        "users": [(str(user[cfg.field_name("user_id")]), user)],
        "user_bots": _by_id(directory.user_bots(index), cfg.field_name("bot_id")),
        "user_servers": _by_id(directory.user_servers(index), cfg.field_name("server_id")),
        "user_webhooks": _by_id(directory.user_webhooks(index), cfg.field_name("webhook_id")),
    }


def _by_id(records: list[dict[str, Any]], key: str) -> list[tuple[str, Any]]:
    return sorted(((str(r[key]), r) for r in records), key=lambda pair: pair[0])


_SNAPSHOT_KEYS = {"users": "user_id", "user_bots": "bot_id", "user_servers": "server_id",
                  "user_webhooks": "webhook_id"}


def archived_snapshot(settings: Settings, run_id: str) -> dict[str, list[tuple[str, Any]]]:
    """The snapshot run ``run_id`` archived, in the shape of :func:`served_snapshot`."""
    return {table: sorted(((key, json.loads(raw)) for key, raw in query(
        settings, f"SELECT {column}, raw::VARCHAR FROM {table} WHERE run_id = ?", run_id)),
        key=lambda pair: pair[0]) for table, column in _SNAPSHOT_KEYS.items()}


def last_run(settings: Settings) -> str:
    return query(settings, "SELECT run_id FROM harvest_runs ORDER BY started_at DESC LIMIT 1")[0][0]


def service_shape(svc: RunningService, token: str) -> dict[str, Any]:
    """The [service] settings and the token that fit ``svc`` (what `botstats probe --write`
    decides of them), as harvest_settings_for overrides: a test of [fields] advice starts from
    these, so only the fields are wrong."""
    cfg = svc.config
    return {"user_token": token, "service.token_on_bot_reads": cfg.bot_reads_need_token,
            "service.page_size": min(cfg.max_page_size, 100),
            "service.stats_page_size": cfg.stats_page_size,
            "service.user_lists_page_size": cfg.user_lists_page_size}
