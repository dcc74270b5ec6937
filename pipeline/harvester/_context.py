"""What every part of one harvest shares: the client, the ``[fields]`` it reads records by, the
report it fills, the batch its rows go to, whether it re-reads everything, and the event that
stops it. Parts take this (and, where they need more, the one settings section they read)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..core import FieldSettings
from ..interface import Client
from ._batch import Batch
from ._report import HarvestReport


@dataclass(frozen=True, slots=True)
class Run:
    """One harvest's shared parts (see the module docstring)."""

    client: Client
    fields: FieldSettings
    report: HarvestReport
    buffer: Batch
    full: bool
    stop: threading.Event
