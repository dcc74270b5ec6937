"""The scheduler's jobs, each run in a child process of its own.

After a job a process keeps what the job left (Python's heap, the allocators' free lists, the
pages of the libraries' code it ran), and a long-lived process stacks every job's on the next:
the daemon peaked above `botstats run` doing the same jobs. So the daemon keeps only the clock
and runs each job in a child (:func:`in_child`): its peak is that of the same job started by
cron, and the daemon never loads polars or DuckDB. The child takes the job's lock itself; the
daemon hands it the settings (through a pipe: they may hold secrets), forwards SIGTERM/SIGINT
to it once it handles them, and gets back its one-line result, its error and exit code, or the
signal that killed it, for the log.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypedDict

from ..core import BotstatsError, Settings

log = logging.getLogger("botstats.schedule")

# What a child runs: the job's function in the runner, by name (the daemon never imports it).
CHILD_JOBS = {"harvest": "harvest_job", "trends": "trends_job"}
_CHILD = "from pipeline.operate._children import child_main; child_main()"
_READY = b"ready"
# How often a waiting daemon looks for a stop request to forward.
_POLL = 0.2


class Said(TypedDict, total=False):
    """What a child says on stdout when it ends, one JSON line: its job's ``result`` line; or
    its ``error`` and ``exit_code``; or how it ``crash``-ed."""

    result: str
    error: str
    exit_code: int
    crash: str


class Children:
    """The job processes running now, so a second stop signal can reach them too."""

    def __init__(self) -> None:
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    @contextmanager
    def running(self, proc: subprocess.Popen[bytes]) -> Iterator[None]:
        with self._lock:
            self._procs.add(proc)
        try:
            yield
        finally:
            with self._lock:
                self._procs.discard(proc)

    def signal(self, signum: int) -> None:
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)


def in_child(name: str, children: Children) -> Callable[[Settings, threading.Event], str]:
    """The scheduler's job ``name`` (``CHILD_JOBS``) run in a child process (see the module
    docstring): its result line; a :class:`BotstatsError` with its message and exit code when
    it failed or died."""

    def job(settings: Settings, stop: threading.Event) -> str:
        return run_child(name, settings, stop, children)

    job.__name__ = f"{name}_in_child"
    return job


def run_child(name: str, settings: Settings, stop: threading.Event,
              children: Children | None = None) -> str:
    """Run the job ``name`` in a child process and wait for it, forwarding SIGTERM once
    ``stop`` is set (the child finishes its batch, as the job would in this process)."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, process_group=0)
    assert proc.stdin is not None and proc.stdout is not None
    with (children or Children()).running(proc):
        try:
            proc.stdin.write(pickle.dumps((name, settings)))
            proc.stdin.close()
        except OSError:  # it died before reading: its exit status says how
            pass
        out = _Output(proc)
        forwarded = False
        while True:
            try:
                code = proc.wait(timeout=_POLL)
                break
            except subprocess.TimeoutExpired:
                # Only once it handles the signal: before, SIGTERM would kill it outright.
                if stop.is_set() and not forwarded and out.ready.is_set():
                    proc.send_signal(signal.SIGTERM)
                    forwarded = True
        out.join()
    return _outcome(name, proc.pid, code, out.result)


class _Output(threading.Thread):
    """The child's standard output, read while it runs (a full pipe would stall it): first the
    line that says it handles signals (``ready``), then its result."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.result = b""
        self.ready = threading.Event()
        self.start()

    def run(self) -> None:
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() == _READY:
            self.ready.set()
        self.result = self.proc.stdout.read()


def _outcome(name: str, pid: int, code: int, out: bytes) -> str:
    """The job's result line, or its failure raised as the job would have raised it."""
    try:
        said: Said = json.loads(out.decode() or "{}")
    except ValueError:
        said = Said()
    if code < 0:
        signame = signal.Signals(-code).name
        error = BotstatsError(
            f"its process (pid {pid}) was killed by {signame}; whatever it had committed is "
            f"kept, and the next run takes over its lock and completes the work")
        error.exit_code = 128 - code
        raise error
    if "result" in said:  # it ran to its end: its line says how (a partial harvest exits 3)
        return str(said["result"])
    if "error" in said:
        error = BotstatsError(str(said["error"]))
        error.exit_code = int(said.get("exit_code", code or 1))
        raise error
    raise RuntimeError(f"the {name} job's process (pid {pid}) ended with exit {code}: "
                       f"{said.get('crash') or 'no result (see its log above)'}")


def child_main() -> None:
    """A job's child process: the job and the settings from stdin, logging as the daemon's,
    SIGTERM/SIGINT handled as the job handles them in `botstats run`, the result (or error)
    as one JSON line on stdout, and the job's exit code."""
    from ._memory import tune_allocators
    from ._signals import stop_on_signals

    tune_allocators()  # as the botstats command does, before anything loads polars
    code = 0
    said = Said()
    with stop_on_signals() as stop:
        sys.stdout.buffer.write(_READY + b"\n")
        sys.stdout.flush()
        name, settings = pickle.load(sys.stdin.buffer)
        from . import _runner
        from ._logs import setup_logging

        setup_logging(settings)
        try:
            result = getattr(_runner, CHILD_JOBS[name])(settings, stop)
            said = Said(result=str(result))
            code = result.exit_code
        except BotstatsError as exc:
            code, said = exc.exit_code, Said(error=str(exc), exit_code=exc.exit_code)
        except Exception as exc:  # reported to the daemon, which logs it
            log.exception("the %s job crashed", name)
            code, said = 1, Said(crash=repr(exc))
    sys.stdout.write(json.dumps(said) + "\n")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
