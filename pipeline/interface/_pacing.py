"""How many requests a second the client sends: unlimited until the service pushes back, then
paced under what it allows, and back up to it within seconds. :class:`Pace` is a pure state
machine (every event carries its time), driven by :class:`~._concurrency.Gate` with the window.

- **Push back** is a refusal of the rate limit (a 429, or a 403 that says its quota is spent:
  :func:`~._ratelimit.is_rate_limited`), or an answer whose ``remaining`` quota (any family of rate-limit
  headers, :mod:`._ratelimit`) is down to :data:`RESERVE` (to half the most it was seen at,
  for a quota of a few): the pace slows *before* the bucket is empty, where a 429 would cost a
  request and a wait.
- **A cut** sets the pace to a share of itself (:data:`BACKOFF`, :data:`EASE`); the next waits
  until the slower pace has saved a request, and at least :data:`COOLDOWN` (answers to
  requests sent before a cut still tell of the pace before it). The
  first cut, of a run not paced yet, starts from the rate it was sending at (answers over the
  last second, 429s included). Never from a measured rate once paced: a 429's told wait holds
  its request back, and the answers with it, so such a figure falls far below what the
  service allows.
- **Recovery** follows CUBIC's curve (RFC 9438) in the time since the cut, relative to the pace
  cut from: back to it quickly, flat near it, then faster the longer nothing pushes back, so a
  pace cut too far is found again within seconds. It never runs further ahead than
  :data:`HEADROOM` times the most that ever got through in a second (or the pace last cut
  from): a pace nothing uses tells nothing, and a cut from far above the service's rate would
  take many cuts (and 429s) to land.
- **Ceilings**: ``[service].request_budget``, and the rate a ``RateLimit-Policy`` (or a
  ``RateLimit-Limit`` policy) states; the pace never exceeds either.
- **Turns**: one request at a time takes its turn, an interval after the previous turn, so a
  request a busy event loop woke a little late costs the next none of its interval; after more
  than an interval late (a pause), the turns start again from it. Turns reserved in advance
  would let the requests woken late go out together, a burst a small bucket does not absorb;
  turns counted from when the previous request went lose the lateness, a tenth of the rate.

Figures (the share of the allowed rate each choice reaches, and the alternatives measured) are
in bench/README.md and docs/design.md.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ._ratelimit import RateLimit, is_rate_limited

RESERVE = 1  # an answer leaving this many requests of the quota, or fewer, slows the pace
BACKOFF = 0.9  # a 429: the pace goes to this share of itself
EASE = 0.97  # the quota down to the reserve: this share
COOLDOWN = 0.1  # seconds between two cuts at least
CUBIC = 0.01  # the recovery: pace = good * (1 + CUBIC * (t - k) ** 3), good the pace cut from
RECOVERY_RATE = 25.0  # under this many requests a second, the recovery counts requests, not seconds
HEADROOM = 1.5  # the pace never exceeds this times the most that got through in a second
RATE_WINDOW = 1.0  # seconds of successes that tell the rate getting through
SLOWEST = 0.05  # requests per second the pace never goes under
# The least time the first cut divides the early answers by: a run's first answers come in
# milliseconds.
FIRST_SPAN = 0.05


@dataclass
class Pace:
    """The pace of one client; feed it every answer, ask it when the next request may go."""

    budget: float = 0.0  # requests per second the user allows ([service].request_budget); 0: any
    policy: float | None = None  # requests per second the service's policy states
    good: float | None = None  # the pace the last cut was from; None: not paced yet
    _cut_at: float = float("-inf")
    _calm_at: float = float("-inf")  # no cut before this
    _most_remaining: int = 0
    _k: float = 0.0
    _successes: deque[float] = field(default_factory=deque, repr=False)
    _answers: deque[float] = field(default_factory=deque, repr=False)
    _first: float | None = None
    _best: float = 0.0  # the most successes in one RATE_WINDOW
    _next_turn: float = float("-inf")

    @property
    def paced(self) -> bool:
        """Whether requests wait for their turn at all."""
        return self.good is not None or bool(self.budget) or self.policy is not None

    def rate(self, now: float) -> float | None:
        """Requests per second allowed now; None: no limit."""
        rate = self._service_pace(now)
        for ceiling in (self.budget or None, self.policy):
            if ceiling is not None:
                rate = ceiling if rate is None else min(rate, ceiling)
        return rate

    def wait(self, now: float) -> float:
        """Seconds until the next request may go (0: now)."""
        rate = self.rate(now)
        return 0.0 if rate is None else max(0.0, self._next_turn - now)

    def sent(self, now: float) -> None:
        """A request went out at ``now``: the next turn is an interval after this one's turn, or
        after ``now`` when it went more than an interval late (after a pause)."""
        rate = self.rate(now)
        if rate is not None:
            interval = 1.0 / rate
            late = now - self._next_turn
            self._next_turn = (now if late > interval else self._next_turn) + interval

    def on_answer(self, now: float, status: int, said: RateLimit,
                  sent: float | None = None) -> None:
        """An answer to the request sent at ``sent`` (default: ``now``), and what its headers
        said about the rate limit."""
        if self._first is None:
            self._first = now
        if said.rate is not None:
            self.policy = max(said.rate, SLOWEST)
        self._answers.append(now)
        while self._answers[0] < now - RATE_WINDOW:
            self._answers.popleft()
        if is_rate_limited(status, said):
            # A request sent before the last cut tells of the pace before it.
            if (now if sent is None else sent) >= self._cut_at and \
                    now - self._cut_at >= COOLDOWN:
                self._cut(now, BACKOFF)
            return
        if status < 500:
            self._succeeded(now)
        if said.remaining is not None:
            # A bucket of two is never above one: keep back at most half of the most seen.
            self._most_remaining = max(self._most_remaining, said.remaining)
            reserve = min(RESERVE, self._most_remaining // 2)
            if said.remaining <= reserve < self._most_remaining and now >= self._calm_at:
                self._cut(now, EASE)

    def _service_pace(self, now: float) -> float | None:
        if self.good is None:
            return None
        # Seconds, or for a slow service as many requests as RECOVERY_RATE sends a second: a
        # cycle of cut and recovery long enough for a 429 to stay a few in a hundred.
        t = (now - self._cut_at) * min(1.0, self.good / RECOVERY_RATE)
        pace = self.good * (1 + CUBIC * (t - self._k) ** 3)
        return max(SLOWEST, min(pace, HEADROOM * max(self._best, self.good)))

    def _cut(self, now: float, share: float) -> None:
        pace = self._service_pace(now)
        self.good = max(SLOWEST, self._offered(now) if pace is None else pace)
        self._k = ((1 - share) / CUBIC) ** (1 / 3)
        self._cut_at = now
        # A quota's remaining lags: until the slower pace has saved a request, it still tells of
        # the faster one.
        self._calm_at = now + max(COOLDOWN, 1 / ((1 - share) * self.good))

    def _succeeded(self, now: float) -> None:
        successes = self._successes
        successes.append(now)
        while successes[0] < now - RATE_WINDOW:
            successes.popleft()
        if self._first is not None and now - self._first >= RATE_WINDOW:
            self._best = max(self._best, len(successes) / RATE_WINDOW)

    def _offered(self, now: float) -> float:
        """Answers a second, 429s included, over the last second or since the first of them:
        what the run was sending when the service first pushed back. Rather high than low: a
        pace too high is cut again a tenth of a second later, one too low takes seconds to
        grow."""
        answers = self._answers
        span = min(RATE_WINDOW, now - answers[0]) if answers else 0.0
        return len(answers) / max(span, FIRST_SPAN)
