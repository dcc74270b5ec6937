"""The `botstats` command: parse, call one library function, print.

One module per command group, each registering its commands on the group in :mod:`._base`:
``_interface`` (users, bots, post-stat), ``_serve`` (the embedded service), ``_archive``
(harvest, status, trends, sql), ``_jobs`` (run, schedule, cron, demo, config), ``_reports``
(report, compare, forecast: reads of the trend exports), ``_probe`` (probe), ``_alerts``
(alerts test, alerts list).

Exit codes: 0 ok; 1 the service answered with an error or could not be reached;
2 usage or config error; see README for the harvest/run codes.
"""

from __future__ import annotations

from . import (  # noqa: F401  (each registers its commands)
    _alerts,
    _archive,
    _interface,
    _jobs,
    _probe,
    _reports,
    _serve,
)
from ._base import cli, exit_now, main

__all__ = ["cli", "exit_now", "main"]
