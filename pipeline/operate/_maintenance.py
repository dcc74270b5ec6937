"""Archive upkeep, each a job of its own under the run lock: convert, compact, backup, restore."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import ConfigError, Settings
from ._lock import TRENDS_SCOPE, run_lock

if TYPE_CHECKING:
    from ..analytics import ExportCompaction
    from ..archive import Compaction, ConvertReport

log = logging.getLogger("botstats.run")


def convert_archive(settings: Settings, *, python: str | None = None,
                    say: Callable[[str], None] = log.info) -> ConvertReport:
    """Convert a botstats 0.1 archive to the DuckLake layout (see :func:`pipeline.archive.convert`)."""
    from ..archive import convert

    if settings.shared_catalog:
        raise ConfigError("convert-archive converts an archive of botstats 0.1 (one DuckDB "
                          "file) into a SQLite catalog: run it without [store].catalog.")
    with run_lock(settings, "convert-archive"):
        return convert(settings, python=python, say=say)


def compact_archive(settings: Settings, *, keep_days: float) -> Compaction:
    """Merge small data files and expire snapshots older than ``keep_days``."""
    from .. import archive

    with run_lock(settings, "compact"), archive.writer(settings) as con:
        return archive.compact(con, archive.ArchivePaths.of(settings), keep_days=keep_days)


def compact_exports(settings: Settings) -> ExportCompaction:
    """Merge the trend exports' day files of every settled month into the month's file, under
    the trends lock (as a trends build: one at a time, beside the harvest)."""
    from ..analytics import compact_exports as merge

    with run_lock(settings, "compact", scope=TRENDS_SCOPE):
        return merge(settings)


def backup_archive(settings: Settings, dest: Path) -> tuple[int, int]:
    """Copy the archive into folder ``dest``; (files, bytes) copied."""
    from .. import archive

    with run_lock(settings, "backup"):
        return archive.backup(archive.ArchivePaths.of(settings), dest)


def restore_archive(settings: Settings, source: Path) -> tuple[int, int]:
    """Put the backup in folder ``source`` in place of the archive; (files, bytes) copied."""
    from .. import archive

    with run_lock(settings, "restore"):
        return archive.restore(source, archive.ArchivePaths.of(settings))
