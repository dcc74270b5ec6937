"""The surface of pipeline.interface (imported lazily: see __init__.py)."""

from ._client import Client
from ._concurrency import AimdLimit, workers
from ._payloads import RawArray, Reply, split_array, stat_payload

__all__ = [
    "AimdLimit",
    "Client",
    "RawArray",
    "Reply",
    "split_array",
    "stat_payload",
    "workers",
]
