"""Adaptive concurrency (`[service].concurrency = "auto"`): the AIMD state machine on its own,
then the gate and a whole harvest against the embedded service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from conftest import archived_stat_rows, service_stat_rows

from pipeline.core._errors import ConfigError
from pipeline.core._loading import load_settings
from pipeline.core._settings import Settings
from pipeline.harvester._run import harvest
from pipeline.harvester._workers import Workers
from pipeline.interface._concurrency import START, AimdLimit, Gate, adaptive_control, workers
from pipeline.interface._pacing import Pace
from pipeline.service import RunningService


class Round:
    """Feeds an AimdLimit rounds of answers on a simulated clock and CPU."""

    def __init__(self, limit: AimdLimit) -> None:
        self.limit, self.now, self.cpu = limit, 0.0, 0.0

    def __call__(self, latency: float, *, best: float | None = None,
                 cpu_per_answer: float = 0.001) -> int:
        """One round: the window's answers, all in flight together, so the round lasts
        ``latency``; the first answer takes ``best`` (default: ``latency``). Returns the
        window after it."""
        window = self.limit.window
        for n in range(window):
            self.cpu += cpu_per_answer
            self.limit.on_success(self.now + latency * (n + 1) / window,
                                  best if best is not None and n == 0 else latency, self.cpu)
        self.now += latency
        return self.limit.window


def test_far_away_the_window_doubles_while_latency_holds_up_to_the_ceiling() -> None:
    limit = AimdLimit(ceiling=32)
    answer = Round(limit)
    assert limit.window == START
    assert answer(0.050) == START  # the first round opens connections: it decides nothing
    assert [answer(0.050), answer(0.052), answer(0.050)] == [16, 32, 32]  # never above 32


def test_far_away_a_busy_machine_does_not_stop_the_growth() -> None:
    # The best answer takes 50 ms and most three times that (other processes have the CPU):
    # still within the tolerance, and far more in flight than our CPU needs, so it grows.
    answer = Round(AimdLimit(ceiling=32))
    assert [answer(0.150, best=0.050) for _ in range(4)] == [8, 16, 32, 32]


def test_on_loopback_our_cpu_bounds_the_answers_and_the_window_stays_at_the_start() -> None:
    # A request alone takes 1.5 ms, and each answer costs us 1.25 ms of CPU: a window of 8
    # already keeps the CPU busy (latency grows with it), so it never grows.
    limit = AimdLimit(ceiling=32)
    answer = Round(limit)
    windows = [answer(limit.window * 0.00125, best=0.0015, cpu_per_answer=0.00125)
               for _ in range(20)]
    assert set(windows) == {START}
    assert limit.room(0.0015) == pytest.approx(2.4)


def test_a_service_that_queues_steps_the_window_back_to_the_start() -> None:
    limit = AimdLimit(ceiling=32)
    answer = Round(limit)
    for _ in range(4):
        answer(0.050)
    assert limit.window == 32
    assert answer(0.500) == 25  # ten times the best: the service is queueing
    for _ in range(10):
        answer(0.500)
    assert limit.window == START and not limit.slow_start  # never below the start
    assert answer(0.050) == START + 1  # then additive increase, one a round


def test_a_server_error_halves_the_window_once_a_round() -> None:
    limit = AimdLimit(ceiling=32)
    limit.on_overload(0.0)
    limit.on_overload(0.0)  # the same round: no second cut
    assert limit.window == START // 2
    for _ in range(10):
        for _ in range(limit.window):
            limit.on_overload(1.0)
    assert limit.window == 1  # never below one


def test_a_429_leaves_the_window_to_the_pace_and_ends_its_doubling() -> None:
    limit = AimdLimit(ceiling=32)
    answer = Round(limit)
    answer(0.050)
    assert answer(0.050) == 16 and limit.slow_start
    limit.on_rate_limited(1.0)  # the pace's business (tests/test_pacing.py)
    assert limit.window == 16 and not limit.slow_start


def test_a_fixed_concurrency_is_paced_too_one_request_at_a_time() -> None:
    gate = Gate(None, Pace(budget=200))

    async def request() -> float:
        sent = await gate.acquire()
        gate.release(sent, 200)
        return sent

    async def main() -> list[float]:
        return list(await asyncio.gather(*(request() for _ in range(5))))

    sent = sorted(asyncio.run(main()))
    assert gate.paced_seconds > 0  # four of them waited for their turn
    assert all(later > earlier for earlier, later in zip(sent, sent[1:], strict=False))


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
        sent = await gate.acquire()
        await asyncio.sleep(0.01)
        gate.release(sent, 500)  # every answer a 5xx: the window falls to one

    async def main() -> None:
        await asyncio.gather(*(request() for _ in range(20)))

    asyncio.run(main())
    assert gate.peak == 2
    assert control.window == 1


def test_a_cancelled_waiter_gives_its_place_on() -> None:
    gate = Gate(AimdLimit(ceiling=1, start=1))

    async def main() -> list[str]:
        done: list[str] = []
        first = await gate.acquire()
        waiting = asyncio.create_task(gate.acquire())
        later = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        gate.release(first, 200)
        sent = await asyncio.wait_for(later, 1)  # the place went past the cancelled waiter
        done.append("later")
        gate.release(sent, 200)
        return done

    assert asyncio.run(main()) == ["later"]


@pytest.mark.clock
def test_auto_harvests_a_rate_limited_service_completely(
        service_factory: Callable[..., RunningService],
        harvest_settings: Callable[..., Settings]) -> None:
    svc = service_factory(bots=150, history_days=2, rate_limit=60.0)
    settings = harvest_settings(svc, {"retry.attempts": 10})
    assert settings.service.concurrency == "auto"
    report = harvest(settings)
    assert report.status == "complete", report.message
    # It met the limit (the service answered 429), and every 429 was retried, not lost.
    assert svc.app.state.faults.rejected > 0
    assert report.retries >= svc.app.state.faults.rejected
    assert archived_stat_rows(settings) == service_stat_rows(svc.directory)


def test_harvest_tasks_follow_the_window_up_to_the_most_and_stop_growing_once_closed() -> None:

    async def main() -> list[int]:
        control = AimdLimit(ceiling=32, start=2)
        started: list[int] = []

        async def task() -> None:
            started.append(1)

        pool = Workers(task, 5, control)
        counts = []
        pool.grow()
        counts.append(len(pool.tasks))  # the window: 2
        control.limit = 4.0
        pool.grow()
        counts.append(len(pool.tasks))  # grown with it
        control.limit = 30.0
        pool.grow()
        counts.append(len(pool.tasks))  # never past the most
        stopping = pool.close()
        control.limit = 1.0
        pool.grow()
        counts.append(len(stopping))
        counts.append(len(pool.tasks))  # closed: no new task
        fixed = Workers(task, 3, None)
        fixed.grow()
        counts.append(len(fixed.tasks))  # a fixed concurrency: all of them at once
        await asyncio.gather(*pool.tasks, *fixed.tasks)
        counts.append(len(started))
        return counts

    assert asyncio.run(main()) == [2, 4, 5, 5, 5, 3, 8]
