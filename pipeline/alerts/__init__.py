"""The alerts stage: telling people, where they already are, what happened, once per thing.

After a run's own work is committed, ``_notify`` reads what the alerts are decided from
(``_facts``: the archive's runs, the lock's holder, the exports' events and forecasts) and what
was told before (``_ledger``: the archive's ``alerts`` table, and the spool of runs the lock
kept out), lets ``_decide`` (pure) choose what each destination is told, words it (``_alert``),
lays it out for Discord, Slack, a JSON webhook or mail within their limits (``_messages``),
sends it with retries in a time budget (``_send``), and records each answer in the ledger.
Nothing it does changes a run's status or exit code.
"""

import lazy_loader

# The names below are what other stages may use; each module loads when a name of it is.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
