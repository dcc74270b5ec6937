"""The run lock: what a job locks (its :class:`Scope`), and how it holds it.

A scope is the whole archive (compaction, backup, restore, conversion: alone), one shard's
harvest, or the trends build. A trends build reads a snapshot of the archive and writes only its
exports, so it never holds a harvest back: with a SQLite catalog a harvest holds the archive's
file lock and a trends build the trends' file lock beside it (one harvest at a time per archive,
as on one machine, and one trends build), and the archive scope holds both; with a PostgreSQL
catalog each scope is an advisory lock of its own in that database, so the workers of different
shards, and a trends build, run side by side, on many machines.

**The file locks.** An OS file lock (``filelock``, ``flock`` on Linux) is released by the kernel
when its process dies, so a lock left by a killed run never blocks the next one: it simply takes
the lock. Beside each lock, a small JSON file names the holder (job, run id, PID, host, since) so
that

- a run that waits in vain can say which run holds the archive, and
- a run that takes the lock can tell a clean hand-over from a *stale* one: the previous holder
  never wrote ``released_at`` and its PID is gone. That is logged as a take-over (the harvest
  itself marks the dead run's ``harvest_runs`` row ``interrupted``).

**Advisory locks** (a PostgreSQL catalog; the SQL is the archive's ``AdvisoryLocks``). Each job
holds what its scope needs, on a connection of its own:

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

import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import NotRequired, TypedDict

from filelock import FileLock, Timeout

from .. import archive
from ..core import ConfigError, LockTimeout, Settings, Shard, replacing

log = logging.getLogger("botstats.lock")

# While waiting, wake this often to try again and to notice a stop request (SIGTERM to the
# scheduler).
_POLL = 0.25


@dataclass(frozen=True)
class Scope:
    """``archive`` (compaction, backup, restore, conversion: alone), ``shard`` (a harvest of
    ``shard``) or ``trends``."""

    name: str = "archive"
    shard: Shard = field(default_factory=Shard)

    @classmethod
    def harvest(cls, shard: Shard | None = None) -> Scope:
        return cls("shard", shard or Shard())

    def lock_name(self, *, archive_lock: bool = False) -> str:
        """The lock, for messages (``archive_lock``: the shared archive lock that held it)."""
        if archive_lock or self.name == "archive":
            return "the archive lock"
        if self.name == "trends":
            return "the trends lock"
        return "the harvest lock" if self.shard.whole else f"the lock of shard {self.shard}"


ARCHIVE_SCOPE = Scope()
TRENDS_SCOPE = Scope("trends")


def _info_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".holder.json")


def files(lock_path: Path) -> tuple[Path, Path]:
    """The lock file and the file naming its holder."""
    return lock_path, _info_path(lock_path)


class HolderJson(TypedDict):
    """:class:`Holder` as its file spells it."""

    job: str
    run_id: str | None
    pid: int | None
    host: str
    since: str
    released_at: NotRequired[str]  # once released


@dataclass(frozen=True)
class Holder:
    """Who took the file lock, as the file beside it says: the job, its run (once it has one),
    its process, and when it took the lock and let it go (``released_at`` unset: it still holds
    it, or died holding it)."""

    job: str = "?"
    run_id: str | None = None
    pid: int | None = None
    host: str = "?"
    since: str = "?"
    released_at: str | None = None

    @classmethod
    def of(cls, data: object) -> Holder | None:
        """The holder a holder file's JSON names; None when it is not one (a field of the wrong
        type is taken as not said)."""
        if not isinstance(data, dict):
            return None

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        pid = data.get("pid")
        return cls(job=text("job") or "?", run_id=text("run_id"),
                   pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                   host=text("host") or "?", since=text("since") or "?",
                   released_at=text("released_at"))

    def as_dict(self) -> HolderJson:
        """As the holder file spells it (``released_at`` only once released)."""
        out = HolderJson(job=self.job, run_id=self.run_id, pid=self.pid, host=self.host,
                         since=self.since)
        if self.released_at is not None:
            out["released_at"] = self.released_at
        return out

    def describe(self) -> str:
        """'run 2026...-ab12 (run, pid 123 on host, since ...)' for messages."""
        return (f"run {self.run_id or '?'} ({self.job}, pid {self.pid or '?'} on {self.host}, "
                f"since {self.since})")

    def stale(self) -> bool:
        """Whether it died holding the lock: never released, by a process of this host that is
        gone (another host's PID cannot be checked; the OS lock was free, so it is gone)."""
        if self.released_at or self.host != socket.gethostname():
            return False
        return self.pid is not None and self.pid != os.getpid() and not pid_alive(self.pid)


def trends_lock_path(lock_path: Path) -> Path:
    """The trends' file lock beside the archive's: ``archive.ducklake.trends.lock``."""
    name = lock_path.name
    stem = name[:-len(".lock")] if name.endswith(".lock") else name
    return lock_path.with_name(stem + ".trends.lock")


def lock_paths(settings: Settings, scope: Scope) -> list[Path]:
    """The file locks a scope holds, in the order they are taken (with a SQLite catalog)."""
    archive_lock = settings.lock_path
    trends = trends_lock_path(archive_lock)
    if scope.name == "archive":
        return [archive_lock, trends]
    return [trends] if scope.name == "trends" else [archive_lock]


def holder(settings: Settings, scope: Scope = ARCHIVE_SCOPE) -> Holder | None:
    """Who last took the scope's (first) lock (it may have finished or died since: see
    ``released_at``)."""
    return _holder_of(lock_paths(settings, scope)[0])


def advisory_holder(settings: Settings, scope: Scope) -> Holder | None:
    """Who holds what keeps ``scope`` out in a PostgreSQL catalog (the archive lock taken
    exclusively, or the scope's own), as its session names itself (:meth:`AdvisoryHandle.title`);
    ``since``: when its session began. None when nobody does."""
    paths = archive.ArchivePaths.of(settings)
    locks = archive.AdvisoryLocks(paths.dsn, paths.password, archive.session_name("status"))
    try:
        sessions = [row for key, _shared in _keys(scope) for row in locks.holder_sessions(key)]
    finally:
        locks.close()
    if not sessions:
        return None
    name, _addr, since = min(sessions, key=lambda row: row[2])
    return _session_holder(name, since)


_SESSION = re.compile(r"^botstats (?P<job>\S+)(?: (?P<shard>\d+/\d+))?(?: (?P<run>\S+))?"
                      r" pid (?P<pid>\d+)@(?P<host>.*)$")


def _session_holder(name: str, since: datetime) -> Holder:
    """A holder from a session's name (``botstats harvest 1/3 RUN pid 4242@host``)."""
    at = (since if since.tzinfo else since.replace(tzinfo=UTC)).isoformat()
    match = _SESSION.match(name)
    if match is None:
        return Holder(job=name or "?", since=at)
    return Holder(job=match["job"], run_id=match["run"], pid=int(match["pid"]),
                  host=match["host"], since=at)


def _holder_of(lock_path: Path) -> Holder | None:
    try:
        data = json.loads(_info_path(lock_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return Holder.of(data)


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


def describe(info: Holder | None) -> str:
    """The holder for messages (:meth:`Holder.describe`), or that the file names none."""
    return info.describe() if info else "an unknown holder (no holder file)"


class LockHandle:
    """The held file locks; ``note(run_id=...)`` adds to what their holder files say about us.
    A job that holds the archive's lock excludes every other harvest, so every run left
    ``running`` is dead (``dead``); ``also`` takes the locks of another scope too."""

    def __init__(self, settings: Settings, info: Holder, stop: threading.Event | None) -> None:
        self.settings = settings
        self.info = info
        self.stop = stop
        self.held: dict[Path, FileLock] = {}
        # The holder before this job, as its first lock's file said (what a run that took over
        # reports).
        self.previous: Holder | None = None
        self.took_over = False

    @property
    def path(self) -> Path:
        return next(iter(self.held))

    def note(self, *, run_id: str | None = None, released_at: str | None = None) -> None:
        noted = replace(self.info, run_id=run_id or self.info.run_id,
                        released_at=released_at or self.info.released_at)
        if noted == self.info:
            return
        self.info = noted
        for path in self.held:
            _write_info(path, noted)

    def dead(self, _shard: Shard) -> bool:
        return True

    @contextmanager
    def also(self, scope: Scope, timeout: float | None = None) -> Iterator[None]:
        """Hold ``scope``'s locks as well while inside (waiting for them as for the first)."""
        wanted = [p for p in lock_paths(self.settings, scope) if p not in self.held]
        wait = self.settings.run.lock_timeout if timeout is None else timeout
        try:
            for path in wanted:
                self.take(path, wait)
            yield
        finally:
            for path in reversed(wanted):
                self.let_go(path)

    def take(self, path: Path, wait: float) -> None:
        """Take the lock at ``path`` (waiting up to ``wait`` s; LockTimeout after) and name
        this job in its holder file."""
        create_lock_file(path)
        lock = FileLock(str(path))
        which = "the archive lock" if path == self.settings.lock_path else "the trends lock"
        started = time.monotonic()
        if not _acquire(lock, 0, None) and not _wait_for(lock, f"{which} {path}", wait,
                                                         self.stop):
            who = describe(_holder_of(path))
            if self.stop is not None and self.stop.is_set():
                raise LockTimeout(f"stopped while waiting for {which} {path}, held by {who}.")
            raise LockTimeout(
                f"another botstats job holds {which} {path}: {who}; waited {wait:g} s. Let it "
                f"finish (see `botstats status`), or raise [run].lock_timeout / "
                f"--lock-timeout.")
        self.held[path] = lock
        previous = _holder_of(path)
        if self.previous is None:
            self.previous = previous
        if previous is not None and previous.stale():
            self.took_over = self.took_over or path == self.settings.lock_path
            log.warning("took over %s %s from %s: that process is gone without releasing it "
                        "(killed?)", which, path, describe(previous))
        waited = time.monotonic() - started
        if waited >= 1:
            log.info("waited %.1f s for %s %s", waited, which, path)
        _write_info(path, self.info)

    def let_go(self, path: Path) -> None:
        lock = self.held.pop(path, None)
        if lock is None:
            return
        try:
            _write_info(path, replace(
                self.info, released_at=datetime.now(UTC).isoformat(timespec="seconds")))
        finally:
            lock.release()

    def release(self) -> None:
        for path in reversed(list(self.held)):
            self.let_go(path)


def _write_info(lock_path: Path, info: Holder) -> None:
    target = _info_path(lock_path)
    try:
        with replacing(target) as tmp:
            tmp.write_text(json.dumps(info.as_dict()), encoding="utf-8")
    except OSError as exc:  # the holder file is for messages only: never fail a run over it
        log.warning("cannot write the lock holder file %s: %s", target, exc)


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


def _wait_for(lock: FileLock, which: str, wait: float, stop: threading.Event | None) -> bool:
    """Say who holds the lock (``which``: its name and path) and how long this job will wait,
    then wait (see _acquire)."""
    how_long = "for as long as it takes" if wait < 0 else f"up to {wait:g} s (--lock-timeout, [run].lock_timeout)"
    log.info("%s is held by %s: waiting %s", which,
             describe(_holder_of(Path(lock.lock_file))), how_long)
    return _acquire(lock, wait, stop)


@dataclass(frozen=True)
class _Ask:
    """What a job asks of the lock: the job and its run (once it has one), the scope, how long
    it waits (seconds; negative: for as long as it takes) and the event that stops the wait."""

    job: str
    scope: Scope
    wait: float
    run_id: str | None
    stop: threading.Event | None


@contextmanager
def _file_lock(settings: Settings, ask: _Ask) -> Iterator[LockHandle]:
    prepare_archive_place(settings)
    handle = LockHandle(settings, Holder(
        job=ask.job, run_id=ask.run_id, pid=os.getpid(), host=socket.gethostname(),
        since=datetime.now(UTC).isoformat(timespec="seconds")), ask.stop)
    deadline = None if ask.wait < 0 else time.monotonic() + ask.wait
    try:
        for path in lock_paths(settings, ask.scope):
            left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            handle.take(path, left)
        yield handle
    finally:
        handle.release()


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
        self.run_id: str | None = None
        self.previous: Holder | None = None  # the server frees a dead job's locks itself
        self.took_over = False

    def title(self) -> str:
        """e.g. ``botstats harvest 1/3 20261125T100000Z-3f9a1c pid 4242@worker-1``."""
        parts = ["botstats", self.job]
        if self.scope.name == "shard" and not self.scope.shard.whole:
            parts.append(str(self.scope.shard))
        if self.run_id:
            parts.append(self.run_id)
        return " ".join([*parts, f"pid {os.getpid()}@{socket.gethostname()}"])

    def note(self, *, run_id: str | None = None) -> None:
        if run_id == self.run_id:
            return
        self.run_id = run_id
        self.locks.rename(self.title())

    def dead(self, shard: Shard) -> bool:
        return self.locks.free(archive.shard_key(shard.k, shard.n))

    @contextmanager
    def also(self, scope: Scope, timeout: float | None = None) -> Iterator[None]:
        wanted = [k for k in _keys(scope) if k not in self.locks.held]
        wait = self.settings.run.lock_timeout if timeout is None else timeout
        _wait_for_keys(self.locks, wanted, scope, wait, self.stop)
        try:
            yield
        finally:
            self.locks.release(wanted)


def _wait_for_keys(locks: archive.AdvisoryLocks, wanted: list[tuple[int, bool]], scope: Scope,
                   wait: float, stop: threading.Event | None) -> None:
    """Take ``wanted`` (for ``scope``), trying every ``_POLL`` seconds up to ``wait`` seconds
    (negative: for as long as it takes); else LockTimeout."""
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
def _advisory_lock(settings: Settings, ask: _Ask) -> Iterator[AdvisoryHandle]:
    paths = archive.ArchivePaths.of(settings)
    locks = archive.AdvisoryLocks(paths.dsn, paths.password, archive.session_name(ask.job))
    try:
        handle = AdvisoryHandle(locks, settings, ask.job, ask.scope, ask.stop)
        _wait_for_keys(locks, _keys(ask.scope), ask.scope, ask.wait, ask.stop)
        handle.run_id = ask.run_id
        locks.rename(handle.title())
        yield handle
    finally:
        locks.close()


# What run_lock yields: the file lock's handle, or the advisory locks' of a PostgreSQL catalog.
Held = LockHandle | AdvisoryHandle


@dataclass(frozen=True, slots=True)
class Wait:
    """How long a job waits for the lock: ``seconds`` (None: [run].lock_timeout; negative: for
    as long as it takes), and only until ``stop`` is set."""

    seconds: float | None = None
    stop: threading.Event | None = None


@contextmanager
def run_lock(settings: Settings, job: str, *, scope: Scope = ARCHIVE_SCOPE,
             wait: Wait = Wait(), run_id: str | None = None) -> Iterator[Held]:
    """Hold the archive's run lock for ``job`` (of run ``run_id``, once it has one) and
    ``scope``, waiting as ``wait`` says.

    Raises :class:`~pipeline.core.LockTimeout` (exit 75) naming the holder when the wait runs
    out, or as soon as ``wait.stop`` is set while waiting.
    """
    seconds = settings.run.lock_timeout if wait.seconds is None else wait.seconds
    ask = _Ask(job, scope, seconds, run_id, wait.stop)
    if settings.shared_catalog:
        with _advisory_lock(settings, ask) as handle:
            yield handle
        return
    with _file_lock(settings, ask) as file_handle:
        yield file_handle
