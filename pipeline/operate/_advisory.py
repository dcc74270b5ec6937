"""The run lock when the catalog is a PostgreSQL database: advisory locks in that database, so
workers on many machines share them.

Each job holds what its scope needs, on a connection of its own:

- a harvest of shard K/N: the lock of that shard, so one worker harvests it at a time, and the
  archive lock in shared mode;
- a trends build: the trends lock, so one job builds them, and the archive lock, shared;
- compaction, backup and restore: the archive lock alone, exclusively, so they wait for every
  worker and hold new ones back (deleting orphaned files must not see a worker's uncommitted
  files).

The server releases a session's locks when its connection ends, so a killed job (even
``kill -9``) never blocks the next one. Who holds a lock is read from ``pg_stat_activity``,
where each job names itself (job, shard, run id, pid and host).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .. import archive
from ..core import LockTimeout, Settings, Shard
from ._scope import Scope

log = logging.getLogger("botstats.lock")

_POLL = 0.25  # seconds between tries while waiting (and to notice a stop request)


def _keys(scope: Scope) -> list[tuple[int, bool]]:
    """(key, shared) of every lock the scope needs, in the order they are taken."""
    if scope.name == "archive":
        return [(archive.ARCHIVE, False)]
    own = archive.TRENDS if scope.name == "trends" else archive.shard_key(scope.shard.k,
                                                                          scope.shard.n)
    return [(archive.ARCHIVE, True), (own, False)]


class AdvisoryHandle:
    """The held locks. ``note(run_id=...)`` renames the session so waiting jobs can name it;
    ``dead(shard)`` says whether no live job harvests that shard; ``also(scope)`` takes more."""

    def __init__(self, locks: archive.AdvisoryLocks, settings: Settings, job: str, scope: Scope,
                 stop: threading.Event | None) -> None:
        self.locks = locks
        self.settings = settings
        self.job = job
        self.scope = scope
        self.stop = stop
        self.info: dict[str, Any] = {}
        self.previous: dict[str, Any] | None = None
        self.took_over = False

    def title(self) -> str:
        """e.g. ``botstats harvest 1/3 20261125T100000Z-3f9a1c pid 4242@worker-1``."""
        parts = ["botstats", self.job]
        if self.scope.name == "shard" and not self.scope.shard.whole:
            parts.append(str(self.scope.shard))
        if self.info.get("run_id"):
            parts.append(str(self.info["run_id"]))
        return " ".join([*parts, f"pid {os.getpid()}@{socket.gethostname()}"])

    def note(self, **fields: Any) -> None:
        if all(self.info.get(k) == v for k, v in fields.items()):
            return
        self.info.update(fields)
        self.locks.rename(self.title())

    def dead(self, shard: Shard) -> bool:
        return self.locks.free(archive.shard_key(shard.k, shard.n))

    @contextmanager
    def also(self, scope: Scope, timeout: float | None = None) -> Iterator[None]:
        wanted = [k for k in _keys(scope) if k not in self.locks.held]
        _wait(self.locks, wanted, self.settings, scope, timeout, self.stop)
        try:
            yield
        finally:
            self.locks.release(wanted)


def _wait(locks: Any, wanted: list[tuple[int, bool]], settings: Settings, scope: Scope,
          timeout: float | None, stop: threading.Event | None) -> None:
    """Take ``wanted``, trying every ``_POLL`` seconds up to the wait; else LockTimeout."""
    wait = settings.run.lock_timeout if timeout is None else timeout
    deadline = None if wait < 0 else time.monotonic() + wait
    started = time.monotonic()
    said = False
    while (blocker := locks.take(wanted)) is not None:
        who = "; ".join(locks.holders(blocker)) or "a job that has just let go"
        lock = scope.lock_name(archive_lock=blocker == archive.ARCHIVE)
        if not said:
            how_long = "for as long as it takes" if deadline is None else \
                f"up to {wait:g} s (--lock-timeout, [run].lock_timeout)"
            log.info("%s is held in the PostgreSQL catalog by %s: waiting %s", lock, who,
                     how_long)
            said = True
        if stop is not None and stop.is_set():
            raise LockTimeout(f"stopped while waiting for {lock}, held by {who}.")
        if deadline is not None and time.monotonic() >= deadline:
            raise LockTimeout(
                f"another botstats job holds {lock} in the PostgreSQL catalog: {who}; waited "
                f"{wait:g} s. Let it finish (see `botstats status`), or raise "
                f"[run].lock_timeout / --lock-timeout.")
        (stop or threading.Event()).wait(_POLL)
    waited = time.monotonic() - started
    if waited >= 1:
        log.info("waited %.1f s for %s", waited, scope.lock_name())


@contextmanager
def advisory_lock(settings: Settings, job: str, scope: Scope, *, timeout: float | None,
                  run_id: str | None, stop: threading.Event | None) -> Iterator[AdvisoryHandle]:
    paths = archive.ArchivePaths.of(settings)
    locks = archive.AdvisoryLocks(paths.dsn, paths.password, archive.session_name(job))
    try:
        handle = AdvisoryHandle(locks, settings, job, scope, stop)
        _wait(locks, _keys(scope), settings, scope, timeout, stop)
        handle.info["run_id"] = run_id
        locks.rename(handle.title())
        yield handle
    finally:
        locks.close()


__all__ = ["AdvisoryHandle", "advisory_lock"]
