"""The surface of pipeline.alerts (imported lazily: see __init__.py)."""

from ._alert import Alert, LockHolder, RunOutcome
from ._ledger import Row, undelivered
from ._notify import (
    AlertsReport,
    Clock,
    TestResult,
    ledger_rows,
    notify_blocked,
    notify_data,
    notify_run,
    send_test,
)

__all__ = [
    "Alert",
    "AlertsReport",
    "Clock",
    "ledger_rows",
    "LockHolder",
    "notify_blocked",
    "notify_data",
    "notify_run",
    "Row",
    "RunOutcome",
    "send_test",
    "TestResult",
    "undelivered",
]
