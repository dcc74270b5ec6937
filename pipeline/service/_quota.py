"""The service's rate limit: a token bucket, and the headers it tells its state with.

Real services tell a client about their rate limit in one of a few families of headers; the
service can play each (``Faults.rate_limit_headers``), so a client is tried against all of them:

- ``retry-after``: a 429 carries ``Retry-After: <seconds>`` (whole seconds, rounded up);
- ``retry-after-date``: a 429 carries ``Retry-After: <HTTP-date>`` (rounded up to the second);
- ``x-reset-after``: every answer carries ``X-RateLimit-Limit``, ``-Remaining`` and
  ``-Reset-After`` (seconds, to the millisecond), as Discord does;
- ``x-reset-epoch``: ``X-RateLimit-Limit``, ``-Remaining`` and ``-Reset`` as a Unix time (whole
  seconds, rounded up), as GitHub does;
- ``x-reset-epoch-ms``: the same with ``-Reset`` a Unix time in milliseconds (rounded up);
- ``x-reset-delta``: the same with ``-Reset`` in seconds from now (rounded up);
- ``http-date``: the same with ``-Reset`` an HTTP-date (rounded up to the second);
- ``github-403``: the headers of ``x-reset-epoch``, and a spent quota answered **403** (not 429)
  with ``X-RateLimit-Remaining: 0``, as GitHub's primary rate limit does;
- ``ratelimit``: the IETF draft's ``RateLimit-Limit``, ``-Remaining`` and ``-Reset`` (seconds,
  rounded up);
- ``ratelimit-policy``: its newer single fields, ``RateLimit: "default";r=R;t=T`` and
  ``RateLimit-Policy: "default";q=Q;w=W`` (the bucket's rate as a quota per window);
- ``none``: a bare 429.

None of them carries ``Retry-After`` but the first two. Limit is the bucket's capacity,
remaining the whole tokens left after the request, reset the seconds until the bucket is full
again (on a 429: until the next token).
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable

from ._config import RATE_LIMIT_HEADERS


class TokenBucket:
    """``rate`` tokens per second, holding at most ``capacity`` (0: ``max(1, rate)``, a
    one-second burst). ``now``: the clock's reading (``time.monotonic()`` unless given, as the
    simulations of tests/test_pacing.py give their own)."""

    def __init__(self, rate: float, capacity: float = 0.0, now: float | None = None) -> None:
        self.rate = rate
        self.capacity = capacity or max(1.0, rate)
        self.tokens = self.capacity
        self.updated = time.monotonic() if now is None else now

    def take(self, now: float | None = None) -> float:
        """Take a token: 0.0 if there was one, else the seconds until there is."""
        now = time.monotonic() if now is None else now
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate

    def full_in(self) -> float:
        """Seconds until the bucket is full again."""
        return max(0.0, self.capacity - self.tokens) / self.rate


# How each X-RateLimit-Reset family spells the reset: (the Unix time it falls at, the seconds
# until it, rounded up) -> the header's value.
_X_RESETS: dict[str, Callable[[float, str], str]] = {
    "x-reset-epoch": lambda at, seconds: str(math.ceil(at)),
    "github-403": lambda at, seconds: str(math.ceil(at)),
    "x-reset-epoch-ms": lambda at, seconds: str(math.ceil(at * 1000)),
    "x-reset-delta": lambda at, seconds: seconds,
    "http-date": lambda at, seconds: email.utils.formatdate(math.ceil(at), usegmt=True),
}


def refusal_status(family: str) -> int:
    """The status of an answer the rate limit refuses: 429, or GitHub's 403."""
    return 403 if family == "github-403" else 429


def quota_headers(family: str, bucket: TokenBucket, wait: float,
                  now: float | None = None) -> dict[str, str]:
    """The headers of one answer in ``family``: ``wait`` > 0 for a 429 (the seconds until a
    token), 0 for an answer that took one. ``now``: the Unix time (default: the clock)."""
    assert family in RATE_LIMIT_HEADERS, family
    now = time.time() if now is None else now
    if family in ("retry-after", "retry-after-date"):
        if not wait:
            return {}
        if family == "retry-after":
            return {"Retry-After": str(max(1, math.ceil(wait)))}
        return {"Retry-After": email.utils.formatdate(math.ceil(now + wait), usegmt=True)}
    if family == "none":
        return {}
    limit = str(int(bucket.capacity))
    remaining = "0" if wait else str(int(bucket.tokens))
    reset = wait or bucket.full_in()
    seconds = str(math.ceil(reset))
    if family == "x-reset-after":
        return {"X-RateLimit-Limit": limit, "X-RateLimit-Remaining": remaining,
                "X-RateLimit-Reset-After": f"{reset:.3f}"}
    if family in _X_RESETS:
        return {"X-RateLimit-Limit": limit, "X-RateLimit-Remaining": remaining,
                "X-RateLimit-Reset": _X_RESETS[family](now + reset, seconds)}
    if family == "ratelimit":
        return {"RateLimit-Limit": limit, "RateLimit-Remaining": remaining,
                "RateLimit-Reset": seconds}
    # ratelimit-policy: the window is whole seconds (the draft allows no fraction), so a rate
    # under one a second is one request per so many seconds.
    window = 1 if bucket.rate >= 1 else math.ceil(1 / bucket.rate)
    quota = max(1, math.floor(bucket.rate * window))
    return {"RateLimit-Policy": f'"default";q={quota};w={window}',
            "RateLimit": f'"default";r={remaining};t={seconds}'}
