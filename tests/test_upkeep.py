"""The archive's upkeep through the CLI: `botstats compact` (merges files, deletes those no kept
snapshot reads, the archive unchanged), `backup` and `restore` (also after a compaction deleted
files), each under the run lock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pipeline.archive import _store as store
from pipeline.archive._store import ArchivePaths, open_archive
from pipeline.cli import cli
from pipeline.core._loading import load_settings
from pipeline.core._settings import Settings
from pipeline.operate._lock import run_lock

ROWS = 200  # more than DuckLake inlines in the catalog: each insert writes a data file


def _settings(tmp_path: Path) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text("[run]\nlock_timeout = 0.2\n")
    return load_settings(config, env={}, overrides={"store.db": str(tmp_path / "a.ducklake")})


def botstats(settings: Settings, *args: Any) -> Result:
    config = settings.db_path.parent / "config.toml"
    return CliRunner().invoke(cli, [*map(str, args), "--config", str(config),
                                    "--db", str(settings.db_path)])


def _add(settings: Settings, tag: str) -> None:
    with store.writer(settings) as con:
        con.execute("INSERT INTO bot_stats (stat_id, bot_id, recorded_at, raw, run_id, archived_at) "
                    f"SELECT '{tag}' || i, 'b' || (i % 7), now(), '{{}}', 'r', now() "
                    f"FROM range({ROWS}) t(i)")


def _rows(settings: Settings) -> list[tuple[Any, ...]]:
    with open_archive(settings.db_path) as con:
        return con.execute("SELECT stat_id, bot_id, recorded_at, raw FROM bot_stats "
                           "ORDER BY stat_id").fetchall()


def _files(settings: Settings, table: str = "") -> set[Path]:
    """The archive's data files on disk (of ``table``, or all)."""
    return set((ArchivePaths.of(settings).data / "main" / table).rglob("*.parquet"))


def test_compact_merges_small_files_deletes_the_old_ones_and_keeps_every_row(
        tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    for tag in "abc":
        _add(settings, tag)
    rows, files, every = _rows(settings), _files(settings, "bot_stats"), _files(settings)
    assert len(rows) == 3 * ROWS and len(files) == 3

    result = botstats(settings, "compact", "--keep-days", "0")
    assert result.exit_code == 0, result.output
    assert f"data files {len(every)} -> {len(_files(settings))}," in result.output

    after = _files(settings, "bot_stats")
    assert len(after) == 1 and not after & files  # the three merged into one
    assert not any(f.exists() for f in files)  # and deleted from the disk
    assert _rows(settings) == rows


def test_a_backup_after_a_compaction_holds_only_live_files_and_restores_exactly(
        tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    backups = tmp_path / "bk"
    _add(settings, "a")
    _add(settings, "b")
    assert botstats(settings, "backup", backups).exit_code == 0
    assert botstats(settings, "compact", "--keep-days", "0").exit_code == 0
    rows = _rows(settings)

    result = botstats(settings, "backup", backups)
    assert result.exit_code == 0, result.output
    # The merged file copied, the two it replaced dropped from the backup as from the archive.
    backed = ArchivePaths(backups / settings.db_path.name)
    assert ({f.relative_to(backed.data) for f in backed.data.rglob("*.parquet")}
            == {f.relative_to(ArchivePaths.of(settings).data) for f in _files(settings)})

    _add(settings, "c")  # lost by the restore
    result = botstats(settings, "restore", backups)
    assert result.exit_code == 0, result.output
    assert _rows(settings) == rows


@pytest.mark.parametrize("job", [["compact"], ["backup", "{bk}"], ["restore", "{bk}"]],
                         ids=["compact", "backup", "restore"])
def test_upkeep_waits_for_the_run_lock_and_gives_up_with_75(tmp_path: Path, job: list[str]) -> None:
    settings = _settings(tmp_path)
    _add(settings, "a")
    backups = tmp_path / "bk"
    assert botstats(settings, "backup", backups).exit_code == 0
    _add(settings, "b")
    rows, files = _rows(settings), _files(settings)

    with run_lock(settings, "run", run_id="20261122T000000Z-holder"):
        result = botstats(settings, *(a.format(bk=backups) for a in job))
    assert result.exit_code == 75, result.output
    assert "another botstats job holds the archive lock" in result.output
    assert "run 20261122T000000Z-holder" in result.output
    # Nothing was done: the archive, its files and the backup as they were.
    assert _rows(settings) == rows and _files(settings) == files
    backed = ArchivePaths(backups / settings.db_path.name)
    assert len(list(backed.data.rglob("*.parquet"))) == 1
