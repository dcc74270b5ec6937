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


def answer_round(limit: AimdLimit, now: float, latency: float) -> float:
    """One round: as many successes as the window, each ``latency`` long; the time after it."""
    for _ in range(limit.window):
        now += 0.001
        limit.on_success(now, latency)
    return now


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


def test_latency_that_does_not_hold_stops_growth_and_steps_back_to_the_start() -> None:
    limit = AimdLimit(ceiling=64)
    now = answer_round(limit, 0.0, 0.050)
    now = answer_round(limit, now, 0.050)  # 16
    now = answer_round(limit, now, 0.300)  # six times the best: the service is queueing
    assert (limit.window, limit.slow_start) == (12, False)
    for _ in range(20):
        now = answer_round(limit, now, 0.300)
    assert limit.window == START  # latency alone never takes it below the start
    now = answer_round(limit, now, 0.050)
    assert limit.window == START + 1  # then additive increase, one per round


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
