"""Shared fixtures. The embedded-service fixtures come first; add yours below them."""

from __future__ import annotations

import copy
import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import settings as hypothesis_settings

from pipeline.core._loading import load_settings
from pipeline.core._settings import Settings
from pipeline.harvester._report import HarvestReport
from pipeline.service import Directory, Faults, RunningService, ServiceConfig, serve_in_thread

# One thread each for DuckDB and polars, in this process and every process it starts (they
# inherit the environment): the suite runs two workers on two cores over small data, where a
# second thread per library only adds the cost of handing work between threads
# (docs/development.md, "The suite"). Set before any test module loads polars; a value set
# outside wins.
os.environ.setdefault("POLARS_MAX_THREADS", "1")
os.environ.setdefault("BOTSTATS_STORE_THREADS", "1")
TEST_THREADS = int(os.environ["BOTSTATS_STORE_THREADS"])


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a `botstats` process a test starts: none of the user's BOTSTATS_*
    settings (the test's config is the whole truth), but the suite's one thread per library."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOTSTATS_")}
    env["BOTSTATS_STORE_THREADS"] = str(TEST_THREADS)
    return env | extra

# --- reading what a child process says, never without a limit --------------------------------
def read_line(stream: IO[str], timeout: float = 30) -> str:
    """The next line a child writes to ``stream`` ("" at its end); a test failure after
    ``timeout`` seconds without one, so a child that hangs silent fails the test that waits for
    it instead of holding the suite. (A reader thread: a pipe's buffered text has no timeout.)"""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not got:
        pytest.fail(f"no line from the child process within {timeout:g} s")
    return got[0]


def stderr_of(proc: subprocess.Popen[str], timeout: float = 10) -> str:
    """What an ended (or ending) child wrote to its stderr pipe, waiting ``timeout`` seconds at
    most (a grandchild may hold the pipe open)."""
    try:
        return proc.communicate(timeout=timeout)[1] or ""
    except (subprocess.TimeoutExpired, ValueError) as exc:
        return f"(its stderr could not be read: {exc})"


# --- the embedded bot-listing service ----------------------------------------------------
_FAULT_FIELDS = {f.name for f in dataclasses.fields(Faults)}

# The `service` fixture: small enough to start in milliseconds, with every kind of bot.
SMALL_SERVICE: dict[str, Any] = {"bots": 30, "history_days": 10, "stats_per_day": 2}


def start_service(**cfg_kwargs: Any) -> RunningService:
    """Start the service on a free loopback port; the caller closes it (or uses ``with``).

    Takes ``ServiceConfig`` fields, and ``Faults`` fields directly for convenience:
    ``start_service(bots=10, churn_every=1)`` is ``ServiceConfig(bots=10,
    faults=Faults(churn_every=1))``. ``host=`` is passed to ``serve_in_thread``."""
    host = cfg_kwargs.pop("host", "127.0.0.1")
    fault_kwargs = {name: cfg_kwargs.pop(name) for name in list(cfg_kwargs) if name in _FAULT_FIELDS}
    if fault_kwargs:
        cfg_kwargs["faults"] = dataclasses.replace(cfg_kwargs.get("faults", Faults()), **fault_kwargs)
    return serve_in_thread(ServiceConfig(**cfg_kwargs), host=host, port=0)


# Services a test has done with, still shutting down on their own threads: a test's teardown
# does not wait out uvicorn's shutdown (0.1-0.3 s of sleeping, some 500 times a suite); the
# session waits for whatever is left at its end.
_STOPPING: list[RunningService] = []


@pytest.fixture(scope="session", autouse=True)
def _services_closed() -> Iterator[None]:
    yield
    for svc in _STOPPING:
        svc.close()


@pytest.fixture
def service_factory() -> Iterator[Callable[..., RunningService]]:
    """``service_factory(**cfg_kwargs)`` starts a service (see ``start_service``); every one
    started is stopped after the test (and has ended by the session's end)."""
    started: list[RunningService] = []

    def factory(**cfg_kwargs: Any) -> RunningService:
        svc = start_service(**cfg_kwargs)
        started.append(svc)
        return svc

    yield factory
    for svc in started:
        svc.stop()
    _STOPPING[:] = [svc for svc in _STOPPING if svc.running] + started


@pytest.fixture
def service(service_factory: Callable[..., RunningService]) -> RunningService:
    """A healthy service: 30 bots, 10 days x 2 stats/day, no faults, clock = this hour."""
    return service_factory(**SMALL_SERVICE)


# --- running in parallel (pytest-xdist; the rules are in docs/development.md) -------------
# `make test` runs the suite on two workers. A test marked `clock` races or measures the clock
# (the scheduler firing, signals and kills landing mid-run, lock waits): all of them run on one
# worker, one after another, so two of them never slow each other down. A test marked `alone`
# must not share the CPU at all: while it runs, every other worker waits between its tests.
# The tests marked `slow` are handed out first: a long one left for the end would keep one
# worker busy while the other has nothing left to do.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("clock"):
            item.add_marker(pytest.mark.xdist_group("clock"))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _cpu_share(item.config, alone=item.get_closest_marker("alone") is not None):
        yield


@contextmanager
def _cpu_share(config: pytest.Config, *, alone: bool) -> Iterator[None]:
    """Held while a test runs (setup to teardown) on an xdist worker: shared by every test,
    exclusive for an `alone` one. The gate is taken first and, by an `alone` test, kept: once
    one waits, no worker starts a new test, so it cannot be starved. Workers of one run share
    the folder above their own temporary folders; a run without workers locks nothing."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    folder = config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
    with (folder / "tests.gate").open("a") as gate, (folder / "tests.cpu").open("a") as cpu:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(cpu, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(cpu, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(gate, fcntl.LOCK_UN)


# --- templates: an archive built once per worker, copied for each test ------------------------
# Creating an archive, harvesting a service or building the trends costs a second or more of
# CPU; copying the files it left costs milliseconds. A fixture that hands each test the same
# starting archive builds it once (per xdist worker) and gives every test its own copy, so
# tests never share an archive they write. Templates are only ever read by copying.
class Templates:
    """Folders built once per session, keyed by what built them."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._built: dict[Hashable, tuple[Path, Any]] = {}

    def get(self, key: Hashable, build: Callable[[Path], Any]) -> tuple[Path, Any]:
        """(folder, what ``build(folder)`` returned), building it the first time ``key`` is asked."""
        if key not in self._built:
            folder = self._root / f"template-{len(self._built)}"
            folder.mkdir()
            self._built[key] = (folder, build(folder))
        return self._built[key]


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    return Templates(tmp_path_factory.mktemp("templates"))


def copy_archive(source: Path, dest: Path) -> None:
    """Copy the archive whose catalog is ``source``, with its data folder, to catalog ``dest``
    (an archive opens wherever it is: its data paths are relative to the catalog)."""
    from pipeline.archive._store import ArchivePaths

    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    if ArchivePaths.at(source).data.is_dir():
        shutil.copytree(ArchivePaths.at(source).data, ArchivePaths.at(dest).data)


# --- other fixtures below ----------------------------------------------------------------


# --- property-based tests ------------------------------------------------------------------
# "ci" (the default): a fixed number of examples from a fixed seed, so the suite's run time and
# its verdict are the same on every machine. "deep": HYPOTHESIS_PROFILE=deep for a long search.
hypothesis_settings.register_profile("ci", max_examples=150, derandomize=True, deadline=None,
                                     database=None, print_blob=True)
hypothesis_settings.register_profile("deep", max_examples=5000, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# --- harvest: settings for a service, and both sides of "the archive equals the service" -----
# The harvest test files import the helpers below (`from conftest import ...`); the fixtures
# are named by the state they leave.
def harvest_settings_for(svc: RunningService, db: Path, overrides: dict[str, Any] | None = None,
                         config: Path | None = None) -> Settings:
    """Settings that harvest ``svc`` into ``db`` with fast retries; ``overrides`` use
    "section.key" names (and "user_token"/"bot_key"). ``config`` is an empty file, so the
    repository's own config.toml never leaks into a test."""
    if config is None:
        config = db.with_name("empty-config.toml")
        config.touch()
    return load_settings(config, env={}, overrides={
        "service.base_url": svc.base_url,
        "store.db": str(db),
        "retry.backoff_base": 0.01,
        "retry.backoff_max": 0.05,
        "store.threads": TEST_THREADS,
        **(overrides or {}),
    })


def harvested_copy(templates: Templates, svc: RunningService, db: Path,
                   overrides: dict[str, Any] | None = None) -> tuple[Settings, HarvestReport]:
    """Settings that harvest ``svc`` into ``db`` (as :func:`harvest_settings_for`), with ``db``
    already holding what a first `harvest` of ``svc`` writes, and that harvest's report.

    ``svc`` must be as it started (no advance, churn or post yet). The harvest itself runs once
    per worker, against a twin of ``svc`` (the same config and clock, so the same data); each
    caller gets a copy of its archive, in which the run names ``svc``'s address."""
    from pipeline.archive._store import ArchivePaths, connect
    from pipeline.core._redact import redact_url
    from pipeline.harvester._run import harvest

    clock = svc.directory.clock()
    twin_config = dataclasses.replace(svc.config, end=clock)

    def build(folder: Path) -> tuple[Path, HarvestReport]:
        with serve_in_thread(twin_config, host=svc.host, port=0) as twin:
            settings = harvest_settings_for(twin, folder / "archive.ducklake", overrides)
            report = harvest(settings)
        assert report.status == "complete", report.message
        return settings.db_path, report

    key = ("harvest", repr(twin_config), repr(sorted((overrides or {}).items())))
    _, (template, report) = templates.get(key, build)
    copy_archive(template, db)
    settings = harvest_settings_for(svc, db, overrides)
    con = connect(ArchivePaths.of(settings))
    try:
        con.execute("UPDATE harvest_runs SET base_url = ?", [redact_url(svc.base_url)])
    finally:
        con.close()
    return settings, copy.deepcopy(report)


@pytest.fixture
def harvest_settings(tmp_path: Path) -> Callable[..., Settings]:
    """``harvest_settings(svc, {"section.key": value})``: settings archiving ``svc`` into
    ``tmp_path / "archive.ducklake"``."""

    def make(svc: RunningService, overrides: dict[str, Any] | None = None) -> Settings:
        return harvest_settings_for(svc, tmp_path / "archive.ducklake", overrides)

    return make


def answer_json(handler: BaseHTTPRequestHandler, body: bytes, status: int = 200) -> None:
    """Send ``body`` as a JSON response from a test's own ``http.server`` handler."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def query(settings: Settings, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on the published archive (read-only, as an analyst opens it)."""
    from pipeline.archive import _store as store

    with store.reader(settings) as con:
        return con.execute(sql, list(params)).fetchall()


def _utc(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp).astimezone(UTC)


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def service_stat_rows(directory: Directory, bot_ids: Iterable[str] | None = None, *,
                      include_removed: bool = False) -> list[tuple[Any, ...]]:
    """The service's valid records as archive rows (bot_id, stat_id, recorded_at, users, guilds,
    shards, memory_load, cpu_load, commands_executed), sorted; every listed bot by default."""
    rows = []
    for bot_id in directory.bot_ids() if bot_ids is None else bot_ids:
        for r in directory.valid_stats(bot_id, include_removed=include_removed):
            rows.append((bot_id, r["id"], _utc(r["timestamp"]), r["users"], r["guilds"],
                         r["shards"], _num(r["memory_load"]), _num(r["cpu_load"]),
                         r["commands_executed"]))
    return sorted(rows)


def archived_stat_rows(settings: Settings) -> list[tuple[Any, ...]]:
    """Every row of bot_stats in the shape of :func:`service_stat_rows`, sorted (duplicates kept)."""
    return sorted(query(settings, "SELECT bot_id, stat_id, recorded_at, users, guilds, shards, "
                                  "memory_load, cpu_load, commands_executed FROM bot_stats"))


def _custom_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, separators=(",", ":"))


def _custom_num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def service_custom_rows(directory: Directory, bot_ids: Iterable[str] | None = None, *,
                        include_removed: bool = False) -> list[tuple[Any, ...]]:
    """Custom fields of the service's valid records as (bot_id, stat_id, recorded_at, name,
    value_text, value_num), sorted."""
    rows = []
    for bot_id in directory.bot_ids() if bot_ids is None else bot_ids:
        for r in directory.valid_stats(bot_id, include_removed=include_removed):
            for item in r.get("custom") or []:
                rows.append((bot_id, r["id"], _utc(r["timestamp"]), item["name"],
                             _custom_text(item.get("value")), _custom_num(item.get("value"))))
    return sorted(rows)


def archived_custom_rows(settings: Settings) -> list[tuple[Any, ...]]:
    return sorted(query(settings, "SELECT bot_id, stat_id, recorded_at, name, value_text, "
                                  "value_num FROM bot_stat_custom"))


def stat_keys(rows: Iterable[tuple[Any, ...]]) -> set[tuple[str, str]]:
    """(bot_id, stat_id) of stat rows."""
    return {(row[0], row[1]) for row in rows}


def assert_archive_has_no_duplicates(settings: Settings) -> None:
    """No key twice, and ``bot_latest_stat`` (what incremental runs compare with) names each
    bot's newest archived record."""
    for table, key in (("bot_stats", "bot_id, stat_id"),
                       ("bot_stat_custom", "bot_id, stat_id, name"), ("bots", "bot_id")):
        dupes = query(settings, f"SELECT {key}, count(*) FROM {table} GROUP BY ALL "
                                f"HAVING count(*) > 1 LIMIT 3")
        assert dupes == [], f"{table} holds duplicates: {dupes}"
    assert_latest_is_newest(settings)


def assert_archive_equals_service(settings: Settings, directory: Directory, *,
                                  bots: bool = False) -> None:
    """The archive holds exactly the service's valid records and custom fields, each once; with
    ``bots``, exactly the bots it lists too."""
    assert archived_stat_rows(settings) == service_stat_rows(directory)
    assert archived_custom_rows(settings) == service_custom_rows(directory)
    assert_archive_has_no_duplicates(settings)
    if bots:
        assert {b for (b,) in query(settings, "SELECT bot_id FROM bots")} == set(directory.bot_ids())


def assert_latest_is_newest(settings: Settings) -> None:
    newest = query(settings, "SELECT bot_id, max(recorded_at) FROM bot_stats GROUP BY bot_id "
                             "ORDER BY bot_id")
    kept = query(settings, "SELECT bot_id, recorded_at FROM bot_latest_stat ORDER BY bot_id")
    assert kept == newest, "bot_latest_stat is not each bot's newest archived record"
    astray = query(settings, "SELECT l.bot_id, l.stat_id FROM bot_latest_stat l LEFT JOIN "
                             "bot_stats s USING (bot_id, stat_id) "
                             "WHERE s.recorded_at IS DISTINCT FROM l.recorded_at LIMIT 3")
    assert astray == [], f"bot_latest_stat names records not archived at that time: {astray}"


# --- trends: a small hand-made archive whose datasets are worked out by hand in test_trends.py ---
# Days D1..D10 are 2025-01-25 (a Saturday) .. 2025-02-03. alpha: steady growth, a guild spike on
# D8, a counter reset on D4, two records on D3 (the second at 23:30 UTC, given as +01:00). beta:
# shrinking, no record on D4-D5. gamma: tiny (below the movers minimum). delta: only D3 and D10.
def _alpha() -> list[tuple[Any, ...]]:
    guilds = {1: 100, 2: 110, 4: 130, 5: 140, 6: 151, 7: 160, 8: 260, 9: 270, 10: 280}
    cpu = {1: 10, 2: 20, 4: 40, 5: 50, 6: 60, 7: 70, 8: 95, 9: 20, 10: 30}
    cmds = {1: 1000, 2: 1050, 4: 30, 5: 80, 6: 135, 7: 180, 8: 230, 9: 290, 10: 340}
    rows = [("alpha", f"2025-{_d(d)} 12:00:00+00", g * 10, g, 1, 85.0 if d == 8 else 50.0,
             float(cpu[d]), cmds[d]) for d, g in guilds.items()]
    rows += [("alpha", "2025-01-27 10:00:00+00", 1180, 118, 2, 50.0, 30.0, 1110),
             ("alpha", "2025-01-28 00:30:00+01", 1220, 122, None, 50.0, 90.0, 1150)]
    return rows


def _d(day: int) -> str:
    """D1..D10 as MM-DD."""
    return f"01-{24 + day}" if day <= 7 else f"02-{day - 7:02d}"


TREND_STATS: list[tuple[Any, ...]] = [  # bot, recorded_at, users, guilds, shards, mem, cpu, cmds
    *_alpha(),
    *[("beta", f"2025-{_d(d)} 08:00:00+00", u, g, None, None, None, None) for d, g, u in (
        (1, 50, 3000), (2, 48, 2900), (3, 46, 2800), (6, 40, 2500), (7, 39, 2400),
        (8, 38, 2300), (9, 37, 2200), (10, 35, 2100))],
    *[("gamma", f"2025-{_d(d)} 12:00:00+00", g * 5, g, None, None, None, None)
      for d, g in zip(range(1, 11), (2, 2, 3, 3, 4, 4, 5, 5, 6, 6), strict=True)],
    ("delta", "2025-01-27 12:00:00+00", 5000, 2000, None, None, None, None),
    ("delta", "2025-02-03 12:00:00+00", 5000, 2200, None, None, None, None),
]
TREND_CUSTOM: list[tuple[Any, ...]] = [  # bot, recorded_at, name, value_text, value_num
    ("alpha", "2025-01-25 12:00:00+00", "latency", "100", 100.0),
    ("alpha", "2025-01-25 12:00:00+00", "version", "1.0", None),
    ("alpha", "2025-01-26 12:00:00+00", "latency", "120", 120.0),
    ("alpha", "2025-01-26 12:00:00+00", "version", "1.0", None),
    ("alpha", "2025-01-27 10:00:00+00", "latency", "80", 80.0),
    ("alpha", "2025-01-27 10:00:00+00", "version", "1.1", None),
    ("alpha", "2025-01-27 23:30:00+00", "latency", "90", 90.0),
    ("alpha", "2025-01-27 23:30:00+00", "version", "1.2", None),
    ("alpha", "2025-01-28 12:00:00+00", "latency", "110", 110.0),
    ("alpha", "2025-01-28 12:00:00+00", "version", "1.2", None),
    ("alpha", "2025-01-28 12:00:00+00", "premium", "true", 1.0),
    ("alpha", "2025-01-28 12:00:00+00", "note", None, None),
]
TREND_BOTS: list[tuple[Any, ...]] = [  # bot, first_seen_at, removed_at
    ("alpha", "2025-01-25 06:00:00+00", None),
    ("beta", "2025-01-25 06:00:00+00", None),
    ("gamma", "2025-01-25 06:00:00+00", None),
    ("delta", "2025-01-27 06:00:00+00", None),
    ("epsilon", "2025-01-27 07:00:00+00", "2025-01-30 09:00:00+00"),
]
TREND_OVERRIDES: dict[str, Any] = {
    "trends.movers_min_guilds": 10, "trends.movers_top": 2, "trends.anomaly_window": 7,
    "trends.anomaly_min_days": 3, "trends.anomaly_threshold": 3.5, "trends.health_threshold": 80.0,
}


def trend_settings_for(root: Path, overrides: dict[str, Any] | None = None) -> Settings:
    """Settings with the archive and exports under ``root`` and the fixture's thresholds."""
    config = root / "empty-config.toml"
    config.touch()
    return load_settings(config, env={}, overrides={
        "store.db": str(root / "archive.ducklake"), "exports.dir": str(root / "exports"),
        "store.threads": TEST_THREADS, **TREND_OVERRIDES, **(overrides or {}),
    })


def write_trend_archive(settings: Settings, stats: Iterable[tuple[Any, ...]] = (),
                        custom: Iterable[tuple[Any, ...]] = (),
                        bots: Iterable[tuple[Any, ...]] = ()) -> None:
    """Insert hand-made rows (shapes as TREND_STATS, TREND_CUSTOM, TREND_BOTS) and publish."""
    from pipeline.archive import _store as store

    with store.writer(settings) as con:
        con.execute("BEGIN TRANSACTION")  # one commit: each is a catalog write in a DuckLake
        n = con.execute("SELECT count(*) FROM bot_stats").fetchall()[0][0]
        for i, (bot, at, users, guilds, shards, mem, cpu, cmds) in enumerate(stats, start=n):
            con.execute(
                "INSERT INTO bot_stats VALUES (?, ?, ?::TIMESTAMPTZ, ?, ?, ?, ?, ?, ?, '{}', "
                "'test', now())", [f"s{i}", bot, at, users, guilds, shards, mem, cpu, cmds])
        for bot, at, name, text, num in custom:
            con.execute(
                "INSERT INTO bot_stat_custom SELECT stat_id, bot_id, recorded_at, ?, ?, ?, 'test' "
                "FROM bot_stats WHERE bot_id = ? AND recorded_at = ?::TIMESTAMPTZ",
                [name, text, num, bot, at])
        for bot, seen, removed in bots:
            insert_bot(con, bot, bot, seen, seen, removed)
        con.execute("COMMIT")


def insert_bot(con: Any, bot_id: str, name: str, first_seen: Any, last_seen: Any,
               removed: Any = None, run_id: str = "test") -> None:
    """A bot as the listing would leave it: its record in bot_listing and its sighting in
    bot_last_seen (the `bots` view joins them)."""
    con.execute("INSERT INTO bot_listing VALUES (?, ?, '{}', ?::TIMESTAMPTZ, ?::TIMESTAMPTZ, ?)",
                [bot_id, name, first_seen, removed, run_id])
    con.execute("INSERT INTO bot_last_seen VALUES (?, ?::TIMESTAMPTZ, ?)",
                [bot_id, last_seen, run_id])


def _trend_template(folder: Path) -> Settings:
    settings = trend_settings_for(folder)
    write_trend_archive(settings, TREND_STATS, TREND_CUSTOM, TREND_BOTS)
    return settings


def _trends_built_template(templates: Templates, folder: Path) -> Settings:
    from pipeline.analytics.build._build import build_trends

    _, unbuilt = templates.get("trend_archive", _trend_template)
    settings = trend_settings_for(folder)
    copy_archive(unbuilt.db_path, settings.db_path)
    build_trends(settings)
    return settings


@pytest.fixture
def trend_archive(tmp_path: Path, templates: Templates) -> Settings:
    """Settings whose archive holds the TREND_* rows (nothing exported yet)."""
    _, template = templates.get("trend_archive", _trend_template)
    settings = trend_settings_for(tmp_path)
    copy_archive(template.db_path, settings.db_path)
    return settings


@pytest.fixture
def trends_built(trend_archive: Settings, templates: Templates) -> Settings:
    """The fixture archive after one `build_trends`: exports, manifest and views in place."""
    from pipeline.analytics.build._build import create_views
    from pipeline.archive._store import ArchivePaths, writer

    _, built = templates.get("trends_built", lambda f: _trends_built_template(templates, f))
    trend_archive.db_path.unlink()
    shutil.rmtree(ArchivePaths.of(trend_archive).data)
    copy_archive(built.db_path, trend_archive.db_path)
    shutil.copytree(built.export_dir, trend_archive.export_dir)
    with writer(trend_archive) as con:  # the views name the exports by their absolute path
        create_views(con, trend_archive.export_dir)
    return trend_archive


# --- report, compare, forecast: the embedded service's data harvested and its trends exported ---
EXPORTED_SERVICE: dict[str, Any] = {"bots": 40, "history_days": 60, "stats_per_day": 2,
                                    "end": datetime(2026, 11, 1, 12)}


@pytest.fixture(scope="session")
def exported_archive(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """40 bots x 60 days (two records a day, every shape of bot) after one `botstats run`:
    the archive and every trend dataset exported. Shared by several tests: read it only."""
    from pipeline.operate._runner import run

    root = tmp_path_factory.mktemp("exported")
    with start_service(**EXPORTED_SERVICE) as svc:
        settings = harvest_settings_for(svc, root / "archive.duckdb",
                                        {"exports.dir": str(root / "exports")})
        report = run(settings)
    assert report.status == "complete", report.message
    return settings
