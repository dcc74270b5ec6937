"""The admin endpoints, outside the interface and never faulted: health, advancing the clock, churn,
growth, warming, and the planted events (the truth a detector is judged by)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from ._endpoint import MAX_ADVANCE, _directory, _query_int, error
from ._faults import FaultInjector
from ._json import JSONResponse


async def admin_health(request: Request) -> Response:
    summary = _directory(request).summary()
    injector: FaultInjector = request.app.state.faults
    summary.update(status="ok", rate_limited=injector.rejected, injected_errors=injector.injected)
    return JSONResponse(summary)


async def admin_advance(request: Request) -> Response:
    intervals = _query_int(request, "intervals", 1)
    if isinstance(intervals, Response):
        return intervals
    if intervals > MAX_ADVANCE:
        return error(400, f"intervals must be at most {MAX_ADVANCE}", {"intervals": intervals})
    directory = _directory(request)
    directory.advance(intervals)
    return JSONResponse({"advanced": intervals, **directory.summary()})


async def admin_churn(request: Request) -> Response:
    times = _query_int(request, "times", 1)
    if isinstance(times, Response):
        return times
    directory = _directory(request)
    changes = [directory.churn() for _ in range(min(times, MAX_ADVANCE))]
    return JSONResponse({"added": [a for a, _ in changes], "removed": [r for _, r in changes]})


async def admin_grow(request: Request) -> Response:
    count = _query_int(request, "bots", 1)
    if isinstance(count, Response):
        return count
    return JSONResponse({"added": _directory(request).grow(min(count, MAX_ADVANCE))})


async def admin_warm(request: Request) -> Response:
    started = time.perf_counter()
    bots = _directory(request).warm()
    return JSONResponse({"warmed": bots, "seconds": round(time.perf_counter() - started, 3)})


async def admin_events(request: Request) -> Response:
    directory = _directory(request)
    return JSONResponse({"share": directory.config.events, "events": directory.events()})
