"""Stopping on request: SIGTERM or Ctrl+C lets the running job finish its current batch and
record the run ``interrupted``; a second signal aborts the usual way, for a job that will not
finish. Shared by `botstats run|harvest|demo` and the scheduler daemon."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger("botstats.run")


def _warn(name: str) -> None:
    log.warning("%s received: finishing the current batch, then stopping (send it again to "
                "abort at once)", name)


@contextmanager
def stop_on_signals(
    stop: threading.Event | None = None, *, on_stop: Callable[[str], None] = _warn
) -> Iterator[threading.Event]:
    """While inside, SIGTERM/SIGINT set ``stop`` (a new event by default) and call ``on_stop``
    with the signal's name; the first signal puts the default handlers back. Off the main
    thread (where Python cannot take signals) it only yields ``stop``."""
    stop = stop or threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, _frame: Any) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        on_stop(signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
