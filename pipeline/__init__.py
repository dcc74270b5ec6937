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

Importing it changes nothing of the host process: the allocator settings botstats runs with
are made by the processes it starts itself (``pipeline.tune_allocators``).
"""

import lazy_loader

__version__ = "0.2.0"

__getattr__, __dir__, _names = lazy_loader.attach_stub(__name__, __file__)
__all__ = [*_names, "__version__"]
