"""The archive's reads and writes: what a harvest commits (one transaction per batch, across
every table), its run bookkeeping, and the queries `botstats sql` and notebooks run.

The harvester (``pipeline.harvester``) fetches and validates; everything it writes goes through
:func:`write_batch`, so a batch's records, the bots it lists, ``bot_latest_stat``, its rejects and
the run's counters land together or not at all. Keys are kept unique here: the archive is a
DuckLake, which has no primary keys (see docs/design.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import duckdb
import polars as pl

from ..core import StoreError, same_record
from ._commit import RunCounts, committing
from ._sql import run_with_frames

log = logging.getLogger("botstats.harvest")


@dataclass(frozen=True, slots=True)
class BotRow:
    bot_id: str
    name: str | None
    raw: str


STAT_SCHEMA = {
    "stat_id": pl.String, "bot_id": pl.String, "recorded_at": pl.Datetime("us", "UTC"),
    "users": pl.Int64, "guilds": pl.Int64, "shards": pl.Int64, "memory_load": pl.Float64,
    "cpu_load": pl.Float64, "commands_executed": pl.Int64, "raw": pl.String,
}
CUSTOM_SCHEMA = {
    "stat_id": pl.String, "bot_id": pl.String, "recorded_at": pl.Datetime("us", "UTC"),
    "name": pl.String, "value_text": pl.String, "value_num": pl.Float64,
}


ERROR_SCHEMA = {"endpoint": pl.String, "bot_id": pl.String, "error": pl.String}


class Lookup(Enum):
    """Which of a batch's records are looked up in ``bot_stats`` before they are written: none
    (nothing was archived when the run began, and each bot is read once: every key is new),
    those the reader could not tell new (flagged ``_check``), or every one (another worker
    committed since the batch was read: what the reader knew to be new may not be now)."""

    NONE = "none"
    FLAGGED = "flagged"
    EVERY = "every"


@dataclass
class Frames:
    stats: pl.DataFrame
    custom: pl.DataFrame
    bots: list[BotRow]
    rejects: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    users: list[dict[str, Any]]
    snapshots: dict[str, list[dict[str, Any]]]
    distinct: bool = False  # no stat key twice (custom field names are unique per record)
    listed: dict[str, int] = field(default_factory=dict)
    # Sightings (bot_id, last_seen_at) of bots listed by this and earlier batches of the run,
    # written with this one (see _write_bots).
    seen: pl.DataFrame | None = None

    @property
    def empty(self) -> bool:
        return not (self.stats.height or self.bots or self.rejects or self.errors or self.users
                    or self.snapshots or self.listed or (self.seen is not None
                                                         and self.seen.height))


def write_batch(con: duckdb.DuckDBPyConnection, f: Frames, report: RunCounts,
                new_only: bool = False) -> None:
    """One transaction: the batch's rows and the run's counters land together or not at all.
    ``new_only``: nothing was archived when the run began (see ``_write_records``)."""
    try:
        committing(con, report, lambda c, retried: _write(c, f, report, new_only, retried))
    except duckdb.Error as exc:
        raise StoreError(
            f"writing a batch of run {report.run_id} failed: {exc}. The archive keeps every "
            f"batch committed before this one and none of this one: fix what the error says "
            f"(a full disk, say) and run again, and the next run completes the work."
        ) from exc


def _write(con: duckdb.DuckDBPyConnection, f: Frames, report: RunCounts, new_only: bool,
           retried: bool) -> None:
    """The batch inside its transaction. ``retried``: another worker committed since the batch
    was read, so every record is looked up (what the reader knew to be new may not be now)."""
    now = datetime.now(UTC)
    run_id = report.run_id
    if f.bots:
        report.bots_new += _write_bots(con, f.bots, run_id, now)
    if f.seen is not None and f.seen.height:
        _write_seen(con, f.seen, run_id)
    if f.stats.height or f.listed:
        lookup = Lookup.EVERY if retried else Lookup.NONE if new_only else Lookup.FLAGGED
        added, updated = _write_stats(con, f, run_id, now, lookup)
        report.stats_added += added
        report.stats_updated += updated
    if f.rejects:
        report.rejects += _write_rejects(con, f.rejects, run_id, now)
    if f.errors:
        run_with_frames(con, "INSERT INTO harvest_errors BY NAME SELECT * FROM errors_in",
                        errors_in=pl.DataFrame(f.errors, schema=ERROR_SCHEMA).with_columns(
                            run_id=pl.lit(run_id), seen_at=pl.lit(now)))
    if f.users:
        _insert_snapshot(con, "users", f.users, run_id)
    for table, rows in f.snapshots.items():
        _insert_snapshot(con, table, rows, run_id)


def _insert_snapshot(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]],
                     run_id: str) -> None:
    """A user snapshot's rows, each key once per run (a snapshot is taken once per run)."""
    keys = [c for c in rows[0] if c not in ("raw", "fetched_at", "is_me")]
    run_with_frames(
        con, f"INSERT INTO {table} BY NAME SELECT * FROM snap_in ANTI JOIN "
        f"(SELECT * FROM {table} WHERE run_id = ?) USING ({', '.join(keys)})", [run_id],
        snap_in=pl.DataFrame(rows).unique(subset=keys, keep="last", maintain_order=True))


def _write_bots(con: duckdb.DuckDBPyConnection, rows: list[BotRow], run_id: str,
                now: datetime) -> int:
    """The listed bots' records (``bot_listing``) where a bot is new, changed, or back after a
    removal, with those bots' sightings (``bot_last_seen``, one narrow row a bot); how many are
    new. ``bots`` is the view that joins the two (migration 009). The other bots' sightings
    come later in :attr:`Frames.seen`: the run writes them together, in one file and one
    commit rather than one a batch (docs/design.md, "Writes proportional to what is new"),
    and a bot that is new or back is in ``bots`` as soon as its batch is."""
    # Frames are named apart from tables, so no SQL reads a frame where it means a table.
    bots_in = _bots_frame(rows)
    changed = _changed(con, bots_in)
    if changed.height:
        run_with_frames(
            con,
            "MERGE INTO bot_listing AS t USING listing_in AS n ON t.bot_id = n.bot_id "
            "WHEN MATCHED THEN UPDATE SET name = n.name, raw = n.raw, removed_at = NULL, "
            "run_id = n.run_id WHEN NOT MATCHED THEN INSERT BY NAME",
            listing_in=bots_in.join(changed.select("bot_id"), on="bot_id", how="semi")
            .with_columns(first_seen_at=pl.lit(now), run_id=pl.lit(run_id)))
        _write_seen(con, changed.select("bot_id").with_columns(last_seen_at=pl.lit(now)), run_id)
    return int(changed["new"].sum())


def listing_changed(con: duckdb.DuckDBPyConnection, rows: list[BotRow]) -> set[str]:
    """Which of the listed bots ``rows`` a write would record in ``bot_listing``: new, changed,
    or back after a removal (a read: the harvester keeps only those bots' rows to write)."""
    return set(_changed(con, _bots_frame(rows))["bot_id"])


def _bots_frame(rows: list[BotRow]) -> pl.DataFrame:
    """Listed bots as a frame (bot_id, name, raw), each bot's last row."""
    return pl.DataFrame(
        {"bot_id": [r.bot_id for r in rows], "name": [r.name for r in rows],
         "raw": [r.raw for r in rows]},
        schema={"bot_id": pl.String, "name": pl.String, "raw": pl.String},
    ).unique(subset="bot_id", keep="last")


def _changed(con: duckdb.DuckDBPyConnection, bots_in: pl.DataFrame) -> pl.DataFrame:
    """Of the listed bots ``bots_in`` (bot_id, name, raw), those ``bot_listing`` does not hold
    as they are (bot_id, and whether it is new)."""
    return pl.DataFrame(run_with_frames(
        con, "SELECT n.bot_id, o.bot_id IS NULL FROM bots_in AS n LEFT JOIN bot_listing AS o "
        "USING (bot_id) WHERE o.bot_id IS NULL OR o.removed_at IS NOT NULL "
        "OR o.name IS DISTINCT FROM n.name OR o.raw::VARCHAR IS DISTINCT FROM n.raw",
        bots_in=bots_in), schema={"bot_id": pl.String, "new": pl.Boolean}, orient="row")


def _write_seen(con: duckdb.DuckDBPyConnection, seen: pl.DataFrame, run_id: str) -> None:
    """Each bot's newest sighting (``seen``: bot_id, last_seen_at) by run ``run_id``; a row
    this run wrote already (with its bot's record) is not written again."""
    run_with_frames(
        con,
        "MERGE INTO bot_last_seen AS t USING seen_in AS n ON t.bot_id = n.bot_id "
        "WHEN MATCHED AND t.run_id IS DISTINCT FROM n.run_id THEN UPDATE SET "
        "last_seen_at = n.last_seen_at, run_id = n.run_id WHEN NOT MATCHED THEN INSERT BY NAME",
        seen_in=seen.unique(subset="bot_id", keep="last").with_columns(run_id=pl.lit(run_id)))


def _write_stats(con: duckdb.DuckDBPyConnection, f: Frames, run_id: str, now: datetime,
                 lookup: Lookup) -> tuple[int, int]:
    """The batch's records (new ones added, changed ones rewritten, custom fields with them)
    and each bot's newest archived record; (added, changed). ``lookup``: which records are
    looked up in the archive rather than taken as new on the reader's word."""
    batch_in = _stats_in(f.stats, run_id, now, f.distinct)
    if lookup is Lookup.EVERY:
        batch_in = batch_in.with_columns(_check=pl.lit(True))
    added, changed = _write_records(con, f, batch_in, run_id, lookup is Lookup.NONE)
    _update_latest(con, batch_in, changed, f.listed)
    return added, changed.height


def _update_latest(con: duckdb.DuckDBPyConnection, batch_in: pl.DataFrame,
                   changed: pl.DataFrame, listed: dict[str, int]) -> None:
    """``bot_latest_stat`` after the batch: a bot's newest record in the batch replaces the one
    kept unless that one is newer (the service may have dropped records the archive keeps), and
    the length of each bot's /stats list as read."""
    # Of records at one time (a bot posting one per shard), the last as the list gives them,
    # which is the one GET /stat answers with at a service listing oldest first.
    newest_in = batch_in.group_by("bot_id").agg(
        pl.col("stat_id").sort_by("recorded_at", maintain_order=True).last(),
        pl.col("recorded_at").max())
    lengths = pl.DataFrame({"bot_id": list(listed), "stats_listed": list(listed.values())},
                           schema={"bot_id": pl.String, "stats_listed": pl.Int64})
    latest_in = newest_in.join(lengths, on="bot_id", how="full", coalesce=True)
    run_with_frames(
        con, "MERGE INTO bot_latest_stat AS t USING latest_in AS n ON t.bot_id = n.bot_id "
        "WHEN MATCHED THEN UPDATE SET "
        "stat_id = CASE WHEN n.recorded_at >= t.recorded_at THEN n.stat_id ELSE t.stat_id END, "
        "recorded_at = greatest(t.recorded_at, n.recorded_at), "
        "stats_listed = coalesce(n.stats_listed, t.stats_listed) "
        "WHEN NOT MATCHED AND n.stat_id IS NOT NULL THEN INSERT BY NAME",
        latest_in=latest_in)
    if changed.height:
        # A rewritten record may have moved back in time: its bots' newest is looked up again
        # (a scan of bot_stats, only when the service changed records).
        run_with_frames(
            con, "UPDATE bot_latest_stat AS t SET stat_id = n.stat_id, recorded_at = n.recorded_at "
            "FROM (SELECT bot_id, arg_max(stat_id, recorded_at) AS stat_id, max(recorded_at) AS "
            "recorded_at FROM bot_stats SEMI JOIN changed_in USING (bot_id) GROUP BY bot_id) AS n "
            "WHERE t.bot_id = n.bot_id",
            changed_in=changed.select("bot_id").unique())


def _write_records(con: duckdb.DuckDBPyConnection, f: Frames, batch_in: pl.DataFrame,
                   run_id: str, new_only: bool) -> tuple[int, pl.DataFrame]:
    """Insert the batch's new records; rewrite those the service changed; (added, changed).

    Rows the reader knows to be new (newer than their bot's newest archived record, or of a bot
    with nothing archived) are inserted as they are; only the others are looked up in
    ``bot_stats``, so an hourly run never scans the archive."""
    if new_only:
        # Nothing was archived when the run started and each bot is read once: every key is new.
        checked = batch_in.clear()
    else:
        checked = batch_in.filter("_check")
    fresh = batch_in.filter(~pl.col("_check")) if checked.height else batch_in
    changed = _keys([])
    if checked.height:
        archived = _archived(con, checked)
        fresh = pl.concat([fresh, checked.join(archived.select("bot_id", "stat_id"),
                                               on=["bot_id", "stat_id"], how="anti",
                                               maintain_order="left")])
        changed = _update_changed(con, checked, archived)
    fresh = fresh.drop("_check")
    if fresh.height:
        run_with_frames(con, "INSERT INTO bot_stats BY NAME SELECT * FROM batch_in", batch_in=fresh)
    if f.custom.height:
        # With every record new, every custom field is written; else those of the records
        # added or rewritten.
        written = (None if fresh.height == batch_in.height
                   else pl.concat([fresh.select("bot_id", "stat_id"), changed]))
        _write_custom(con, _custom_in(f.custom, run_id, f.distinct, written), changed)
    return fresh.height, changed


def _archived(con: duckdb.DuckDBPyConnection, checked: pl.DataFrame) -> pl.DataFrame:
    """The archived text of those ``checked`` records that are in ``bot_stats`` (keys, raw)."""
    rows = run_with_frames(
        con, "SELECT t.bot_id, t.stat_id, t.raw::VARCHAR FROM bot_stats AS t SEMI JOIN "
        "(SELECT bot_id, stat_id FROM batch_in) AS b USING (bot_id, stat_id)",
        batch_in=checked.select("bot_id", "stat_id"))
    return pl.DataFrame(rows, schema={"bot_id": pl.String, "stat_id": pl.String,
                                      "old_raw": pl.String}, orient="row")


def _keys(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"bot_id": pl.String, "stat_id": pl.String}, orient="row")


def _write_custom(con: duckdb.DuckDBPyConnection, custom_in: pl.DataFrame,
                  changed: pl.DataFrame) -> None:
    """Custom fields belong to their stat record: they are written with a new record and
    replaced with a changed one, never compared on their own (the stat's key already makes
    them exactly-once)."""
    if changed.height:
        run_with_frames(con, "DELETE FROM bot_stat_custom WHERE (bot_id, stat_id) IN "
                  "(SELECT bot_id, stat_id FROM changed_in)", changed_in=changed)
    if custom_in.height:
        run_with_frames(con, "INSERT INTO bot_stat_custom BY NAME SELECT * FROM custom_in",
                  custom_in=custom_in)


# Duplicate keys inside one batch: keep the last copy the service sent. maintain_order: rows
# land in the order the service sent them (bot by bot, oldest first).
def _stats_in(stats: pl.DataFrame, run_id: str, now: datetime, distinct: bool) -> pl.DataFrame:
    if not distinct:
        stats = stats.unique(subset=["bot_id", "stat_id"], keep="last", maintain_order=True)
    return stats.with_columns(run_id=pl.lit(run_id), archived_at=pl.lit(now))


def _custom_in(custom: pl.DataFrame, run_id: str, distinct: bool,
               written: pl.DataFrame | None = None) -> pl.DataFrame:
    """The custom fields of the records ``written`` (keys; None: of every record)."""
    if not distinct:
        custom = custom.unique(subset=["bot_id", "stat_id", "name"], keep="last",
                               maintain_order=True)
    custom = custom.with_columns(run_id=pl.lit(run_id))
    if written is None:
        return custom
    return custom.join(written, on=["bot_id", "stat_id"], how="semi", maintain_order="left")


def _update_changed(con: duckdb.DuckDBPyConnection, checked: pl.DataFrame,
                    archived: pl.DataFrame) -> pl.DataFrame:
    """Rewrite the records the service changed since we archived them (an unchanged record is
    never rewritten); return their keys.

    A record whose text differs is compared as JSON: the same record spelled another way (keys
    reordered, or archived canonically by an older botstats) is unchanged."""
    spelled_apart = checked.join(archived, on=["bot_id", "stat_id"], how="inner").filter(
        pl.col("old_raw") != pl.col("raw"))
    changed = _keys([(bot_id, stat_id) for bot_id, stat_id, old, new in spelled_apart.select(
        "bot_id", "stat_id", "old_raw", "raw").iter_rows() if not same_record(old, new)])
    if changed.is_empty():
        return changed
    run_with_frames(
        con, "UPDATE bot_stats AS t SET recorded_at = b.recorded_at, users = b.users, "
        "guilds = b.guilds, shards = b.shards, memory_load = b.memory_load, "
        "cpu_load = b.cpu_load, commands_executed = b.commands_executed, raw = b.raw, "
        "run_id = b.run_id, archived_at = b.archived_at "
        "FROM (SELECT * FROM batch_in SEMI JOIN changed_in USING (bot_id, stat_id)) AS b "
        "WHERE t.bot_id = b.bot_id AND t.stat_id = b.stat_id",
        batch_in=checked.drop("_check"), changed_in=changed)
    return changed


def _keyed_rejects(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Rejects with their key: the same bad record seen again next run is the same reject."""
    return pl.DataFrame(rows, schema={"endpoint": pl.String, "bot_id": pl.String,
                                      "reason": pl.String, "raw": pl.String}).with_columns(
        reject_key=pl.concat_str(
            [pl.col("endpoint").str.replace(r"\?.*$", ""), pl.col("bot_id").fill_null(""),
             pl.col("reason"), pl.col("raw").fill_null("")], separator="\x1f"
        ).hash().cast(pl.String))


def held_rejects(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> list[bool]:
    """Which of these rejects (endpoint, bot_id, reason, raw) the archive holds already: the
    same record refused again."""
    keys = _keyed_rejects(rows).select("reject_key")
    held = {key for (key,) in run_with_frames(
        con, "SELECT reject_key FROM keys_in SEMI JOIN rejects USING (reject_key)",
        keys_in=keys)}
    return [key in held for key in keys["reject_key"]]


def _write_rejects(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], run_id: str,
                   now: datetime) -> int:
    rejects_in = (
        _keyed_rejects(rows)
        .with_columns(run_id=pl.lit(run_id), seen_at=pl.lit(now))
        .unique(subset="reject_key", keep="first")
    )
    new = pl.DataFrame(run_with_frames(
        con, "SELECT reject_key FROM rejects_in ANTI JOIN rejects USING (reject_key)",
        rejects_in=rejects_in.select("reject_key")), schema={"reject_key": pl.String},
        orient="row")
    if new.height:
        run_with_frames(con, "INSERT INTO rejects BY NAME SELECT * FROM rejects_in",
                  rejects_in=rejects_in.join(new, on="reject_key", how="semi"))
    return new.height


