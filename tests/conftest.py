"""Shared fixtures. The embedded-service fixtures come first; add yours below them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pipeline.service import Faults, RunningService, ServiceConfig, serve_in_thread

# --- the embedded bot-listing service ----------------------------------------------------
_FAULT_FIELDS = {f.name for f in dataclasses.fields(Faults)}

# The `service` fixture: small enough to start in milliseconds, with every kind of bot.
SMALL_SERVICE: dict[str, Any] = {"bots": 30, "history_days": 10, "stats_per_day": 2}


def start_service(**cfg_kwargs: Any) -> RunningService:
    """Start the service on a free loopback port; the caller closes it (or uses ``with``).

    Takes ``ServiceConfig`` fields, and ``Faults`` fields directly for convenience:
    ``start_service(bots=10, churn_every=1)`` is ``ServiceConfig(bots=10,
    faults=Faults(churn_every=1))``. ``host=`` is passed to ``serve_in_thread``."""
    host = cfg_kwargs.pop("host", "127.0.0.1")
    fault_kwargs = {name: cfg_kwargs.pop(name) for name in list(cfg_kwargs) if name in _FAULT_FIELDS}
    if fault_kwargs:
        cfg_kwargs["faults"] = dataclasses.replace(cfg_kwargs.get("faults", Faults()), **fault_kwargs)
    return serve_in_thread(ServiceConfig(**cfg_kwargs), host=host, port=0)


@pytest.fixture
def service_factory() -> Iterator[Callable[..., RunningService]]:
    """``service_factory(**cfg_kwargs)`` starts a service (see ``start_service``); every one
    started is stopped after the test."""
    started: list[RunningService] = []

    def factory(**cfg_kwargs: Any) -> RunningService:
        svc = start_service(**cfg_kwargs)
        started.append(svc)
        return svc

    yield factory
    for svc in started:
        svc.close()


@pytest.fixture
def service(service_factory: Callable[..., RunningService]) -> RunningService:
    """A healthy service: 30 bots, 10 days x 2 stats/day, no faults, clock = this hour."""
    return service_factory(**SMALL_SERVICE)


# --- other fixtures below ----------------------------------------------------------------
