"""The Directory's state, and the virtual clock that moves it.

State is small whatever the size: the virtual clock (a tick count), the churn bookkeeping
(bots inserted at the front, bots removed) and the stats bots posted. Everything else is
derived on demand by ``_data``. Thread-safe: the server's event loop and a test thread may use
the Directory at the same time, each part taking ``_lock``.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

from .._config import ServiceConfig
from .._data import LOW_BITS, Timeline, scrambler
from .._shapes import Shapes

Record = dict[str, Any]


class State:
    """What a Directory holds (see the module docstring), and its clock."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        seed = config.seed
        self._seed = seed
        initial = config.history_days * config.stats_per_day
        interval = timedelta(seconds=config.interval_seconds)
        clock = config.start_clock()
        self.timeline = Timeline(slot0=clock - interval * (initial - 1), interval=interval,
                                 initial=initial, per_day=config.stats_per_day)
        self._lock = threading.RLock()
        self._base = config.bots
        self._user_count = config.user_count
        self._universe = config.bots  # bot indices below this exist or existed
        self._added: list[int] = []  # live churn-inserted bots, oldest first (listed newest first)
        self._added_all: list[int] = []
        self._added_slot: dict[int, int] = {}
        self._removed_base: list[int] = []  # sorted, for the bisect in _index_at
        self._removed: dict[int, int] = {}  # bot index -> last slot it got records for
        # Posted stats per bot: (slot that was newest when posted, timestamp, record).
        self._posted: dict[int, list[tuple[int, datetime, Record]]] = {}
        self._ticks = 0
        self._live_start = time.monotonic()
        self._listing_requests = 0
        self._churns = 0
        self._spoiled: dict[int, int] = {}  # bot index -> /stats answers a body fault spoiled
        self._bot_ids = scrambler(seed, "bot", LOW_BITS)
        self._user_ids = scrambler(seed, "user", LOW_BITS)
        self._keys = scrambler(seed, "key", 32)
        self._tokens = scrambler(seed, "token", 32)
        self.shapes = Shapes.of(config)

    def last_slot(self) -> int:
        """The newest slot of the grid that has happened (records exist up to it)."""
        live = self.config.faults.live_interval
        ticks = self._ticks
        if live > 0:
            ticks += int((time.monotonic() - self._live_start) / live)
        return self.timeline.initial - 1 + ticks

    def clock(self) -> datetime:
        """The virtual now: the time of the newest slot."""
        return self.timeline.time(self.last_slot())

    def advance(self, intervals: int = 1) -> None:
        """New stat records arrive: every live bot gets ``intervals`` more. O(1)."""
        if isinstance(intervals, bool) or not isinstance(intervals, int) or intervals < 0:
            raise ValueError(f"intervals={intervals!r}: expected an integer >= 0")
        with self._lock:
            self._ticks += intervals
