"""The tasks that harvest bots from the queue the listing fills, as many as the concurrency window holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from .. import archive
from ..interface import AimdLimit
from ._context import Run
from ._report import ProgressFn
from ._tail import OrderHint, harvest_bot


class Workers:
    """The tasks that harvest bots: as many as the window of ``concurrency = "auto"`` holds,
    up to ``most`` (a fixed concurrency: that many from the start). Tasks waiting at the gate
    for a place in the window would cost a wake-up per request, a few percent of a harvest on
    loopback, where the window stays near its start."""

    def __init__(self, make: Callable[[], Coroutine[Any, Any, None]], most: int,
                 control: AimdLimit | None) -> None:
        self._make, self._most, self._control = make, most, control
        self._closed = False
        self.tasks: list[asyncio.Task[None]] = []

    def grow(self) -> None:
        """Start tasks up to the window (all of ``most`` without a control)."""
        want = self._most if self._control is None else min(self._most, self._control.window)
        while not self._closed and len(self.tasks) < want:
            self.tasks.append(asyncio.create_task(self._make()))

    def close(self) -> list[asyncio.Task[None]]:
        """No more tasks; the ones to stop (a None each)."""
        self._closed = True
        return list(self.tasks)


async def worker(run: Run, queue: asyncio.Queue[tuple[str, archive.Newest | None] | None],
                 on_progress: ProgressFn | None, pool: Workers, order: OrderHint) -> None:
    buffer, report = run.buffer, run.report
    while (item := await queue.get()) is not None:
        pool.grow()
        if run.stop.is_set() or buffer.halted:
            continue  # drain: the lister stops feeding, the queue empties, None arrives
        bot_id, newest = item
        await harvest_bot(run, bot_id, newest, order)
        if buffer.full:  # after every bot, those with nothing new too: they add a bot row
            await buffer.flush()
        if on_progress is not None:
            report.requests = run.client.stats.requests
            report.retries = run.client.stats.retries
            on_progress(report)
