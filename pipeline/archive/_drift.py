"""Schema drift: record fields the archive has not seen before.

The archive remembers the top-level fields of bot and stat records it has seen, and since which
run (table ``record_fields``). A run hands over the fields it saw; those not yet known are
written and, unless this is the first run to note fields (the baseline), returned as drift for
the run's summary. ``botstats status`` shows the drift first seen by the runs it lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import polars as pl

from ._commit import RunCounts, committing
from ._sql import run_with_frames


def new_fields(known: set[tuple[str, str]], seen: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(kind, field) seen and not known, sorted."""
    return sorted((kind, name) for kind, names in seen.items() for name in names
                  if (kind, name) not in known)


def describe_fields(fields: list[tuple[str, str]]) -> str:
    """"stat records: 'a', 'b'; bot records: 'c'"."""
    by_kind: dict[str, list[str]] = {}
    for kind, name in fields:
        by_kind.setdefault(kind, []).append(f"'{name}'")
    return "; ".join(f"{kind} records: {', '.join(names)}" for kind, names in by_kind.items())


def note_fields(con: duckdb.DuckDBPyConnection, report: RunCounts, seen: dict[str, set[str]],
                now: datetime) -> list[tuple[str, str]]:
    """Remember the fields ``seen`` by the run of ``report``; return those that are drift (new,
    and not the baseline of an archive that knew no fields yet). In a transaction of the run
    (``committing``), so two workers noting the same new field keep it once."""
    return committing(con, report, lambda c, _: _note(c, report.run_id, seen, now))


def _note(con: duckdb.DuckDBPyConnection, run_id: str, seen: dict[str, set[str]],
          now: datetime) -> list[tuple[str, str]]:
    known = {(k, f) for k, f in con.execute("SELECT kind, field FROM record_fields").fetchall()}
    new = new_fields(known, seen)
    if not new:
        return []
    baseline = not known
    fields_in = pl.DataFrame(new, schema={"kind": pl.String, "field": pl.String}, orient="row")
    run_with_frames(con, "INSERT INTO record_fields SELECT kind, field, ?, ?, ? FROM fields_in "
                          "ANTI JOIN record_fields USING (kind, field)", [run_id, now, baseline],
                          fields_in=fields_in)
    return [] if baseline else new


@dataclass(frozen=True)
class NewFields:
    """Record fields of one kind first seen by a run (not the archive's baseline)."""

    run_id: str
    kind: str
    fields: tuple[str, ...]
    first_seen_at: datetime


def drift_since(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[NewFields]:
    """The drift first seen by these runs, newest first."""
    if not run_ids:
        return []
    rows = con.execute(
        "SELECT first_run_id, kind, list(field ORDER BY field), min(first_seen_at) "
        "FROM record_fields WHERE NOT baseline AND list_contains(?, first_run_id) "
        "GROUP BY first_run_id, kind ORDER BY min(first_seen_at) DESC, kind", [run_ids]
    ).fetchall()
    return [NewFields(r, k, tuple(f), t) for r, k, f, t in rows]
