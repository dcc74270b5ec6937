"""The surface of pipeline.interface (imported lazily: see __init__.py)."""

from ._client import Client, stats_path, user_list_path
from ._concurrency import AimdLimit, workers
from ._lists import LIST_KEYS, TOTAL_KEYS, ListPage, ListShape, as_count
from ._payloads import RawArray, Reply, split_array, stat_payload
from ._ratelimit import RateLimit, read_rate_limit

__all__ = [
    "LIST_KEYS",
    "TOTAL_KEYS",
    "AimdLimit",
    "as_count",
    "Client",
    "ListPage",
    "ListShape",
    "RateLimit",
    "RawArray",
    "Reply",
    "read_rate_limit",
    "split_array",
    "stats_path",
    "user_list_path",
    "stat_payload",
    "workers",
]
