"""Parquet exports: month partitions written atomically, a manifest, and nothing rewritten twice.

Layout under the export directory::

    <export dir>/manifest.json
    <export dir>/<dataset>/month=YYYY-MM/part-0.parquet   one file per month of the time column
    <export dir>/<dataset>/empty.parquet                  only while the dataset has no rows

The zero-row ``empty.parquet`` exists because DuckDB refuses a view over a glob that matches no
file; it carries the schema, so ``trend_anomalies`` works (and is empty) on a quiet archive.

One export run is an :class:`ExportBatch`: every changed partition is first written beside its
target under a hidden ``.part-0.parquet.<run>.tmp`` name (readers glob ``*.parquet``, so they
never see it) and fsynced. Only when every dataset is staged are the files renamed over their
targets, stale partitions removed and the manifest replaced, last. An error (or a kill) while
staging leaves the previous export exactly as it was; leftover temp files are swept by the next
run. A partition whose bytes hash the same as the manifest says is not touched at all, so a rerun
without new data rewrites nothing and new data rewrites only the months it lands in.

Results computed in slices of bots go through a :class:`MonthSpill` (scratch parquet in a hidden
``.scratch-<run>`` folder, one folder per dataset and month), so a dataset is staged a month at a
time and never whole in memory.

This module knows nothing of trends: it is handed frames, or months of them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from ...core import TMP_SUFFIX, ExportError, aside, fsync_dir, replacing

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
PART_FILE = "part-0.parquet"
EMPTY_FILE = "empty.parquet"
EMPTY_KEY = "empty"
_SPILL_PREFIX = ".scratch-"
ZSTD_LEVEL = 1
# Rows per parquet row group of an export partition. Fixed, so a partition's bytes (and its
# hash) depend on its rows only, not on how they were computed: in one frame, or streamed from
# slices of bots.
ROW_GROUP_ROWS = 131_072


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
    _previous: dict[str, Any] = field(default_factory=dict)
    _datasets: dict[str, Any] = field(default_factory=dict)
    _pending: list[_Pending] = field(default_factory=list)
    _stale: list[Path] = field(default_factory=list)
    _spill: MonthSpill | None = None
    # What the export was computed from (e.g. a watermark): kept in the manifest as "source".
    source: dict[str, Any] | None = None

    def stage(self, name: str, parts: Iterable[tuple[str, pl.DataFrame | pl.LazyFrame]], *,
              time_column: str, keep_before: str | None = None) -> DatasetExport:
        """Write the changed partitions aside; nothing is visible until :meth:`commit`.

        ``parts`` are (key, rows) in key order, as :func:`month_parts` or
        :meth:`MonthSpill.parts` give them, each already in its final row order (the content
        hash is of the bytes). A DataFrame part is held in memory; a LazyFrame part (a month of
        spill files) is streamed to its file a row group at a time.

        ``keep_before`` (a ``month=YYYY-MM`` key) keeps the previous export's partitions of
        earlier months as they are, neither read nor rewritten: ``parts`` then start at that
        month, and an ``empty`` part means only that nothing is new there.
        """
        if name in self._datasets:
            raise ExportError(f"dataset {name!r} was staged twice in run {self.run_id}.")
        previous = self._previous.get("datasets", {}).get(name, {})
        old_parts = {p["partition"]: p for p in previous.get("partitions", [])}
        entries: list[dict[str, Any]] = []
        if keep_before is not None:
            entries = [p for key, p in sorted(old_parts.items())
                       if key != EMPTY_KEY and key < keep_before]
        written: list[str] = []
        unchanged: list[str] = [e["partition"] for e in entries]
        schema: pl.Schema | None = None
        for key, part in parts:
            if key == EMPTY_KEY and entries:
                continue
            schema = schema or part.collect_schema()
            relpath = _relpath(name, key)
            entry = self._stage_part(part, relpath, old_parts.get(key), time_column,
                                     where=f"{name}/{key}")
            if entry is None:
                entries.append(old_parts[key])
                unchanged.append(key)
            else:
                entries.append({"partition": key, **entry})
                written.append(key)
        keep = {self.export_dir / e["path"] for e in entries}
        removed = self._find_stale(name, keep)
        rows = sum(e["rows"] for e in entries)
        lo = min((e["date_min"] for e in entries if e["date_min"]), default=None)
        hi = max((e["date_max"] for e in entries if e["date_max"]), default=None)
        changed = bool(written or removed) or not previous
        self._datasets[name] = {
            "dataset": name,
            "run_id": self.run_id if changed else previous.get("run_id", self.run_id),
            "written_at": self.written_at.isoformat() if changed else previous.get("written_at"),
            "rows": rows,
            "time_column": time_column,
            "partitioned_by": "month",
            "date_min": lo,
            "date_max": hi,
            "columns": ({c: str(t) for c, t in schema.items()} if schema is not None
                        else previous.get("columns", {})),
            "partitions": entries,
        }
        return DatasetExport(
            name=name, rows=rows, partitions=len(entries), written=tuple(written),
            unchanged=tuple(unchanged), removed=tuple(removed), date_min=lo, date_max=hi,
        )

    @property
    def previous(self) -> dict[str, Any]:
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

    def previous_file(self, name: str, key: str) -> Path | None:
        """The file of partition ``key`` of dataset ``name`` in the previous export, if any."""
        for p in self._previous.get("datasets", {}).get(name, {}).get("partitions", []):
            if p["partition"] == key:
                path = self.export_dir / p["path"]
                return path if path.is_file() else None
        return None

    def _stage_part(self, part: pl.DataFrame | pl.LazyFrame, relpath: Path,
                    old: dict[str, Any] | None, time_column: str, *,
                    where: str) -> dict[str, Any] | None:
        """Write one partition aside unless its bytes equal ``old``'s (then None); its
        manifest entry otherwise."""
        target = self.export_dir / relpath
        if isinstance(part, pl.DataFrame):
            data = _parquet_bytes(part, self.compression, where=where)
            digest, size = hashlib.sha256(data).hexdigest(), len(data)
            if _same(old, target, digest, size):
                return None
            self._write_aside(target, data)
            rows, (lo, hi) = part.height, _date_range(part, time_column)
        else:
            tmp = self._sink_aside(target, part, where=where)
            digest, size = _file_digest(tmp)
            if _same(old, target, digest, size):
                tmp.unlink()
                self._pending.pop()
                return None
            rows, (lo, hi) = _file_range(tmp, time_column)
        return {"path": relpath.as_posix(), "rows": rows, "date_min": lo, "date_max": hi,
                "sha256": digest, "bytes": size, "run_id": self.run_id,
                "written_at": self.written_at.isoformat()}

    def _sink_aside(self, target: Path, part: pl.LazyFrame, *, where: str) -> Path:
        tmp = aside(target, self.run_id)
        self._pending.append(_Pending(tmp, target))
        try:
            tmp.parent.mkdir(parents=True, exist_ok=True)
            # [exports].compression is a str the settings check against polars' codec names.
            part.sink_parquet(tmp, compression=self.compression,  # type: ignore[call-overload]
                              compression_level=_level(self.compression),
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

    def stage_file(self, relpath: str, frame: pl.DataFrame) -> None:
        """Write a parquet file that is no dataset (a job's state), committed with the rest."""
        target = self.export_dir / relpath
        data = _parquet_bytes(frame, self.compression, where=relpath)
        if not (target.is_file() and target.read_bytes() == data):
            self._write_aside(target, data)

    def spill(self) -> MonthSpill:
        """A scratch area for this run, removed when the batch commits or aborts."""
        self._spill = MonthSpill(self.export_dir / f"{_SPILL_PREFIX}{self.run_id}")
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
        """Parquet files of this dataset the new export no longer has (a month that vanished)."""
        root = self.export_dir / name
        removed = []
        for path in sorted(root.glob("**/*.parquet")) if root.is_dir() else []:
            if path not in keep:
                self._stale.append(path)
                removed.append(path.parent.name if path.name == PART_FILE else EMPTY_KEY)
        return removed

    def commit(self) -> None:
        """Rename every staged file into place, drop stale partitions, then the manifest."""
        try:
            for p in self._pending:
                os.replace(p.tmp, p.target)
            dirs = {p.target.parent for p in self._pending} | {self.export_dir}
            for path in self._stale:
                path.unlink(missing_ok=True)
                if path.name == PART_FILE and not any(path.parent.iterdir()):
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

    def _manifest(self) -> dict[str, Any]:
        datasets = dict(sorted(self._datasets.items()))
        old = self._previous
        changed = self.source is not None and self.source != old.get("source")
        run_id: str
        written_at: str | None  # an old manifest may lack it
        if self._pending or self._stale or changed or datasets != old.get("datasets"):
            run_id, written_at = self.run_id, self.written_at.isoformat()
        else:
            run_id, written_at = old.get("run_id", self.run_id), old.get("written_at")
        manifest = {"format": MANIFEST_FORMAT, "run_id": run_id, "written_at": written_at,
                    "datasets": datasets}
        source = self.source if self.source is not None else old.get("source")
        return manifest if source is None else {**manifest, "source": source}


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
            shutil.rmtree(batch._spill.root, ignore_errors=True)


def read_manifest(export_dir: Path) -> dict[str, Any]:
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
    return manifest


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


def month_parts(frame: pl.DataFrame, time_column: str) -> Iterator[tuple[str, pl.DataFrame]]:
    """(``month=YYYY-MM``, rows) per calendar month of ``time_column``, in month order; a
    zero-row frame gives the one ``empty`` partition that keeps the schema readable.

    One month is copied out at a time, so staging costs a month of memory, not a dataset.
    """
    if frame.height == 0:
        yield EMPTY_KEY, frame
        return
    t = frame[time_column]
    month = t.dt.year().cast(pl.Int32) * 100 + t.dt.month().cast(pl.Int32)
    for value in month.unique().sort():
        yield f"month={value // 100:04d}-{value % 100:02d}", frame.filter(month == value)


class MonthSpill:
    """Scratch parquet files, one folder per dataset and month, for results computed in slices
    of bots: each slice adds its rows, then a dataset is read back one month at a time, so no
    dataset is ever whole in memory. Lives in a hidden folder of the export directory (same
    disk, swept if a killed run leaves it) and is removed when the export batch ends.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._schemas: dict[str, pl.Schema] = {}
        self._files = 0

    def add(self, name: str, frame: pl.DataFrame, time_column: str) -> None:
        self._schemas.setdefault(name, frame.schema)
        for key, part in month_parts(frame, time_column):
            if key == EMPTY_KEY:
                continue
            folder = self.root / name / key
            folder.mkdir(parents=True, exist_ok=True)
            self._files += 1  # a rising number: files of a month read back in slice order
            part.write_parquet(folder / f"{self._files:08d}.parquet", compression="lz4")

    def months(self, name: str) -> list[str]:
        folder = self.root / name
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def scan(self, name: str, months: Iterable[str] | None = None) -> pl.LazyFrame:
        """The rows of ``months`` (default: all), in the order they were added."""
        files = [f for key in (self.months(name) if months is None else months)
                 for f in sorted((self.root / name / key).glob("*.parquet"))]
        if not files:
            return pl.LazyFrame(schema=self.schema(name))
        return pl.scan_parquet(files, hive_partitioning=False)

    def parts(self, name: str) -> Iterator[tuple[str, pl.DataFrame]]:
        """(key, rows) per month, as :meth:`ExportBatch.stage` takes them."""
        months = self.months(name)
        if not months:
            yield EMPTY_KEY, pl.DataFrame(schema=self.schema(name))
        for key in months:
            yield key, self.scan(name, [key]).collect()

    def streamed_parts(self, name: str) -> Iterator[tuple[str, pl.DataFrame | pl.LazyFrame]]:
        """(key, rows) per month, each month a scan of its files in the order they were added:
        :meth:`ExportBatch.stage` streams it to its file, so the rows must already be in the
        export's order across files (slices of bots, added in bot order, each sorted)."""
        months = self.months(name)
        if not months:
            yield EMPTY_KEY, pl.DataFrame(schema=self.schema(name))
        for key in months:
            yield key, self.scan(name, [key])

    def schema(self, name: str) -> pl.Schema:
        if name not in self._schemas:
            raise ExportError(f"nothing was computed for {name!r} (an empty archive slice?)")
        return self._schemas[name]


def _relpath(name: str, key: str) -> Path:
    return Path(name) / (EMPTY_FILE if key == EMPTY_KEY else f"{key}/{PART_FILE}")


def _level(compression: str) -> int | None:
    # zstd level 1 rather than the default 3, for write speed (bench/micro.py measures both).
    return ZSTD_LEVEL if compression == "zstd" else None


def _parquet_bytes(frame: pl.DataFrame, compression: str, *, where: str) -> bytes:
    buf = io.BytesIO()
    try:
        # [exports].compression is a str the settings check against polars' codec names.
        frame.write_parquet(buf, compression=compression,  # type: ignore[arg-type]
                            compression_level=_level(compression), row_group_size=ROW_GROUP_ROWS)
    except pl.exceptions.PolarsError as exc:
        raise ExportError(f"cannot encode {where} as parquet: {exc}") from exc
    return buf.getvalue()


def _same(old: dict[str, Any] | None, target: Path, digest: str, size: int) -> bool:
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


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
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
