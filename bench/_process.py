"""A bench step in a process of its own, measured: wall time, CPU, peak RSS, bytes written."""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Measured:
    seconds: float  # wall
    peak_rss_mb: float
    cpu_s: float  # user + system, every thread of the process
    written_mb: float  # handed to the storage layer (Linux: what /proc/<pid>/io counts)
    code: int


def run_measured(cmd: list[str], *, cwd: Path, log: Path, env: dict[str, str] | None = None,
                 append: bool = False, stdout: Path | None = None) -> Measured:
    """Run ``cmd`` with its output into ``log`` (its standard output into ``stdout`` if given):
    its wall time, peak RSS, CPU time, bytes written and exit code. ``os.wait4`` gives the
    rusage of that one child (RUSAGE_CHILDREN would mix all of them)."""
    with ExitStack() as files:
        err = files.enter_context(log.open("ab" if append else "wb"))
        out = files.enter_context(stdout.open("wb")) if stdout else err
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
    return Measured(seconds, usage.ru_maxrss / 1024,  # ru_maxrss is in KiB on Linux
                    usage.ru_utime + usage.ru_stime, usage.ru_oublock * 512 / 1e6,  # 512-byte blocks
                    os.waitstatus_to_exitcode(status))
