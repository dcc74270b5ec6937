"""`botstats demo`: the whole pipeline in one command, against the embedded service.

Starts the embedded bot-listing service on a free loopback port (in a thread), runs the same job
as `botstats run` against it into a directory (``data/`` by default, the default archive, so the
follow-up commands work without flags), and returns what was written for the CLI to print.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from .. import archive
from ..analytics import read_manifest
from ..core import Settings, load_settings
from ..harvester import ProgressFn
from . import _lock as lock
from ._runner import RunReport, RunReportJson, run

ARCHIVE_NAME = "archive.ducklake"
# The demo service's clock at its first run in a directory. The service's ids are made from its
# clock (a bot created N days before it), so a later run must start the service from the same
# clock and move it on by the time since, or every bot would come back under a new id.
CLOCK_NAME = "demo-clock.json"

DEFAULT_DIR = "data"
DEFAULT_BOTS = 200
DEFAULT_DAYS = 90
DEFAULT_STATS_PER_DAY = 2
# The share of bots the demo's service plants events on (spikes, level shifts, outages...), so
# its anomalies and report show what they are for (see docs/service.md, planted events).
DEFAULT_EVENTS = 0.1


class DemoJson(TypedDict):
    """:class:`DemoReport` as `botstats demo --json` prints it."""

    status: str
    exit_code: int
    service: str
    archive: str
    exports: str
    tables: dict[str, int]
    datasets: dict[str, int]
    seconds: float
    run: RunReportJson


@dataclass
class DemoReport:
    run: RunReport
    base_url: str
    settings: Settings
    tables: dict[str, int] = field(default_factory=dict)
    datasets: dict[str, int] = field(default_factory=dict)  # export dataset -> rows
    seconds: float = 0.0

    def as_dict(self) -> DemoJson:
        return {
            "status": self.run.status, "exit_code": self.run.exit_code,
            "service": self.base_url, "archive": str(self.settings.db_path),
            "exports": str(self.settings.export_dir), "tables": self.tables,
            "datasets": self.datasets, "seconds": round(self.seconds, 2),
            "run": self.run.as_dict(),
        }


def demo_settings(directory: Path, base_url: str, user_token: str,
                  config: str | None = None) -> Settings:
    """The user's settings (config.toml, environment), pointed at the demo service and dir."""
    return load_settings(config, overrides={
        "service.base_url": base_url,
        "store.db": str(directory / ARCHIVE_NAME),
        "exports.dir": str(directory / "exports"),
        "run.lock_file": "",
        "user_token": user_token,  # the demo user's: users tables get a snapshot too
    })


def clear(directory: Path) -> None:
    """Remove what a previous demo wrote in ``directory`` (only those files)."""
    paths = archive.ArchivePaths.at(directory / ARCHIVE_NAME)
    for path in (paths.catalog, *lock.files(Path(f"{paths.catalog}.lock")), directory / CLOCK_NAME):
        path.unlink(missing_ok=True)
    shutil.rmtree(paths.data, ignore_errors=True)
    shutil.rmtree(directory / "exports", ignore_errors=True)


@dataclass(frozen=True)
class DemoOptions:
    """What the demo's service serves (``bots``, ``days`` of history, ``stats_per_day``, the
    share of bots with planted ``events``), the user's ``config`` file, whether to start
    ``fresh`` (a previous demo's files in the directory removed first), and ``now``: the wall
    clock (the current time unless given), which sets how far the service's clock moved since
    the directory's first run."""

    bots: int = DEFAULT_BOTS
    days: int = DEFAULT_DAYS
    stats_per_day: int = DEFAULT_STATS_PER_DAY
    events: float = DEFAULT_EVENTS
    config: str | None = None
    fresh: bool = False
    now: datetime | None = None


def demo(directory: str | Path = DEFAULT_DIR, options: DemoOptions | None = None, *,
         stop: threading.Event | None = None,
         on_progress: ProgressFn | None = None) -> DemoReport:
    """Serve, run, summarise, as ``options`` say. The service stops before this returns."""
    from ..service import ServiceConfig, serve_in_thread

    started = time.monotonic()
    directory, options = Path(directory), options or DemoOptions()
    if options.fresh:
        clear(directory)
    now = options.now or datetime.now(UTC)
    start = service_clock(directory, now)
    cfg = ServiceConfig(bots=options.bots, history_days=options.days,
                        stats_per_day=options.stats_per_day, events=options.events, end=start)
    with serve_in_thread(cfg, host="127.0.0.1", port=0) as svc:
        svc.directory.advance(intervals_since(start, now, cfg.interval_seconds))
        token = next(iter(svc.directory.user_tokens().values()))
        settings = demo_settings(directory, svc.base_url, token, options.config)
        report = run(settings, stop=stop, on_progress=on_progress)
        base_url = svc.base_url
    out = DemoReport(report, base_url, settings)
    if settings.db_path.exists():
        with archive.reader(settings) as con:
            out.tables = archive.table_counts(con)
    manifest = read_manifest(settings.export_dir)
    out.datasets = {name: int(entry.get("rows", 0))
                    for name, entry in manifest.get("datasets", {}).items()}
    out.seconds = time.monotonic() - started
    return out




def service_clock(directory: Path, now: datetime) -> datetime:
    """The demo service's clock at its first run in ``directory`` (saved then: now, to the hour).

    A missing or unreadable file starts a new clock; with an archive already there, that run
    sees other ids and ends partial, as any service whose bots all changed would.
    """
    path = directory / CLOCK_NAME
    try:
        saved = datetime.fromisoformat(json.loads(path.read_text(encoding="utf-8"))["start"])
        if saved.tzinfo is not None and saved <= now:
            return saved
    except (OSError, ValueError, KeyError, TypeError):
        pass
    start = now.replace(minute=0, second=0, microsecond=0)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"start": start.isoformat()}) + "\n", encoding="utf-8")
    except OSError:
        pass  # the run's own checks of the directory say what is wrong with it, and the fix
    return start


def intervals_since(start: datetime, now: datetime, interval_seconds: int) -> int:
    """Whole stat intervals from ``start`` to ``now``: the records the service made meanwhile."""
    return max(0, int((now - start).total_seconds()) // interval_seconds)


def next_steps(report: DemoReport, directory: str | Path, exe: str) -> str:
    """What to try after the demo, as commands for this installation (``exe`` calls botstats)."""
    db = report.settings.db_path
    db_flag = "" if Path(directory) == Path(DEFAULT_DIR) else f" --db {db}"
    # The week's top growers by name (the service's listing names them; the id beside it).
    query = ("SELECT n.name, g.bot_id, g.guilds, g.guilds_change_7d FROM trend_bot_growth AS g "
             "JOIN trend_bot_names AS n USING (bot_id) WHERE g.day = (SELECT max(day) FROM "
             "trend_bot_growth) ORDER BY g.guilds_change_7d DESC NULLS LAST, g.bot_id LIMIT 5")
    return "\n".join([
        "",
        f"Done in {report.seconds:.1f} s. Three things to try next:",
        "",
        "  1. Query the archive (read-only: safe to keep open while harvests run):",
        f"       {exe}{db_flag} sql \"{query}\"",
        f"       or: {Path(exe).with_name('duckdb')} -cmd \"$({exe}{db_flag} sql --attach)\"",
        "  2. Explore it in the notebook:",
        "       .venv/bin/pip install -e '.[notebooks]' jupyterlab",
        "       .venv/bin/jupyter lab notebooks/explore.ipynb",
        "  3. Keep it up to date:",
        f"       {exe}{db_flag} schedule --dry-run    # the next runs of [schedule] in config.toml",
        f"       {exe}{db_flag} schedule              # the scheduler daemon (Ctrl+C stops it)",
        f"       {exe} cron                  # or a crontab line / systemd timer instead",
    ])
