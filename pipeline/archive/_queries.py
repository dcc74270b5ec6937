"""What the harvest and the trends ask of the archive: each bot's newest record, whether anything is archived, and what changed since a watermark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

import duckdb
import polars as pl

from ..core import first_line
from ._sql import run_with_frames
from ._store import ALIAS


@dataclass(frozen=True)
class Newest:
    """A bot's newest archived record: its key and time (microseconds since the epoch), and how
    long the bot's /stats list was when last read (None: not known)."""

    stat_id: str
    recorded_at: int
    listed: int | None


def nothing_archived(con: duckdb.DuckDBPyConnection) -> bool:
    """No stat (nor custom field) archived yet: a first harvest, or --full into a fresh file."""
    ((found,),) = con.execute(
        "SELECT EXISTS (SELECT 1 FROM bot_stats) OR EXISTS (SELECT 1 FROM bot_stat_custom)"
    ).fetchall()
    return not found


def newest(con: duckdb.DuckDBPyConnection, bot_ids: list[str]) -> dict[str, Newest]:
    """The newest archived record of each bot in one listing page (one query per page, on
    ``bot_latest_stat``: one row per bot, whatever the size of ``bot_stats``)."""
    rows = run_with_frames(
        con, "SELECT bot_id, stat_id, epoch_us(recorded_at), stats_listed FROM bot_latest_stat "
        "SEMI JOIN page_in USING (bot_id)",
        page_in=pl.DataFrame({"bot_id": bot_ids}, schema={"bot_id": pl.String}))
    return {bot_id: Newest(stat_id, at, listed) for bot_id, stat_id, at, listed in rows}


@dataclass(frozen=True)
class Changes:
    """What the archive gained since a watermark, for incremental trends."""

    first_day: date | None  # earliest UTC day whose records changed; None: nothing did
    watermark: str | None  # pass it to the next call (None: the archive has no records yet)


_SNAPSHOT = "snapshot:"


def changes_since(con: duckdb.DuckDBPyConnection, watermark: str | None) -> Changes:
    """The earliest UTC day of ``recorded_at`` among records archived, rewritten or deleted
    after ``watermark``, and the watermark that covers them; ``None`` reads from the beginning.

    The watermark is the DuckLake snapshot the answer is up to (``snapshot:<id>``, the id
    zero-padded so watermarks sort as they follow each other; unchanged while nothing in
    ``bot_stats`` changed, so a build with nothing new rewrites nothing). Snapshots
    number commits in the order they landed, whichever worker made them; a time stamped in the
    rows would not do with several workers, whose batches stamped earlier may commit later. A
    rewritten record's change shows it as it was too, so the day it moved from is counted.
    Raises ValueError for a watermark that is not a snapshot (an older botstats' timestamp), or
    whose snapshot compaction has expired: the caller then rebuilds everything.
    """
    ((current,),) = con.execute(f"FROM ducklake_current_snapshot('{ALIAS}')").fetchall()
    if watermark is None:
        ((first,),) = con.execute("SELECT min(recorded_at) FROM bot_stats").fetchall()
        if first is None:
            return Changes(None, None)
        return Changes(first.astimezone(UTC).date(), _mark(current))
    if not watermark.startswith(_SNAPSHOT) or not watermark[len(_SNAPSHOT):].isdigit():
        raise ValueError(f"watermark {watermark!r} is not a snapshot of the archive")
    since = int(watermark[len(_SNAPSHOT):])
    if since >= current:
        return Changes(None, watermark)
    try:
        ((first,),) = con.execute(
            f"SELECT min(recorded_at) FROM ducklake_table_changes('{ALIAS}', 'main', "
            f"'bot_stats', {since + 1}, {current})").fetchall()
    except duckdb.InvalidInputException as exc:
        raise ValueError(f"the archive no longer keeps snapshot {since} (compacted away): "
                         f"{first_line(exc)}") from None
    if first is None:
        return Changes(None, watermark)
    return Changes(first.astimezone(UTC).date(), _mark(current))


def _mark(snapshot: int) -> str:
    return f"{_SNAPSHOT}{snapshot:020d}"


def last_commit(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """When the newest snapshot of the archive was committed."""
    ((when,),) = con.execute(f"SELECT max(snapshot_time) FROM ducklake_snapshots('{ALIAS}')"
                             ).fetchall()
    return when if isinstance(when, datetime) else None
