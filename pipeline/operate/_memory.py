"""A process's peak memory, as a run reports it."""

from __future__ import annotations

import resource
import sys


def peak_rss_mb() -> float | None:
    """This process image's peak resident set (``VmHWM``; an ``exec`` starts it again), in MB."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    # Elsewhere the process's peak over its life: KB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)
