"""`botstats trends` and `botstats sql`, end to end on the trends fixture archive."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner, Result
from conftest import TREND_OVERRIDES

from pipeline.analytics.build._build import DATASETS
from pipeline.archive._store import open_archive
from pipeline.cli import cli
from pipeline.core._settings import Settings

REPO = Path(__file__).resolve().parents[1]
QUERIES = REPO / "sql" / "queries"


def config_for(settings: Settings, path: Path) -> Path:
    """A config.toml naming the fixture's archive, exports and thresholds."""
    lines = [f'[store]\ndb = "{settings.db_path}"', f'[exports]\ndir = "{settings.export_dir}"',
             "[trends]"]
    lines += [f"{k.split('.')[1]} = {v}" for k, v in TREND_OVERRIDES.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def config(trend_archive: Settings, tmp_path: Path) -> Path:
    return config_for(trend_archive, tmp_path / "config.toml")


@pytest.fixture
def built_config(config: Path, trends_built: Settings) -> Path:
    """The config, after one trends build (conftest's `trends_built`, in the config's places)."""
    return config


def botstats(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def sql_json(config: Path, *args: Any) -> list[dict[str, Any]]:
    result = botstats("sql", "--config", config, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# --- botstats trends -------------------------------------------------------------------------
def test_trends_prints_a_summary_and_a_rerun_writes_nothing(config: Path,
                                                             trend_archive: Settings) -> None:
    first = botstats("trends", "--config", config)
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    assert re.fullmatch(r"trends \S+: full \(no previous incremental export\); 10 datasets in "
                        r"\d+\.\d s; partitions 55 written, 0 unchanged", lines[0])
    assert lines[1].split() == ["dataset", "rows", "written", "unchanged", "removed", "days"]
    # Ten days, none of them settled yet: a file each.
    assert lines[2].split() == ["bot_daily", "30", "10", "0", "0", "2025-01-25..2025-02-03"]
    assert lines[6].split() == ["anomalies", "3", "3", "0", "0", "2025-01-28..2025-02-01"]
    # alpha, beta and gamma have a week of values: a forecast each, as of 2025-02-03.
    assert lines[10].split() == ["bot_forecast", "18", "1", "0", "0", "2025-02-03..2025-02-03"]
    # The names of the bots as listed now, by the day they were first seen.
    assert lines[11].split() == ["bot_names", "5", "1", "0", "0", "2025-01-25..2025-01-27"]
    assert lines[12] == f"exports: {trend_archive.export_dir.resolve()}"
    again = botstats("trends", "--config", config).output.splitlines()[0]
    assert "unchanged (nothing new since the last export)" in again
    assert "partitions 0 written, 55 unchanged" in again
    # --full recomputes everything; the same rows give the same bytes, so nothing is written.
    full = botstats("trends", "--config", config, "--full").output.splitlines()[0]
    assert ": full (--full); " in full and "partitions 0 written, 55 unchanged" in full


def test_trends_out_writes_elsewhere_and_the_views_follow(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "other exports"  # a space, to check the quoting of the view paths
    result = botstats("trends", "--config", config, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["export_dir"] == str(out.resolve())
    assert [d["name"] for d in report["datasets"]] == list(DATASETS)
    assert (out / "manifest.json").is_file()
    assert sql_json(config, "SELECT count(*) AS n FROM trend_bot_daily") == [{"n": 30}]


# --- botstats sql ----------------------------------------------------------------------------
def test_sql_prints_an_aligned_table(built_config: Path) -> None:
    result = botstats("sql", "--config", built_config,
                      "SELECT day, bots_reporting, guilds, NULL AS note FROM "
                      "trend_directory_daily ORDER BY day LIMIT 3")
    assert result.exit_code == 0
    assert result.output == (
        "day         bots_reporting  guilds  note\n"
        "----------  --------------  ------  ----\n"
        "2025-01-25               3     152  NULL\n"
        "2025-01-26               3     160  NULL\n"
        "2025-01-27               4    2171  NULL\n"
        "(3 rows)\n")


def test_sql_table_shows_max_rows(built_config: Path) -> None:
    result = botstats("sql", "--config", built_config, "--max-rows", "2",
                      "SELECT * FROM range(5) t(i)")
    assert result.output.splitlines()[-3:] == ["0", "1", "(2 rows, more not shown)"]


def test_top_movers_this_week(built_config: Path) -> None:
    got = sql_json(built_config, "-f", QUERIES / "top_movers_this_week.sql")
    assert {r["day"] for r in got} == {"2025-02-03"}
    assert [(r["metric"], r["measure"], r["direction"], r["rank"], r["bot_id"]) for r in got] == [
        ("guilds", "abs", "gainer", 1, "delta"), ("guilds", "abs", "gainer", 2, "alpha"),
        ("guilds", "abs", "loser", 1, "beta"), ("guilds", "pct", "gainer", 1, "alpha"),
        ("guilds", "pct", "gainer", 2, "delta"), ("guilds", "pct", "loser", 1, "beta"),
        ("users", "abs", "gainer", 1, "alpha"), ("users", "abs", "loser", 1, "beta"),
        ("users", "pct", "gainer", 1, "alpha"), ("users", "pct", "loser", 1, "beta")]
    assert got[1]["pct_change"] == pytest.approx(129.51)


def test_todays_anomalies(built_config: Path) -> None:
    # The newest day (D10) has none; D8 has alpha's spike (guilds and users: one event).
    assert sql_json(built_config, "-f", QUERIES / "todays_anomalies.sql") == []
    got = sql_json(built_config, "-f", QUERIES / "todays_anomalies.sql", "--param",
                   "day=2025-02-01")
    assert [(r["name"], r["bot_id"], r["kind"], r["summary"]) for r in got] == [
        ("alpha", "alpha", "spike", "users +63% for 3 days so far")]
    assert got[0]["severity"] == pytest.approx(3.48, abs=0.01)


def test_this_weeks_events(built_config: Path) -> None:
    # The week to D10 (2025-01-28..02-03): alpha's spike, beta's outage, alpha's reset; the
    # most severe first.
    got = sql_json(built_config, "-f", QUERIES / "this_weeks_events.sql")
    assert [(r["name"], r["kind"]) for r in got] == [
        ("beta", "outage"), ("alpha", "spike"), ("alpha", "counter_reset")]


def test_one_bots_history(built_config: Path) -> None:
    got = sql_json(built_config, "-f", QUERIES / "bot_history.sql", "-p", "bot_id=delta")
    assert [(r["day"], r["guilds"], r["guilds_change_7d"], r["guilds_pct_7d"], r["guilds_rank"])
            for r in got] == [("2025-01-27", 2000, None, None, 1), ("2025-02-03", 2200, 200, 10.0, 1)]
    missing = botstats("sql", "--config", built_config, "-f", QUERIES / "bot_history.sql")
    assert missing.exit_code == 2
    assert "set the bot first: --param bot_id=ID" in missing.output


def test_directory_growth(built_config: Path) -> None:
    got = sql_json(built_config, "-f", QUERIES / "directory_growth.sql")
    assert len(got) == 10
    # D8: 303 guilds vs 152 on D1 -> +151, 99.34 %; D10: 2521 vs 2171 on D3.
    assert [(r["day"], r["guilds_change_7d"], r["guilds_pct_7d"]) for r in got[7:]] == [
        ("2025-02-01", 151, 99.34), ("2025-02-02", 153, 95.63), ("2025-02-03", 350, 16.12)]
    assert got[0]["guilds_change_7d"] is None
    assert [r["bots_listed_net"] for r in got] == [3, 3, 5, 5, 5, 4, 4, 4, 4, 4]


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "parquet"])
def test_sql_output_to_an_unusable_path_is_an_error_not_a_traceback(built_config: Path,
                                                                     tmp_path: Path,
                                                                     fmt: str) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    target = tmp_path / "notes.txt" / f"out.{fmt}"
    result = botstats("sql", "--config", built_config, "--format", fmt, "--output", target,
                      "SELECT 1 AS one")
    assert result.exit_code == 1
    assert f"cannot write {target}" in result.output
    assert (tmp_path / "notes.txt").read_text() == "keep me"
    good = tmp_path / f"good.{fmt}"
    assert botstats("sql", "--config", built_config, "--format", fmt, "--output", good,
                    "SELECT 1 AS one").exit_code == 0
    if fmt == "parquet":
        assert pl.read_parquet(good).rows() == [(1,)]
    else:
        assert "one" in good.read_text()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]  # none left aside


def test_a_query_file_that_is_not_utf8_is_refused_clearly(built_config: Path,
                                                          tmp_path: Path) -> None:
    query = tmp_path / "latin1.sql"
    query.write_bytes("SELECT 'café' AS word".encode("latin-1"))
    result = botstats("sql", "--config", built_config, "--file", query)
    assert result.exit_code == 2
    assert f"{query}: not UTF-8 text" in result.output and "Save the query as UTF-8" in result.output
    query.write_text("SELECT 'café' AS word", encoding="utf-8")
    result = botstats("sql", "--config", built_config, "--file", query, "--format", "csv")
    assert (result.exit_code, result.output) == (0, "word\ncafé\n")


def test_sql_writes_csv_json_and_parquet(built_config: Path, tmp_path: Path) -> None:
    query = "SELECT bot_id, day, guilds FROM trend_bot_daily WHERE bot_id = 'delta' ORDER BY day"
    csv = botstats("sql", "--config", built_config, "--format", "csv", query)
    assert csv.output == "bot_id,day,guilds\ndelta,2025-01-27,2000\ndelta,2025-02-03,2200\n"
    out = tmp_path / "delta.parquet"
    assert botstats("sql", "--config", built_config, "--format", "parquet", "--output", out,
                    query).exit_code == 0
    assert pl.read_parquet(out).rows() == pl.read_csv(csv.output.encode(),
                                                       try_parse_dates=True).rows()
    out_json = tmp_path / "delta.json"
    assert botstats("sql", "--config", built_config, "--format", "json", "-o", out_json,
                    query).output == ""
    assert json.loads(out_json.read_text())[1] == {"bot_id": "delta", "day": "2025-02-03",
                                                    "guilds": 2200}
    # DuckDB sums are HUGEINT/DECIMAL: still numbers in JSON, not strings.
    assert sql_json(built_config, "SELECT sum(i) AS s, sum(i) / 4 AS m FROM range(4) t(i)") == [
        {"s": 6, "m": 1.5}]


@pytest.mark.parametrize(("args", "words"), [
    (["SELEC 1"], "syntax error"),
    (["SELECT * FROM trend_nothing"], "The trend_* views exist once `botstats trends` has run"),
    (["CREATE TABLE t (a INT)"], "read-only"),
    ([], "give a QUERY or -f FILE"),
    (["SELECT 1", "-f", str(QUERIES / "bot_history.sql")], "give a QUERY or -f FILE"),
    (["SELECT 1", "--format", "parquet"], "--format parquet needs --output"),
    (["SELECT 1", "--param", "bot_id"], "is not NAME=VALUE"),
    (["SELECT 1", "--param", "bot-id=1"], "a name must be letters, digits and _"),
    (["  \n "], "the query is empty: give a SELECT"),
])
def test_sql_errors_exit_2_with_a_message(built_config: Path, args: list[str], words: str) -> None:
    result = botstats("sql", "--config", built_config, *args)
    assert result.exit_code == 2
    assert words in result.output
    assert "Traceback" not in result.output


def test_a_query_with_no_result_set_says_so_and_writes_nothing(built_config: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    result = botstats("sql", "--config", built_config, "/* only a comment */", "--output", out,
                      "--format", "csv")
    assert result.exit_code == 0
    assert "the query returned no result set" in result.output and str(out) in result.output
    assert not out.exists()


@pytest.mark.parametrize("command", [["sql", "SELECT 1"], ["trends"], ["status"]])
def test_without_an_archive_says_what_to_run(tmp_path: Path, command: list[str]) -> None:
    empty = tmp_path / "empty.toml"
    empty.touch()
    result = botstats(command[0], "--config", empty, "--db", tmp_path / "none.duckdb", *command[1:])
    assert result.exit_code == 1
    assert "there is no archive at" in result.output and "botstats harvest" in result.output
    assert not (tmp_path / "none.duckdb").exists()
    assert not (tmp_path / "none.duckdb.primary").exists()


def test_status_of_a_duckdb_file_that_is_no_archive_says_so(tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    empty = tmp_path / "empty.toml"
    empty.touch()
    result = botstats("status", "--config", empty, "--db", other)
    assert result.exit_code == 1
    assert "is a DuckDB database file, not a DuckLake archive" in result.output
    assert "botstats convert-archive" in result.output
    assert "Traceback" not in result.output


def test_views_are_in_the_published_archive(built_config: Path, trend_archive: Settings) -> None:
    """A fresh read-only connection (what `duckdb data/archive.ducklake` opens) sees them."""
    with open_archive(trend_archive.db_path) as con:
        views = [r[0] for r in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND view_name <> 'bots' "
            "ORDER BY 1").fetchall()]  # bots: the archive's own (migration 009)
        assert views == sorted(f"trend_{name}" for name in DATASETS)
        counts = {v: con.execute(f"SELECT count(*) FROM {v}").fetchall()[0][0] for v in views}
    assert counts == {"trend_anomalies": 3, "trend_bot_daily": 30, "trend_bot_names": 5, "trend_bot_growth": 30,
                      "trend_bot_ranks": 30, "trend_custom_daily": 9, "trend_directory_daily": 10,
                      "trend_movers": 26, "trend_resource_health": 3, "trend_bot_forecast": 18}


@pytest.mark.slow
def test_real_processes_from_another_directory(config: Path, tmp_path: Path) -> None:
    """`python -m pipeline trends`, then `sql` from elsewhere: the views' paths are absolute."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(*args: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], cwd=elsewhere,
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})

    built = run("trends", "--config", config)
    assert built.returncode == 0, built.stderr
    assert "partitions 55 written" in built.stdout
    asked = run("sql", "--config", config, "--format", "json",
                "SELECT bot_id, kind FROM trend_anomalies ORDER BY day")
    assert asked.returncode == 0, asked.stderr
    assert [r["kind"] for r in json.loads(asked.stdout)] == ["counter_reset", "outage", "spike"]
    failed = run("sql", "--config", config, "SELECT nonsense FROM trend_bot_daily")
    assert failed.returncode == 2
    assert failed.stderr.startswith("botstats: error: the query failed: Binder Error")
    assert "Traceback" not in failed.stderr
