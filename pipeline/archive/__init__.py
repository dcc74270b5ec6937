"""The archive stage: a DuckLake (a catalog plus parquet data files) opened, migrated, written
and kept.

``_store`` (where the archive lives, opening it as writer or reader), ``_migrations`` (the
numbered schema), ``_sql`` (literals and polars frames into SQL), ``_writes`` (what a harvest
commits, a batch per transaction), ``_runs`` (``harvest_runs`` bookkeeping and removals),
``_queries`` (what the harvest and the trends ask of it), ``_drift`` (record fields not seen
before), ``_upkeep`` (size, backup, restore, compaction), ``_legacy`` (converting an archive of
botstats 0.1).
"""

import lazy_loader

# The names below are what other stages may use; each module loads when a name of it is.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
