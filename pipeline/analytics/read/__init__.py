"""Reading the exports (and the archive) back: ``botstats sql`` and the notebooks' helpers
(``_explore``), ``botstats compare`` with the forecasts' reach and curve (``_compare``)."""
