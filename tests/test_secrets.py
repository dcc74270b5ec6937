"""Nothing secret is logged or stored: a real `botstats run` and `botstats post-stat` with a user
token and a bot key (and a refused post), then every log, output, archive table and export is
searched for both."""


from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import child_env

from pipeline.archive._store import open_archive

pytestmark = pytest.mark.slow


def _botstats(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def _text_columns(db: Path) -> list[tuple[str, str]]:
    with open_archive(db) as con:
        return con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_catalog = 'archive' AND table_schema = 'main' "
            "AND data_type IN ('VARCHAR', 'JSON') "
            "AND table_name IN (SELECT table_name FROM information_schema.tables "
            "                   WHERE table_type = 'BASE TABLE')").fetchall()


@pytest.mark.parametrize("on_reads", [False, True], ids=["token on user reads",
                                                      "token on every read"])
def test_no_secret_in_logs_outputs_tables_or_exports(tmp_path: Path, service_factory: Any,
                                                     on_reads: bool) -> None:
    svc = service_factory(bots=20, history_days=5, stats_per_day=2, bot_reads_need_token=on_reads)
    d = svc.directory
    token = next(iter(d.user_tokens().values()))
    bot_id, other_bot = d.bot_ids()[:2]
    key = d.bot_key(bot_id)
    secrets = {"user token": token, "bot key": key}
    env = child_env()
    env.update({"BOTSTATS_CONFIG": "", "BOTSTATS_USER_TOKEN": token, "BOTSTATS_BOT_KEY": key,
                "BOTSTATS_LOG_LEVEL": "debug", "BOTSTATS_DB": str(tmp_path / "a.ducklake"),
                "BOTSTATS_EXPORT_DIR": str(tmp_path / "exports"), "BOTSTATS_BASE_URL": svc.base_url,
                "BOTSTATS_SERVICE_TOKEN_ON_BOT_READS": str(on_reads).lower()})
    log_file = tmp_path / "botstats.log"
    common = ["--log-format", "json", "--log-file", str(log_file)]

    runs = [
        _botstats(tmp_path, env, *common, "run", "--no-progress"),
        _botstats(tmp_path, env, *common, "post-stat", bot_id, "--users", "5", "--guilds", "6"),
        # The key of one bot used for another: refused (403), an error path worth checking.
        _botstats(tmp_path, env, *common, "post-stat", other_bot, "--users", "5", "--guilds", "6"),
        _botstats(tmp_path, env, *common, "run", "--no-progress"),  # archives the posted record
    ]
    assert [r.returncode for r in runs] == [0, 0, 1, 0], [r.stderr for r in runs]
    assert '"guilds": 6' in runs[1].stdout

    # The secrets were really used: the user snapshot needs the token.
    with open_archive(tmp_path / "a.ducklake") as con:
        assert con.execute("SELECT count(*) FROM users").fetchall()[0][0] >= 1
        assert con.execute("SELECT count(*) FROM bot_stats WHERE guilds = 6 AND bot_id = ?",
                           [bot_id]).fetchall()[0][0] == 1

    places: dict[str, str] = {"log file": log_file.read_text()}
    assert places["log file"].count('"level"') >= 4
    for i, r in enumerate(runs):
        places[f"stdout of command {i}"] = r.stdout
        places[f"stderr of command {i}"] = r.stderr
    for db in (tmp_path / "a.ducklake",):
        with open_archive(db) as con:
            for table, column in _text_columns(db):
                values = con.execute(f'SELECT "{column}"::VARCHAR FROM "{table}"').fetchall()
                places[f"{db.name}: {table}.{column}"] = "\n".join(str(v[0]) for v in values)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    for path in files:
        if path.suffix == ".parquet":
            frame = pl.read_parquet(path)
            places[str(path)] = frame.select(pl.all().cast(pl.String)).write_csv()
        # Every file's raw bytes too: logs, the lock holder, manifests, the DuckDB files.
        places[f"bytes of {path.name}"] = path.read_bytes().decode("latin-1")

    leaks = [f"{what} in {where}" for where, text in places.items()
             for what, secret in secrets.items() if secret in text]
    assert not leaks, leaks
