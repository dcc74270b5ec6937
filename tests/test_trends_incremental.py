"""Incremental trends: every run recomputes only the days the archive's changes touch, and its
exports equal, row for row, a build from scratch of the same archive.

The archive is harvested from the embedded service over loopback; between trend runs it gains
new records, a late record (older than its bot's newest), a posted record that resets a counter
and changes a text field, a record changed in place (also moved in time), a churned bot (one
removed, one new). After every run the export is compared, partition by partition, with a
from-scratch `build_trends` into another directory: the runs read the archive in slices of a
few bots, the from-scratch build in one, so the slicing is checked too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import httpx
import polars as pl
import pytest
from conftest import harvest_settings_for, write_trend_archive
from polars.testing import assert_frame_equal

from pipeline.analytics.build import _slices as slices_module
from pipeline.analytics.build._anomalies import HOLD_DAYS
from pipeline.analytics.build._build import DATASETS, TrendsReport, build_trends
from pipeline.analytics.build._jobs import bot_daily, custom_daily
from pipeline.analytics.build._window import (
    STATE_CHANGES,
    Window,
    WindowUnavailable,
    carried,
    changed_state,
    directory_change,
    last_rows,
    next_state,
    read_state,
    week_start,
)
from pipeline.analytics.exports._exports import read_manifest
from pipeline.archive import _queries as queries
from pipeline.archive import _store as store
from pipeline.core._settings import Settings
from pipeline.harvester._report import HarvestOptions
from pipeline.harvester._run import harvest
from pipeline.service import RunningService

END = datetime(2026, 3, 3, 12, tzinfo=UTC)  # the service's clock: 40 days span Jan-Mar


def with_export_dir(settings: Settings, export_dir: Path) -> Settings:
    return dataclasses.replace(
        settings, exports=dataclasses.replace(settings.exports, dir=export_dir))


def read_datasets(export_dir: Path) -> dict[str, pl.DataFrame]:
    """Each dataset as a reader sees it (every file the manifest lists), sorted by its order
    and time; bot_forecast as its current rows (each bot's newest ``as_of``), which is what a
    from-scratch build has: an incremental run may leave older ones until `botstats compact`."""
    manifest = read_manifest(export_dir)
    out = {}
    for name, spec in DATASETS.items():
        files = [export_dir / p["path"] for p in manifest["datasets"][name]["partitions"]]
        frame = pl.read_parquet(files, hive_partitioning=False)
        if name == "bot_forecast":
            frame = frame.filter(pl.col("as_of") == pl.col("as_of").max().over("bot_id", "metric"))
        keys = list(dict.fromkeys([*spec.order, spec.time_column]))
        out[name] = frame.sort(keys, maintain_order=True)
    return out


def assert_same_exports(got: Path, want: Path) -> None:
    """Same datasets, same rows; floats to rounding. (The files may differ: a day the
    incremental runs wrote on its own is part of its month's file in a build from scratch.)"""
    mine, theirs = read_datasets(got), read_datasets(want)
    for name, frame in theirs.items():
        try:
            assert_frame_equal(mine[name], frame, check_exact=False, rel_tol=1e-12, abs_tol=1e-9)
        except AssertionError as exc:
            raise AssertionError(f"{name} differs: {exc}") from None


# Slices of a few bots: a run's first month then merges its earlier rows slice by slice.
SLICE_ROWS = 200


class Scenario:
    """An archive harvested from ``svc``, its export, and a from-scratch build to compare."""

    def __init__(self, svc: RunningService, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.svc = svc
        self.root = root
        self.monkeypatch = monkeypatch
        self.settings = harvest_settings_for(svc, root / "archive.ducklake",
                                             {"exports.dir": str(root / "exports"),
                                              "trends.movers_top": 3})
        self.builds = 0

    def harvest(self, **kw: Any) -> None:
        report = harvest(self.settings, HarvestOptions(**kw))
        assert report.status == "complete", report.message

    def trends(self, **kw: Any) -> TrendsReport:
        """An (incremental) build in slices, then a check against a from-scratch build in one."""
        with self.monkeypatch.context() as sliced:
            sliced.setattr(slices_module, "CHUNK_ROWS", SLICE_ROWS)
            report = build_trends(self.settings, **kw)
        self.builds += 1
        scratch = with_export_dir(self.settings, self.root / f"scratch-{self.builds}")
        assert build_trends(scratch).mode == "full"
        assert_same_exports(self.settings.export_dir, scratch.export_dir)
        return report

    def archive(self) -> duckdb.DuckDBPyConnection:
        """The archive, read-write, as an operator's own duckdb session opens it."""
        return store.connect(store.ArchivePaths.of(self.settings))


@pytest.fixture
def scenario(service_factory: Callable[..., RunningService], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Scenario:
    # Planted events: spikes, shifts and outages whose rows an incremental run must settle
    # exactly as a full build does.
    svc = service_factory(bots=16, history_days=40, stats_per_day=4, end=END, events=0.5)
    return Scenario(svc, tmp_path, monkeypatch)


def settled(first_changed: date) -> date:
    """Where an incremental run starts computing: the Monday on or before the first changed
    day (resource_health's weeks are whole)."""
    return week_start(first_changed)


def files_state(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_incremental_exports_equal_a_build_from_scratch(scenario: Scenario) -> None:
    s = scenario
    s.harvest()
    # A record of 12 days ago the archive will only get later (a late record), with its
    # custom fields: deleted now, archived again by the `harvest --full` below.
    with s.archive() as con:
        late_bot, late_stat, late_at = con.execute(
            "SELECT bot_id, stat_id, recorded_at FROM bot_stats WHERE recorded_at = "
            "$t ORDER BY bot_id LIMIT 1", {"t": END - timedelta(days=12)}).fetchall()[0]
        con.execute("DELETE FROM bot_stat_custom WHERE bot_id = $b AND stat_id = $s",
                    {"b": late_bot, "s": late_stat})
        con.execute("DELETE FROM bot_stats WHERE bot_id = $b AND stat_id = $s",
                    {"b": late_bot, "s": late_stat})

    first = s.trends()
    assert (first.mode, first.reason) == ("full", "no previous incremental export")

    def late_is_back() -> bool:
        with s.archive() as con:
            return bool(con.execute("SELECT count(*) FROM bot_stats WHERE bot_id = $b AND "
                                    "stat_id = $s", {"b": late_bot, "s": late_stat}).fetchall()[0][0])

    # New records for every bot (a day and a half: the window is this week). A harvest that
    # reads whole /stats lists brings the late record back already.
    s.svc.directory.advance(6)
    s.harvest()
    late_back = late_is_back()
    report = s.trends()
    assert (report.mode, report.since) == (
        "incremental", settled(late_at.date() if late_back else END.date())), report.reason
    if not late_back:
        # The days the new records land on, each its own file; nothing before them.
        assert {d.name: d.written for d in report.datasets}["bot_daily"] == (
            "day=2026-03-03", "day=2026-03-04", "day=2026-03-05")

    # A record the bot posts itself: its counter restarts and its region (text) changes.
    bot_id = s.svc.directory.bot_ids()[0]
    with httpx.Client(base_url=s.svc.base_url) as http:
        posted = http.post(f"/bots/{bot_id}/stats", headers={
            "Authorization": s.svc.directory.bot_key(bot_id)}, json={
            "users": 10, "guilds": 5, "commands_executed": 3,
            "custom": [{"name": "region", "value": "moon-1"}]})
    assert posted.status_code == 201, posted.text
    s.svc.directory.advance(1)
    s.harvest()
    assert s.trends().mode == "incremental"

    # The late record (hourly runs add only what is newer than a bot's newest record): a
    # `harvest --full` archives it, 12 days after its time.
    s.harvest(full=True)
    report = s.trends()
    assert late_is_back()
    if not late_back:
        assert (report.mode, report.since) == ("incremental", settled(late_at.date()))
    # Churn: a new bot, and a removed one (its history stays; directory_daily counts it).
    s.svc.directory.churn()
    s.svc.directory.advance(1)
    s.harvest()
    assert s.trends().mode == "incremental"

    manifest = read_manifest(s.settings.export_dir)
    january = [p for p in manifest["datasets"]["bot_daily"]["partitions"]
               if p["partition"] == "month=2026-01"]
    assert january and january[0]["run_id"] == first.run_id  # months before: untouched

    # A record changed in the archive (as if a run had archived a wrong copy of it), and
    # another moved two days later; then `harvest --full` puts both back as the service has
    # them. The second move's earlier day is known only from before the rewrite.
    with s.archive() as con:
        changed, moved = con.execute(
            "SELECT bot_id, stat_id FROM bot_stats WHERE recorded_at = $t AND bot_id IN "
            "(SELECT bot_id FROM bots WHERE removed_at IS NULL) ORDER BY bot_id LIMIT 2",
            {"t": END - timedelta(days=20)}).fetchall()
        con.execute("UPDATE bot_stats SET guilds = 0, raw = '{\"stale\":true}', "
                    "archived_at = now() WHERE bot_id = $b AND stat_id = $s",
                    {"b": changed[0], "s": changed[1]})
        con.execute("UPDATE bot_stats SET recorded_at = recorded_at + INTERVAL 2 DAY, "
                    "raw = '{\"stale\":true}', archived_at = now() "
                    "WHERE bot_id = $b AND stat_id = $s", {"b": moved[0], "s": moved[1]})
        con.execute("UPDATE bot_stat_custom SET recorded_at = recorded_at + INTERVAL 2 DAY "
                    "WHERE bot_id = $b AND stat_id = $s", {"b": moved[0], "s": moved[1]})
    report = s.trends()
    assert (report.mode, report.since) == ("incremental",
                                           settled((END - timedelta(days=20)).date()))
    s.harvest(full=True)
    report = s.trends()
    with s.archive() as con:
        assert con.execute("SELECT sum(stats_updated) FROM harvest_runs WHERE run_id = (SELECT "
                           "max(run_id) FROM harvest_runs)").fetchall() == [(2,)]

    # Nothing new: nothing computed, no file touched.
    before = files_state(s.settings.export_dir)
    report = build_trends(s.settings)
    assert (report.mode, report.written) == ("unchanged", 0)
    assert files_state(s.settings.export_dir) == before

    # --full rebuilds everything, and equals a build from scratch.
    s.svc.directory.advance(1)
    s.harvest()
    assert s.trends(full=True).mode == "full"


def test_changed_trend_settings_rebuild_everything(trends_built: Settings) -> None:
    report = build_trends(dataclasses.replace(
        trends_built, trends=dataclasses.replace(trends_built.trends, movers_top=1)))
    assert (report.mode, report.reason) == ("full", "the [trends] settings or the datasets' "
                                                    "columns changed")


def test_a_missing_export_file_or_bad_watermark_rebuilds(trends_built: Settings) -> None:
    (trends_built.export_dir / "_state" / "bots.parquet").unlink()
    write_trend_archive(trends_built, [
        ("alpha", "2025-02-04 12:00:00+00", 2900, 290, 1, 50.0, 40.0, 390)])
    report = build_trends(trends_built)
    assert report.mode == "full" and "cannot be continued" in report.reason
    manifest_path = trends_built.export_dir / "manifest.json"
    manifest_path.write_text(manifest_path.read_text().replace(
        read_manifest(trends_built.export_dir)["source"]["watermark"], "yesterday"))
    report = build_trends(trends_built)
    assert report.mode == "full" and "watermark is unreadable" in report.reason


def test_a_late_record_rewrites_only_the_days_it_can_change(trends_built: Settings) -> None:
    # 2025-01-29 is a Wednesday: the run computes from the Monday of its week (resource_health's
    # week is one row), an event's row of up to HOLD_DAYS before it may change, and every other
    # row from that day on; of those, only the files whose rows did change are written.
    write_trend_archive(trends_built, [
        ("gamma", "2025-01-29 18:00:00+00", 100, 20, None, None, None, None)])
    report = build_trends(trends_built)
    assert (report.mode, report.since) == ("incremental", date(2025, 1, 27))
    written = {d.name: d.written for d in report.datasets}
    assert written["bot_daily"] == ("day=2025-01-29",)
    assert all(key >= f"day=2025-01-{29 - HOLD_DAYS}" for keys in written.values() for key in keys)
    scratch = with_export_dir(trends_built, trends_built.export_dir.parent / "scratch")
    build_trends(scratch)
    assert_same_exports(trends_built.export_dir, scratch.export_dir)


# --- the pure pieces, on frames of a few rows ------------------------------------------------
T0 = datetime(2025, 3, 3, 12, tzinfo=UTC)  # a Monday


def _stats(counters: list[int | None]) -> pl.LazyFrame:
    n = len(counters)
    return pl.LazyFrame({
        "bot_id": ["b"] * n, "stat_id": [f"s{i}" for i in range(n)],
        "recorded_at": [T0 + timedelta(days=i) for i in range(n)],
        "users": list(range(n)), "guilds": list(range(n)), "shards": [None] * n,
        "cpu_load": [None] * n, "memory_load": [None] * n, "commands_executed": counters,
    }).cast({"shards": pl.Int64, "cpu_load": pl.Float64, "memory_load": pl.Float64,
             "commands_executed": pl.Int64})


def test_bot_daily_from_a_carried_counter_equals_the_whole_history() -> None:
    # Counter 10, null, 25, 5 (a reset), 9 over five days; the window starts on day 3.
    stats = _stats([10, None, 25, 5, 9])
    whole = bot_daily(stats).collect().sort("day")
    start = (T0 + timedelta(days=2)).date()
    before = whole.filter(pl.col("day") < start)
    carry = before.tail(1).select("bot_id", "commands_counter")
    assert carry.item(0, "commands_counter") == 10  # carried over the null day
    part = bot_daily(stats.filter(pl.col("recorded_at") >= T0 + timedelta(days=2)),
                     carry.lazy()).collect().sort("day")
    assert part.equals(whole.filter(pl.col("day") >= start))
    assert part["commands_executed"].to_list() == [15, 5, 4]
    # Without the carried counter the first day in the window would count nothing.
    alone = bot_daily(stats.filter(pl.col("recorded_at") >= T0 + timedelta(days=2)))
    assert alone.collect().sort("day")["commands_executed"].to_list() == [None, 5, 4]


def test_records_at_the_same_instant_are_taken_in_stat_id_order() -> None:
    stats = _stats([10, 20]).with_columns(recorded_at=pl.lit(T0), stat_id=pl.Series(["z", "a"]))
    out = bot_daily(stats).collect()
    # "a" (counter 20) comes first whatever the archive's order: "z" then resets to 10.
    assert out.select("users", "commands_executed", "commands_resets",
                      "commands_counter").row(0) == (0, 10, 1, 10)


def test_custom_daily_from_a_carried_text_equals_the_whole_history() -> None:
    values = ["eu", "eu", "us", "us", "eu"]
    custom = pl.LazyFrame({
        "bot_id": ["b"] * 5, "stat_id": [f"s{i}" for i in range(5)],
        "recorded_at": [T0 + timedelta(days=i) for i in range(5)], "name": ["region"] * 5,
        "value_text": values, "value_num": [None] * 5,
    }).cast({"value_num": pl.Float64})
    whole = custom_daily(custom).collect().sort("day")
    start = (T0 + timedelta(days=3)).date()
    last = whole.filter(pl.col("day") < start).tail(1)
    carry = last.select("bot_id", "name", "value_text", "changed_at")
    part = custom_daily(custom.filter(pl.col("recorded_at") >= T0 + timedelta(days=3)),
                        carry.lazy()).collect().sort("day")
    assert part.equals(whole.filter(pl.col("day") >= start))
    # Day 4 keeps "us", which appeared on day 3 (before the window): no change that day.
    assert part.select("value_text", "changed_at", "changes").rows() == [
        ("us", T0 + timedelta(days=2), 0), ("eu", T0 + timedelta(days=4), 1)]


def test_next_state_keeps_the_last_row_before_and_after_the_start() -> None:
    day = [date(2025, 3, d) for d in range(1, 11)]
    firsts = pl.DataFrame({"bot_id": ["a", "b"], "first_day": [day[0], day[1]]})
    lasts = pl.DataFrame({"bot_id": ["a", "b"], "last_day": [day[4], day[2]],
                          "commands_counter": [50, 20]})
    new = pl.LazyFrame({"bot_id": ["a", "a", "c"], "day": [day[7], day[8], day[8]],
                        "commands_counter": [70, None, 5]})
    summary = last_rows(new.collect(), ("bot_id",), ("commands_counter",))
    state = next_state(summary, ("bot_id",), ("commands_counter",), firsts, lasts)
    assert state.rows() == [
        ("a", day[0], day[8], None),  # new rows: the last of them
        ("b", day[1], day[2], 20),  # no new rows: as before the start
        ("c", day[8], day[8], 5),  # a new bot
    ]
    full = next_state(summary, ("bot_id",), ("commands_counter",), None, None)
    assert full.rows() == [("a", day[7], day[8], None), ("c", day[8], day[8], 5)]


def test_a_state_is_written_as_the_keys_that_changed_beside_it(tmp_path: Path) -> None:
    day = date(2025, 3, 1)
    old = pl.DataFrame({"bot_id": [f"b{i}" for i in range(8)], "last_day": [day] * 8,
                        "counter": [None, *range(1, 8)]})
    old.write_parquet(tmp_path / "s.parquet")
    # One bot moved on, one is new: those two rows beside the state, which reads back whole.
    new = pl.concat([old.with_columns(
        last_day=pl.when(pl.col("bot_id") == "b0").then(date(2025, 3, 2)).otherwise("last_day")),
        pl.DataFrame({"bot_id": ["b9"], "last_day": [day], "counter": [9]})])
    files, writes = changed_state(old, new, ["s.parquet"], "s.parquet", "r2")
    assert files == ["s.parquet", "s.r2.parquet"] and list(writes) == ["s.r2.parquet"]
    assert writes["s.r2.parquet"]["bot_id"].to_list() == ["b0", "b9"]  # a null counter is equal
    writes["s.r2.parquet"].write_parquet(tmp_path / "s.r2.parquet")
    assert read_state(tmp_path, files, new.schema, ("bot_id",)).equals(new.sort("bot_id"))
    # Nothing changed: nothing written. Many keys changed, or too many files: the base again.
    assert changed_state(new, new, files, "s.parquet", "r3") == (files, {})
    assert changed_state(old, old.with_columns(counter=pl.lit(0)), ["s.parquet"], "s.parquet",
                         "r3")[0] == ["s.parquet"]
    many = ["s.parquet", *(f"s.r{i}.parquet" for i in range(STATE_CHANGES))]
    assert changed_state(old, new, many, "s.parquet", "r9")[0] == ["s.parquet"]
    assert changed_state(None, new, files, "s.parquet", "r9")[0] == ["s.parquet"]


def test_directory_change_finds_the_first_day_whose_bot_counts_differ() -> None:
    d = [date(2025, 3, n) for n in range(1, 6)]
    exported = pl.LazyFrame({"day": d[:4], "bots_first_seen": [3, 0, 0, 1],
                             "bots_removed": [0, 0, 0, 0]})
    same = pl.LazyFrame({"day": [d[0], d[3]], "bots_first_seen": [3, 1],
                         "bots_removed": [None, None]}).cast({"bots_removed": pl.Int64})
    assert directory_change(same, exported) is None
    # A bot that came back (removed_at cleared) leaves a removal fewer on day 3.
    exported = exported.with_columns(bots_removed=pl.Series([0, 0, 1, 0]))
    assert directory_change(same, exported) == d[2]


def test_week_start_is_the_monday_on_or_before() -> None:
    assert [week_start(date(2025, 3, n)) for n in (2, 3, 9)] == [
        date(2025, 2, 24), date(2025, 3, 3), date(2025, 3, 3)]


def test_changes_since_a_watermark(trend_archive: Settings) -> None:
    with store.writer(trend_archive) as con:
        everything = queries.changes_since(con, None)
        assert everything.first_day == date(2025, 1, 25)
        assert queries.changes_since(con, everything.watermark) == queries.Changes(
            None, everything.watermark)
        con.execute("INSERT INTO bot_stats SELECT 'late', bot_id, '2025-01-28 01:00:00+00', users, "
                    "guilds, shards, memory_load, cpu_load, commands_executed, raw, 'r2', now() "
                    "FROM bot_stats WHERE bot_id = 'gamma' LIMIT 1")
        later = queries.changes_since(con, everything.watermark)
        assert later.first_day == date(2025, 1, 28) and later.watermark > everything.watermark
        # A record rewritten to a later day: the day it moved from is counted too.
        con.execute("UPDATE bot_stats SET recorded_at = '2025-02-02 01:00:00+00' "
                    "WHERE stat_id = 'late'")
        moved = queries.changes_since(con, later.watermark)
        assert moved.first_day == date(2025, 1, 28) and moved.watermark > later.watermark
        with pytest.raises(ValueError):
            queries.changes_since(con, "yesterday")


def test_window_since_keeps_the_recomputed_days() -> None:
    frame = pl.LazyFrame({"day": [date(2025, 3, 2), date(2025, 3, 3)]})
    assert Window(date(2025, 3, 3)).since(frame, "day").collect().height == 1
    assert Window(None).since(frame, "day").collect().height == 2


def test_carried_reads_months_back_only_until_every_key_is_found(tmp_path: Path) -> None:
    d = [date(2025, 3, 1), date(2025, 2, 10), date(2025, 1, 5)]
    march, february = tmp_path / "march.parquet", tmp_path / "february.parquet"
    pl.DataFrame({"bot_id": ["a", "a"], "day": [d[0], date(2025, 3, 20)],
                  "commands_counter": [3, 4]}).write_parquet(march)
    pl.DataFrame({"bot_id": ["a", "b"], "day": [d[1], d[1]],
                  "commands_counter": [2, 7]}).write_parquet(february)
    start = date(2025, 3, 10)
    state = pl.DataFrame({  # a, b: rows on both sides of start; c: its last row long before
        "bot_id": ["a", "b", "c", "d"], "first_day": [d[2], d[2], d[2], date(2025, 3, 12)],
        "last_day": [date(2025, 3, 20), date(2025, 3, 11), d[2], date(2025, 3, 12)],
        "commands_counter": [4, 8, 1, 9]})
    gone = tmp_path / "january-that-is-not-there.parquet"
    got = carried(state, ("bot_id",), start, [march, february, gone], "commands_counter")
    # a from March (its row after start ignored), b from February, c from the state; d has
    # no row before start. January was never opened (it does not even exist).
    assert sorted(got.rows()) == [("a", d[0], 3), ("b", d[1], 7), ("c", d[2], 1)]
    with pytest.raises(WindowUnavailable):
        carried(state, ("bot_id",), start, [march], "commands_counter")  # b is nowhere
