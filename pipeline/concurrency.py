"""How many requests a harvest keeps in flight, and how fast it sends them, when
``[service].concurrency = "auto"``: found as the run goes, as TCP finds a link's capacity.

:class:`AimdLimit` is a pure state machine (no clock, no I/O: every event carries its time),
so every rule is a unit test; :class:`Gate` is the thin async loop the client sends through.

- **The window** (requests in flight) starts at :data:`START` and, from the second round (a
  round is as many answers as the window; the first one opens connections), doubles each round
  while latency holds (the round's mean stays within ``tolerance`` times the best latency
  seen, plus ``slack``) or answers per second still grow with it (``scaling`` times the best
  seen with at most two thirds in flight), until the first sign of load; then it grows by one
  a round (additive increase). A round where neither holds stops the growth and steps the
  window back towards :data:`START` (a fifth at a time: on a link where CPU, not distance,
  bounds the answers, more in flight only costs more per request). A 5xx or a timeout halves
  it (multiplicative decrease), at most once a round, down to 1; it never exceeds
  ``[service].max_connections``.
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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
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
    tolerance: float = 2.0  # a round's mean latency may reach this times the best one ...
    slack: float = 0.002  # ... plus this many seconds (jitter on a fast link is not load)
    retreat: float = 0.8  # the window after a round whose latency did not hold (not below start)
    scaling: float = 1.25  # answers per second a wider window must bring to keep growing
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
    _round_began: float | None = None
    _best_at: dict[int, float] = field(default_factory=dict, repr=False)  # window -> answers/s
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
    def on_success(self, now: float, latency: float) -> None:
        """An answer that is not a sign of load (2xx, and 4xx other than 429)."""
        self._best_latency = min(self._best_latency, latency)
        self._successes.append(now)
        while self._successes and self._successes[0] < now - RATE_WINDOW:
            self._successes.popleft()
        if self.rate is not None:
            self.rate += self._rate_step * max(0.0, now - self._rate_updated)
            self._rate_updated = now
        self._round_latency += latency
        self._answered(now)

    def on_rate_limited(self, now: float) -> None:
        """A 429: pace just under what was getting through."""
        self.slow_start = False
        if now - self._last_rate_cut >= self.rate_cooldown:
            recent = sum(1 for t in self._successes if t >= now - RATE_WINDOW) / RATE_WINDOW
            through = min(self.rate, recent) if self.rate is not None else recent
            self.rate = max(1.0, self.rate_backoff * through)
            self._rate_step = self.rate_growth * self.rate
            self._rate_updated = now
            self._last_rate_cut = now
        self._answered(now)

    def on_overload(self, now: float) -> None:
        """A 5xx or a timeout: halve the window, once a round."""
        self.slow_start = False
        if not self._round_cut:
            self.limit = max(1.0, self.limit * self.backoff)
            self._round_cut = True
        self._answered(now)

    def send_delay(self, now: float) -> float:
        """Seconds to wait before sending one more request (0 unless paced); reserves its turn."""
        if self.rate is None:
            return 0.0
        at = max(now, self._next_send)
        self._next_send = at + 1.0 / self.rate
        return at - now

    # --- rounds ----------------------------------------------------------------------------
    def _answered(self, now: float) -> None:
        self._round_answers += 1
        if self._round_answers < self.window:
            return
        answers, latency, cut = self._round_answers, self._round_latency, self._round_cut
        self._round_answers, self._round_latency, self._round_cut = 0, 0.0, False
        self._rounds += 1
        began, self._round_began = self._round_began, now
        window = self.window
        throughput = answers / (now - began) if began is not None and now > began else None
        if throughput is not None:
            self._best_at[window] = max(self._best_at.get(window, 0.0), throughput)
        if cut or self._rounds == 1:  # the first round opens connections: its latency says little
            return
        mean = latency / answers
        best = min(self._best_latency, mean)
        if mean <= best * self.tolerance + self.slack or self._scales(window, throughput):
            grown = self.limit * 2 if self.slow_start else self.limit + 1
            self.limit = float(min(self.ceiling, grown))
        else:
            self.slow_start = False
            if self.limit > self.start:
                self.limit = max(float(self.start), self.limit * self.retreat)

    def _scales(self, window: int, throughput: float | None) -> bool:
        """Whether answers per second still grow with the window: this round's against the best
        seen with at most two thirds of it in flight. Far away, a busy machine makes every
        latency look worse than it is while more in flight still brings more answers; on a
        link where CPU bounds the answers, they stay flat and the window steps back."""
        if throughput is None:
            return False
        smaller = [w for w in self._best_at if w <= window * 2 / 3]
        if not smaller:
            return window <= self.start  # nothing to compare with yet: try a wider window once
        return throughput >= self.scaling * self._best_at[max(smaller)]


class Gate:
    """What a request waits for before it is sent: a free place in the window and its turn in
    the pace. ``control`` None: a gate that never waits (a fixed concurrency is kept by the
    harvest's workers instead)."""

    def __init__(self, control: AimdLimit | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self._clock = clock
        self._in_flight = 0
        self._changed = asyncio.Condition()
        self.peak = 0  # the most requests in flight at once, for the run's report

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Answer]:
        """Hold a place for one request; set the yielded answer's ``status`` (or ``timeout``)."""
        control = self.control
        answer = Answer()
        if control is None:
            yield answer
            return
        async with self._changed:
            await self._changed.wait_for(lambda: self._in_flight < control.window)
            self._in_flight += 1
            self.peak = max(self.peak, self._in_flight)
        try:
            delay = control.send_delay(self._clock())
            if delay > 0:
                await asyncio.sleep(delay)
            sent = self._clock()
            yield answer
        finally:
            now = self._clock()
            if answer.status == 429:
                control.on_rate_limited(now)
            elif answer.timeout or (answer.status or 0) >= 500:
                control.on_overload(now)
            elif answer.status is not None:
                control.on_success(now, now - sent)
            async with self._changed:
                self._in_flight -= 1
                # Wake only as many waiters as there are places: waking all of them on every
                # answer costs a wake-up per worker per request.
                self._changed.notify(max(0, control.window - self._in_flight))


def adaptive_control(concurrency: int | str, max_connections: int) -> AimdLimit | None:
    """The control of ``[service].concurrency``: adaptive for "auto", none for a number."""
    return AimdLimit(ceiling=max_connections) if concurrency == "auto" else None


def workers(concurrency: int | str, max_connections: int) -> int:
    """Tasks a harvest runs to keep that many requests in flight: enough to fill the widest
    window "auto" may open, else the fixed number."""
    return max_connections if concurrency == "auto" else int(concurrency)


@dataclass
class Answer:
    """How one request through the gate ended: its status, or a timeout; neither = unknown (a
    connection error, a cancellation), which teaches the control nothing."""

    status: int | None = None
    timeout: bool = False


__all__ = ["START", "AimdLimit", "Answer", "Gate", "adaptive_control", "workers"]
