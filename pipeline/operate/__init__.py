"""Operating botstats: runs under a lock, on a schedule, deployed, watched.

``_runner`` (``run``: harvest then trends then the report; each step on its own too, as
``botstats harvest``/``trends`` and the scheduler's jobs, all under the run lock),
``_maintenance`` (the archive's upkeep jobs under the same lock), ``_process`` (`botstats run`
re-executing itself for the trends), ``_memory`` (a process's peak RSS), ``_lock`` (the run
lock: its scopes, the file lock, a PostgreSQL catalog's advisory locks), ``_signals`` (stopping
on SIGTERM after the current batch), ``_schedule`` (the APScheduler daemon), ``_deploy`` (the
crontab line and systemd units), ``_status`` (``botstats status``), ``_logs`` (logging with
secrets redacted), ``_demo`` (``botstats demo`` against the embedded service).
"""

import lazy_loader

# The names below are what other stages may use; each module loads when a name of it is.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
