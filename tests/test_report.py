"""`botstats report`: one self-contained HTML file, opened in a real headless Chromium (Debian's
`chromium`, installed by `make test`), with no network: no console message, every chart drawn
(the SVG elements ECharts drew are counted against the data each chart was given), a non-blank
screenshot, and one bot's numbers checked against the exported datasets."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import threading
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import (
    TREND_BOTS,
    TREND_CUSTOM,
    TREND_STATS,
    harvest_settings_for,
    start_service,
    trend_settings_for,
    write_trend_archive,
)

from pipeline.analytics.build._build import build_trends
from pipeline.analytics.build._forecast import MODEL_WORDS
from pipeline.analytics.exports._datasets import load_dataset
from pipeline.analytics.report._report import build_report
from pipeline.cli import cli
from pipeline.core._settings import Settings
from pipeline.operate import _runner as runner

pytestmark = pytest.mark.slow


def chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Open ``url`` in headless Chromium with every host unresolvable (so a fetch would fail
    and log), and console messages logged to stderr."""
    exe = shutil.which("chromium")
    assert exe, "chromium is missing: `make test` installs it (.ci/chromium), or apt-get install chromium"
    return subprocess.run(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", f"--user-data-dir={tmp_path / 'chromium-profile'}",
         *args, url],
        capture_output=True, text=True, timeout=180, cwd=tmp_path)


def console(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The console messages of a Chromium run that rendered its page (exit 0: a Chromium that
    failed to start logs no console message either)."""
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line for line in proc.stderr.splitlines() if "CONSOLE" in line]


def chart_options(text: str) -> dict[str, dict[str, Any]]:
    """The ECharts options the report hands to the page: what each chart is asked to draw."""
    found = re.search(r'<script type="application/json" id="charts">(.*?)</script>', text, re.S)
    assert found
    return json.loads(found.group(1))


def drawn(dom: str) -> dict[str, list[str]]:
    """The ``d`` of every SVG path drawn inside each chart's element, by chart id."""
    out = {}
    for part in re.split(r'(?=<div class="chart" id="chart-\d+")', dom)[1:]:
        chart_id = re.match(r'<div class="chart" id="(chart-\d+)"', part).group(1)  # type: ignore[union-attr]
        # Parts are split at each chart's element, so an SVG in a part is that chart's.
        svg = part[: part.find("</svg>")] if "</svg>" in part else ""
        out[chart_id] = re.findall(r'<path d="([^"]+)"', svg)
    return out


BAR = re.compile(r"^M[-\d.]+ [-\d.]+l[-\d.]+ 0l0 [-\d.]+l[-\d.]+ 0Z$")


def assert_every_chart_drew_its_data(options: dict[str, dict[str, Any]],
                                     paths: dict[str, list[str]]) -> None:
    assert set(paths) == set(options)
    for chart_id, option in options.items():
        d = paths[chart_id]
        assert d, f"{chart_id} ({option['title']['text']}) drew nothing"
        bars = sum(1 for p in d if BAR.match(p) and "l0 0" not in p)
        wanted_bars = sum(sum(1 for v in s["data"] if (v[1] if isinstance(v, list) else v))
                          for s in option["series"] if s["type"] == "bar")
        assert bars >= wanted_bars, (chart_id, option["title"]["text"], bars, wanted_bars)
        # Each line series of n points is one polyline of at least n - 1 segments.
        needs = sorted((sum(1 for v in s["data"] if v[1] is not None) - 1
                        for s in option["series"] if s["type"] == "line"), reverse=True)
        needs = [n for n in needs if n >= 1]
        lines = sorted((p.count("L") for p in d), reverse=True)
        for i, need in enumerate(needs):
            assert lines[i] >= need, (chart_id, option["title"]["text"], lines[:len(needs)], needs)


@pytest.fixture(scope="module")
def two_bots(exported_archive: Settings) -> list[str]:
    """The two largest bots on the last day that have a forecast."""
    outlook = load_dataset(exported_archive, "bot_forecast")
    daily = load_dataset(exported_archive, "bot_daily")
    last = daily.filter(pl.col("day") == pl.col("day").max())
    ranked = last.filter(pl.col("bot_id").is_in(outlook["bot_id"].implode())).sort(
        "guilds", descending=True)
    return ranked["bot_id"].head(2).to_list()


@pytest.fixture(scope="module")
def report_file(exported_archive: Settings, two_bots: list[str],
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    result = build_report(exported_archive, out=out, bot_ids=two_bots, compare=True)
    assert result.path == out and result.bytes == out.stat().st_size
    return out


def test_the_report_renders_every_chart_in_chromium_offline(report_file: Path,
                                                            tmp_path: Path) -> None:
    proc = chromium(tmp_path, report_file.as_uri(), "--dump-dom")
    # Nothing logged to the console: no error, no failed fetch (every host is unresolvable).
    assert console(proc) == []
    options = chart_options(report_file.read_text())
    assert len(options) >= 12  # directory 2, movers 2, health 1, compare 1, each bot 4-5
    assert f'data-charts-ready="{len(options)}"' in proc.stdout
    assert_every_chart_drew_its_data(options, drawn(proc.stdout))


def test_a_screenshot_of_the_report_is_not_blank(report_file: Path, tmp_path: Path) -> None:
    import matplotlib.image

    shot = tmp_path / "report.png"
    proc = chromium(tmp_path, report_file.as_uri(), f"--screenshot={shot}",
                    "--window-size=1200,1600")
    assert proc.returncode == 0, proc.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)[:, :, :3]
    assert pixels.shape[:2] == (1600, 1200)
    not_white = (pixels < 0.95).any(axis=2).mean()
    colours = len({tuple(p) for p in (pixels[::7, ::7] * 255).astype(int).reshape(-1, 3)})
    assert not_white > 0.05 and colours > 50, (not_white, colours)


def test_the_report_is_self_contained(report_file: Path) -> None:
    text = report_file.read_text()
    assert not re.search(r"<script[^>]+src=", text)  # every script is inline
    # Nor does the markup refer to anything outside (that the scripts fetch nothing, the
    # browser test shows: every host is unresolvable there and nothing is logged).
    markup = re.sub(r"<script[^>]*>.*?</script>", "", text, flags=re.S)
    assert not re.search(r"<link|<img|<iframe|@import|url\(|https?://", markup)
    assert "echarts" in text and "Apache License" in text  # the library, inline with its notice


def test_a_bots_numbers_in_the_report_are_the_datasets(exported_archive: Settings,
                                                       report_file: Path,
                                                       two_bots: list[str]) -> None:
    bot = two_bots[0]
    text = report_file.read_text()
    options = chart_options(text)
    section = text[text.index(f'<section id="bot-{bot}">'):]
    first_chart = re.search(r'id="(chart-\d+)"', section).group(1)  # type: ignore[union-attr]
    series = {s["name"]: s["data"] for s in options[first_chart]["series"]}
    daily = load_dataset(exported_archive, "bot_daily").filter(pl.col("bot_id") == bot).sort("day")
    since = daily["day"].max() - timedelta(days=89)
    history = daily.filter(pl.col("day") >= since)
    assert series["guilds"] == [[str(d), g] for d, g in history.select("day", "guilds").iter_rows()]
    outlook = load_dataset(exported_archive, "bot_forecast").filter(
        (pl.col("bot_id") == bot) & (pl.col("metric") == "guilds")).sort("horizon_days")
    # The chart and the table name the model the bot's backtest chose.
    word = MODEL_WORDS[outlook["model"][0]]
    assert options[first_chart]["title"]["text"] == f"Guilds, with the forecast's 80% band ({word})"
    assert f"<td>{word}</td>" in section
    ahead = dict((d, v) for d, v in series["forecast"])
    for day, value, lo, hi in outlook.select("day", "forecast", "lo80", "hi80").iter_rows():
        assert ahead[str(day)] == pytest.approx(value)
        # The forecast table of the bot's section shows the same numbers.
        assert f"<td>{day}</td><td class=\"num\">{value:,.0f}</td><td class=\"num\">{lo:,.0f}" \
               f"</td><td class=\"num\">{hi:,.0f}</td>" in section


def test_botstats_report_writes_the_file_and_says_where(exported_archive: Settings,
                                                        two_bots: list[str],
                                                        tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\ndb = "{exported_archive.db_path}"\n'
                      f'[exports]\ndir = "{exported_archive.export_dir}"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "report", "--out", str(out),
                                      "--bot", two_bots[0], "--days", "30", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["path"] == str(out) and shown["bytes"] == out.stat().st_size
    assert shown["bots"] == [two_bots[0]] and shown["charts"] >= 8
    bad = CliRunner().invoke(cli, ["--config", str(config), "report", "--out", str(out),
                                   "--bot", two_bots[0], "--compare"])
    assert bad.exit_code == 1 and "--compare needs 2 to 4 bots" in bad.output


def test_a_quiet_archive_gives_a_report_that_says_so(tmp_path: Path) -> None:
    settings = trend_settings_for(tmp_path)
    write_trend_archive(settings)  # no stats at all
    build_trends(settings)
    result = build_report(settings)
    assert result.path == settings.export_dir / "report.html" and result.bots == ()
    text = result.path.read_text()
    for empty in ("Gainers, 7 days: none.", "Losers, 30 days: none.", "Climbed: none.",
                  "This week: the events that matter most: none.",
                  "Running hot in the last week (days of p95 load above the threshold): none."):
        assert empty in text
    proc = chromium(tmp_path, result.path.as_uri(), "--dump-dom")
    assert console(proc) == []


def test_names_from_the_service_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    settings = trend_settings_for(tmp_path)
    odd = "</script><script>alert(1)</script><!--"
    alpha = [row for row in TREND_STATS if row[0] == "alpha"]
    write_trend_archive(settings, alpha,
                        [*TREND_CUSTOM, ("alpha", "2025-01-28 12:00:00+00", odd, "5", 5.0),
                         ("alpha", "2025-01-28 12:00:00+00", "<b>tag</b>", "<i>x</i>", None)],
                        TREND_BOTS[:1])
    build_trends(settings)
    text = build_report(settings, bot_ids=["alpha"]).path.read_text()
    assert odd not in text and "<b>tag</b>" not in text and "&lt;i&gt;x&lt;/i&gt;" in text
    custom = [o for o in chart_options(text).values() if o["title"]["text"].startswith("Custom")]
    assert odd in [s["name"] for s in custom[0]["series"]]  # the name itself, intact
    proc = chromium(tmp_path, (settings.export_dir / "report.html").as_uri(), "--dump-dom")
    assert console(proc) == []


def test_the_scheduled_trends_job_refreshes_the_report_too(trend_archive: Settings,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    settings = replace(trend_archive, report=replace(trend_archive.report, file=str(out),
                                                     bots="alpha beta", compare=True))
    result = runner.trends_job(settings, threading.Event())
    assert result.exit_code == 0 and result.line.endswith(f"; report {out}")
    assert '<section id="compare"><h2>Side by side</h2>' in out.read_text()


def test_run_refreshes_the_report_named_in_settings(tmp_path: Path, service: Any) -> None:
    out = tmp_path / "site" / "report.html"
    settings = harvest_settings_for(service, tmp_path / "archive.duckdb", {
        "exports.dir": str(tmp_path / "exports"), "report.file": str(out)})
    report = runner.run(settings)
    assert report.status == "complete" and report.report is not None
    assert report.report.path == out and out.stat().st_size == report.report.bytes
    assert report.as_dict()["report"]["path"] == str(out)
    assert '<section id="directory"><h2>The directory</h2>' in out.read_text()


@pytest.fixture(scope="module")
def year_old_archive(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A directory whose records end a year before today (with planted events), harvested
    today and exported: the harvester's first-seen day is today, the data's last day is not."""
    root = tmp_path_factory.mktemp("year-old")
    end = (datetime.now(UTC) - timedelta(days=365)).replace(minute=0, second=0, microsecond=0)
    with start_service(bots=40, history_days=60, stats_per_day=2, end=end, events=0.3) as svc:
        settings = harvest_settings_for(svc, root / "archive.duckdb",
                                        {"exports.dir": str(root / "exports")})
        report = runner.run(settings)
    assert report.status == "complete", report.message
    return settings


def test_a_report_of_a_year_old_archive_is_on_the_datas_own_clock(
        year_old_archive: Settings, tmp_path: Path) -> None:
    settings = year_old_archive
    daily = load_dataset(settings, "bot_daily")
    last = daily["day"].max()
    assert isinstance(last, date) and (date.today() - last).days >= 360
    # The harvester saw every bot first today: a row the report's window must not end on.
    seen = load_dataset(settings, "directory_daily").filter(pl.col("bots_first_seen") > 0)
    assert seen["day"].max() == datetime.now(UTC).date()
    ranked = daily.filter(pl.col("day") == last).sort("guilds", descending=True)
    bots = ranked["bot_id"].head(2).to_list()
    out = tmp_path / "old.html"
    build_report(settings, out=out, bot_ids=bots, compare=True)
    text = out.read_text()
    assert f"Last 90 days to {last};" in text
    assert f"Nothing recent: the newest stats are from {last}" in text
    # In Chromium: every chart drew its data (the directory's, the side by side, each bot's).
    proc = chromium(tmp_path, out.as_uri(), "--dump-dom")
    assert console(proc) == []
    options = chart_options(text)
    titles = [o["title"]["text"] for o in options.values()]
    assert {"Bots reporting", "Total guilds and users", "Guilds, side by side"} <= set(titles)
    assert_every_chart_drew_its_data(options, drawn(proc.stdout))
    # The events section lists the events of the export's last 14 days, the most severe first.
    events = load_dataset(settings, "anomalies").filter(
        (pl.col("day") > last - timedelta(days=14)) & (pl.col("kind") != "counter_reset"))
    assert events.height > 0
    section = proc.stdout[proc.stdout.index('<section id="anomalies">'):]
    section = section[:section.index("</section>")]
    every = section[section.index("Every event of the last 14 days"):]
    assert f"({events.height} in all" in every
    listed = re.findall(r'<td class="bot" title="(\d+)">', every)
    wanted = events.sort(["severity", "day", "bot_id"], descending=[True, True, False])
    assert listed == wanted["bot_id"].head(25).to_list()
    for summary in wanted["summary"].head(25):
        assert html.escape(summary) in every
