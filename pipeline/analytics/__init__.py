"""The analytics stage: polars jobs over the archive, their parquet exports, and what reads them.

Four folders, in the order the data flows (each imports only those before it):

- ``exports/``: the datasets (``_datasets``: their names, keys and order; reading one back) and
  the files they live in (``_exports``: month partitions written a batch at a time, the manifest);
- ``build/``: :func:`build_trends` (``_build``) plans a run (``_plan``: full, incremental from a
  Monday, or nothing new), reads the archive a slice of whole bots at a time (``_slices``), runs
  the jobs on each slice (``_jobs``, ``_anomalies``, ``_forecast``) and writes the datasets;
  ``_window`` is what an incremental run carries in from the previous export;
- ``read/``: ``botstats sql`` and the notebooks' helpers (``_explore``), ``botstats compare``
  and the forecasts' reach and curve (``_compare``);
- ``report/``: the HTML report (``_report``, its ``_sections`` and ``_charts``).

=================  ==========================================================================
bot_daily          per bot and day: last users/guilds/shards, mean and p95 load, commands run
bot_growth         per bot and day: 1/7/30-day change and percent, 7-day means, 30-day CDGR
bot_ranks          per bot and day: rank by guilds and users, rank change over 1 and 7 days
movers             per day: top gainers/losers over 7 and 30 days, absolute and percent
anomalies          bot-days whose daily delta has a robust z-score above the threshold
resource_health    per bot and week: p95 load and days above the health threshold
custom_daily       per bot, day and custom field: numeric stats, or the text value and changes
directory_daily    per day: totals, bots reporting, bots first seen, first reporting, removed
bot_forecast       per bot, metric and horizon: forecast and 80% interval
=================  ==========================================================================
"""

import lazy_loader

# The names below are what other stages may use; each module loads when a name of it is.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
