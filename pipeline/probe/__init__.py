"""The probe stage: ``botstats probe``, what a service does where the interface says "not shown".

``_probe`` makes the requests (a bounded, polite budget) and gathers what ``_reading`` reads
from the replies (pure: the listing's paging and cap, record shapes, ``/stats`` paging and
order, rate-limit headers); ``_accepts`` checks that a harvest with the proposed settings reads
the records the probe saw; ``_report`` is what was found and proposed, and ``_writing`` merges
the decided proposals into a config file.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
