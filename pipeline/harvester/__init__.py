"""The harvest stage: the service's directory into the archive, incrementally and exactly once.

:func:`harvest` runs one harvest (``_run``; its parts share a ``_context.Run``): it snapshots
the configured user (``_snapshot``), pages ``GET /bots`` (``_listing``), hands bots to worker
tasks (``_workers``) that read what is new of each bot's ``/stats`` (``_tail``). Every list the service pages is paged by the state
machines of ``_paging``; records are validated into rows (``_records``, with ``_shapes`` saying
what records look like), ids that would merge records are refused (``_ids``), and rows are
written in batches (``_batch``). ``_verdict`` judges whether the run is complete, and words the
advice for a wrong field; ``_removals`` whether a listing that lost bots is believed;
``_report`` is what a run did. The probe (``botstats probe``) is a stage of its own,
:mod:`pipeline.probe`, that reads records with the rules named here.
"""

import lazy_loader

# The names below are what other stages may use; each module loads when a name of it is.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
