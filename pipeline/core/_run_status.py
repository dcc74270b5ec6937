"""How a run ends: :class:`RunStatus`, one spelling for the harvest, the run, ``harvest_runs``,
`botstats status` and the exit codes."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run's status. A ``str``: JSON, the archive's ``harvest_runs.status`` and the messages
    see the same words as ever, and a member equals its word (``RunStatus.COMPLETE ==
    "complete"``)."""

    RUNNING = "running"  # begun; also what a run killed before it ended leaves
    COMPLETE = "complete"  # did everything it says
    PARTIAL = "partial"  # some bots or reads failed, or the listing was not believed whole
    FAILED = "failed"  # could not do its job, or a setting reads the service wrong
    INTERRUPTED = "interrupted"  # stopped on request, or found killed by the next run
