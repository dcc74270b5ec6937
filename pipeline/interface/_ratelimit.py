"""What an answer says about the service's rate limit, read from its headers: one pure function,
:func:`read_rate_limit` (headers and the time now in, a :class:`RateLimit` out).

The interface says nothing about rate limits, and services tell theirs in several families of
headers, often only some of them on a given answer:

- ``Retry-After``: delay-seconds or an HTTP-date (RFC 9110), on a 429 or a 503;
- ``X-RateLimit-Limit``, ``-Remaining``, and ``-Reset`` as a Unix time (GitHub; milliseconds at
  some services) or as seconds from now (others), told apart by size: no service asks to wait
  31 years, so a value from 10^9 on is a time; ``-Reset-After`` in seconds (Discord);
- the IETF draft's ``RateLimit-Limit``, ``-Remaining``, ``-Reset`` (seconds; a Unix time at
  GitLab, told apart the same way), and its newer single fields, structured lists (RFC 9651):
  ``RateLimit: "default";r=50;t=30`` (r remaining, t seconds until the quota resets) and
  ``RateLimit-Policy: "default";q=100;w=60`` (q requests per w seconds); and the older
  dictionary ``RateLimit: limit=100, remaining=50, reset=5``.

A reset is told apart by its value, whatever the header: an HTTP-date; else a number, which
from 10^12 on is a Unix time in milliseconds, from 10^9 on a Unix time in seconds (2001-09-09;
no service asks to wait 31 years), and below that seconds to wait.

A refusal is a 429, or a 403 that says the quota is spent (``X-RateLimit-Remaining: 0``, or
``RateLimit-Remaining: 0``: GitHub answers a spent primary rate limit so) or when to come back
(``Retry-After``: GitHub's secondary limits): :func:`is_rate_limited`. Any other 403 is a
refusal of the credentials.

Where several families are present, ``RateLimit`` is read before ``RateLimit-*`` before
``X-RateLimit-*`` for remaining, limit and reset; of several policies or limits in one field,
the most restrictive (least remaining; least rate). ``Retry-After`` always gives the wait. A
value that is not a finite number >= 0 is ignored, as the draft says malformed fields must be.
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

# A reset at or above this is a Unix time, not a delay in seconds (2001-09-09); at or above
# the second, a Unix time in milliseconds.
EPOCH_SECONDS = 1e9
EPOCH_MILLIS = 1e12


@dataclass(frozen=True)
class RateLimit:
    """What one answer says about the rate limit; None for what it does not say.

    ``wait``: seconds before asking again (Retry-After); ``remaining``: requests left before the
    quota resets; ``limit``: requests the quota holds; ``reset``: seconds until it resets;
    ``rate``: requests per second a policy allows (its q / w); ``told_by``: the header that
    gives :meth:`retry_wait`, for messages."""

    wait: float | None = None
    remaining: int | None = None
    limit: int | None = None
    reset: float | None = None
    rate: float | None = None
    told_by: str = ""

    def retry_wait(self) -> float | None:
        """Seconds a request this answer refused should wait: Retry-After, else the reset of a
        quota that is spent (or whose remaining is not told); None when nothing says."""
        if self.wait is not None:
            return self.wait
        if self.reset is not None and not self.remaining:
            return self.reset
        return None


NOTHING_SAID = RateLimit()


def is_rate_limited(status: int, said: RateLimit) -> bool:
    """Whether an answer of ``status`` whose headers ``said`` this is the service's rate limit
    refusing a request (to be waited out and sent again), rather than another failure."""
    if status == 429:
        return True
    return status == 403 and (said.remaining == 0 or said.wait is not None)


def read_rate_limit(headers: Mapping[str, str], now: datetime | None = None) -> RateLimit:
    """What ``headers`` say about the rate limit, ``now`` being the time they were received
    (default: now). Names in any case; a field sent twice is one list (as ``httpx.Headers``
    joins it)."""
    headers = {name.lower(): value for name, value in headers.items()}
    epoch = (now or datetime.now(UTC)).timestamp()
    wait = _seconds_until(headers.get("retry-after"), epoch)
    said, told_by = _ratelimit_field(headers, epoch), "RateLimit"
    if said is None:
        said, told_by = _prefixed(headers, epoch, "ratelimit-"), "RateLimit-Reset"
    if said is None:
        said, told_by = _prefixed(headers, epoch, "x-ratelimit-"), (
            "X-RateLimit-Reset-After" if "x-ratelimit-reset-after" in headers
            else "X-RateLimit-Reset")
    remaining, limit, reset = said or (None, None, None)
    if wait is not None:
        told_by = "Retry-After"
    elif reset is None:
        told_by = ""
    rate = _least(_policy_rate(headers.get("ratelimit-policy")),
                  _policy_rate(headers.get("ratelimit-limit")))
    return RateLimit(wait, remaining, limit, reset, rate, told_by)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if absent
    or unreadable, so the caller falls back to its own backoff."""
    return _seconds_until(value, (now or datetime.now(UTC)).timestamp())


def _least(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _number(text: str | None) -> float | None:
    """A finite number >= 0, or None."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _count(text: str | None) -> int | None:
    value = _number(text)
    return None if value is None else int(value)


def _seconds_until(text: str | None, epoch: float) -> float | None:
    """Seconds from ``epoch`` to what ``text`` names: delay-seconds, a Unix time (seconds or
    milliseconds) or an HTTP-date; None when it names none of them."""
    if text is None or not text.strip():
        return None
    try:
        value: float | None = float(text.strip())
    except ValueError:
        value = None
    if value is not None and not math.isfinite(value):
        return None
    if value is None:
        try:
            when = email.utils.parsedate_to_datetime(text.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # HTTP-dates are GMT; be lenient with ones that omit it
            when = when.replace(tzinfo=UTC)
        return max(0.0, when.timestamp() - epoch)
    if value >= EPOCH_MILLIS:
        value = value / 1000 - epoch
    elif value >= EPOCH_SECONDS:
        value -= epoch
    return max(0.0, value)  # a time already past (or a negative delay): now


def _prefixed(headers: Mapping[str, str], epoch: float,
              prefix: str) -> tuple[int | None, int | None, float | None] | None:
    """``<prefix>Limit``, ``-Remaining`` and ``-Reset`` (or ``-Reset-After``); None when
    neither remaining nor reset is told."""
    remaining = _count(_first_member(headers.get(prefix + "remaining")))
    after = _number(headers.get(prefix + "reset-after"))
    reset = after if after is not None else _reset(headers.get(prefix + "reset"), epoch)
    if remaining is None and reset is None:
        return None
    return remaining, _count(_first_member(headers.get(prefix + "limit"))), reset


def _reset(text: str | None, epoch: float) -> float | None:
    """Seconds until a ``-Reset`` field's time: the whole value (an HTTP-date holds a comma),
    else its first member (a draft's list)."""
    whole = _seconds_until(text, epoch)
    return whole if whole is not None else _seconds_until(_first_member(text), epoch)


def _ratelimit_field(headers: Mapping[str, str],
                     epoch: float) -> tuple[int | None, int | None, float | None] | None:
    """``RateLimit``: a list of service limits (the least remaining wins, then the longest
    reset), or the older dictionary of limit, remaining and reset."""
    text = headers.get("ratelimit")
    if text is None:
        return None
    members = _members(text)
    keyed = {item.partition("=")[0].strip().lower(): item.partition("=")[2]
             for item, _ in members if "=" in item and not item.startswith('"')}
    if "remaining" in keyed or "reset" in keyed:
        remaining = _count(keyed.get("remaining"))
        return remaining, _count(keyed.get("limit")), _seconds_until(keyed.get("reset"), epoch)
    best: tuple[int, float | None] | None = None
    for _, params in members:
        remaining = _count(params.get("r"))
        if remaining is None:
            continue
        reset = _seconds_until(params.get("t"), epoch)
        if best is None or (remaining, -(reset or 0.0)) < (best[0], -(best[1] or 0.0)):
            best = (remaining, reset)
    return None if best is None else (best[0], None, best[1])


def _policy_rate(text: str | None) -> float | None:
    """The least rate of a list of quota policies: ``"name";q=100;w=60`` items, or the older
    ``100;w=60`` ones (as ``RateLimit-Limit`` lists them too)."""
    if text is None:
        return None
    rate = None
    for item, params in _members(text):
        quota = _number(params.get("q")) if "q" in params else _number(item)
        window = _number(params.get("w"))
        if quota is not None and window:
            rate = _least(rate, quota / window)
    return rate


def _first_member(text: str | None) -> str | None:
    """The first member of a list (``10, 10;w=1`` -> ``10``), as drafts let a limit list its
    policies after it."""
    if text is None:
        return None
    members = _members(text)
    return members[0][0] if members else None


def _members(text: str) -> list[tuple[str, dict[str, str]]]:
    """The members of a structured-field list (RFC 9651), each as its item's text and its
    parameters (strings unquoted); quoted commas and semicolons do not split."""
    members: list[tuple[str, dict[str, str]]] = []
    for member in _split(text, ","):
        parts = _split(member, ";")
        item = _unquote(parts[0].strip())
        params = {}
        for part in parts[1:]:
            key, _, value = part.partition("=")
            params[key.strip().lower()] = _unquote(value.strip()) if value else "?1"
        if item or params:
            members.append((item, params))
    return members


def _split(text: str, sep: str) -> list[str]:
    parts, start, quoted, escaped = [], 0, False, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == sep and not quoted:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text
