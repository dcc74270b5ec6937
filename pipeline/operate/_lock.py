"""The run lock: one writer job (harvest, trends, run) at a time per archive with a SQLite
catalog; with a PostgreSQL catalog, a lock per scope in that database (``_advisory``), so the
workers of different shards run side by side.

An OS file lock (``filelock``, ``flock`` on Linux) is released by the kernel when its process
dies, so a lock left by a killed run never blocks the next one: it simply takes the lock. Beside
the lock, a small JSON file names the holder (job, run id, PID, host, since) so that

- a run that waits in vain can say which run holds the archive, and
- a run that takes the lock can tell a clean hand-over from a *stale* one: the previous holder
  never wrote ``released_at`` and its PID is gone. That is logged as a take-over (the harvest
  itself marks the dead run's ``harvest_runs`` row ``interrupted``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..core import ConfigError, LockTimeout, Settings, Shard, replacing
from ._advisory import AdvisoryHandle, advisory_lock
from ._scope import ARCHIVE_SCOPE, Scope

log = logging.getLogger("botstats.lock")

# While waiting, wake this often to notice a stop request (SIGTERM to the scheduler).
_POLL = 0.25


def _info_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".holder.json")


def files(lock_path: Path) -> tuple[Path, Path]:
    """The lock file and the file naming its holder."""
    return lock_path, _info_path(lock_path)


def holder(settings: Settings) -> dict[str, Any] | None:
    """Who last took the lock (it may have finished or died since: see ``released_at``)."""
    try:
        data = json.loads(_info_path(settings.lock_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def describe(info: dict[str, Any] | None) -> str:
    """'run 2026...-ab12 (run, pid 123 on host, since ...)' for messages."""
    if not info:
        return "an unknown holder (no holder file)"
    run = info.get("run_id") or "?"
    return (f"run {run} ({info.get('job', '?')}, pid {info.get('pid', '?')} on "
            f"{info.get('host', '?')}, since {info.get('since', '?')})")


class LockHandle:
    """The held lock; ``note(run_id=...)`` adds to what the holder file says about us. It
    excludes every other writer, so every run left ``running`` is dead (``dead``) and it covers
    every scope (``also``)."""

    def __init__(self, path: Path, info: dict[str, Any]) -> None:
        self.path = path
        self.info = info
        self.previous: dict[str, Any] | None = None
        self.took_over = False

    def note(self, **fields: Any) -> None:
        if all(self.info.get(k) == v for k, v in fields.items()):
            return
        self.info.update(fields)
        _write_info(self.path, self.info)

    def dead(self, _shard: Shard) -> bool:
        return True

    @contextmanager
    def also(self, _scope: Scope, timeout: float | None = None) -> Iterator[None]:
        yield


# What run_lock yields: the file lock's handle, or the advisory locks' of a PostgreSQL catalog.
Held = LockHandle | AdvisoryHandle


def _write_info(lock_path: Path, info: dict[str, Any]) -> None:
    target = _info_path(lock_path)
    try:
        with replacing(target) as tmp:
            tmp.write_text(json.dumps(info), encoding="utf-8")
    except OSError as exc:  # the holder file is for messages only: never fail a run over it
        log.warning("cannot write the lock holder file %s: %s", target, exc)


def _is_stale(previous: dict[str, Any] | None) -> bool:
    if not previous or previous.get("released_at"):
        return False
    if previous.get("host") != socket.gethostname():
        return False  # cannot check a PID on another host; the OS lock was free, so it is gone
    pid = previous.get("pid")
    return isinstance(pid, int) and pid != os.getpid() and not pid_alive(pid)


def prepare_archive_place(settings: Settings) -> None:
    """What a writer job needs before it waits for anything: an archive path that names a file,
    and the lock file beside it; else a clear error now. (A PostgreSQL catalog: nothing here.)"""
    if settings.shared_catalog:
        return
    db = settings.db_path
    if db.is_dir():
        raise ConfigError(
            f"the archive ([store].db, --db) {db} is a directory: name the file, e.g. "
            f"{db / 'archive.ducklake'}.")
    create_lock_file(settings.lock_path)


def create_lock_file(path: Path) -> None:
    """The lock file and its directory, or a clear error: filelock takes a lock file it cannot
    open for one held by another process, and would wait out the whole timeout, then blame it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        blocker = next((p for p in path.parents if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            reason = f"{blocker} is a file, not a directory"
        raise ConfigError(
            f"cannot create the archive's lock file {path}: {reason}. The archive "
            f"([store].db, --db) must be in a directory this user can write: fix its "
            f"permissions, or point --db elsewhere."
        ) from exc


def _acquire(lock: FileLock, wait: float, stop: threading.Event | None) -> bool:
    """Wait up to ``wait`` seconds (a negative wait: forever); False if it ran out or ``stop``."""
    if stop is None:
        try:
            lock.acquire(timeout=wait)
            return True
        except Timeout:
            return False
    deadline = None if wait < 0 else time.monotonic() + wait
    while not stop.is_set():
        slice_ = _POLL if deadline is None else max(0.0, min(_POLL, deadline - time.monotonic()))
        try:
            lock.acquire(timeout=slice_)
            return True
        except Timeout:
            if deadline is not None and time.monotonic() >= deadline:
                return False
    return False


def _wait_for(lock: FileLock, settings: Settings, wait: float,
              stop: threading.Event | None) -> bool:
    """Say who holds the lock and how long this job will wait, then wait (see _acquire)."""
    how_long = "for as long as it takes" if wait < 0 else f"up to {wait:g} s (--lock-timeout, [run].lock_timeout)"
    log.info("the archive lock %s is held by %s: waiting %s", settings.lock_path,
             describe(holder(settings)), how_long)
    return _acquire(lock, wait, stop)


@contextmanager
def run_lock(
    settings: Settings,
    job: str,
    *,
    scope: Scope = ARCHIVE_SCOPE,
    timeout: float | None = None,
    run_id: str | None = None,
    stop: threading.Event | None = None,
) -> Iterator[Held]:
    """Hold the archive's run lock for ``job`` and ``scope``; wait up to ``timeout`` (default
    [run].lock_timeout).

    Raises :class:`~pipeline.errors.LockTimeout` (exit 75) naming the holder when the wait runs
    out, or as soon as ``stop`` is set while waiting.
    """
    if settings.shared_catalog:
        with advisory_lock(settings, job, scope, timeout=timeout, run_id=run_id,
                           stop=stop) as handle:
            yield handle
        return
    with _file_lock(settings, job, timeout=timeout, run_id=run_id, stop=stop) as file_handle:
        yield file_handle


@contextmanager
def _file_lock(settings: Settings, job: str, *, timeout: float | None, run_id: str | None,
               stop: threading.Event | None) -> Iterator[LockHandle]:
    path = settings.lock_path
    prepare_archive_place(settings)
    wait = settings.run.lock_timeout if timeout is None else timeout
    lock = FileLock(str(path))
    started = time.monotonic()
    if not _acquire(lock, 0, None) and not _wait_for(lock, settings, wait, stop):
        who = describe(holder(settings))
        if stop is not None and stop.is_set():
            raise LockTimeout(f"stopped while waiting for the archive lock {path}, held by {who}.")
        raise LockTimeout(
            f"another botstats job holds the archive lock {path}: {who}; waited {wait:g} s. "
            f"Let it finish (see `botstats status`), or raise [run].lock_timeout / --lock-timeout."
        )
    try:
        previous = holder(settings)
        handle = LockHandle(path, {
            "job": job, "run_id": run_id, "pid": os.getpid(), "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        })
        handle.previous = previous
        if _is_stale(previous):
            handle.took_over = True
            log.warning("took over the archive lock %s from %s: that process is gone without "
                        "releasing it (killed?)", path, describe(previous))
        waited = time.monotonic() - started
        if waited >= 1:
            log.info("waited %.1f s for the archive lock %s", waited, path)
        _write_info(path, handle.info)
        try:
            yield handle
        finally:
            handle.note(released_at=datetime.now(UTC).isoformat(timespec="seconds"))
    finally:
        lock.release()
