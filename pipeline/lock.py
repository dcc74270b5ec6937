"""The run lock: one writer job (harvest, trends, run) at a time per archive.

An OS file lock (``filelock``) is released by the kernel when its process dies, so a lock left by
a killed run is never stale: the next run simply takes it. Beside it, a small JSON file names the
holder (run, PID, host, since) so a run that waits in vain can say who holds the archive.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from .config import Settings
from .errors import LockTimeout


def _info_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".holder.json")


def holder(settings: Settings) -> dict[str, Any] | None:
    """Who last took the lock (it may have finished or died since)."""
    try:
        return json.loads(_info_path(settings.lock_path).read_text())
    except (OSError, ValueError):
        return None


@contextmanager
def run_lock(settings: Settings, job: str, *, timeout: float | None = None) -> Iterator[None]:
    """Hold the archive's run lock for ``job``; wait up to ``timeout`` (default [run].lock_timeout)."""
    path = settings.lock_path
    path.parent.mkdir(parents=True, exist_ok=True)
    wait = settings.run.lock_timeout if timeout is None else timeout
    lock = FileLock(str(path), timeout=wait)
    try:
        lock.acquire()
    except Timeout:
        who = holder(settings) or {}
        raise LockTimeout(
            f"another botstats job holds the archive lock {path} "
            f"({who.get('job', '?')} pid {who.get('pid', '?')} on {who.get('host', '?')} since "
            f"{who.get('since', '?')}); waited {wait:.0f} s. Let it finish, or raise "
            f"[run].lock_timeout."
        ) from None
    try:
        _info_path(path).write_text(json.dumps({
            "job": job, "pid": os.getpid(), "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }))
        yield
    finally:
        lock.release()
