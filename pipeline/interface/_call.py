"""A request as the client sees it: one logical call's retry state, and the counters every call adds to."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ..core import (
    redact_url,
)

if TYPE_CHECKING:
    from ._lists import ListShape


@dataclass
class ClientStats:
    """Counters of one client, shared by every request it makes.

    ``requests`` counts every HTTP attempt (retries included); ``retries`` the attempts that
    were repeats; ``rate_limited``/``server_errors``/``transport_errors``/``bad_responses`` the
    failed attempts by kind; ``waited_seconds`` the time slept between retries (backoff and
    Retry-After); ``throttled_seconds`` the time requests waited for their turn in the pace
    (the request budget, or the service's rate limit).
    """

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    bad_responses: int = 0
    waited_seconds: float = 0.0
    throttled_seconds: float = 0.0

    def as_dict(self) -> dict[str, int | float]:
        return asdict(self)


@dataclass
class Call:
    """One logical request and the retry state its attempts hand to tenacity's hooks."""

    request: httpx.Request
    expect: type[list[Any]] | type[dict[str, Any]]
    idempotent: bool
    auth_hint: str  # what to check when the service refuses the credentials
    recheck: str = ""  # for a POST: how to tell whether a failed attempt was stored anyway
    raw: bool = False  # a list answer as a RawArray (elements undecoded) when it is plain JSON
    shape: ListShape | None = None  # a list endpoint's answer, read as [service] says (a ListPage)
    # Written by each attempt, read by the retry predicate and the wait.
    retryable: bool = False
    retry_after: float | None = None
    # 429s that told a wait, and those waits in all: a service pacing us, not a failure, so
    # they do not count against [retry].attempts; [retry].max_retry_after bounds their sum.
    told: int = 0
    told_seconds: float = 0.0

    @property
    def where(self) -> str:
        return f"{self.request.method} {redact_url(str(self.request.url))}"
