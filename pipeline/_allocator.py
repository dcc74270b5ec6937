"""polars' allocator, tuned before polars loads (``import pipeline`` imports this first).

polars allocates through its own jemalloc, which reads ``_RJEM_MALLOC_CONF`` once, when polars
loads. Its defaults (8 arenas on 2 cores, freed pages kept as "muzzy") held freed slices' memory
long after the trends step moved on: one arena, and freed pages given back at once, peak lower
for the same work (docs/design.md, "Memory"). A value the user set wins.
"""

from __future__ import annotations

import os

POLARS_MALLOC_CONF = "narenas:1,muzzy_decay_ms:0"

os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_MALLOC_CONF)
