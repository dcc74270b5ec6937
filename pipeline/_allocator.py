"""The process's allocators, tuned before polars loads (``import pipeline`` imports this first).

polars allocates through its own jemalloc, which reads ``_RJEM_MALLOC_CONF`` once, when polars
loads. Its defaults (8 arenas on 2 cores, freed pages kept as "muzzy") held freed slices' memory
long after the trends step moved on: one arena, and freed pages given back within 100 ms, peak
lower for the same work.

DuckDB, pyarrow and Python allocate through glibc's malloc, whose threshold for serving a large
block by its own mapping rises to the size of every such block freed (up to 32 MB): after the
first few, DuckDB's result buffers (an Arrow batch is sized for a million rows) came from the
heap, and freed, stayed in the process. Fixed thresholds keep large blocks mapped and returned
when freed. Both measured in docs/design.md, "Memory". A value the user set wins.
"""

from __future__ import annotations

import ctypes
import os
import sys

POLARS_MALLOC_CONF = "narenas:1,dirty_decay_ms:100,muzzy_decay_ms:0"
# glibc's mallopt parameters and its defaults' starting values, held fixed.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
GLIBC_THRESHOLD = 128 * 1024

os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_MALLOC_CONF)


def fix_glibc_thresholds() -> bool:
    """Hold glibc malloc's mmap and trim thresholds at their defaults (no dynamic rise), unless
    the user tuned them; whether they were set (False off glibc)."""
    tuned = "GLIBC_TUNABLES" in os.environ or any(
        name in os.environ for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"))
    if tuned or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt thresholds)
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, GLIBC_THRESHOLD)
                and mallopt(M_TRIM_THRESHOLD, GLIBC_THRESHOLD))


fix_glibc_thresholds()
