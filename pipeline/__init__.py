"""botstats: archive a bot-listing service's statistics into a DuckLake and compute trends.

The public API, for notebooks and scripts (everything else is private by name)::

    import pipeline

    settings = pipeline.load_settings("config.toml")      # or pipeline.notebook_settings()
    report = pipeline.harvest(settings)                   # one harvest; report.status
    trends = pipeline.build_trends(settings)              # the parquet exports
    growth = pipeline.load_dataset(settings, "bot_growth")
    top = pipeline.query(settings, "SELECT * FROM trend_movers LIMIT 10")

Data flows one way: service <- interface <- harvester -> archive -> analytics; ``operate`` runs
them on a schedule and ``cli`` is the ``botstats`` command. Names load when first used.
"""

import lazy_loader

import pipeline._allocator  # noqa: F401  (sets polars' allocator before anything loads polars)

__version__ = "0.2.0"

__getattr__, __dir__, _names = lazy_loader.attach_stub(__name__, __file__)
__all__ = [*_names, "__version__"]
