"""The interface stage: speaking to the bot-listing service over HTTP.

:class:`Client` is the one way in: each endpoint of the interface as an async method, auth per
endpoint kind, retries with backoff and the service's own waits, the request budget, and every
failure worded as an error of :mod:`pipeline.core`. Records come back as the service sent them;
interpreting them is the harvest's business.

Modules: ``_client`` (endpoints and retries), ``_call`` (a call's retry state and the counters),
``_transport`` (connections, bodies, proxies), ``_failures`` (errors worded), ``_payloads``
(bodies: arrays split undecoded, replies, the stat payload), ``_ratelimit`` (what an answer's
rate-limit headers say), ``_pacing`` (requests a second, steered by them), ``_concurrency``
(the gate every request crosses: the pace, and how many requests to keep in flight when
``[service].concurrency = "auto"``).
"""

import lazy_loader

# The names below are what other stages may use; each module loads when a name of it is.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
