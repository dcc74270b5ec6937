"""The hourly job as the directory grows: 10,000 and 100,000 bots on one machine.

For each size the embedded service runs in its own process (``--bots N``, 10 days of history,
one record a day, at noon, ``/stats`` paged by 100, its clock on a Sunday late in a month, so
the hourly run's records are the Monday after's and that month holds every earlier day).
Measured, each in processes of its own:

- **first harvest**: the steps of `botstats run` into an empty archive (the harvest in one
  process; a full trends build and the HTML report in a second, as `botstats run` re-executes
  itself for them);
- **hourly run**: the service is warmed (``POST /_admin/warm``, as an indexed service is) and
  moves one interval forward (one new record a bot), then `botstats run` itself (``python -m
  pipeline run --json``): harvest, incremental trends, report. Its peak RSS is the kernel's
  for the process over both of its images (``os.wait4``); per part, what the run reports;
- **hourly, by step**: one interval forward, the same steps as the first harvest's, each
  measured (below);
- with ``--same-process``, **hourly, one process** as well: one more interval forward, every
  step in one process (what `botstats run` does with ``[run].fresh_process = false``);
- **1% new**: one bot in a hundred posts a record (``POST /bots/:id/stats`` with its key, from
  the service's credentials file), which the service stamps at the end of the current interval
  (the next day: the other bots report that day at noon), then `botstats run`.

For `botstats run` (the hourly run and the 1% run), the bytes written per part: by the harvest
(records and the run's bookkeeping), the bot rows (``bot_listing``, ``bot_last_seen``), each
trend dataset, the trends' state and manifest, and the report: every file new or changed under
the work folder, by size; "catalog and scratch" is what the kernel counted for the process
(``/proc/<pid>/io``, kept across its ``exec`` and its children) beyond those files: the SQLite
catalog's log and pages, scratch files, logs. With ``--s3`` the data files live on the S3
server the tests use (moto, in a process of its own, ``bench/_s3.py``), which counts the bytes
uploaded to it per table: those are the harvest's and the bot rows' parts then.

The venv's shared libraries are dropped from the page cache first (see ``cold_libraries``).
Per measured step: wall, CPU (every thread), peak RSS (``VmHWM``, reset before each step through
``/proc/self/clear_refs``) and what it was made of (the highest ``RssAnon``, the process's own
data, and ``RssFile``, pages of the libraries' code, sampled every 10 ms), bytes handed to the
storage layer (``/proc/self/io``) and requests (listing pages from the service's counter; the
rest are each bot's ``/stat`` and ``/stats``); for each process its wall, CPU and bytes written
(``os.wait4``); and the service's CPU and peak RSS. The target (issue "Scale up, then out"):
the hourly run's peak RSS within 400 MB at every size; (issue "Hourly writes as small as what
is new") written, at most 15 MB by the hourly run at 10,000 bots, 100 MB at 100,000, and 5 MB
by the 1% run at 100,000.

    .venv/bin/python bench/directory.py                        # 10,000 and 100,000 bots
    .venv/bin/python bench/directory.py --bots 200,2000        # a quick look (the tests)
    .venv/bin/python bench/directory.py --work W --keep        # again: the hourly runs only
    .venv/bin/python bench/directory.py --same-process         # and the hourly run in one process
    .venv/bin/python bench/directory.py --bots 10000 --s3      # the data files in object storage

Figures are dated in bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _process import run_measured
from _s3 import S3Server
from _service import Service

REPO = Path(__file__).resolve().parent.parent
END = "2026-10-25T12:00:00Z"  # a Sunday: the hourly run's record is Monday 26 October, noon
DAYS = 10
PAGE = 100
TARGET_MB = 400.0
STEPS = ("harvest", "trends", "report")
ONE_PERCENT = 100  # one bot in this many posts a record for the "1% new" run
# Written by the hourly run (MB), per size, and by the 1% run at 100,000 bots.
WRITE_TARGETS = {("hourly", 10_000): 15.0, ("hourly", 100_000): 100.0,
                 ("one-percent", 100_000): 5.0}
BOT_ROWS = ("bots", "bot_listing", "bot_last_seen")


@dataclass
class Step:
    seconds: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    written_mb: float = 0.0
    anon_mb: float = 0.0  # the highest RssAnon sampled: the process's own data
    file_mb: float = 0.0  # the highest RssFile sampled: pages of the libraries' code and files
    requests: int = 0
    listing_requests: int = 0


@dataclass
class Job:
    bots: int
    job: str  # first | hourly | hourly-steps | hourly-one | one-percent
    status: str = ""
    seconds: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    written_mb: float = 0.0
    records: int = 0
    service_cpu_s: float = 0.0
    service_peak_mb: float = 0.0
    steps: dict[str, Step] = field(default_factory=dict)
    # MB written per part (see the module docstring); uploaded: with --s3, the server's count.
    parts: dict[str, float] = field(default_factory=dict)
    uploaded_mb: float = 0.0
    s3: bool = False


# --- the child: the steps of `botstats run`, each measured -------------------------------------
class Meter:
    """Wall, CPU, peak RSS and bytes written of one step of this process; a thread samples
    what the RSS is made of (the process's own data, and mapped library code) every 10 ms."""

    def __enter__(self) -> Meter:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
        self.started, self.cpu, self.written = time.perf_counter(), _cpu(), _written()
        self.anon = self.file = 0.0
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.01):
            anon, file = _rss_parts_mb()
            self.anon, self.file = max(self.anon, anon), max(self.file, file)

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._sampler.join()
        self.step = Step(time.perf_counter() - self.started, _cpu() - self.cpu, _hwm_mb(),
                         (_written() - self.written) / 1e6, self.anon, self.file)


def _rss_parts_mb() -> tuple[float, float]:
    parts = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:")):
            parts[line.split(":")[0]] = int(line.split()[1]) / 1024
    return parts.get("RssAnon", 0.0), parts.get("RssFile", 0.0)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _written() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


# What a child runs: every step of `botstats run`, or the harvest / the analytics alone.
PARTS = {"all": STEPS, "harvest": ("harvest",), "analytics": ("trends", "report")}


def child(work: Path, base_url: str, out: Path, part: str = "all",
          run_id: str | None = None, store: dict[str, str] | None = None) -> None:
    import pipeline

    pipeline.tune_allocators()  # as the `botstats` command does before anything loads polars
    config = work / "empty.toml"
    config.touch()
    # With --s3 the data path and the server (its keys come in the environment).
    settings = pipeline.load_settings(config, env={
        k: v for k, v in os.environ.items() if k.startswith("AWS_")}, overrides={
        "service.base_url": base_url, "store.db": str(work / "archive.ducklake"),
        "exports.dir": str(work / "exports"), "service.stats_page_size": PAGE,
        "report.file": str(work / "report.html"),
        **{f"store.{k}": v for k, v in (store or {}).items()}})

    def listing() -> int:
        return int(httpx.get(f"{base_url}/_admin/health", timeout=30).json()["listing_requests"])

    steps: dict[str, Any] = {"start": asdict(Step(peak_rss_mb=_hwm_mb()))}  # imports
    result: dict[str, Any] = {"status": "complete", "records": 0, "run_id": run_id}
    if "harvest" in PARTS[part]:
        pages = listing()
        with Meter() as m:
            report = pipeline.harvest(settings)
        steps["harvest"] = asdict(m.step) | {"requests": report.requests,
                                             "listing_requests": listing() - pages}
        result |= {"status": report.status, "records": report.stats_added,
                   "run_id": report.run_id}
    if "trends" in PARTS[part]:
        with Meter() as m:
            pipeline.build_trends(settings, run_id=result["run_id"])
        steps["trends"] = asdict(m.step)
        with Meter() as m:
            pipeline.build_report(settings)
        steps["report"] = asdict(m.step)
    out.write_text(json.dumps(result | {"steps": steps}))


# --- the parent ----------------------------------------------------------------------------------
def service_peak_mb(svc: Service) -> float:
    for line in Path(f"/proc/{svc.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


# How each job runs: its steps in processes of their own (the analytics in a second one, as
# `botstats run` re-executes itself for them), or every step in one.
JOB_PARTS = {"first": ("harvest", "analytics"), "hourly-steps": ("harvest", "analytics"),
             "hourly-one": ("all",)}


def measure(bots: int, job: str, work: Path, svc: Service, log: Path,
            s3: S3Server | None = None) -> Job:
    """One job of measured steps (``JOB_PARTS``), the job's figures the sum of its processes'
    (its peak, the highest)."""
    cpu = svc.cpu_seconds() or 0.0
    total = Job(bots, job, "complete", s3=s3 is not None)
    run_id = None
    store = s3.settings(str(bots)) if s3 else {}
    for part in JOB_PARTS[job]:
        out = work / f".{job}.{part}.json"
        args = ["--child", str(work), "--base-url", svc.base_url, "--out", str(out),
                "--part", part, "--store", json.dumps(store)] + (
                    ["--run-id", run_id] if run_id else [])
        m = run_measured([sys.executable, __file__, *args], cwd=REPO, log=log, append=True,
                         env={**os.environ, **(s3.env() if s3 else {})})
        if m.code != 0:
            raise SystemExit(f"the {job} run of {bots:,} bots failed; see {log}")
        reported = json.loads(out.read_text())
        steps = {name: Step(**step) for name, step in reported["steps"].items()}
        # The process's peak is the highest of its steps': resetting VmHWM per step also
        # resets what os.wait4 reports at exit.
        total.peak_rss_mb = max(total.peak_rss_mb, *(s.peak_rss_mb for s in steps.values()))
        del steps["start"]
        total.steps |= steps
        total.seconds += m.seconds
        total.cpu_s += m.cpu_s
        total.written_mb += m.written_mb
        if "harvest" in steps:
            total.status, total.records = reported["status"], reported["records"]
        run_id = reported["run_id"]
    total.service_cpu_s = (svc.cpu_seconds() or 0.0) - cpu
    total.service_peak_mb = service_peak_mb(svc)
    return total


def measure_run(bots: int, work: Path, svc: Service, log: Path, job: str = "hourly",
                s3: S3Server | None = None) -> Job:
    """`botstats run --json` itself, with the settings the measured steps use: its peak RSS is
    the kernel's for the process (``os.wait4`` keeps the highest across an ``exec``), its parts
    what the run reports (each image's ``VmHWM``, the harvest's and the trends' seconds), and
    what it wrote, per part (the module docstring)."""
    config = work / "bench.toml"
    store = "".join(f'{k} = "{v}"\n' for k, v in (s3.settings(str(bots)) if s3 else {}).items())
    config.write_text(
        f'[service]\nbase_url = "{svc.base_url}"\nstats_page_size = {PAGE}\n'
        f'[store]\ndb = "{work / "archive.ducklake"}"\n{store}'
        f'[exports]\ndir = "{work / "exports"}"\n[report]\nfile = "{work / "report.html"}"\n')
    cpu, pages = svc.cpu_seconds() or 0.0, svc.listing_requests()
    out = work / f".{job}.json"
    files = file_state(work)
    uploaded = s3.uploaded() if s3 else {}
    m = run_measured([sys.executable, "-m", "pipeline", "--config", str(config), "run", "--json",
                      "--no-progress"], cwd=REPO, log=log, append=True, stdout=out,
                     env={**os.environ, "BOTSTATS_CONFIG": "", **(s3.env() if s3 else {})})
    try:
        report = json.loads(out.read_text())
    except ValueError:
        raise SystemExit(f"the {job} run of {bots:,} bots printed no report; see {log}") from None
    if m.code != 0:
        raise SystemExit(f"the {job} run of {bots:,} bots ended {report['status']} "
                         f"(exit {m.code}); see {log}")
    harvest, trends, memory = report["harvest"], report["trends"], report["memory"]
    done = Job(bots, job, report["status"], m.seconds, m.cpu_s, m.peak_rss_mb, m.written_mb,
               harvest["stats_added"], (svc.cpu_seconds() or 0.0) - cpu, service_peak_mb(svc),
               s3=s3 is not None)
    done.steps = {
        "harvest": Step(harvest["seconds"], peak_rss_mb=memory["harvest"],
                        requests=harvest["requests"],
                        listing_requests=svc.listing_requests() - pages),
        "trends+report": Step(trends["seconds"], peak_rss_mb=memory["trends"]),
    }
    written = written_parts(files, file_state(work), work)
    local = sum(written.values())
    if s3:
        after = s3.uploaded()
        sent = {table: n - uploaded.get(table, 0) for table, n in after.items()}
        done.uploaded_mb = sum(sent.values()) / 1e6
        for table, n in sent.items():
            part = _archive_part(table)
            written[part] = written.get(part, 0) + n
    done.parts = {part: n / 1e6 for part, n in sorted(written.items(), key=_part_order)}
    done.parts["catalog and scratch"] = max(0.0, (m.written_mb * 1e6 - local) / 1e6)
    return done


# --- bytes written, per part -----------------------------------------------------------------
def file_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under ``root``: (inode, size, mtime_ns)."""
    out = {}
    for path in root.rglob("*"):
        try:
            st = path.stat()
        except OSError:  # gone meanwhile
            continue
        if path.is_file():
            out[path.relative_to(root).as_posix()] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def written_parts(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]],
                  root: Path) -> dict[str, int]:
    """Bytes of the files new or changed between two :func:`file_state`, per part (the SQLite
    catalog's files, changed in place, are left to "catalog and scratch")."""
    parts: dict[str, int] = {}
    for rel, state in after.items():
        if before.get(rel) == state:
            continue
        part = _part_of(rel)
        if part:
            parts[part] = parts.get(part, 0) + state[1]
    return parts


def _part_of(rel: str) -> str | None:
    first, *rest = rel.split("/")
    if first == "exports" and rest:
        from pipeline.analytics.exports._datasets import DATASETS

        return f"trends: {rest[0]}" if rest[0] in DATASETS else "trends: state and manifest"
    if first == "report.html":
        return "report"
    if first.endswith(".files") and len(rest) > 1 and rest[0] == "main":
        return _archive_part(rest[1])
    return None


def _archive_part(table: str) -> str:
    return "bot rows" if table in BOT_ROWS else "harvest"


def _part_order(item: tuple[str, int]) -> tuple[int, str]:
    name = item[0]
    rank = {"harvest": 0, "bot rows": 1, "trends: state and manifest": 3, "report": 4}
    return rank.get(name, 2), name


# --- one bot in a hundred posts a record -------------------------------------------------------
def post_one_percent(svc: Service, credentials: Path) -> int:
    """Every ``ONE_PERCENT``-th listed bot posts a record (its newest one's counts, moved on a
    little) with its own key; how many did. The service stamps them at the end of the current
    interval: a day the other bots have not reported yet."""
    keys = json.loads(credentials.read_text())["bot_keys"]
    posted = 0
    with httpx.Client(base_url=svc.base_url, timeout=60) as http:
        for bot_id, key in list(keys.items())[::ONE_PERCENT]:
            newest = http.get(f"/bots/{bot_id}/stat").json()
            answer = http.post(f"/bots/{bot_id}/stats", headers={"Authorization": key}, json={
                "users": int(newest.get("users") or 0) + 5,
                "guilds": int(newest.get("guilds") or 0) + 1})
            answer.raise_for_status()
            posted += 1
    return posted


def cold_libraries() -> int:
    """Drop this venv's shared libraries from the page cache (``posix_fadvise`` DONTNEED; pages
    a process maps stay): a library freshly installed sits in the cache as it was written, in
    large folios, and a process that maps it counts each folio it touches whole, so the same
    step's ``RssFile`` read up to 100 MB higher in a new venv than in an old one. Read back
    from disk, the libraries count the pages the steps fault in. Each file is flushed first:
    DONTNEED leaves pages not yet written back, which a venv made a minute before still has
    (its hourly run read 264 MB ``RssFile`` instead of 194). The number of files."""
    dropped = 0
    for path in Path(sys.prefix).rglob("*.so*"):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            dropped += 1
        finally:
            os.close(fd)
    return dropped


KEPT = ".first"  # a size's folder after its first harvest, kept by --keep


def run_size(bots: int, root: Path, keep: bool, same_process: bool = False,
             s3: bool = False) -> list[Job]:
    """The first harvest and the hourly runs of one size (``same_process``: and one more with
    every step in one process), then the 1% run. With ``keep`` the folder as the first harvest
    left it is copied aside, and a later run with ``keep`` starts from that copy: only the
    hourly runs are measured again (the service is the same for the same size). ``s3``: the
    data files on the S3 server (not with ``keep``: the bucket is not kept)."""
    work = root / f"{bots}"
    kept = work / KEPT
    reuse = keep and kept.is_dir()
    if reuse:
        for path in work.iterdir():
            if path != kept:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        shutil.copytree(kept, work, dirs_exist_ok=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    log = work / "bench.log"
    cold_libraries()
    credentials = work / "credentials.json"
    svc = Service(["--bots", str(bots), "--history-days", str(DAYS), "--stats-per-day", "1",
                   "--end", END, "--stats-page-size", str(PAGE), "--credentials-file",
                   str(credentials)], work / "service.log")
    server = S3Server(work / "s3.log") if s3 else None
    try:
        jobs = [] if reuse else [measure(bots, "first", work, svc, log, server)]
        if keep and not reuse:
            shutil.copytree(work, kept, ignore=shutil.ignore_patterns(KEPT, "*.log"))
        svc.warm()
        svc.advance()
        jobs.append(measure_run(bots, work, svc, log, s3=server))
        svc.advance()
        jobs.append(measure(bots, "hourly-steps", work, svc, log, server))
        if same_process:
            svc.advance()
            jobs.append(measure(bots, "hourly-one", work, svc, log, server))
        post_one_percent(svc, credentials)
        jobs.append(measure_run(bots, work, svc, log, "one-percent", server))
    finally:
        svc.close()
        if server is not None:
            server.close()
    return jobs


def render(jobs: list[Job]) -> str:
    lines = [f"{'bots':>8} {'job':<12} {'status':<9} {'wall s':>7} {'cpu s':>7} {'RSS MB':>7} "
             f"{'written MB':>10} {'records':>9} {'svc cpu s':>9} {'svc MB':>7}  per step "
             f"(wall s / cpu s / RSS MB [anon + file] / written MB / requests)"]
    for j in jobs:
        steps = "  ".join(_step(name, s, measured=j.job not in RUNS) for name, s in j.steps.items())
        lines.append(f"{j.bots:>8,} {j.job:<12} {j.status:<9} {j.seconds:>7.1f} {j.cpu_s:>7.1f} "
                     f"{j.peak_rss_mb:>7.0f} {j.written_mb:>10.1f} {j.records:>9,} "
                     f"{j.service_cpu_s:>9.1f} {j.service_peak_mb:>7.0f}  {steps}")
    lines.append("")
    for j in jobs:
        if j.parts:
            where = ", data files on S3 (uploaded: the server's count)" if j.s3 else ""
            lines.append(f"written by {j.job} at {j.bots:,} bots{where}, MB: " + ", ".join(
                f"{part} {mb:.2f}" for part, mb in j.parts.items()))
    lines.append("")
    for j in jobs:
        if j.job in HOW:
            verdict = "MET" if j.peak_rss_mb <= TARGET_MB else "MISSED"
            lines.append(f"hourly run at {j.bots:,} bots{HOW[j.job]}: peak RSS "
                         f"{j.peak_rss_mb:.0f} MB (target <= {TARGET_MB:.0f}) {verdict}; "
                         f"{j.seconds:.0f} s")
        target = WRITE_TARGETS.get((j.job, j.bots))
        if target is not None:
            total = j.written_mb + j.uploaded_mb
            verdict = "MET" if total <= target else "MISSED"
            lines.append(f"{j.job} run at {j.bots:,} bots: written {total:.1f} MB "
                         f"(target <= {target:.0f}) {verdict}")
    return "\n".join(lines)


HOW = {"hourly": " (botstats run)", "hourly-steps": " (its steps, measured)",
       "hourly-one": " (every step in one process)"}
RUNS = ("hourly", "one-percent")  # `botstats run` itself: its parts are what it reports


def _step(name: str, s: Step, *, measured: bool) -> str:
    """wall / cpu / RSS [anon + file] / written (/ requests) of a measured step; of a part of
    `botstats run`, what it reports: wall / RSS (/ requests)."""
    requests = f"/{s.requests:,} ({s.listing_requests:,} listing)" if name == "harvest" else ""
    if not measured:
        return f"{name} {s.seconds:.1f}/-/{s.peak_rss_mb:.0f}/-{requests}"
    return (f"{name} {s.seconds:.1f}/{s.cpu_s:.1f}/{s.peak_rss_mb:.0f} [{s.anon_mb:.0f} + "
            f"{s.file_mb:.0f}]/{s.written_mb:.1f}{requests}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bots", default="10000,100000", help="comma-separated directory sizes")
    p.add_argument("--work", help="work folder (default: a temporary one, removed after)")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--keep", action="store_true",
                   help=f"keep each size's archive after its first harvest (in <work>/<bots>/"
                        f"{KEPT}) and, when it is there, start from it: only the hourly run is "
                        f"measured again (needs --work)")
    p.add_argument("--same-process", action="store_true",
                   help="also measure an hourly run with every step in one process (as "
                        "[run].fresh_process = false runs them)")
    p.add_argument("--s3", action="store_true",
                   help="keep the archive's data files on a local S3 server (moto), which "
                        "counts the bytes uploaded to it")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--base-url", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--part", choices=list(PARTS), default="all", help=argparse.SUPPRESS)
    p.add_argument("--run-id", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.keep and not args.work:
        p.error("--keep needs --work: the kept archive lives in the work folder")
    if args.keep and args.s3:
        p.error("--keep keeps the archive's folder, not the S3 server's bucket: not with --s3")
    if args.child:
        child(Path(args.child), args.base_url, Path(args.out), args.part, args.run_id,
              json.loads(args.store) if args.store else None)
        return
    root = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="botstats-directory-"))
    jobs: list[Job] = []
    try:
        for bots in (int(b) for b in args.bots.split(",") if b.strip()):
            kept = args.keep and (root / f"{bots}" / KEPT).is_dir()
            print(f"{bots:,} bots: " + ("an hourly run from the kept first harvest" if kept
                                        else "first harvest, then an hourly run"), flush=True)
            size = run_size(bots, root, args.keep, args.same_process, args.s3)
            jobs += size
            for j in size:
                print(f"  {j.job}: {j.status}, {j.seconds:.1f} s, {j.peak_rss_mb:.0f} MB peak",
                      flush=True)
        print()
        print(render(jobs))
        if args.json:
            Path(args.json).write_text(json.dumps([asdict(j) for j in jobs], indent=1))
    finally:
        if not args.work:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
