"""Rate limits told by the service: every family of headers read (``read_rate_limit``), the pace
they steer (``Pace``) on a simulated clock, and the real client paced by the embedded service's
token bucket speaking each family, in virtual time (an event loop whose clock moves only while
every task waits: the figures are the same on any machine, however busy)."""

from __future__ import annotations

import asyncio
import random
import selectors
from datetime import UTC, datetime, tzinfo
from types import SimpleNamespace

import httpx
import pytest

from pipeline.core._settings import RetrySettings, ServiceSettings, Settings
from pipeline.interface import _ratelimit
from pipeline.interface._call import ClientStats
from pipeline.interface._client import Client
from pipeline.interface._concurrency import Gate
from pipeline.interface._pacing import COOLDOWN, Pace
from pipeline.interface._ratelimit import (
    NOTHING_SAID,
    RateLimit,
    is_rate_limited,
    read_rate_limit,
)
from pipeline.service import Faults, ServiceConfig, _quota
from pipeline.service._app import create_app
from pipeline.service._config import RATE_LIMIT_HEADERS

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
EPOCH = NOW.timestamp()


# --- the headers, read ------------------------------------------------------------------------
@pytest.mark.parametrize(("headers", "said"), [
    ({}, NOTHING_SAID),
    ({"Retry-After": "2"}, RateLimit(wait=2.0, told_by="Retry-After")),
    ({"retry-after": "Wed, 25 Nov 2026 12:00:30 GMT"}, RateLimit(wait=30.0, told_by="Retry-After")),
    ({"Retry-After": "soon"}, NOTHING_SAID),
    # Discord: the reset in seconds, to the millisecond.
    ({"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "0.25"},
     RateLimit(remaining=0, limit=5, reset=0.25, told_by="X-RateLimit-Reset-After")),
    # GitHub: a Unix time; elsewhere seconds from now; a Unix time in milliseconds.
    ({"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "12",
      "X-RateLimit-Reset": str(int(EPOCH) + 600)},
     RateLimit(remaining=12, limit=5000, reset=600.0, told_by="X-RateLimit-Reset")),
    ({"X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "60"},
     RateLimit(remaining=3, reset=60.0, told_by="X-RateLimit-Reset")),
    ({"X-RateLimit-Reset": str(int(EPOCH * 1000) + 1500)},
     RateLimit(reset=1.5, told_by="X-RateLimit-Reset")),
    # The IETF draft's fields; a limit listing its policies after it; GitLab's Unix time.
    ({"RateLimit-Limit": "10", "RateLimit-Remaining": "3", "RateLimit-Reset": "1"},
     RateLimit(remaining=3, limit=10, reset=1.0, told_by="RateLimit-Reset")),
    ({"RateLimit-Limit": "10, 10;w=1, 100;w=60", "RateLimit-Remaining": "9",
      "RateLimit-Reset": "1"},
     RateLimit(remaining=9, limit=10, reset=1.0, rate=100 / 60, told_by="RateLimit-Reset")),
    ({"RateLimit-Remaining": "0", "RateLimit-Reset": str(int(EPOCH) + 40)},
     RateLimit(remaining=0, reset=40.0, told_by="RateLimit-Reset")),
    # Its newer single fields: the most restrictive service limit, the least policy rate.
    ({"RateLimit": '"burst";r=3;t=1, "daily";r=800;t=3600',
      "RateLimit-Policy": '"burst";q=100;w=60, "daily";q=1000;w=86400'},
     RateLimit(remaining=3, reset=1.0, rate=1000 / 86400, told_by="RateLimit")),
    ({"RateLimit": '"a";r=0;t=5, "b";r=0;t=50'}, RateLimit(remaining=0, reset=50.0,
                                                        told_by="RateLimit")),
    ({"RateLimit": '"q,;\\"x";r=7'}, RateLimit(remaining=7)),  # quoted separators do not split
    ({"RateLimit": "limit=100, remaining=50, reset=5"},  # an older draft's dictionary
     RateLimit(remaining=50, limit=100, reset=5.0, told_by="RateLimit")),
    # Retry-After gives the wait whatever else is said; RateLimit is read before the others.
    ({"Retry-After": "7", "RateLimit": '"d";r=0;t=1', "X-RateLimit-Remaining": "9"},
     RateLimit(wait=7.0, remaining=0, reset=1.0, told_by="Retry-After")),
    # Malformed values are ignored, as the draft says they must be.
    ({"RateLimit-Remaining": "-1", "RateLimit-Reset": "NaN", "X-RateLimit-Remaining": "many"},
     NOTHING_SAID),
    ({"RateLimit-Policy": '"p";q=10;w=0'}, NOTHING_SAID),
], ids=lambda value: None)
def test_every_family_of_rate_limit_headers_is_read(headers: dict[str, str],
                                                     said: RateLimit) -> None:
    import httpx

    assert read_rate_limit(httpx.Headers(headers), NOW) == said


@pytest.mark.parametrize(("said", "wait"), [
    (RateLimit(wait=3.0, remaining=0, reset=1.0), 3.0),  # Retry-After first
    (RateLimit(remaining=0, reset=1.0), 1.0),  # a spent quota: until it resets
    (RateLimit(reset=2.0), 2.0),  # remaining not told
    (RateLimit(remaining=4, reset=1.0), None),  # a quota not spent says nothing of a retry
    (NOTHING_SAID, None),
])
def test_a_refused_request_waits_what_the_answer_says(said: RateLimit, wait: float | None) -> None:
    assert said.retry_wait() == wait


# --- the pace, on a simulated clock --------------------------------------------------------------
def answers(pace: Pace, start: float, seconds: float, per_second: float, status: int = 200,
            said: RateLimit = NOTHING_SAID) -> float:
    """``per_second`` answers for ``seconds`` from ``start``; the time after the last."""
    step = 1 / per_second
    t = start
    while t < start + seconds:
        pace.on_answer(t, status, said)
        t += step
    return t


def test_unpaced_until_the_service_pushes_back() -> None:
    pace = Pace()
    answers(pace, 0.0, 2.0, 500)
    assert not pace.paced and pace.wait(2.0) == 0.0


def test_a_429_paces_under_the_rate_getting_through_and_recovers_it_within_seconds() -> None:
    pace = Pace()
    t = answers(pace, 0.0, 2.0, 100)
    pace.on_answer(t, 429, RateLimit(wait=1.0))
    assert pace.rate(t) == pytest.approx(90, rel=0.02)  # 0.9 of the 100/s getting through
    pace.on_answer(t + COOLDOWN / 2, 429, NOTHING_SAID)  # answers to requests sent before it
    assert pace.rate(t + COOLDOWN / 2) == pytest.approx(90, rel=0.02)
    assert pace.rate(t + 2.5) == pytest.approx(100, rel=0.02)  # back where it was cut from
    assert pace.rate(t + 6) > 110  # and on, the longer nothing pushes back


def test_a_pace_cut_too_far_by_a_burst_of_429s_is_found_again_within_seconds() -> None:
    pace = Pace()
    t = answers(pace, 0.0, 3.0, 100)
    for n in range(12):  # a burst of 429s, each after the cooldown: the pace falls to a third
        pace.on_answer(t + n * COOLDOWN * 1.01, 429, NOTHING_SAID)
    low = t + 12 * COOLDOWN * 1.01
    assert pace.rate(low) < 35
    assert pace.rate(low + 8) > 100  # within seconds, not a run


def test_the_pace_slows_before_the_quota_is_spent() -> None:
    pace = Pace()
    t = answers(pace, 0.0, 1.0, 100, said=RateLimit(remaining=40, limit=50, reset=1.0))
    assert not pace.paced  # plenty left
    pace.on_answer(t, 200, RateLimit(remaining=1, limit=50, reset=1.0))
    assert pace.paced and pace.rate(t) == pytest.approx(97, rel=0.02)


def test_the_pace_never_runs_far_ahead_of_what_got_through() -> None:
    pace = Pace()
    t = answers(pace, 0.0, 2.0, 100)
    pace.on_answer(t, 429, NOTHING_SAID)
    assert pace.rate(t + 60) == pytest.approx(150, rel=0.02)  # 1.5 times the best second, not thousands


def test_the_request_budget_and_a_stated_policy_are_ceilings() -> None:
    assert Pace(budget=5).rate(0.0) == 5 and Pace(budget=5).paced
    pace = Pace(budget=50)
    pace.on_answer(0.0, 200, RateLimit(rate=10.0))
    assert pace.rate(1.0) == 10  # RateLimit-Policy: 10 a second
    t = answers(pace, 1.0, 2.0, 100)
    pace.on_answer(t, 429, NOTHING_SAID)
    assert pace.rate(t) == 10


def test_turns_come_an_interval_apart_and_a_late_one_does_not_delay_the_next() -> None:
    pace = Pace(budget=4)
    assert pace.wait(10.0) == 0.0
    pace.sent(10.0)
    assert pace.wait(10.1) == pytest.approx(0.15)
    pace.sent(10.3)  # its turn was 10.25: woken late, it leaves the next turn where it was
    assert pace.wait(10.3) == pytest.approx(0.2)
    pace.sent(12.0)  # after a pause, the turns start again from it: no burst to make up for it
    assert pace.wait(12.0) == pytest.approx(0.25)


# --- the real client against the embedded service, in virtual time ------------------------------
class VirtualClock:
    """Seconds since the run began; they pass only while every task waits (for a timer)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Jumping(selectors.DefaultSelector):
    """A selector that, when nothing is ready, moves the clock to the loop's next timer instead
    of sleeping until it."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self.clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if not ready and timeout:
            self.clock.now += timeout
        return ready


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a :class:`VirtualClock`: the client's pace, its retries' waits, the
    service's latency and token bucket all keep its time, so a run of a minute takes the CPU
    its requests cost, and its figures are the same on any machine, however busy."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(selector=_Jumping(clock))
        self.clock = clock

    def time(self) -> float:
        return self.clock.now


def paced_run(family: str, monkeypatch: pytest.MonkeyPatch, *, rate: float = 50.0,
              burst: float = 5.0, seconds: float = 40.0, workers: int = 8) -> tuple[float, float]:
    """``workers`` tasks reading bots through one real :class:`Client` ([service].concurrency
    "auto", not told the limit) from the embedded service's app (its endpoints, its token
    bucket of ``rate`` a second and ``burst`` tokens, answering in ``family``, 2 ms a request)
    for ``seconds`` of virtual time. Returns (answers that were not 429 a second, over
    ``rate``; the share of requests answered 429)."""
    clock = VirtualClock()
    # The service's bucket and headers, and what the client reads them against, on its clock.
    monkeypatch.setattr(_quota, "time", SimpleNamespace(monotonic=clock,
                                                        time=lambda: EPOCH + clock()))

    class _Now(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> _Now:  # type: ignore[override]
            return cls.fromtimestamp(EPOCH + clock(), tz)

    monkeypatch.setattr(_ratelimit, "datetime", _Now)
    random.seed(1)  # the jittered backoff of a bare 429
    app = create_app(ServiceConfig(bots=8, history_days=1, stats_per_day=1, seed=1, faults=Faults(
        rate_limit=rate, rate_burst=burst, rate_limit_headers=family, latency_ms=2.0)))
    settings = Settings(service=ServiceSettings(base_url="http://service"),
                        retry=RetrySettings(attempts=100, max_retry_after=60))
    ids = sorted(app.state.directory.bot_ids())

    async def read_for_a_while() -> ClientStats:
        async with Client(settings, transport=httpx.ASGITransport(app=app)) as client:
            client.gate = Gate(client.gate.control, client.gate.pace, clock=clock)

            async def worker(i: int) -> None:
                while clock() < seconds:
                    await client.bot(ids[i % len(ids)])

            await asyncio.gather(*(worker(i) for i in range(workers)))
            return client.stats

    loop = VirtualTimeLoop(clock)
    try:
        stats = loop.run_until_complete(read_for_a_while())
    finally:
        loop.close()
    return (stats.requests - stats.rate_limited) / clock() / rate, stats.rate_limited / stats.requests


@pytest.mark.parametrize("family", RATE_LIMIT_HEADERS)
def test_the_client_paces_a_token_bucket_with_a_small_burst_at_its_rate_in_every_family(
        family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The targets (bench/pacing.py measures them over a whole harvest in real time): at least
    # 85% of the allowed rate gets through, at most 2% of requests are answered 429, start
    # included, whatever the family of headers tells the limit (or none does).
    share, refused = paced_run(family, monkeypatch)
    assert share >= 0.85, f"{share:.1%} of the allowed rate"
    assert refused <= 0.02, f"{refused:.2%} of requests answered 429"


# One reset, 30 s after NOW, in each spelling a service may use.
RESETS = {
    "seconds to wait": "30",
    "a Unix time": str(int(EPOCH) + 30),
    "a Unix time in milliseconds": str(int(EPOCH * 1000) + 30_000),
    "an HTTP-date": "Wed, 25 Nov 2026 12:00:30 GMT",
}


@pytest.mark.parametrize("spelling", list(RESETS))
@pytest.mark.parametrize("header", ["X-RateLimit-Reset", "RateLimit-Reset"])
def test_a_reset_is_read_in_every_spelling(header: str, spelling: str) -> None:
    said = read_rate_limit({header.replace("Reset", "Remaining"): "0", header: RESETS[spelling]},
                           NOW)
    assert (said.reset, said.retry_wait(), said.told_by) == (30.0, 30.0, header)



@pytest.mark.parametrize(("value", "wait"), [
    ("999999999", 999_999_999.0),  # below 10^9: seconds to wait, however many
    ("1000000000", 0.0),  # 2001: a Unix time long past, so no wait at all
    (str(int(EPOCH) - 5), 0.0),  # a reset just past: now
    ("999999999999", 999_999_999_999 - EPOCH),  # below 10^12: a Unix time in seconds
    ("1000000000000", 0.0),  # 2001 in milliseconds
    ("Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
    ("Wed, 25 Nov 2026 12:00:30", 30.0),  # an HTTP-date without its GMT, read as GMT
    ("-3", 0.0),  # a negative delay: now, as Retry-After reads it
    ("soon", None), ("inf", None), ("10, 10;w=1", 10.0),  # a draft's list: its first member
])
def test_a_reset_is_told_apart_by_its_value(value: str, wait: float | None) -> None:
    assert read_rate_limit({"X-RateLimit-Reset": value}, NOW).reset == wait



@pytest.mark.parametrize(("status", "headers", "limited"), [
    (429, {}, True),
    (429, {"X-RateLimit-Remaining": "3"}, True),
    # GitHub: a spent primary quota is a 403 with X-RateLimit-Remaining: 0 (and a secondary
    # limit a 403 with Retry-After); another 403 refuses the credentials.
    (403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(EPOCH) + 60)}, True),
    (403, {"RateLimit-Remaining": "0"}, True),
    (403, {"RateLimit": '"default";r=0;t=5'}, True),
    (403, {"Retry-After": "60"}, True),
    (403, {}, False),
    (403, {"X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": str(int(EPOCH) + 60)}, False),
    (401, {"X-RateLimit-Remaining": "0"}, False),
    (200, {"X-RateLimit-Remaining": "0"}, False),  # the last request of a quota went through
    (503, {"Retry-After": "1"}, False),  # a failing service, retried as a 5xx
])
def test_a_refusal_is_a_rate_limit_by_its_status_and_headers(
        status: int, headers: dict[str, str], limited: bool) -> None:
    assert is_rate_limited(status, read_rate_limit(headers, NOW)) is limited



def test_a_403_that_says_its_quota_is_spent_paces_as_a_429_does_and_another_does_not() -> None:
    spent = RateLimit(remaining=0, reset=1.0)
    pace = Pace()
    t = answers(pace, 0.0, 2.0, 100)
    pace.on_answer(t, 403, spent)
    assert pace.rate(t) == pytest.approx(90, rel=0.02)
    refused = Pace()
    t = answers(refused, 0.0, 2.0, 100)
    refused.on_answer(t, 403, NOTHING_SAID)  # credentials refused: no sign of the pace
    assert not refused.paced

