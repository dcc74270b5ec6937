"""The surface of pipeline.archive (imported lazily: see __init__.py)."""

from ._drift import NewFields, describe_fields, drift_since, note_fields
from ._legacy import ConvertReport, convert
from ._migrations import sql_dir
from ._postgres import ARCHIVE, TRENDS, AdvisoryLocks, session_name, shard_key
from ._queries import Newest, changes_since, last_commit, newest, nothing_archived
from ._runs import begin_run, finish_run, live_bots, mark_removed
from ._sql import literal, now_utc, rollback
from ._store import (
    ALIAS,
    ArchivePaths,
    attach_statements,
    cursor,
    exists,
    is_busy,
    open_archive,
    reader,
    snapshot,
    table_counts,
    writer,
)
from ._upkeep import Compaction, backup, compact, disk_bytes, restore
from ._writes import (
    CUSTOM_SCHEMA,
    STAT_SCHEMA,
    BotRow,
    Frames,
    held_rejects,
    listing_changed,
    write_batch,
)

__all__ = [
    "AdvisoryLocks",
    "ALIAS",
    "ARCHIVE",
    "ArchivePaths",
    "attach_statements",
    "backup",
    "begin_run",
    "BotRow",
    "changes_since",
    "compact",
    "Compaction",
    "convert",
    "ConvertReport",
    "cursor",
    "CUSTOM_SCHEMA",
    "describe_fields",
    "disk_bytes",
    "drift_since",
    "NewFields",
    "exists",
    "finish_run",
    "Frames",
    "held_rejects",
    "is_busy",
    "literal",
    "last_commit",
    "listing_changed",
    "live_bots",
    "mark_removed",
    "Newest",
    "newest",
    "note_fields",
    "nothing_archived",
    "now_utc",
    "open_archive",
    "reader",
    "restore",
    "rollback",
    "session_name",
    "snapshot",
    "shard_key",
    "sql_dir",
    "STAT_SCHEMA",
    "table_counts",
    "TRENDS",
    "write_batch",
    "writer",
]
