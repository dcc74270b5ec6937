"""Parquet exports: partitions written atomically, a manifest, and nothing rewritten twice.

Layout under the export directory::

    <export dir>/manifest.json
    <export dir>/<dataset>/month=YYYY-MM/part-0.parquet          a settled month, one file
    <export dir>/<dataset>/month=YYYY-MM/day-YYYY-MM-DD.parquet  a recent day, a file of its own
    <export dir>/<dataset>/empty.parquet                         only while the dataset is empty

Partitions follow the time column. A run rewrites the days it recomputes, each its own small
file, and never a month for them: an hourly run costs the day it adds, not the month it lands
in. A month is *settled* once all of it lies before :func:`settle_line` (the Monday of the week
before the newest day): a full build writes it as one file, and :meth:`ExportBatch.merge_days`
(`botstats compact`) merges the day files of a month that has settled since into it, so a
dataset keeps one file a month and at most a few weeks of day files. Readers glob ``*.parquet``
under the dataset (the views, polars, DuckDB) or take the manifest's list: both see every row
once, whichever file holds it.

The zero-row ``empty.parquet`` exists because DuckDB refuses a view over a glob that matches no
file; it carries the schema, so ``trend_anomalies`` works (and is empty) on a quiet archive.

One export run is an :class:`ExportBatch`: every changed partition is first written beside its
target under a hidden ``.<file>.<run>.tmp`` name (readers glob ``*.parquet``, so they never see
it) and fsynced. Only when every dataset is staged are the files renamed over their targets,
stale partitions removed and the manifest replaced, last. An error (or a kill) while staging
leaves the previous export exactly as it was; leftover temp files are swept by the next run. A
partition whose bytes hash the same as the manifest says is not touched at all, so a rerun
without new data rewrites nothing.

Results computed in slices of bots go through a :class:`Spill` (per dataset and partition, the
slices' rows in the order they came), held in memory up to ``SPILL_MEMORY`` bytes and in a
hidden ``.scratch-<run>`` folder beyond, so an hourly run's few new days cost no scratch files
and a full build's months are never whole in memory.

This module knows nothing of trends: it is handed frames, or partitions of them.
"""

from __future__ import annotations

import calendar
import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TypedDict, cast

import polars as pl

from ...core import TMP_SUFFIX, ExportError, aside, fsync_dir, replacing

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
PART_FILE = "part-0.parquet"
EMPTY_FILE = "empty.parquet"
EMPTY_KEY = "empty"
MONTH = "month="  # a month's file: month=YYYY-MM
DAY = "day="  # a day's file: day=YYYY-MM-DD (in its month's folder)
_SPILL_PREFIX = ".scratch-"
ZSTD_LEVEL = 1
# zstd's level for a partition of rows per week (resource_health): every run of its week
# rewrites it whole, however few bots changed, so its bytes are paid each hour. 19 writes a
# week of 100,000 bots in 0.97 MB instead of 1.31 for 0.9 s of CPU (docs/design.md, "Writes
# proportional to what is new"); the daily datasets' files change only where their days do.
WEEK_ZSTD_LEVEL = 19
# Compressed bytes a Spill keeps in memory before it writes its chunks to scratch files: a run
# with a few new rows writes no scratch file, a full build's months go to disk. What it holds
# is held beside every later peak of the step, so it is kept small (docs/design.md, "Memory").
SPILL_MEMORY = 4 << 20
# Rows per parquet row group of an export partition. Fixed, so a partition's bytes (and its
# hash) depend on its rows only, not on how they were computed: in one frame, or streamed from
# slices of bots.
ROW_GROUP_ROWS = 131_072


class PartFile(TypedDict):
    """A partition's file as the manifest lists it: its path under the export directory, its
    rows and days (ISO text; None: no row has one), the digest and size of its bytes, and the
    run that wrote it."""

    path: str
    rows: int
    date_min: str | None
    date_max: str | None
    sha256: str
    bytes: int
    run_id: str
    written_at: str


class Part(PartFile):
    """A partition in the manifest: its key (``month=YYYY-MM``, ``day=YYYY-MM-DD`` or
    ``empty``) and its file."""

    partition: str


class DatasetEntry(TypedDict):
    """A dataset in the manifest: the run that last changed it, its rows and days, how it is
    partitioned, its columns (name -> polars type) and its partitions, oldest first."""

    dataset: str
    run_id: str
    written_at: str | None
    rows: int
    time_column: str
    partitioned_by: str
    date_min: str | None
    date_max: str | None
    columns: dict[str, str]
    partitions: list[Part]


class Source(TypedDict, total=False):
    """What an export was computed from: the trends settings' fingerprint, the archive's change
    watermark it is up to, and the files of each state an incremental run carries."""

    trends: str
    watermark: str | None
    state: dict[str, list[str]]


class Manifest(TypedDict, total=False):
    """``manifest.json``: every dataset of the export, the run that last changed any, and its
    source. Empty (``{}``) before the first export."""

    format: int
    run_id: str
    written_at: str | None
    datasets: dict[str, DatasetEntry]
    source: Source


@dataclass(frozen=True)
class DatasetExport:
    """What one run did to one dataset."""

    name: str
    rows: int
    partitions: int
    written: tuple[str, ...]  # partition keys rewritten this run (month=YYYY-MM or "empty")
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]
    date_min: str | None
    date_max: str | None


@dataclass
class _Staged:
    """What a run makes of one dataset's partitions: their manifest entries, the keys it wrote
    and those it left as they were, and the schema of the rows it wrote (None: it wrote none,
    the previous export's columns stand)."""

    entries: list[Part] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    schema: pl.Schema | None = None

    def keep(self, entry: Part) -> None:
        """A partition the previous export has, left as it is."""
        self.entries.append(entry)
        self.unchanged.append(entry["partition"])

    def write(self, key: str, entry: PartFile) -> None:
        """A partition staged this run (``entry``: :meth:`ExportBatch._stage_part`'s)."""
        self.entries.append({"partition": key, **entry})
        self.written.append(key)


@dataclass
class _Pending:
    tmp: Path
    target: Path


@dataclass
class ExportBatch:
    """Stage datasets, then commit them all at once (see the module docstring)."""

    export_dir: Path
    run_id: str
    written_at: datetime
    compression: str = "zstd"
    _previous: Manifest = field(default_factory=Manifest)
    _datasets: dict[str, DatasetEntry] = field(default_factory=dict)
    _pending: list[_Pending] = field(default_factory=list)
    _stale: list[Path] = field(default_factory=list)
    _spill: Spill | None = None
    # What the export was computed from (e.g. a watermark): kept in the manifest as "source".
    source: Source | None = None

    def stage(self, name: str, parts: Iterable[tuple[str, pl.DataFrame | pl.LazyFrame]], *,
              time_column: str, emit_from: date | None = None) -> DatasetExport:
        """Write the changed partitions aside; nothing is visible until :meth:`commit`.

        ``parts`` are (key, rows) in partition order (:func:`partition_order`), as
        :func:`partitions` or :meth:`Spill.parts` give them, each already in its final row
        order (the content hash is of the bytes). A DataFrame part is held in memory; a
        LazyFrame part (spilled chunks) is streamed to its file a row group at a time.

        ``emit_from``: ``parts`` hold the rows from that day on, and the previous export's rows
        before it stay as they are: its partitions that end before it are neither read nor
        rewritten, one that spans it (a month file) keeps its rows before it, and its
        partitions from that day on are replaced by ``parts`` (removed where ``parts`` has
        none). An ``empty`` part then means only that nothing is new.
        """
        if name in self._datasets:
            raise ExportError(f"dataset {name!r} was staged twice in run {self.run_id}.")
        previous = self._previous.get("datasets", {}).get(name)
        old_parts = {p["partition"]: p for p in previous["partitions"]} if previous else {}
        staged = _Staged()
        if emit_from is not None:
            for key, p in sorted(old_parts.items(), key=lambda kv: partition_order(kv[0])):
                first, last = p["date_min"], p["date_max"]
                if key == EMPTY_KEY or not first or not last:
                    continue
                if _day(last) < emit_from:
                    staged.keep(p)
                elif _day(first) < emit_from:  # a month file that spans emit_from
                    kept = pl.scan_parquet(self.export_dir / p["path"], hive_partitioning=False
                                           ).filter(pl.col(time_column) < emit_from)
                    entry = self._stage_part(kept, _relpath(name, key), p, time_column,
                                             where=f"{name}/{key}")
                    if entry is None:
                        staged.keep(p)
                    elif entry["rows"]:
                        staged.write(key, entry)
                    else:  # every row of it was from emit_from on: the file goes
                        self._discard(self.export_dir / _relpath(name, key))
        for key, part in parts:
            if key == EMPTY_KEY and staged.entries:
                continue
            staged.schema = staged.schema or part.collect_schema()
            entry = self._stage_part(part, _relpath(name, key), old_parts.get(key), time_column,
                                     where=f"{name}/{key}")
            if entry is None:
                staged.keep(old_parts[key])
            else:
                staged.write(key, entry)
        return self._record(name, previous, staged, time_column)

    def _record(self, name: str, previous: DatasetEntry | None, staged: _Staged,
                time_column: str) -> DatasetExport:
        """The dataset's manifest entry from its partitions' entries; what the run did to it."""
        written, unchanged, schema = staged.written, staged.unchanged, staged.schema
        entries = sorted(staged.entries, key=lambda e: partition_order(e["partition"]))
        if len(entries) > 1:  # an empty part stands in only for a dataset with no rows
            entries = [e for e in entries if e["partition"] != EMPTY_KEY]
        keep = {self.export_dir / e["path"] for e in entries}
        removed = self._find_stale(name, keep)
        rows = sum(e["rows"] for e in entries)
        lo = min((e["date_min"] for e in entries if e["date_min"]), default=None)
        hi = max((e["date_max"] for e in entries if e["date_max"]), default=None)
        run_id: str = self.run_id
        written_at: str | None = self.written_at.isoformat()
        if previous and not (written or removed):  # unchanged: as the previous run left it
            run_id, written_at = previous.get("run_id", run_id), previous.get("written_at")
        self._datasets[name] = {
            "dataset": name,
            "run_id": run_id,
            "written_at": written_at,
            "rows": rows,
            "time_column": time_column,
            "partitioned_by": "month/day",
            "date_min": lo,
            "date_max": hi,
            "columns": ({c: str(t) for c, t in schema.items()} if schema is not None
                        else previous["columns"] if previous else {}),
            "partitions": entries,
        }
        return DatasetExport(
            name=name, rows=rows, partitions=len(entries), written=tuple(written),
            unchanged=tuple(u for u in unchanged if u in {e["partition"] for e in entries}),
            removed=tuple(removed), date_min=lo, date_max=hi,
        )

    def merge_days(self, name: str, *, settled: date,
                   latest_by: tuple[str, ...] = ()) -> DatasetExport:
        """Merge the day files of every month that lies wholly before ``settled`` into that
        month's file (`botstats compact`): the month's file, if any, then its days in order,
        streamed. ``latest_by``: rows of a key older than the key's newest time anywhere in the
        dataset are dropped from what is rewritten (superseded; bot_forecast's, where a bot's
        forecast is its newest ``as_of``)."""
        previous = self._previous.get("datasets", {}).get(name)
        if previous is None or name in self._datasets:
            raise ExportError(f"dataset {name!r} cannot be compacted in run {self.run_id}: the "
                              f"previous export lacks it or it was staged already.")
        time_column = previous["time_column"]
        months: dict[str, list[Part]] = {}
        for p in previous["partitions"]:
            if p["partition"] != EMPTY_KEY:
                months.setdefault(month_key(key_day(p["partition"])), []).append(p)
        due = {month: sorted(ps, key=lambda p: partition_order(p["partition"]))
               for month, ps in months.items()
               if any(p["partition"].startswith(DAY) for p in ps)
               and month_end(key_day(month)) < settled}
        if not due:
            return self.keep(name)
        newest = None
        if latest_by:
            everything = pl.scan_parquet([self.export_dir / p["path"]
                                          for p in previous["partitions"]], hive_partitioning=False)
            newest = everything.group_by(latest_by).agg(pl.col(time_column).max())
        staged = _Staged()
        for kept in (p for month, ps in months.items() if month not in due for p in ps):
            staged.keep(kept)
        for month, ps in sorted(due.items()):
            rows = pl.concat([pl.scan_parquet(self.export_dir / p["path"], hive_partitioning=False)
                              for p in ps])
            if newest is not None:
                rows = rows.join(newest, on=[*latest_by, time_column], how="semi",
                                 maintain_order="left")
            entry = self._stage_part(rows, _relpath(name, month), None, time_column,
                                     where=f"{name}/{month}")
            assert entry is not None
            if not entry["rows"]:  # every row of it was superseded: no file for the month
                self._discard(self.export_dir / _relpath(name, month))
                continue
            staged.write(month, entry)
        return self._record(name, previous, staged, time_column)

    @property
    def previous(self) -> Manifest:
        """The manifest of the export this batch replaces (``{}`` when there is none)."""
        return self._previous

    def keep(self, name: str) -> DatasetExport:
        """Keep dataset ``name`` exactly as the previous export has it (nothing staged)."""
        previous = self._previous.get("datasets", {}).get(name)
        if previous is None or name in self._datasets:
            raise ExportError(f"dataset {name!r} cannot be kept in run {self.run_id}: the "
                              f"previous export lacks it or it was staged already.")
        self._datasets[name] = previous
        keys = tuple(p["partition"] for p in previous["partitions"])
        return DatasetExport(name=name, rows=previous["rows"], partitions=len(keys), written=(),
                             unchanged=keys, removed=(), date_min=previous.get("date_min"),
                             date_max=previous.get("date_max"))

    def _stage_part(self, part: pl.DataFrame | pl.LazyFrame, relpath: Path,
                    old: Part | None, time_column: str, *,
                    where: str) -> PartFile | None:
        """Write one partition aside unless its bytes equal ``old``'s (then None); its
        manifest entry otherwise."""
        target = self.export_dir / relpath
        level = WEEK_ZSTD_LEVEL if time_column == "week" else None
        if isinstance(part, pl.DataFrame):
            data = _parquet_bytes(part, self.compression, where=where, level=level)
            digest, size = hashlib.sha256(data).hexdigest(), len(data)
            if _same(old, target, digest, size):
                return None
            self._write_aside(target, data)
            rows, (lo, hi) = part.height, _date_range(part, time_column)
        else:
            tmp = self._sink_aside(target, part, where=where, level=level)
            digest, size = _file_digest(tmp)
            if _same(old, target, digest, size):
                self._discard(target)
                return None
            rows, (lo, hi) = _file_range(tmp, time_column)
        return {"path": relpath.as_posix(), "rows": rows, "date_min": lo, "date_max": hi,
                "sha256": digest, "bytes": size, "run_id": self.run_id,
                "written_at": self.written_at.isoformat()}

    def _sink_aside(self, target: Path, part: pl.LazyFrame, *, where: str,
                    level: int | None = None) -> Path:
        tmp = aside(target, self.run_id)
        self._pending.append(_Pending(tmp, target))
        try:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            # [exports].compression is a str the settings check against polars' codec names.
            part.sink_parquet(tmp, compression=self.compression,  # type: ignore[call-overload]
                              compression_level=_zstd_level(self.compression, level),
                              row_group_size=ROW_GROUP_ROWS)
            with tmp.open("rb+") as fh:
                os.fsync(fh.fileno())
        except pl.exceptions.PolarsError as exc:
            raise ExportError(f"cannot encode {where} as parquet: {exc}") from exc
        except OSError as exc:
            raise ExportError(
                f"cannot write {tmp}: {exc.strerror or exc}. Check free space and permissions "
                f"of the export directory ([exports].dir or --out)."
            ) from exc
        return tmp

    def remove_file(self, relpath: str) -> None:
        """Remove a file that is no dataset's (a job's state) when the batch commits."""
        self._stale.append(self.export_dir / relpath)

    def _discard(self, target: Path) -> None:
        """Forget what was staged for ``target`` (its temp file goes)."""
        for p in [p for p in self._pending if p.target == target]:
            p.tmp.unlink(missing_ok=True)
            self._pending.remove(p)

    def stage_file(self, relpath: str, frame: pl.DataFrame) -> None:
        """Write a parquet file that is no dataset (a job's state), committed with the rest."""
        target = self.export_dir / relpath
        data = _parquet_bytes(frame, self.compression, where=relpath)
        if not (target.is_file() and target.read_bytes() == data):
            self._write_aside(target, data)

    def spill(self) -> Spill:
        """A scratch area for this run, removed when the batch commits or aborts."""
        self._spill = Spill(self.export_dir / f"{_SPILL_PREFIX}{self.run_id}")
        return self._spill

    def _write_aside(self, target: Path, data: bytes) -> None:
        tmp = aside(target, self.run_id)
        self._pending.append(_Pending(tmp, target))
        try:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise ExportError(
                f"cannot write {tmp}: {exc.strerror or exc}. Check free space and permissions "
                f"of the export directory ([exports].dir or --out)."
            ) from exc

    def _find_stale(self, name: str, keep: set[Path]) -> list[str]:
        """Parquet files of this dataset the new export no longer has (a day merged into its
        month, a day or month left without rows); their partition keys."""
        root = self.export_dir / name
        removed = []
        for path in sorted(root.glob("**/*.parquet")) if root.is_dir() else []:
            if path not in keep and path not in self._stale:
                self._stale.append(path)
                removed.append(_key_of(path))
        return removed

    def commit(self) -> None:
        """Rename every staged file into place, drop stale partitions, then the manifest."""
        try:
            for p in self._pending:
                os.replace(p.tmp, p.target)
            dirs = {p.target.parent for p in self._pending} | {self.export_dir}
            for path in self._stale:
                path.unlink(missing_ok=True)
                if path.parent.name.startswith(MONTH) and not any(path.parent.iterdir()):
                    path.parent.rmdir()
            for d in dirs:
                fsync_dir(d)
            manifest = self._manifest()
            if manifest != self._previous:
                _write_json_atomic(self.export_dir / MANIFEST, manifest)
        except OSError as exc:
            raise ExportError(
                f"cannot publish the export in {self.export_dir}: {exc}. Every file already in "
                f"place is whole; run `botstats trends` again to finish."
            ) from exc
        self._pending.clear()

    def abort(self) -> None:
        """Remove what was staged; the previous export stays as it was."""
        for p in self._pending:
            p.tmp.unlink(missing_ok=True)
        self._pending.clear()

    def _manifest(self) -> Manifest:
        datasets = dict(sorted(self._datasets.items()))
        old = self._previous
        changed = self.source is not None and self.source != old.get("source")
        run_id: str
        written_at: str | None  # an old manifest may lack it
        if self._pending or self._stale or changed or datasets != old.get("datasets"):
            run_id, written_at = self.run_id, self.written_at.isoformat()
        else:
            run_id, written_at = old.get("run_id", self.run_id), old.get("written_at")
        manifest = Manifest(format=MANIFEST_FORMAT, run_id=run_id, written_at=written_at,
                            datasets=datasets)
        source = self.source if self.source is not None else old.get("source")
        if source is not None:
            manifest["source"] = source
        return manifest


@contextmanager
def export_batch(
    export_dir: Path, *, run_id: str, written_at: datetime, compression: str = "zstd"
) -> Iterator[ExportBatch]:
    """An :class:`ExportBatch` committed when the block ends, aborted if it raises."""
    try:
        export_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(
            f"cannot create the export directory {export_dir}: {exc.strerror or exc}. "
            f"Point [exports].dir (or --out) at a writable place."
        ) from exc
    _sweep_temp_files(export_dir)
    batch = ExportBatch(export_dir, run_id, written_at, compression, read_manifest(export_dir))
    try:
        yield batch
        batch.commit()
    except BaseException:
        batch.abort()
        raise
    finally:
        if batch._spill is not None:
            batch._spill.close()


def read_manifest(export_dir: Path) -> Manifest:
    """The manifest as written by the last export, or ``{}`` when there is none yet."""
    path = export_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ExportError(
            f"cannot read the export manifest {path}: {exc}. Delete it and run `botstats trends` "
            f"to rewrite every dataset."
        ) from exc
    if not isinstance(manifest, dict):
        raise ExportError(
            f"cannot read the export manifest {path}: it holds no JSON object. Delete it and run "
            f"`botstats trends` to rewrite every dataset."
        )
    return cast(Manifest, manifest)  # the file botstats wrote: its shape is the one above


def dataset_files(export_dir: Path, name: str) -> list[Path]:
    """The parquet files of one exported dataset, from the manifest."""
    entry = read_manifest(export_dir).get("datasets", {}).get(name)
    if entry is None:
        raise ExportError(
            f"there is no export of {name!r} in {export_dir} yet. Run `botstats trends` first "
            f"(or point [exports].dir / --out at the directory it wrote)."
        )
    return [export_dir / p["path"] for p in entry["partitions"]]


def write_frame(frame: pl.DataFrame, path: Path, fmt: str) -> None:
    """Write a query result as csv, json or parquet, atomically (aside, then rename)."""
    if fmt not in ("csv", "json", "parquet"):
        raise ExportError(f"unknown output format {fmt!r}; use csv, json or parquet.")
    try:
        with replacing(path) as tmp:
            if fmt == "csv":
                frame.write_csv(tmp)
            elif fmt == "json":
                tmp.write_text(to_json(frame), encoding="utf-8")
            else:
                frame.write_parquet(tmp, compression="zstd")
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}.") from exc
    except pl.exceptions.PolarsError as exc:
        raise ExportError(f"cannot write the result as {fmt} to {path}: {exc}") from exc


def write_text(text: str, path: Path) -> None:
    """Write ``text`` (a formatted result) to ``path``, atomically (aside, then rename)."""
    try:
        with replacing(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}.") from exc


def to_json(frame: pl.DataFrame) -> str:
    """The rows as a JSON array of objects. DuckDB sums are HUGEINT/DECIMAL, which polars
    would write as strings; they become numbers here, as a reader of JSON expects."""
    numbers = [
        pl.col(name).cast(pl.Int128 if dtype.scale == 0 else pl.Float64)
        for name, dtype in frame.schema.items() if isinstance(dtype, pl.Decimal)
    ]
    return frame.with_columns(numbers).write_json()


def month_key(day: date) -> str:
    """The partition of ``day``'s month (its settled file)."""
    return f"{MONTH}{day.year:04d}-{day.month:02d}"


def day_key(day: date) -> str:
    """The partition of ``day`` alone (a recent day's file)."""
    return f"{DAY}{day.isoformat()}"


def key_day(key: str) -> date:
    """The first day a partition key covers."""
    if key.startswith(DAY):
        return date.fromisoformat(key[len(DAY):])
    if key.startswith(MONTH):
        return date.fromisoformat(key[len(MONTH):] + "-01")
    raise ExportError(f"{key!r} is not a partition of an export")


def month_end(day: date) -> date:
    """The last day of ``day``'s month."""
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def partition_order(key: str) -> tuple[date, int]:
    """Partitions in time order; a month's file before the day files of the same month."""
    if key == EMPTY_KEY:
        return date.min, 0
    return key_day(key), 0 if key.startswith(MONTH) else 1


def settle_line(newest: date) -> date:
    """The first day that is not settled, given the newest day exported: the Monday of the
    week before ``newest``'s. An incremental run recomputes from at most a few days before its
    first new day (a Monday, for weeks kept whole), so days before the line are left to old
    late records, and a month wholly before it is kept as one file."""
    return newest - timedelta(days=newest.weekday() + 7)


def partitions(frame: pl.DataFrame, time_column: str,
               months_before: date | None = None) -> Iterator[tuple[str, pl.DataFrame]]:
    """(key, rows) per partition of ``time_column``, in partition order: a month's file for a
    month wholly before ``months_before``, a day's file for every later day (``None``: every
    month is one file). A zero-row frame gives the one ``empty`` partition that keeps the
    schema readable.

    One partition is copied out at a time, so staging costs a partition of memory."""
    if frame.height == 0:
        yield EMPTY_KEY, frame
        return
    keys = _keys(frame[time_column], months_before)
    for key in sorted(keys.unique().to_list(), key=partition_order):
        yield key, frame.filter(keys == key)


def _keys(times: pl.Series, months_before: date | None) -> pl.Series:
    month = pl.format("month={}", times.dt.strftime("%Y-%m"))
    if months_before is None:
        return pl.select(month).to_series()
    settled = times.dt.month_end() < pl.lit(months_before)
    return pl.select(pl.when(settled).then(month)
                     .otherwise(pl.format("day={}", times.dt.strftime("%Y-%m-%d")))).to_series()


class Spill:
    """Rows computed in slices of bots, per dataset and partition, for staging a partition at
    a time: no dataset is ever whole in memory. Each slice adds a chunk (zstd parquet) per
    partition it has rows in; chunks are kept in memory while they total under
    ``SPILL_MEMORY`` bytes and written to scratch files in a hidden folder of the export
    directory (same disk; swept if a killed run leaves it) after that. A partition's rows come
    back in the order their chunks were added."""

    def __init__(self, root: Path, memory: int | None = None) -> None:
        self.root = root
        self.memory = SPILL_MEMORY if memory is None else memory
        self.held = 0  # bytes of chunks in memory
        self._schemas: dict[str, pl.Schema] = {}
        self._chunks: dict[tuple[str, str], list[bytes | Path]] = {}
        self._files = 0

    def add(self, name: str, frame: pl.DataFrame, time_column: str,
            months_before: date | None = None) -> None:
        """``frame``'s rows under their partitions (:func:`partitions`)."""
        self._schemas.setdefault(name, frame.schema)
        for key, part in partitions(frame, time_column, months_before):
            if key != EMPTY_KEY:
                self._keep(name, key, part)

    def _keep(self, name: str, key: str, part: pl.DataFrame) -> None:
        buf = io.BytesIO()
        part.write_parquet(buf, compression="zstd", compression_level=ZSTD_LEVEL)
        data = buf.getvalue()
        chunk: bytes | Path = data
        if self.held + len(data) > self.memory:
            self._files += 1  # a rising number: a partition's files read back in order
            chunk = self.root / name / f"{self._files:08d}.parquet"
            chunk.parent.mkdir(parents=True, exist_ok=True)
            chunk.write_bytes(data)
        else:
            self.held += len(data)
        self._chunks.setdefault((name, key), []).append(chunk)

    def keys(self, name: str) -> list[str]:
        return sorted((k for n, k in self._chunks if n == name), key=partition_order)

    def scan(self, name: str, keys: Iterable[str] | None = None) -> pl.LazyFrame:
        """The rows of ``keys`` (default: all), in the order they were added."""
        chunks = [c for key in (self.keys(name) if keys is None else keys)
                  for c in self._chunks.get((name, key), [])]
        if not chunks:
            return pl.LazyFrame(schema=self.schema(name))
        return pl.concat([pl.scan_parquet(io.BytesIO(c) if isinstance(c, bytes) else c,
                                          hive_partitioning=False) for c in chunks])

    def parts(self, name: str) -> Iterator[tuple[str, pl.DataFrame]]:
        """(key, rows) per partition, as :meth:`ExportBatch.stage` takes them."""
        keys = self.keys(name)
        if not keys:
            yield EMPTY_KEY, pl.DataFrame(schema=self.schema(name))
        for key in keys:
            yield key, self.scan(name, [key]).collect()

    def streamed_parts(self, name: str) -> Iterator[tuple[str, pl.DataFrame | pl.LazyFrame]]:
        """(key, rows) per partition, each a scan of its chunks in the order they were added:
        :meth:`ExportBatch.stage` streams it to its file, so the rows must already be in the
        export's order across chunks (slices of bots, added in bot order, each sorted)."""
        keys = self.keys(name)
        if not keys:
            yield EMPTY_KEY, pl.DataFrame(schema=self.schema(name))
        for key in keys:
            yield key, self.scan(name, [key])

    def schema(self, name: str) -> pl.Schema:
        if name not in self._schemas:
            raise ExportError(f"nothing was computed for {name!r} (an empty archive slice?)")
        return self._schemas[name]

    def close(self) -> None:
        self._chunks.clear()
        self.held = 0
        shutil.rmtree(self.root, ignore_errors=True)


def _relpath(name: str, key: str) -> Path:
    if key == EMPTY_KEY:
        return Path(name) / EMPTY_FILE
    if key.startswith(DAY):
        day = key_day(key)
        return Path(name) / month_key(day) / f"day-{day.isoformat()}.parquet"
    return Path(name) / key / PART_FILE


def _key_of(path: Path) -> str:
    """The partition key of an export file (:func:`_relpath` backwards)."""
    if path.name == EMPTY_FILE:
        return EMPTY_KEY
    if path.name.startswith("day-"):
        return DAY + path.stem[len("day-"):]
    return path.parent.name


def _day(text: str) -> date:
    """A manifest's date_min/date_max (a date, or a time whose date it is)."""
    return date.fromisoformat(text[:10])


def _zstd_level(compression: str, level: int | None = None) -> int | None:
    """zstd's level: ``level`` when given, else :data:`ZSTD_LEVEL`, level 1 rather than the
    default 3 for write speed (bench/micro.py measures both); None for the other codecs."""
    if compression != "zstd":
        return None
    return ZSTD_LEVEL if level is None else level


def _parquet_bytes(frame: pl.DataFrame, compression: str, *, where: str,
                   level: int | None = None) -> bytes:
    """``level``: zstd's, instead of :data:`ZSTD_LEVEL` (other codecs ignore it)."""
    buf = io.BytesIO()
    try:
        # [exports].compression is a str the settings check against polars' codec names.
        frame.write_parquet(buf, compression=compression,  # type: ignore[arg-type]
                            compression_level=_zstd_level(compression, level),
                            row_group_size=ROW_GROUP_ROWS)
    except pl.exceptions.PolarsError as exc:
        raise ExportError(f"cannot encode {where} as parquet: {exc}") from exc
    return buf.getvalue()


def _same(old: Part | None, target: Path, digest: str, size: int) -> bool:
    """Whether the partition in place (described by ``old``) has exactly these bytes."""
    return (old is not None and old.get("sha256") == digest and target.is_file()
            and target.stat().st_size == size)


def _file_digest(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest(), path.stat().st_size


def _file_range(path: Path, column: str) -> tuple[int, tuple[str | None, str | None]]:
    """Rows of a written partition and the range of its time column, read from the file."""
    rows, lo, hi = pl.scan_parquet(path).select(
        pl.len(), lo=pl.col(column).min(), hi=pl.col(column).max()).collect().row(0)
    return rows, (lo.isoformat() if lo else None, hi.isoformat() if hi else None)


def _date_range(frame: pl.DataFrame, column: str) -> tuple[str | None, str | None]:
    if frame.height == 0:
        return None, None
    lo, hi = frame.select(lo=pl.col(column).min(), hi=pl.col(column).max()).row(0)
    return (lo.isoformat() if lo else None, hi.isoformat() if hi else None)


def _write_json_atomic(path: Path, data: Mapping[str, object]) -> None:
    with replacing(path, durable=True) as tmp, tmp.open("w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")


def _sweep_temp_files(export_dir: Path) -> None:
    """Temp files a killed run left behind (they never matched a reader's *.parquet glob)."""
    for scratch in export_dir.glob(f"{_SPILL_PREFIX}*"):
        shutil.rmtree(scratch, ignore_errors=True)
    for tmp in export_dir.glob(f"**/.*{TMP_SUFFIX}"):
        tmp.unlink(missing_ok=True)
    for d in sorted(export_dir.glob("*/month=*"), reverse=True):
        if d.is_dir() and not any(d.iterdir()):
            shutil.rmtree(d, ignore_errors=True)
