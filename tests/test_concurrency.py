"""Adaptive concurrency (`[service].concurrency = "auto"`): the AIMD state machine on its own,
then the gate and a whole harvest against the embedded service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from conftest import archived_stat_rows, service_stat_rows

from pipeline.concurrency import START, AimdLimit, Gate, adaptive_control, workers
from pipeline.config import Settings, load_settings
from pipeline.errors import ConfigError
from pipeline.harvest import harvest
from pipeline.service import RunningService


def answer_round(limit: AimdLimit, now: float, latency: float, best: float | None = None) -> float:
    """One round: the window's answers, all in flight together, so the round lasts ``latency``;
    the first answer takes ``best`` (default: ``latency``). Returns the time after it."""
    window = limit.window
    for n in range(window):
        limit.on_success(now + latency * (n + 1) / window,
                         best if best is not None and n == 0 else latency)
    return now + latency


def test_the_window_doubles_while_latency_holds_up_to_the_ceiling() -> None:
    limit = AimdLimit(ceiling=32)
    assert limit.window == START
    now = answer_round(limit, 0.0, 0.050)
    assert limit.window == START  # the first round opens connections: it decides nothing
    now = answer_round(limit, now, 0.050)
    assert limit.window == 2 * START
    now = answer_round(limit, now, 0.052)
    assert limit.window == 32
    answer_round(limit, now, 0.050)
    assert limit.window == 32  # never above the ceiling


def test_where_answers_per_second_stay_flat_the_window_steps_back() -> None:
    # A link bound by CPU: 800 answers a second whatever is in flight, so latency grows with
    # the window. It stops growing and settles near the start, never below it.
    limit = AimdLimit(ceiling=64)
    now = 0.0
    windows = []
    for _ in range(30):
        now = answer_round(limit, now, limit.window / 800)
        windows.append(limit.window)
    assert max(windows) == 32 and not limit.slow_start
    assert START <= min(windows[-10:]) and max(windows[-10:]) <= 20


def test_far_away_a_busy_machine_does_not_stop_growth_while_answers_scale() -> None:
    # The best answer takes 50 ms, most take three times that (our CPU is busy): latency does
    # not hold, but twice the window brings twice the answers, so it keeps growing.
    limit = AimdLimit(ceiling=32)
    now = 0.0
    for _ in range(4):
        now = answer_round(limit, now, 0.150, best=0.050)
    assert limit.window == 32


def test_a_server_error_halves_the_window_once_a_round() -> None:
    limit = AimdLimit(ceiling=32)
    limit.on_overload(0.0)
    limit.on_overload(0.0)  # the same round: no second cut
    assert limit.window == START // 2
    for _ in range(10):
        for _ in range(limit.window):
            limit.on_overload(1.0)
    assert limit.window == 1  # never below one


def test_a_429_paces_just_under_the_rate_that_was_getting_through() -> None:
    limit = AimdLimit(ceiling=32)
    assert limit.send_delay(0.0) == 0.0  # no pace until the service asks for one
    for i in range(100):  # 100 successes in the last second
        limit.on_success(i / 100, 0.001)
    limit.on_rate_limited(1.0)
    assert limit.rate == pytest.approx(90.0)
    limit.on_rate_limited(1.1)  # within the cooldown: the same event
    assert limit.rate == pytest.approx(90.0)
    # Paced: each request reserves its turn 1/rate after the previous one.
    assert limit.send_delay(2.0) == 0.0
    assert limit.send_delay(2.0) == pytest.approx(1 / 90)
    # Growth is additive in time: 1% of the pace set at the cut per second.
    limit.on_success(12.0, 0.001)
    assert limit.rate == pytest.approx(90.0 + 0.9 * 11)


def test_the_setting_chooses_the_control() -> None:
    assert isinstance(adaptive_control("auto", 32), AimdLimit)
    assert adaptive_control(8, 32) is None
    assert (workers("auto", 32), workers(6, 32)) == (32, 6)


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("12", 12)])
def test_concurrency_is_auto_by_default_and_a_number_still_works(value: str, expected: Any) -> None:
    assert Settings().service.concurrency == "auto"
    settings = load_settings(None, env={"BOTSTATS_SERVICE_CONCURRENCY": value})
    assert settings.service.concurrency == expected


@pytest.mark.parametrize("value", ["fast", "0", "-2"])
def test_a_bad_concurrency_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="CONCURRENCY|concurrency"):
        load_settings(None, env={"BOTSTATS_SERVICE_CONCURRENCY": value})


def test_the_gate_keeps_in_flight_within_the_window() -> None:
    control = AimdLimit(ceiling=4, start=2)
    gate = Gate(control)

    async def request() -> None:
        async with gate.slot() as answer:
            await asyncio.sleep(0.01)
            answer.status = 500  # every answer a 5xx: the window falls to one

    async def main() -> None:
        await asyncio.gather(*(request() for _ in range(20)))

    asyncio.run(main())
    assert gate.peak == 2
    assert control.window == 1


def test_auto_harvests_a_rate_limited_service_completely(
        service_factory: Callable[..., RunningService],
        harvest_settings: Callable[..., Settings]) -> None:
    svc = service_factory(bots=150, history_days=2, rate_limit=60.0)
    settings = harvest_settings(svc, {"retry.attempts": 10})
    report = harvest(settings)
    assert report.status == "complete", report.message
    assert archived_stat_rows(settings) == service_stat_rows(svc.directory)
