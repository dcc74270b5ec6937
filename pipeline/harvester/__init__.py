"""The harvest stage: the service's directory into the archive, incrementally and exactly once.

:func:`harvest` runs one harvest (``_run``): it snapshots the configured user (``_snapshot``),
pages ``GET /bots`` (``_listing``, paged by the pure state machine in ``_pager``), hands bots
to worker tasks (``_workers``) that read what is new of each bot's ``/stats`` (``_tail``, through
``_paged`` for lists the service pages), validates records into rows (``_records``, with
``_shapes`` saying what records look like), refuses ids that would merge records (``_ids``), and
writes them in batches (``_batch``). ``_verdict`` judges whether the run is complete, and words
the advice for a wrong field; ``_removals`` whether a listing that lost bots is believed;
``_report`` is what a run did. ``_probe`` is ``botstats probe``: what the service does where the
interface does not say.
"""

import lazy_loader

# The names below are what other stages may use; each module loads when a name of it is.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
