"""The benchmarks run end to end at a small size: the figures in the README rest on them.

Nothing here looks at timing; what is checked is that each case did the work it reports
(every record fetched and archived, the rerun's request budget, results read back).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_harvest_bench_measures_every_case_on_the_same_data(tmp_path: Path) -> None:
    out = tmp_path / "harvest.json"
    proc = _bench("bench/harvest.py", "--bots", "30", "--days", "3", "--skip-dlt",
                  "--repeat", "2", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    cases = figures["cases"]
    assert set(cases) == {"a", "a'", "b", "c"}
    assert all(case["status"] in ("ok", "complete") for case in cases.values()), cases
    # The bare loop and the harvest read the same records: up to 30 bots x 3 days, one a day
    # (a bot younger than three days has fewer).
    assert 30 < cases["a"]["rows"] == cases["a'"]["rows"] == cases["b"]["rows"] <= 90
    assert cases["c"]["rows"] == 0  # nothing new the second time
    # One /stat per bot plus the listing pages, and the bench counts those pages itself.
    assert figures["ratios"]["again_budget"] == 30 + cases["c"]["listing_pages"]
    assert 30 < cases["c"]["requests"] <= figures["ratios"]["again_budget"]
    for case in cases.values():
        assert case["cpu_s"] > 0 and case["peak_rss_mb"] > 0
    assert figures["ratios"]["full_vs_bare_bound"] > 0
    assert "(b)/(a) throughput" in proc.stdout and "on this machine" in proc.stdout
    assert figures["ratios"]["full_vs_lanes"] > 0 and "(b)/(a') throughput" in proc.stdout
    # Each round's pair, measured seconds apart, besides the ratio of the medians.
    per_round = figures["ratios"]["full_vs_bare_rounds"]
    assert len(per_round) == 2 and all(x > 0 for x in per_round)
    assert "round by round" in proc.stdout


def test_trends_bench_compares_trends_with_plain_sql_and_incremental_with_full(tmp_path: Path) -> None:
    out = tmp_path / "trends.json"
    proc = _bench("bench/trends.py", "--rows", "20000", "--dir", str(tmp_path / "work"),
                  "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    assert figures["rows"] == 20_000
    assert figures["same_results"] is True  # trends and the SQL baseline agree
    trends = next(case for case in figures["cases"] if case["case"] == "trends")
    assert trends["datasets"]["bot_daily"] > 0 and trends["partitions"] > 0
    # After one more record per bot, the incremental run equals a full build row for row.
    incremental = next(case for case in figures["cases"] if case["case"] == "incremental")
    assert incremental["mode"] == "incremental" and incremental["written"] > 0
    assert figures["incremental_equals_full"] is True


def test_scale_bench_measures_the_hourly_job_on_each_archive(tmp_path: Path) -> None:
    # The same service history with and without a synthetic past (older records written
    # through the storage layer), every case: each hourly run archives exactly one new record
    # per bot, and the archive on disk holds no second copy of its data.
    out = tmp_path / "scale.json"
    proc = _bench("bench/scale.py", "--bots", "20", "--sizes", "10k,100k", "--json", str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    runs = json.loads(out.read_text())
    assert [(r["case"], r["size"]) for r in runs] == [
        (c, s) for c in ("paged", "newest", "unpaged") for s in ("10k", "100k")]
    for r in runs:
        assert r["status"] == "complete" and r["new_records"] == 20, r
        assert r["written_mb"] > 0 and r["peak_rss_mb"] > 0 and r["cpu_s"] > 0
        assert 1.0 <= r["ratios"]["disk_vs_data"] <= 1.15, r
    records = {r["size"]: r["records"] for r in runs if r["case"] == "paged"}
    assert records["100k"] - records["10k"] == 20 * 900  # the synthetic older records
    assert "MET" in proc.stdout or "MISSED" in proc.stdout  # every target has a verdict
    # Each build step's own cost is printed (the synthetic past only where there is one).
    built = [line.split(":")[0].strip() for line in proc.stdout.splitlines()
             if line.startswith("  ") and "MB RSS" in line and "requests" not in line]
    assert built == ["harvest", "trends", "synthetic", "harvest", "trends"], proc.stdout
    # Paged either way, the hourly job's requests do not grow with the archive; newest first
    # costs a page a bot less (no empty page to end it).
    requests = {(r["case"], r["size"]): r["requests"] for r in runs}
    for case in ("paged", "newest"):
        assert requests[(case, "10k")] == requests[(case, "100k")]
    assert requests[("newest", "100k")] < requests[("paged", "100k")]


def test_pacing_bench_measures_each_family_against_a_token_bucket(tmp_path: Path) -> None:
    out = tmp_path / "pacing.json"
    proc = _bench("bench/pacing.py", "--bots", "40", "--rate", "40", "--families",
                  "ratelimit,retry-after", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    runs = {r["family"]: r for r in figures["runs"]}
    assert set(runs) == {"ratelimit", "retry-after"}
    for r in runs.values():
        # Every bot archived (the listing, 40 /stats) against a limit that bit (a burst of 5
        # against a window of 8 at start), the service's own 429 count beside it.
        assert r["status"] == "complete" and r["requests"] >= 41 + r["rate_limited"], r
        assert r["rate_limited"] > 0 and 0 < r["ok_per_second"] and 0 < r["limited_share"] < 1
    assert "target (>= 85%, <= 2%)" in proc.stdout


def test_directory_bench_measures_a_first_harvest_and_an_hourly_run_per_size(
        tmp_path: Path) -> None:
    # The hourly run is `botstats run` itself (its peak over both of its process images); the
    # same run's steps are measured one by one, and with --same-process all in one process;
    # then one bot in a hundred posts a record, and `botstats run` again. The data files are on
    # the S3 server the tests use, which counts what is uploaded to it.
    out = tmp_path / "directory.json"
    proc = _bench("bench/directory.py", "--bots", "30", "--same-process", "--s3", "--json",
                  str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    [first, hourly, steps, one, few] = json.loads(out.read_text())
    assert [(j["bots"], j["job"], j["status"]) for j in (first, hourly, steps, one, few)] == [
        (30, "first", "complete"), (30, "hourly", "complete"), (30, "hourly-steps", "complete"),
        (30, "hourly-one", "complete"), (30, "one-percent", "complete")]
    assert hourly["records"] == steps["records"] == one["records"] == 30 < first["records"]
    assert few["records"] == 1  # the first bot of the listing posted one
    # What `botstats run` wrote, per part: the harvest's files, each trend dataset's (at least
    # the day of the new records), the report; the kernel's count is at least their sum.
    for job in (hourly, few):
        parts = job["parts"]
        assert {"trends: bot_daily", "trends: bot_forecast", "report"} <= set(parts), parts
        assert all(mb >= 0 for mb in parts.values())
        assert job["written_mb"] + 0.01 >= sum(parts.values()) - parts["catalog and scratch"]
    assert hourly["parts"]["harvest"] > 0 and hourly["uploaded_mb"] >= hourly["parts"]["harvest"]
    assert "written by hourly at 30 bots, data files on S3 (uploaded: the server's count), " \
           "MB: harvest" in proc.stdout
    for job in (first, steps, one):
        assert list(job["steps"]) == ["harvest", "trends", "report"]
        assert all(s["peak_rss_mb"] > 0 and s["cpu_s"] > 0 for s in job["steps"].values()), job
        assert job["steps"]["harvest"]["requests"] > job["steps"]["harvest"]["listing_requests"] > 0
        assert job["peak_rss_mb"] == max(s["peak_rss_mb"] for s in job["steps"].values())
    # The command's parts are what it reported (in MB to one decimal); its peak, the kernel's
    # over both images, is at least the higher of them.
    parts = hourly["steps"]
    assert list(parts) == ["harvest", "trends+report"]
    assert hourly["peak_rss_mb"] + 0.05 >= max(p["peak_rss_mb"] for p in parts.values()) > 0
    assert parts["harvest"]["requests"] > parts["harvest"]["listing_requests"] > 0
    for how in ("(botstats run)", "(its steps, measured)", "(every step in one process)"):
        assert f"hourly run at 30 bots {how}: peak RSS" in proc.stdout  # the target's verdict


def test_forecast_bench_meets_its_targets_on_the_embedded_service(tmp_path: Path) -> None:
    out = tmp_path / "forecast.json"
    proc = _bench("bench/forecast.py", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    methods = figures["methods"]
    assert {"last", "drift", "shipped", "trend", "damped", "saturating"} <= set(methods)
    # Every method is scored on the same held-back days, of every curve family.
    assert len({m["n"] for m in methods.values()}) == 1 and methods["shipped"]["n"] > 10_000
    assert set(methods["shipped"]["by_shape"]) == {"growing", "saturating", "turning", "flat",
                                                   "declining", "spiky"}
    # Each model is chosen somewhere, and the bending bots mostly bend.
    chosen = methods["shipped"]["models"]
    assert {m for per in chosen.values() for m in per} == {"trend", "damped", "saturating"}
    for family in ("saturating", "turning"):
        assert chosen[family].get("trend", 0) < sum(chosen[family].values()) / 2, chosen
    # The data is the same on every run (a fixed clock and seed), so the targets are checked.
    assert methods["shipped"]["mape"] < min(methods["last"]["mape"], methods["drift"]["mape"])
    assert 75 <= methods["shipped"]["coverage"] <= 85
    assert figures["targets"] == {"beats_baselines": True, "coverage_in_range": True}
    assert "targets: MAPE below both baselines: yes" in proc.stdout


@pytest.mark.clock
def test_concurrency_bench_measures_its_three_figures_in_one_run(tmp_path: Path) -> None:
    out = tmp_path / "concurrency.json"
    proc = _bench("bench/concurrency.py", "--bots", "40", "--rate-bots", "60", "--rate", "40",
                  "--latency-ms", "5", "--repeat", "1", "--loopback-bots", "40",
                  "--loopback-repeat", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    assert set(figures["latency"]) == {"8", "16", "32", "auto"}
    assert set(figures["loopback"]) == {"8", "auto"}
    assert set(figures["met"]) == {"latency_vs_best_fixed", "rate_share", "rate_429_share",
                                   "loopback_vs_8"}
    runs = figures["runs"]
    assert len(runs) == 4 + 2 + 1 and all(r["status"] == "complete" for r in runs), runs
    # Every run read the whole directory: the listing pages plus one /stats per bot.
    assert all(r["requests"] - r["rate_limited"] >= 40 for r in runs)
    assert "auto / best fixed" in proc.stdout and "answered 429" in proc.stdout


@pytest.mark.clock
def test_soak_keeps_the_archive_equal_to_a_faulty_growing_service(tmp_path: Path) -> None:
    # `botstats schedule` firing every 2 s, four runs (the 50-run figures are in bench/README.md).
    out = tmp_path / "soak.json"
    proc = _bench("bench/soak.py", "--runs", "4", "--every", "2", "--bots", "20", "--json",
                  str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    archive = figures["archive"]
    assert archive["equal"] and (archive["missing"], archive["twice"]) == (0, 0), archive
    assert archive["records_archived"] > 1000 and archive["rejects"] > 0  # faults did happen
    assert archive["bots_listed"] == 20 + 2 * 2  # grown after runs 1 and 2
    assert archive["runs_by_status"].get("complete", 0) >= 3
    assert "complete" in figures["last_result"]
    daemon = figures["daemon"]
    assert set(daemon) == {"after_run_2", "after_run_4", "growth"}
    assert all(0 < ratio <= 1.2 for ratio in daemon["growth"].values()), daemon


def test_anomalies_bench_holds_the_shipped_detector_to_the_planted_truth(tmp_path: Path) -> None:
    # On the seed the detector was never tuned on (bench/anomalies.py's HELD_OUT_SEED).
    out = tmp_path / "anomalies.json"
    proc = _bench("bench/anomalies.py", "--bots", "300", "--days", "60", "--events", "0.2",
                  "--seed", "83", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(out.read_text())
    methods = figures["methods"]
    assert set(methods) == {"shipped", "plain z", "robust z"}
    # Every kind is planted, some near the floor, drifts (which are not events) and the bots'
    # routine spikes and restarts besides; the truth is the service's own
    # (GET /_admin/events), and the data is the same on every run.
    assert set(figures["planted"]) == {"spike", "drop", "level_shift", "outage", "counter_reset"}
    assert figures["near_floor"] > 0 and figures["drifts"] > 0
    assert set(figures["routine"]) == {"routine_spike", "routine_restart"}
    shipped = methods["shipped"]
    assert shipped["quiet_bot_days"] > 10_000
    # The targets this small run meets (bench/README.md has the 2,000-bot figures, where this
    # seed meets every target; here, on 15 events near the floor, recall there is 0.60, and
    # the overall recall 0.89).
    assert shipped["precision"] >= 0.9 and shipped["recall_young_spike"]["recall"] >= 0.8
    assert shipped["false_alarms_per_1000"] <= 0.5 and shipped["infinite"] == 0
    assert shipped["recall_all"]["recall"] >= 0.8 and shipped["recall_near_floor"]["recall"] >= 0.5
    met = figures["met"]
    assert met["precision"] and met["recall_young_spike"] and met["false_alarms"]
    # Precision by the kind a row names: every row judged (not routine) counted once.
    by_kind = shipped["precision_by_kind"]
    assert sum(k["rows"] for k in by_kind.values()) == shipped["right"] + shipped["wrong"]
    assert sum(k["right"] for k in by_kind.values()) == shipped["right"]
    # The baselines are judged on the same days, with the same floors, and are noise.
    assert methods["robust z"]["false_alarms_per_1000"] > 10 * max(
        shipped["false_alarms_per_1000"], 0.5)
    assert "targets: precision yes; recall " in proc.stdout  # every target has its verdict


def test_shards_bench_measures_one_and_two_workers(tmp_path: Path) -> None:
    from _postgres_support import cluster

    out = tmp_path / "shards.json"
    proc = _bench("bench/shards.py", "--bots", "30", "--days", "1", "--workers", "1,2",
                  "--catalog", cluster().dsn(), "--work", str(tmp_path), "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    cases = {(c["workers"], c["case"]): c for c in json.loads(out.read_text())}
    assert set(cases) == {(1, "first"), (1, "hourly"), (2, "first"), (2, "hourly"),
                          (2, "alone")}
    assert all(c["exits"] == [0] * len(c["exits"]) for c in cases.values())
    # Every record once, whatever the workers (each N has a service of the same data).
    assert cases[(1, "first")]["records"] == cases[(2, "first")]["records"] > 0
    assert cases[(1, "hourly")]["records"] == cases[(2, "hourly")]["records"] > 0
    assert 0 < cases[(2, "alone")]["records"] < cases[(2, "hourly")]["records"]
    assert "| 2 | hourly |" in proc.stdout
