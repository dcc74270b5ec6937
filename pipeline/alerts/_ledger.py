"""The ledger: the archive's ``alerts`` table (sql/migrations/008_alerts.sql), one row each time
a run tried to tell a destination an alert, and what the runs after it remember of it.

A cron job has no daemon to remember what it told: the ledger does. Each run reads the rows of
the last :data:`KEEP` (:class:`Memory`), decides, sends, and appends what happened, in one
transaction, under the run lock like every other write of the archive. A run that cannot get
the lock (another job holds it) still tells that, but cannot write the archive: it appends its
rows to the *spool*, a file of JSON lines beside the lock file, which the next run holding the
lock moves into the ledger. Rows older than :data:`KEEP` are deleted, so the ledger stays the
size of three months of alerts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from filelock import FileLock

from ..core import StoreError
from ._alert import CONDITIONS, Alert

log = logging.getLogger("botstats.alerts")

KEEP = timedelta(days=90)  # rows older than this are deleted; longer than any window they serve
COLUMNS = ("alert_key", "kind", "incident", "shard", "destination", "run_id", "tried_at",
           "outcome", "tries", "answer", "since", "title", "alert")


@dataclass(frozen=True)
class Entry:
    """One row of the ledger: ``alert`` tried at ``destination`` by ``run_id``."""

    alert: Alert
    destination: str
    outcome: str  # delivered | failed | given_up
    tries: int
    answer: str
    tried_at: datetime
    run_id: str | None = None

    @property
    def delivered(self) -> bool:
        return self.outcome == "delivered"

    def values(self) -> list[Any]:
        a = self.alert
        return [a.key, a.kind, a.incident or None, a.shard, self.destination, self.run_id,
                self.tried_at, self.outcome, self.tries, self.answer, a.since, a.title,
                json.dumps(a.as_dict(), default=str, ensure_ascii=False)]

    def as_dict(self) -> dict[str, Any]:
        return {"alert": self.alert.as_dict(), "destination": self.destination,
                "outcome": self.outcome, "tries": self.tries, "answer": self.answer,
                "tried_at": self.tried_at.isoformat(), "run_id": self.run_id}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        return cls(Alert.from_dict(data["alert"]), str(data["destination"]), str(data["outcome"]),
                   int(data["tries"]), str(data["answer"]),
                   datetime.fromisoformat(data["tried_at"]), data.get("run_id"))


@dataclass
class Track:
    """What the ledger says of one alert at one destination."""

    first_try: datetime
    latest: Entry
    last_delivered: datetime | None = None


@dataclass
class Memory:
    """The ledger's rows, read for the decisions of one run."""

    entries: list[Entry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.entries.sort(key=lambda e: e.tried_at)
        self._tracks: dict[tuple[str, str], Track] = {}
        for entry in self.entries:
            self._note(entry)

    def _note(self, entry: Entry) -> None:
        key = (entry.alert.key, entry.destination)
        track = self._tracks.setdefault(key, Track(entry.tried_at, entry))
        track.latest = entry
        if entry.delivered:
            track.last_delivered = entry.tried_at

    def add(self, entries: Iterable[Entry]) -> None:
        for entry in sorted(entries, key=lambda e: e.tried_at):
            self.entries.append(entry)
            self._note(entry)

    def track(self, key: str, destination: str) -> Track | None:
        return self._tracks.get((key, destination))

    def unresolved(self, destination: str, shard: str) -> list[Alert]:
        """The conditions ``destination`` was told of (delivered) and not yet told the end of
        (no ``resolved`` row at all for it): the latest alert told of each, those of the runs
        of ``shard`` and every lock."""
        told: dict[str, Alert] = {}
        closed: set[str] = set()
        for entry in self.entries:
            if entry.destination != destination:
                continue
            alert = entry.alert
            if alert.kind == "resolved":
                closed.add(alert.incident)
            elif (alert.kind in CONDITIONS and entry.delivered and alert.incident
                    and (alert.shard == shard or alert.kind == "lock")):
                told[alert.incident] = alert
        return [alert for incident, alert in told.items() if incident not in closed]


def _missing_table(exc: duckdb.Error) -> bool:
    return isinstance(exc, duckdb.CatalogException) and "alerts" in str(exc)


def read(con: duckdb.DuckDBPyConnection, now: datetime) -> Memory:
    """The ledger's rows of the last :data:`KEEP` (none in an archive older than the ledger)."""
    try:
        rows = con.execute(
            "SELECT alert, destination, outcome, tries, answer, tried_at, run_id FROM alerts "
            "WHERE tried_at >= ? ORDER BY tried_at", [now - KEEP]).fetchall()
    except duckdb.Error as exc:
        if _missing_table(exc):
            return Memory()
        raise StoreError(f"cannot read the alerts ledger: {exc}") from exc
    return Memory([Entry(Alert.from_dict(json.loads(alert)), dest, outcome, tries, answer,
                         at.astimezone(UTC), run_id)
                   for alert, dest, outcome, tries, answer, at, run_id in rows])


def write(con: duckdb.DuckDBPyConnection, entries: list[Entry], now: datetime) -> None:
    """Append ``entries`` and delete the rows older than :data:`KEEP`, in one transaction."""
    marks = ", ".join("?" for _ in COLUMNS)
    try:
        con.execute("BEGIN TRANSACTION")
        for entry in entries:
            con.execute(f"INSERT INTO alerts ({', '.join(COLUMNS)}) VALUES ({marks})",
                        entry.values())
        ((old,),) = con.execute("SELECT count(*) FROM alerts WHERE tried_at < ?",
                                [now - KEEP]).fetchall()
        if old:
            con.execute("DELETE FROM alerts WHERE tried_at < ?", [now - KEEP])
        con.execute("COMMIT")
    except duckdb.Error as exc:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise StoreError(f"cannot write the alerts ledger: {exc}") from exc


@dataclass(frozen=True)
class Row:
    """A row of the ledger as `botstats alerts list` and `botstats status` show it."""

    tried_at: datetime
    destination: str
    kind: str
    outcome: str
    tries: int
    answer: str
    title: str
    alert_key: str
    run_id: str | None

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "tried_at": self.tried_at.isoformat(timespec="seconds")}


_ROW = "tried_at, destination, kind, outcome, tries, answer, title, alert_key, run_id"


def rows(con: duckdb.DuckDBPyConnection, *, limit: int = 50,
         undelivered: bool = False) -> list[Row]:
    """The ledger, newest first; ``undelivered``: each alert whose latest try at a destination
    failed and which no try delivered there (what the next runs try again)."""
    if undelivered:
        sql = (f"SELECT {', '.join(f'arg_max({c}, tried_at)' for c in _ROW.split(', '))} "
               "FROM alerts GROUP BY alert_key, destination "
               "HAVING NOT bool_or(outcome = 'delivered') "
               "AND arg_max(outcome, tried_at) = 'failed' ORDER BY 1 DESC LIMIT ?")
    else:
        sql = f"SELECT {_ROW} FROM alerts ORDER BY tried_at DESC LIMIT ?"
    try:
        found = con.execute(sql, [limit]).fetchall()
    except duckdb.Error as exc:
        if _missing_table(exc):
            return []
        raise StoreError(f"cannot read the alerts ledger: {exc}") from exc
    return [Row(at.astimezone(UTC), *rest) for at, *rest in found]


def undelivered(con: duckdb.DuckDBPyConnection, *, limit: int = 50) -> list[Row]:
    """The alerts whose latest try failed and which no try delivered (`botstats status`)."""
    return rows(con, limit=limit, undelivered=True)


class Spool:
    """Rows of runs that could not get the lock, in a file of JSON lines beside the lock file,
    until a run holding the lock moves them into the ledger."""

    def __init__(self, lock_path: Path) -> None:
        self.path = lock_path.with_name(lock_path.name + ".alerts.jsonl")
        self._lock = FileLock(str(self.path) + ".lock", timeout=10)

    def read(self) -> list[Entry]:
        try:
            with self._lock:
                text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        except OSError as exc:
            log.warning("cannot read the alerts spool %s: %s", self.path, exc)
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(Entry.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                log.warning("ignored a line of %s that is not an alert row", self.path)
        return out

    def append(self, entries: list[Entry]) -> None:
        lines = "".join(json.dumps(e.as_dict(), default=str, ensure_ascii=False) + "\n"
                        for e in entries)
        try:
            with self._lock, self.path.open("a", encoding="utf-8") as fh:
                fh.write(lines)
        except OSError as exc:
            log.warning("cannot keep %d alert row(s) in %s: %s", len(entries), self.path, exc)

    def drain(self, con: duckdb.DuckDBPyConnection, now: datetime) -> list[Entry]:
        """Move the spool's rows into the ledger; the rows moved."""
        try:
            with self._lock:
                if not self.path.exists():
                    return []
                entries = [Entry.from_dict(json.loads(line)) for line in
                           self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
                write(con, entries, now)
                self.path.unlink()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("cannot move the alerts spool %s into the ledger: %s", self.path, exc)
            return []
        return entries
