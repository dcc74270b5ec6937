"""What the harvest and the trends ask of the archive: each bot's newest record, whether anything is archived, and what changed since a watermark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

import duckdb
import polars as pl

from ._sql import run_with_frames


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


def changes_since(con: duckdb.DuckDBPyConnection, watermark: str | None) -> Changes:
    """The earliest UTC day of ``recorded_at`` among records archived (or rewritten) after
    ``watermark``, and the watermark that covers them; ``None`` reads from the beginning.

    The watermark is the newest ``archived_at``: a batch's records (and their custom fields,
    written with them) share one, and batches commit in time under the run lock. A rewritten
    record may have moved from an earlier day, which these columns no longer show: when a
    run since the watermark rewrote records, the answer is the archive's first day.
    Raises ValueError for a watermark that is not a timestamp.
    """
    since = datetime.fromisoformat(watermark) if watermark is not None else None
    if since is not None and since.tzinfo is None:
        raise ValueError(f"watermark {watermark!r} has no time zone")
    first, newest, rewritten = con.execute(
        "SELECT min(s.recorded_at), max(s.archived_at), coalesce(bool_or(r.stats_updated > 0), "
        "false) FROM bot_stats AS s LEFT JOIN harvest_runs AS r USING (run_id) "
        "WHERE $since::TIMESTAMPTZ IS NULL OR s.archived_at > $since::TIMESTAMPTZ",
        {"since": since},
    ).fetchall()[0]
    if newest is None:
        return Changes(None, watermark)
    if rewritten:
        ((first,),) = con.execute("SELECT min(recorded_at) FROM bot_stats").fetchall()
    return Changes(first.astimezone(UTC).date(), newest.astimezone(UTC).isoformat())
