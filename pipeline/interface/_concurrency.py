"""How many requests a harvest keeps in flight, and how fast it sends them, when
``[service].concurrency = "auto"``: found as the run goes, as TCP finds a link's capacity.

:class:`AimdLimit` is a pure state machine (no clock, no I/O: every event carries its time),
so every rule is a unit test; :class:`Gate` is the thin async loop the client sends through.

- **The window** (requests in flight) starts at :data:`START`. From the second round (a round
  is as many answers as the window; the first one opens connections) it doubles each round
  while latency holds (the round's mean stays within ``tolerance`` times the best latency of
  the run, plus ``slack``) and the window is below its *room*: ``gain`` times the requests in
  flight that keep this process's CPU busy (the best latency over the CPU seconds one answer
  costs us: Little's law). After the first sign of load it grows by one a round (additive
  increase). A round whose latency does not hold steps the window back towards :data:`START`,
  one that is wider than its room back towards the room (a fifth at a time). A 5xx or a
  timeout halves it (multiplicative decrease), at most once a round, down to 1; it never
  exceeds ``[service].max_connections``. Room is what tells a far service (latency large
  against our CPU per answer: many in flight pay) from loopback (our CPU bounds the answers:
  more in flight only costs more per request), and it does not move when other processes
  slow the machine down, which makes every latency look worse than the link is.
- **The pace** (requests per second) is :class:`~._pacing.Pace`'s: the gate asks it for each
  request's turn and tells it every answer, with what the answer's headers said about the
  rate limit. A rate limit is about requests per second, which no window can hold on a fast
  link; a fixed concurrency is paced too.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ._pacing import Pace
from ._ratelimit import NOTHING_SAID, RateLimit, is_rate_limited

START = 8  # the window at start: a fixed concurrency that serves a nearby service well


@dataclass
class AimdLimit:
    """The adaptive window; feed it every answer, ask it how much may be in flight."""

    ceiling: int
    start: int = START
    backoff: float = 0.5  # the window after a 5xx or a timeout, as a share of what it was
    tolerance: float = 4.0  # a round's mean latency may reach this times the best one ...
    slack: float = 0.002  # ... plus this many seconds (jitter on a fast link is not load)
    gain: float = 2.0  # the window may reach this times what keeps our CPU busy
    retreat: float = 0.8  # the window after a round that says it is too wide (not below start)
    limit: float = field(init=False)
    slow_start: bool = True
    # The best latency of the run: a window of recent answers would forget it as the window
    # grows and latency with it, and take the grown latency for the link's own.
    _best_latency: float = float("inf")
    _round_answers: int = 0
    _round_latency: float = 0.0
    _round_cut: bool = False
    _rounds: int = 0
    _round_cpu: float | None = None  # our CPU seconds when the round began
    cpu_per_answer: float | None = None  # our CPU seconds per answer, smoothed over rounds

    def __post_init__(self) -> None:
        self.start = max(1, min(self.start, self.ceiling))
        self.limit = float(self.start)

    @property
    def window(self) -> int:
        """Requests that may be in flight now."""
        return max(1, int(self.limit))

    # --- events ----------------------------------------------------------------------------
    def on_success(self, now: float, latency: float, cpu: float | None = None) -> None:
        """An answer that is not a sign of load (2xx, and 4xx but a rate limit's). ``cpu``: the CPU
        seconds this process has used so far (``time.process_time()``)."""
        self._best_latency = min(self._best_latency, latency)
        self._round_latency += latency
        self._answered(now, cpu)

    def on_rate_limited(self, now: float, cpu: float | None = None) -> None:
        """A refusal of the rate limit (a 429, or GitHub's 403): the pace's business, not the
        window's; it ends the doubling all the same."""
        self.slow_start = False
        self._answered(now, cpu)

    def on_overload(self, now: float, cpu: float | None = None) -> None:
        """A 5xx or a timeout: halve the window, once a round."""
        self.slow_start = False
        if not self._round_cut:
            self.limit = max(1.0, self.limit * self.backoff)
            self._round_cut = True
        self._answered(now, cpu)

    def needs_cpu(self) -> bool:
        """Whether the next answer ends a round, the only time the CPU clock is read."""
        return self._round_answers + 1 >= self.window

    # --- rounds ----------------------------------------------------------------------------
    def _answered(self, now: float, cpu: float | None = None) -> None:
        self._round_answers += 1
        if self._round_answers < self.window:
            return
        answers, latency, cut = self._round_answers, self._round_latency, self._round_cut
        self._round_answers, self._round_latency, self._round_cut = 0, 0.0, False
        self._rounds += 1
        if cpu is not None:
            if self._round_cpu is not None:
                used = max(cpu - self._round_cpu, 0.0) / answers
                self.cpu_per_answer = used if self.cpu_per_answer is None else (
                    0.7 * self.cpu_per_answer + 0.3 * used)
            self._round_cpu = cpu
        if cut or self._rounds == 1:  # the first round opens connections: its latency says little
            return
        mean = latency / answers
        best = min(self._best_latency, mean)
        room = self.room(best)
        holds = mean <= best * self.tolerance + self.slack
        if holds and self.limit < room:
            grown = self.limit * 2 if self.slow_start else self.limit + 1
            self.limit = float(min(self.ceiling, room, grown))
        else:
            self.slow_start = False
            floor = float(self.start) if not holds else max(float(self.start), room)
            if self.limit > floor:
                self.limit = max(floor, self.limit * self.retreat)

    def room(self, best_latency: float) -> float:
        """The widest window worth having: ``gain`` times the requests in flight that keep our
        CPU busy (Little's law: the best latency over our CPU per answer), within the ceiling.
        Far away (latency large against our CPU per answer) that is many; on loopback, where our
        CPU is what bounds the answers, a few, and more in flight would only cost more per
        request. Unknown until a round has been measured: the ceiling."""
        if not self.cpu_per_answer:
            return float(self.ceiling)
        return min(float(self.ceiling), self.gain * best_latency / self.cpu_per_answer)


class Gate:
    """What a request waits for before it is sent: a free place in the window (``control``;
    None: a fixed concurrency, kept by the harvest's workers instead) and its turn in the
    ``pace``. Every request crosses it, so the window is a counter and a queue of waiters, not a
    lock and a condition (a fifth of a request's CPU on loopback), and an unpaced turn costs
    nothing; a paced one waits behind a lock, one request at a time::

        sent = await gate.acquire()
        ... send ...
        gate.release(sent, status, said)    # or timeout=True; neither: it teaches nothing
    """

    def __init__(self, control: AimdLimit | None, pace: Pace | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self.pace = pace or Pace()
        self._clock = clock
        self._in_flight = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._turn = asyncio.Lock()
        self.peak = 0  # the most requests in flight at once
        self.paced_seconds = 0.0  # what requests waited for their turn in the pace, in all

    async def acquire(self) -> float:
        """Wait for a place and for the pace; the time the request goes out."""
        control = self.control
        if control is not None:
            await self._place(control)
        try:
            await self._paced()
        except asyncio.CancelledError:
            if control is not None:
                self._free()
            raise
        return self._clock()

    async def _place(self, control: AimdLimit) -> None:
        if self._in_flight < control.window and not self._waiting:
            self._in_flight += 1
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter  # _free hands its place over: counted in _in_flight already
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._free()  # handed a place, then cancelled: pass it on
                raise
        self.peak = max(self.peak, self._in_flight)

    async def _paced(self) -> None:
        """Wait for this request's turn in the pace (none unless the pace is limited)."""
        pace = self.pace
        if not pace.paced:
            return
        async with self._turn:
            # Asked again after each sleep: a cut meanwhile makes the turn later.
            while (delay := pace.wait(self._clock())) > 0:
                self.paced_seconds += delay
                await asyncio.sleep(delay)
            pace.sent(self._clock())

    def release(self, sent: float, status: int | None = None, said: RateLimit = NOTHING_SAID,
                *, timeout: bool = False) -> None:
        """The request sent at ``sent`` ended: with ``status`` and what its headers ``said``
        about the rate limit, a ``timeout``, or neither (a connection error, a cancellation),
        which teaches the controls nothing."""
        now = self._clock()
        if status is not None:
            self.pace.on_answer(now, status, said, sent)
        control = self.control
        if control is None:
            return
        cpu = time.process_time() if control.needs_cpu() else None
        if status is not None and is_rate_limited(status, said):
            control.on_rate_limited(now, cpu)
        elif timeout or (status or 0) >= 500:
            control.on_overload(now, cpu)
        elif status is not None:
            control.on_success(now, now - sent, cpu)
        self._free()

    def _free(self) -> None:
        assert self.control is not None
        self._in_flight -= 1
        window = self.control.window
        while self._waiting and self._in_flight < window:
            waiter = self._waiting.popleft()
            if not waiter.done():  # a cancelled waiter is skipped
                self._in_flight += 1
                waiter.set_result(None)


def adaptive_control(concurrency: int | str, max_connections: int) -> AimdLimit | None:
    """The control of ``[service].concurrency``: adaptive for "auto", none for a number."""
    return AimdLimit(ceiling=max_connections) if concurrency == "auto" else None


def workers(concurrency: int | str, max_connections: int) -> int:
    """Tasks a harvest runs to keep that many requests in flight: enough to fill the widest
    window "auto" may open, else the fixed number."""
    return max_connections if concurrency == "auto" else int(concurrency)


