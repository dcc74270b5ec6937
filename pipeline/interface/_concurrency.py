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
- **The pace** (requests per second) is unlimited until the service answers 429: a rate limit
  is about requests per second, which no window can hold on a fast link. Then the pace is set
  just under the rate that was getting through (successes in the last second), and grows
  slowly (a small step per second: additive increase) until the next 429 cuts it again
  (multiplicative decrease, at most once per ``rate_cooldown``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

START = 8  # the window at start: a fixed concurrency that serves a nearby service well
RATE_WINDOW = 1.0  # seconds of successes that tell the rate getting through


@dataclass
class AimdLimit:
    """The adaptive window and pace; feed it every answer, ask it how much may be sent."""

    ceiling: int
    start: int = START
    backoff: float = 0.5  # the window after a 5xx or a timeout, as a share of what it was
    rate_backoff: float = 0.9  # the pace after a 429, as a share of the rate getting through
    rate_growth: float = 0.01  # pace added per second, as a share of the pace set at the cut
    rate_cooldown: float = 0.5  # seconds between two cuts of the pace
    tolerance: float = 4.0  # a round's mean latency may reach this times the best one ...
    slack: float = 0.002  # ... plus this many seconds (jitter on a fast link is not load)
    gain: float = 2.0  # the window may reach this times what keeps our CPU busy
    retreat: float = 0.8  # the window after a round that says it is too wide (not below start)
    limit: float = field(init=False)
    rate: float | None = None  # requests per second once paced; None = no pace
    slow_start: bool = True
    # The best latency of the run: a window of recent answers would forget it as the window
    # grows and latency with it, and take the grown latency for the link's own.
    _best_latency: float = float("inf")
    _successes: deque[float] = field(default_factory=deque, repr=False)
    _round_answers: int = 0
    _round_latency: float = 0.0
    _round_cut: bool = False
    _rounds: int = 0
    _round_cpu: float | None = None  # our CPU seconds when the round began
    cpu_per_answer: float | None = None  # our CPU seconds per answer, smoothed over rounds
    _last_rate_cut: float = float("-inf")
    _rate_step: float = 0.0
    _rate_updated: float = 0.0
    _next_send: float = float("-inf")

    def __post_init__(self) -> None:
        self.start = max(1, min(self.start, self.ceiling))
        self.limit = float(self.start)

    @property
    def window(self) -> int:
        """Requests that may be in flight now."""
        return max(1, int(self.limit))

    # --- events ----------------------------------------------------------------------------
    def on_success(self, now: float, latency: float, cpu: float | None = None) -> None:
        """An answer that is not a sign of load (2xx, and 4xx other than 429). ``cpu``: the CPU
        seconds this process has used so far (``time.process_time()``)."""
        self._best_latency = min(self._best_latency, latency)
        self._successes.append(now)
        while self._successes and self._successes[0] < now - RATE_WINDOW:
            self._successes.popleft()
        if self.rate is not None:
            self.rate += self._rate_step * max(0.0, now - self._rate_updated)
            self._rate_updated = now
        self._round_latency += latency
        self._answered(now, cpu)

    def on_rate_limited(self, now: float, cpu: float | None = None) -> None:
        """A 429: pace just under what was getting through."""
        self.slow_start = False
        if now - self._last_rate_cut >= self.rate_cooldown:
            recent = sum(1 for t in self._successes if t >= now - RATE_WINDOW) / RATE_WINDOW
            through = min(self.rate, recent) if self.rate is not None else recent
            self.rate = max(1.0, self.rate_backoff * through)
            self._rate_step = self.rate_growth * self.rate
            self._rate_updated = now
            self._last_rate_cut = now
        self._answered(now, cpu)

    def on_overload(self, now: float, cpu: float | None = None) -> None:
        """A 5xx or a timeout: halve the window, once a round."""
        self.slow_start = False
        if not self._round_cut:
            self.limit = max(1.0, self.limit * self.backoff)
            self._round_cut = True
        self._answered(now, cpu)

    def send_delay(self, now: float) -> float:
        """Seconds to wait before sending one more request (0 unless paced); reserves its turn."""
        if self.rate is None:
            return 0.0
        at = max(now, self._next_send)
        self._next_send = at + 1.0 / self.rate
        return at - now

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
    """What a request waits for before it is sent: a free place in the window and its turn in
    the pace. ``control`` None: a gate that never waits (a fixed concurrency is kept by the
    harvest's workers instead). Every request crosses it, so it is a counter and a queue of
    waiters, not a lock and a condition (a fifth of a request's CPU on loopback)::

        sent = await gate.acquire()
        ... send ...
        gate.release(sent, status)        # or timeout=True; neither: it teaches nothing
    """

    def __init__(self, control: AimdLimit | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self._clock = clock
        self._in_flight = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self.peak = 0  # the most requests in flight at once

    async def acquire(self) -> float:
        """Wait for a place and for the pace; the time the request goes out."""
        control = self.control
        if control is None:
            return 0.0
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
        delay = control.send_delay(self._clock())
        if delay > 0:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self._free()
                raise
        return self._clock()

    def release(self, sent: float, status: int | None = None, *, timeout: bool = False) -> None:
        """The request sent at ``sent`` ended: with ``status``, a ``timeout``, or neither (a
        connection error, a cancellation), which teaches the control nothing."""
        control = self.control
        if control is None:
            return
        now = self._clock()
        cpu = time.process_time() if control.needs_cpu() else None
        if status == 429:
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


