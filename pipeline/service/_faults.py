"""Request-level fault injection: rate limiting, latency and random 5xx answers.

Data-level faults (churn, malformed records, bad JSON, ignore_skip, the live clock) belong
to the Directory and the endpoints; these three only decide whether and when a request gets
through, so they wrap every interface endpoint the same way.
"""

from __future__ import annotations

import asyncio
import math
from random import Random

from starlette.responses import Response

from ._config import Faults
from ._json import JSONResponse
from ._quota import TokenBucket, quota_headers, refusal_status

_REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


class FaultInjector:
    """The request-level faults of one app. Runs on the event loop only (no locking)."""

    def __init__(self, faults: Faults, seed: int) -> None:
        self.faults = faults
        self.bucket = (TokenBucket(faults.rate_limit, faults.rate_burst)
                       if faults.rate_limit > 0 else None)
        # Seeded, so a single client sees a reproducible sequence of faults.
        self.rng = Random(f"{seed}:faults")
        self.rejected = 0
        self.injected = 0

    def rate_limited(self) -> tuple[Response | None, dict[str, str]]:
        """The 429 (GitHub's 403) that replaces the endpoint's answer (None: a token was
        there), and the rate-limit headers the answer carries either way."""
        if self.bucket is None:
            return None, {}
        wait = self.bucket.take()
        headers = quota_headers(self.faults.rate_limit_headers, self.bucket, wait)
        if not wait:
            return None, headers
        self.rejected += 1
        return JSONResponse(
            {"error": "rate limited: too many requests",
             "details": {"retry_after": max(1, math.ceil(wait)),
                         "limit_per_second": self.faults.rate_limit}},
            status_code=refusal_status(self.faults.rate_limit_headers), headers=headers), headers

    async def before(self) -> Response | None:
        """A response that replaces the endpoint's (5xx), or None to go on."""
        faults = self.faults
        if faults.latency_ms > 0 or faults.latency_jitter_ms > 0:
            delay_ms = faults.latency_ms + self.rng.uniform(0, faults.latency_jitter_ms)
            await asyncio.sleep(delay_ms / 1000)
        if faults.error_rate > 0 and self.rng.random() < faults.error_rate:
            self.injected += 1
            return self._server_error()
        return None

    def _server_error(self) -> Response:
        status = self.rng.choice(list(_REASONS))
        reason = _REASONS[status]
        style = self.rng.choice(["json", "html", "empty"])
        headers = {"Retry-After": "1"} if status == 503 and self.rng.random() < 0.5 else {}
        if style == "json":
            return JSONResponse({"error": reason.lower(), "details": {"injected": True}},
                                status_code=status, headers=headers)
        if style == "html":
            # What a proxy in front of a real service answers: not JSON at all.
            return Response(f"<html><body>{status} {reason}</body></html>", status_code=status,
                            headers=headers, media_type="text/html")
        return Response(b"", status_code=status, headers=headers)
