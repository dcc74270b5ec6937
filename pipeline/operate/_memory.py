"""A process's memory: the allocators botstats tunes in the processes it starts itself, and the
peak a run reports.

:func:`tune_allocators` runs first in the `botstats` command (its entry point, which
`python -m pipeline` and the fresh image `botstats run` re-executes into both go through), before
anything loads polars; ``import pipeline`` changes nothing of its host. A script that builds the
trends of a large archive may call it first too.

polars allocates through its own jemalloc, which reads ``_RJEM_MALLOC_CONF`` once, when polars
loads. Its defaults (8 arenas on 2 cores, freed pages kept as "muzzy") held freed slices' memory
long after the trends step moved on: one arena, and freed pages given back within 100 ms, peak
lower for the same work.

DuckDB, pyarrow and Python allocate through glibc's malloc, whose threshold for serving a large
block by its own mapping rises to the size of every such block freed (up to 32 MB): after the
first few, DuckDB's result buffers (an Arrow batch is sized for a million rows) came from the
heap, and freed, stayed in the process. Fixed thresholds keep large blocks mapped and returned
when freed.

pyarrow's own buffers (the compressed Arrow streams an incremental trends run reads its groups
of slices into, and the tables read back from them) come from its default pool, mimalloc, which
keeps the pages they free for pyarrow alone: ``ARROW_DEFAULT_MEMORY_POOL=system`` (read when
pyarrow makes its first buffer) has them come from glibc, held as above. All three measured in
docs/design.md, "Memory". A value the user set wins.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

POLARS_MALLOC_CONF = "narenas:1,dirty_decay_ms:100,muzzy_decay_ms:0"
ARROW_POOL = "system"
# glibc's mallopt parameters and its defaults' starting values, held fixed.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
GLIBC_THRESHOLD = 128 * 1024


def tune_allocators() -> None:
    """Set polars' allocator (``_RJEM_MALLOC_CONF``, unless set; read when polars loads, so call
    this before), pyarrow's (``ARROW_DEFAULT_MEMORY_POOL``, unless set; read at its first
    buffer) and hold glibc's thresholds (:func:`fix_glibc_thresholds`), for this process and
    the processes it starts."""
    os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_MALLOC_CONF)
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_POOL)
    fix_glibc_thresholds()


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


def peak_rss_mb() -> float:
    """This process image's peak resident set (``VmHWM``; an ``exec`` starts it again), in MB."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    # Elsewhere the process's peak over its life: KB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)
