"""The surface of pipeline.interface (imported lazily: see __init__.py)."""

from ._client import Client
from ._concurrency import AimdLimit, workers
from ._payloads import RawArray, Reply, split_array, stat_payload
from ._ratelimit import RateLimit, read_rate_limit

__all__ = [
    "AimdLimit",
    "Client",
    "RateLimit",
    "RawArray",
    "Reply",
    "read_rate_limit",
    "split_array",
    "stat_payload",
    "workers",
]
