"""`botstats run` handing its trends and report to a fresh image of itself.

After the harvest the process keeps what the harvest left: Python's heap (the modules it
imported, pymalloc's arenas), glibc's free lists, the pages of the libraries' code it ran. The
trends' own peak stacks on that (docs/design.md, "Memory"). So `botstats run` re-executes
itself once the harvest has let go of the lock: the same PID (a supervisor, a signal, the lock's
holder file still name the run), the same command line, a fresh heap. What the harvest did
travels in an environment variable, tagged with the PID so that a child process that inherits it
never mistakes it for its own. (The scheduler daemon starts a process per job: ``_children``.)
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import TYPE_CHECKING, TypedDict

from ._logs import LOGGERS

if TYPE_CHECKING:  # the runner imports the harvester: not for the scheduler daemon
    from ._runner import RunReport, RunReportJson

log = logging.getLogger("botstats.run")

HANDOFF_ENV = "_BOTSTATS_RUN_HANDOFF"


class Handoff(TypedDict):
    """What :data:`HANDOFF_ENV` holds, as JSON: the process it is for, and its run."""

    pid: int
    report: RunReportJson


def can_hand_off() -> bool:
    """Whether this process can re-execute itself with the same command line."""
    return os.name == "posix" and bool(getattr(sys, "orig_argv", None)) and bool(sys.executable)


def hand_off(report: RunReport) -> None:
    """Re-execute this command with ``report`` (harvested, ``trends_pending``) waiting for it.
    Returns only if the ``exec`` failed (logged): the caller then finishes the run itself."""
    report.memory.fresh_process = True
    os.environ[HANDOFF_ENV] = json.dumps(Handoff(pid=os.getpid(), report=report.as_dict()),
                                         default=str)
    log.debug("run %s: harvested; the trends and the report in a fresh image of this process",
              report.run_id)
    # What is buffered in this image is lost with it.
    for handler in {h for name in LOGGERS for h in logging.getLogger(name).handlers}:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, sys.orig_argv)
    except OSError as exc:
        os.environ.pop(HANDOFF_ENV, None)
        report.memory.fresh_process = False
        log.warning("could not start a fresh process for the trends (%s): building them in this "
                    "one", exc)


def resumed() -> RunReport | None:
    """The run handed to this process by :func:`hand_off`, if it was; taken out of the
    environment either way, so that nothing this process starts inherits it."""
    from ._runner import RunReport

    raw = os.environ.pop(HANDOFF_ENV, None)
    if not raw:
        return None
    try:
        data: Handoff = json.loads(raw)
        if data.get("pid") != os.getpid():
            return None
        return RunReport.resume(data["report"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignored %s: not a run handed over by botstats (%s)", HANDOFF_ENV, exc)
        return None

