"""Getting a request to the service and its whole body back: one-connection lanes, bodies decompressed here so a cut one is a transport error, and the proxy the environment names."""

from __future__ import annotations

import asyncio
import urllib.request
import zlib
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

# Failures where the request cannot have reached the server, so even a POST may be resent.
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


# Failures worth another try for an idempotent request (a bad URL scheme etc. is not).
TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


class Lanes:
    """Transports of one connection each, every one carrying one request at a time.

    One shared httpx pool re-checks the socket of every idle connection, in Python, whenever a
    request starts or ends (httpcore's ``has_expired``, through anyio), a cost that grows with
    the requests in flight. A one-connection transport checks only its own. Requests go to the
    transport itself, not through ``AsyncClient.send``: its auth, redirect and cookie layers
    (none of which this client uses) cost CPU on every request. Figures: bench/README.md.
    ``size``, ``keep`` and ``wait`` mean what httpx's max_connections, max_keepalive_connections
    and pool timeout mean.
    """

    def __init__(self, make: Callable[[], httpx.AsyncBaseTransport], *, size: int, keep: int,
                 wait: float) -> None:
        self._make = make
        self._keep = keep
        self._wait = wait
        self._slots = asyncio.Semaphore(size)
        self._idle: list[httpx.AsyncBaseTransport] = []  # a stack: the warmest goes first

    async def send(self, request: httpx.Request) -> httpx.Response:
        """The response to ``request``, its body read."""
        try:
            async with asyncio.timeout(self._wait):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no free connection", request=request) from None
        lane = self._idle.pop() if self._idle else self._make()
        try:
            response = await lane.handle_async_request(request)
            response.request = request
            try:
                return await read_body(response)
            finally:
                await response.aclose()
        finally:
            self._slots.release()
            if len(self._idle) < self._keep:
                self._idle.append(lane)
            else:
                await lane.aclose()

    async def aclose(self) -> None:
        lanes, self._idle = self._idle, []
        for lane in lanes:
            await lane.aclose()


class CutBody(httpx.RemoteProtocolError):
    """A compressed body that ends before its end of stream, or does not decompress."""


# zlib window bits per Content-Encoding: gzip, and deflate with its zlib header (or raw).
_WBITS = {"gzip": (zlib.MAX_WBITS | 16,), "deflate": (zlib.MAX_WBITS, -zlib.MAX_WBITS)}


async def read_body(response: httpx.Response) -> httpx.Response:
    """``response`` with its body read. A gzip or deflate body is decompressed here, not by
    httpx: httpx takes a stream cut short for a shorter body (a truncated page that reads as
    bad JSON, never retried as the transfer failure it is), and a corrupt one raises outside
    its transport errors. Both are :class:`CutBody` here: a transport error, retried."""
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in _WBITS:
        try:
            await response.aread()
        except httpx.DecodingError as exc:  # an encoding httpx decodes (br, zstd, stacked)
            raise CutBody(f"the {encoding} body does not decompress: {exc}",
                          request=response.request) from exc
        return response
    raw = b"".join([part async for part in response.aiter_raw()])
    headers = [(k, v) for k, v in response.headers.multi_items()
               if k.lower() not in ("content-encoding", "content-length")]
    return httpx.Response(response.status_code, headers=headers, content=_inflate(raw, encoding),
                          request=response.request, extensions=response.extensions)


def _inflate(raw: bytes, encoding: str) -> bytes:
    problem = "is empty"
    for wbits in _WBITS[encoding] if raw else ():
        inflater = zlib.decompressobj(wbits)
        try:
            body = inflater.decompress(raw) + inflater.flush()
        except zlib.error as exc:
            problem = f"does not decompress ({exc})"
            continue
        if inflater.eof:
            return body
        problem = f"ends before its end of stream ({len(raw)} bytes received)"
    raise CutBody(f"the {encoding} body {problem}")


def env_proxy(url: str, env: dict[str, str] | None = None) -> str | None:
    """The proxy that ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` name for ``url``, unless
    ``NO_PROXY`` exempts its host; None for a direct connection. What httpx reads too: the
    environment, and on macOS and Windows the system's proxy settings (``urllib``'s
    ``getproxies``). ``env`` replaces the environment (tests)."""
    host = urlsplit(url).hostname or ""
    if env is None:
        proxies = urllib.request.getproxies()
        bypass = not proxies or urllib.request.proxy_bypass(host)
    else:
        proxies = {k.lower()[:-6]: v for k, v in env.items()
                   if k.lower().endswith("_proxy") and v}
        # Undocumented (so absent from typeshed) but in urllib since Python 2: NO_PROXY's rules.
        bypass = not proxies or urllib.request.proxy_bypass_environment(  # type: ignore[attr-defined]
            host, proxies)
    proxy = None if bypass else proxies.get(urlsplit(url).scheme) or proxies.get("all")
    # "proxy:3128" means an HTTP proxy, as curl and httpx read it.
    return proxy if proxy is None or "://" in proxy else f"http://{proxy}"
