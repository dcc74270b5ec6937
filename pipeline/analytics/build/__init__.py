"""The trends build: ``build_trends`` (``_build``) plans a run (``_plan``: full, incremental from
a Monday, or nothing new), reads the archive a slice of whole bots at a time (``_slices``, with
``_keyed`` and ``_frames``), runs the jobs on each slice (``_jobs``, ``_anomalies``,
``_forecast``) and hands the datasets to the exports; ``_window`` is what an incremental run
carries in from the previous export."""
