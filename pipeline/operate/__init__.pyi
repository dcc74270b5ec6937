"""The surface of pipeline.operate (imported lazily: see __init__.py)."""

from ._demo import DemoOptions, demo, next_steps
from ._deploy import botstats_command, cron_text
from ._logs import setup_logging
from ._maintenance import (
    backup_archive,
    compact_archive,
    compact_exports,
    convert_archive,
    restore_archive,
)
from ._memory import tune_allocators
from ._process import can_hand_off, hand_off, resumed
from ._runner import (
    RunOptions,
    RunReport,
    finish_run,
    locked_harvest,
    locked_trends,
    run,
    tell_harvest,
    tell_trends,
)
from ._schedule import Crons, describe_schedule, run_scheduler
from ._signals import stop_on_signals
from ._status import (
    RUN_COLUMNS,
    SHARD_COLUMNS,
    ArchiveStatus,
    archive_status,
    describe_drift,
    describe_latest,
    describe_undelivered,
    parse_age,
    run_lines,
    shard_lines,
)

__all__ = [
    "RUN_COLUMNS",
    "SHARD_COLUMNS",
    "ArchiveStatus",
    "DemoOptions",
    "archive_status",
    "backup_archive",
    "botstats_command",
    "can_hand_off",
    "compact_archive",
    "compact_exports",
    "convert_archive",
    "cron_text",
    "Crons",
    "demo",
    "describe_drift",
    "describe_latest",
    "describe_schedule",
    "describe_undelivered",
    "finish_run",
    "hand_off",
    "locked_harvest",
    "locked_trends",
    "next_steps",
    "parse_age",
    "restore_archive",
    "resumed",
    "run",
    "tell_harvest",
    "tell_trends",
    "run_lines",
    "run_scheduler",
    "RunOptions",
    "RunReport",
    "setup_logging",
    "shard_lines",
    "stop_on_signals",
    "tune_allocators",
]
