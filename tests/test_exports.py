"""Parquet exports: layout, manifest, readers agree, atomic and incremental writes."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import trend_settings_for, write_trend_archive

from pipeline.analytics.build._build import DATASETS, build_trends, compact_exports
from pipeline.analytics.exports import _exports as exports
from pipeline.analytics.exports._datasets import load_dataset
from pipeline.archive import _store as store
from pipeline.core._errors import ExportError
from pipeline.core._settings import Settings


def files_state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under root: (inode, mtime_ns, bytes); a rename or rewrite changes it."""
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}


def manifest(settings: Settings) -> dict[str, Any]:
    return json.loads((settings.export_dir / "manifest.json").read_text())


def test_layout_is_a_file_a_recent_day_in_month_folders_of_zstd_parquet(
        trends_built: Settings) -> None:
    # Ten days to Monday 3 February: none of it is settled yet (before the Monday of the week
    # before the newest day), so each day is a file of its own, in its month's folder.
    root = trends_built.export_dir
    files = sorted(p.relative_to(root).as_posix() for p in root.glob("bot_daily/**/*.parquet"))
    assert files == [f"bot_daily/month=2025-01/day-2025-01-{d}.parquet" for d in range(25, 32)] + [
        f"bot_daily/month=2025-02/day-2025-02-0{d}.parquet" for d in (1, 2, 3)]
    # resource_health is partitioned by its week (the Monday's date).
    assert sorted(p.name for p in root.glob("resource_health/*/*.parquet")) == [
        "day-2025-01-20.parquet", "day-2025-01-27.parquet", "day-2025-02-03.parquet"]
    meta = pq.ParquetFile(root / "bot_daily/month=2025-01/day-2025-01-25.parquet").metadata
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"ZSTD"}
    assert not list(root.rglob("*.tmp"))


def test_manifest_describes_every_partition(trends_built: Settings) -> None:
    data = manifest(trends_built)
    assert data["format"] == 1 and set(data["datasets"]) == set(DATASETS)
    daily = data["datasets"]["bot_daily"]
    assert (daily["dataset"], daily["rows"], daily["date_min"], daily["date_max"]) == (
        "bot_daily", 30, "2025-01-25", "2025-02-03")
    assert daily["run_id"] == data["run_id"] and daily["written_at"] == data["written_at"]
    assert [(p["partition"], p["rows"], p["date_min"], p["date_max"])
            for p in daily["partitions"]][:3] == [
        ("day=2025-01-25", 3, "2025-01-25", "2025-01-25"),
        ("day=2025-01-26", 3, "2025-01-26", "2025-01-26"),
        ("day=2025-01-27", 4, "2025-01-27", "2025-01-27")]  # alpha, beta, gamma, delta
    for entry in data["datasets"].values():
        assert entry["rows"] == sum(p["rows"] for p in entry["partitions"])
        for part in entry["partitions"]:
            body = (trends_built.export_dir / part["path"]).read_bytes()
            assert hashlib.sha256(body).hexdigest() == part["sha256"]
            assert len(body) == part["bytes"]


@pytest.mark.parametrize("name", list(DATASETS))
def test_polars_and_duckdb_read_the_same_rows(trends_built: Settings, name: str) -> None:
    pattern = f"{trends_built.export_dir}/{name}/**/*.parquet"
    order = list(DATASETS[name].order)
    by_polars = pl.scan_parquet(pattern, hive_partitioning=False).collect().sort(order)
    with duckdb.connect() as con:
        con.execute("SET TimeZone='UTC'")
        by_duckdb = pl.from_arrow(con.sql(
            f"SELECT * FROM read_parquet('{pattern}', hive_partitioning = false)").to_arrow_table())
    assert isinstance(by_duckdb, pl.DataFrame)
    assert by_polars.height > 0
    assert by_duckdb.sort(order).equals(by_polars)
    assert load_dataset(trends_built, name).sort(order).equals(by_polars)


def test_rerun_without_new_data_rewrites_nothing(trends_built: Settings) -> None:
    before = files_state(trends_built.export_dir)
    report = build_trends(trends_built)
    assert files_state(trends_built.export_dir) == before
    assert report.mode == "unchanged"
    assert report.written == 0 and report.unchanged == len(
        [k for k in before if k.endswith(".parquet") and not k.startswith("_state/")])


def test_new_data_writes_only_the_days_it_changes(trends_built: Settings) -> None:
    before = files_state(trends_built.export_dir)
    old_run = manifest(trends_built)["run_id"]
    write_trend_archive(trends_built, [
        ("alpha", "2025-02-04 12:00:00+00", 2900, 290, 1, 50.0, 40.0, 390)])
    report = build_trends(trends_built)
    after = files_state(trends_built.export_dir)
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed == {
        "manifest.json",
        "_state/bots.parquet",  # alpha's last day and counter: what the next run starts from
        *(f"{name}/month=2025-02/day-2025-02-04.parquet" for name in (
            "bot_daily", "bot_growth", "bot_ranks", "movers", "directory_daily",
            "bot_forecast")),  # alpha's forecast, as of its new last day
        # alpha's jump of 1 February, "3 days so far", holds a fourth day: a level shift now.
        "anomalies/month=2025-02/day-2025-02-01.parquet",
        "resource_health/month=2025-02/day-2025-02-03.parquet",  # the week of 3 February
    }
    assert {d.name: d.written for d in report.datasets if d.written} == {
        **{name: ("day=2025-02-04",) for name in (
            "bot_daily", "bot_growth", "bot_ranks", "movers", "directory_daily", "bot_forecast")},
        "anomalies": ("day=2025-02-01",), "resource_health": ("day=2025-02-03",)}
    data = manifest(trends_built)
    assert data["run_id"] == report.run_id != old_run
    # Datasets the new record did not change keep the run that last wrote them.
    assert data["datasets"]["custom_daily"]["run_id"] == old_run
    first = data["datasets"]["bot_daily"]["partitions"][0]
    assert (first["partition"], first["run_id"]) == ("day=2025-01-25", old_run)
    assert data["datasets"]["bot_daily"]["date_max"] == "2025-02-04"
    # alpha's forecast as of 3 February stays beside the new one until its month is compacted:
    # a bot's current forecast is its newest as_of.
    outlook = load_dataset(trends_built, "bot_forecast").filter(pl.col("bot_id") == "alpha")
    assert sorted(set(outlook["as_of"].cast(pl.String))) == ["2025-02-03", "2025-02-04"]


def test_compact_merges_the_days_of_settled_months(trends_built: Settings) -> None:
    everything = {name: load_dataset(trends_built, name) for name in DATASETS}
    # Nothing settled yet: nothing to do, nothing touched.
    before = files_state(trends_built.export_dir)
    assert compact_exports(trends_built).months == ()
    assert files_state(trends_built.export_dir) == before
    # Three weeks later January is settled: its days become one file, February's stay.
    write_trend_archive(trends_built, [
        ("alpha", "2025-02-24 12:00:00+00", 3100, 310, 1, 50.0, 40.0, 400)])
    build_trends(trends_built)
    done = compact_exports(trends_built)
    root = trends_built.export_dir
    assert "bot_daily/month=2025-01" in done.months and done.files_after < done.files_before
    assert sorted(p.name for p in (root / "bot_daily/month=2025-01").iterdir()) == [
        "part-0.parquet"]
    assert len(list((root / "bot_daily/month=2025-02").iterdir())) == 4
    with store.reader(trends_built) as con:  # the views read the same rows as before
        assert con.execute("SELECT count(*) FROM trend_bot_daily WHERE day < '2025-02-04'"
                           ).fetchall() == [(30,)]
    for name in ("bot_daily", "bot_growth", "custom_daily", "resource_health"):
        spec = DATASETS[name]
        keys = list(dict.fromkeys([*spec.order, spec.time_column]))
        merged = load_dataset(trends_built, name).filter(pl.col(spec.time_column) < date(2025, 2, 1))
        assert merged.sort(keys).equals(everything[name].filter(
            pl.col(spec.time_column) < date(2025, 2, 1)).sort(keys)), name
    assert compact_exports(trends_built).months == ()  # and a second run has nothing to do


def test_compact_drops_the_forecasts_a_newer_one_superseded(trends_built: Settings) -> None:
    # alpha reports again on 20 March: its forecast as of then is written beside the one as of
    # 3 February, which stays until February (settled by then) is merged.
    write_trend_archive(trends_built, [
        ("alpha", "2025-03-20 12:00:00+00", 3100, 310, 1, 50.0, 40.0, 400)])
    build_trends(trends_built)

    def as_of() -> dict[str, list[str]]:
        frame = load_dataset(trends_built, "bot_forecast")
        return {bot: sorted({str(d) for d in frame.filter(pl.col("bot_id") == bot)["as_of"]})
                for bot in ("alpha", "beta")}

    assert as_of() == {"alpha": ["2025-02-03", "2025-03-20"], "beta": ["2025-02-03"]}
    done = compact_exports(trends_built)
    assert "bot_forecast/month=2025-02" in done.months
    assert as_of() == {"alpha": ["2025-03-20"], "beta": ["2025-02-03"]}


def test_a_crash_while_exporting_leaves_the_previous_export(
    trends_built: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = files_state(trends_built.export_dir)
    # New data in both months, so this run would rewrite partitions of several datasets...
    write_trend_archive(trends_built, [
        ("alpha", "2025-01-31 18:00:00+00", 1650, 165, 1, 50.0, 99.0, 200),
        ("alpha", "2025-02-04 12:00:00+00", 2900, 290, 1, 50.0, 40.0, 390)])
    # ...but the disk fills up while the fourth partition is being written (its fsync fails).
    real_fsync = os.fsync
    calls: list[int] = []

    def flaky_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(exports.os, "fsync", flaky_fsync)
    with pytest.raises(ExportError, match="No space left on device"):
        build_trends(trends_built)
    assert len(calls) == 4  # it wrote three partitions and failed on the fourth
    # Every file, manifest included, is byte for byte (and inode for inode) what it was, and
    # no temp file is left behind.
    assert files_state(trends_built.export_dir) == before

    monkeypatch.setattr(exports.os, "fsync", real_fsync)
    report = build_trends(trends_built)
    assert report.written > 0
    assert load_dataset(trends_built, "bot_daily")["day"].max().isoformat() == "2025-02-04"


def test_temp_files_of_a_killed_run_are_invisible_and_swept(trends_built: Settings) -> None:
    leftover = trends_built.export_dir / "bot_daily/month=2025-01/.part-0.parquet.dead-run.tmp"
    leftover.write_bytes(b"PAR1 half a file")
    orphan_dir = trends_built.export_dir / "bot_daily/month=2031-01"
    orphan_dir.mkdir()
    (orphan_dir / ".part-0.parquet.dead-run.tmp").write_bytes(b"PAR1")
    scratch = trends_built.export_dir / ".scratch-dead-run" / "bot_daily" / "month=2025-01"
    scratch.mkdir(parents=True)
    (scratch / "00000001.parquet").write_bytes(b"PAR1")
    with store.reader(trends_built) as con:
        assert con.execute("SELECT count(*) FROM trend_bot_daily").fetchall() == [(30,)]
    build_trends(trends_built)
    assert not leftover.exists() and not orphan_dir.exists()
    assert sorted(p.name for p in trends_built.export_dir.iterdir()) == sorted(
        [*DATASETS, "manifest.json", "_state"])


def test_an_empty_dataset_keeps_a_schema_file_until_rows_come(tmp_path: Path) -> None:
    settings = trend_settings_for(tmp_path)
    from conftest import TREND_BOTS, TREND_CUSTOM, TREND_STATS

    # gamma and delta alone: no event at all.
    quiet = [row for row in TREND_STATS if row[0] in ("gamma", "delta")]
    write_trend_archive(settings, quiet, (), TREND_BOTS)
    report = build_trends(settings)
    empty = settings.export_dir / "anomalies" / "empty.parquet"
    assert {d.name: d.written for d in report.datasets}["anomalies"] == ("empty",)
    assert [p.name for p in (settings.export_dir / "anomalies").rglob("*.parquet")] == [empty.name]
    with store.reader(settings) as con:
        assert con.execute("SELECT count(*) FROM trend_anomalies").fetchall() == [(0,)]
        assert "severity" in [r[0] for r in con.execute("DESCRIBE trend_anomalies").fetchall()]

    # alpha and beta come: a counter reset and an outage in January, a spike in February.
    write_trend_archive(settings, [r for r in TREND_STATS if r not in quiet], TREND_CUSTOM)
    report = build_trends(settings)
    done = {d.name: d for d in report.datasets}["anomalies"]
    assert (done.written, done.removed, done.rows) == (
        ("day=2025-01-28", "day=2025-01-30", "day=2025-02-01"), ("empty",), 3)
    assert not empty.exists()
    with store.reader(settings) as con:
        assert con.execute("SELECT count(*) FROM trend_anomalies").fetchall() == [(3,)]


def test_a_month_without_data_any_more_is_removed(trends_built: Settings) -> None:
    with store.writer(trends_built) as con:
        con.execute("DELETE FROM bot_stat_custom")
        con.execute("DELETE FROM bot_stats WHERE recorded_at >= '2025-02-01'")
    # Records deleted by hand leave no trace an incremental run could see: --full.
    report = build_trends(trends_built, full=True)
    assert {d.name: d.removed for d in report.datasets}["bot_daily"] == (
        "day=2025-02-01", "day=2025-02-02", "day=2025-02-03")
    assert not (trends_built.export_dir / "bot_daily/month=2025-02").exists()
    assert [p["partition"] for p in manifest(trends_built)["datasets"]["bot_daily"]["partitions"]
            ][-1] == "day=2025-01-31"
    # custom_daily lost all its rows: back to the schema file.
    assert [p["partition"] for p in manifest(trends_built)["datasets"]["custom_daily"]["partitions"]
            ] == ["empty"]


def test_an_unreadable_manifest_says_how_to_recover(trends_built: Settings) -> None:
    (trends_built.export_dir / "manifest.json").write_text("{not json")
    with pytest.raises(ExportError, match="Delete it and run `botstats trends`"):
        build_trends(trends_built)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_write_frame_formats_round_trip(tmp_path: Path, fmt: str) -> None:
    frame = pl.DataFrame({"bot_id": ["a", "b"], "n": [1, None]})
    path = tmp_path / f"out.{fmt}"
    exports.write_frame(frame, path, fmt)
    back = {"csv": pl.read_csv, "json": pl.read_json, "parquet": pl.read_parquet}[fmt](path)
    assert back.equals(frame)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_partition_streamed_from_spilled_slices_is_the_partition_written_whole(
        tmp_path: Path) -> None:
    # A partition staged from a spill's chunks (slices of bots, held in memory or in files,
    # streamed a row group at a time) has the bytes, hash and manifest entry of the same rows
    # staged as one frame: so an unchanged partition is still recognised, however the run
    # sliced its bots and wherever it spilled them.
    rows = exports.ROW_GROUP_ROWS + 1000  # more than one row group
    frame = pl.DataFrame({"bot_id": [f"{i // 7:08d}" for i in range(rows)],
                          "day": pl.date_range(pl.date(2026, 3, 1), pl.date(2026, 3, 7),
                                               eager=True).to_list() * (rows // 7) +
                          [None] * (rows % 7),
                          "value": range(rows)})
    whole = frame.drop_nulls("day")
    settled = date(2026, 4, 6)  # March is settled: one file
    entries = {}
    for how, memory in (("in memory", None), ("in files", 0)):
        spill = exports.Spill(tmp_path / f"spill-{memory}", memory=memory)
        for lo in range(0, rows, 30_000):  # slices of uneven chunks
            spill.add("data", frame.slice(lo, 30_000).drop_nulls("day"), "day", settled)
        assert bool(spill.held) == (memory is None)
        assert (spill.root / "data").exists() == (memory == 0)
        for made, parts in ((f"whole {how}", exports.partitions(whole, "day", settled)),
                            (f"streamed {how}", spill.streamed_parts("data"))):
            out = tmp_path / made
            with exports.export_batch(out, run_id="r1", written_at=NOW) as batch:
                batch.stage("data", parts, time_column="day")
            entries[made] = read_manifest_entry(out)
            assert pl.read_parquet(out / "data/month=2026-03/part-0.parquet").equals(whole)
        with exports.export_batch(tmp_path / f"whole {how}", run_id="r2",
                                  written_at=NOW) as batch:
            result = batch.stage("data", spill.streamed_parts("data"), time_column="day")
        assert (result.written, result.unchanged) == ((), ("month=2026-03",))
        spill.close()
    assert len({json.dumps(e, sort_keys=True) for e in entries.values()}) == 1
    assert entries["whole in memory"]["rows"] == whole.height


NOW = datetime(2026, 4, 1, tzinfo=UTC)


def read_manifest_entry(export_dir: Path) -> dict[str, Any]:
    [entry] = exports.read_manifest(export_dir)["datasets"]["data"]["partitions"]
    return {k: v for k, v in entry.items() if k not in ("run_id", "written_at")}
