"""The API client of the bot-listing service: one async class over httpx.

It owns everything between a method call and a JSON value: the URL, the auth header of each
endpoint kind, the client-side request budget, retries with backoff and ``Retry-After``, and the
translation of every failure into :mod:`pipeline.errors`::

    async with Client(settings) as c:
        bots = await c.list_bots(limit=100, skip=0)   # the raw JSON array, elements untouched
        print(c.stats)                                 # attempts, retries, 429s, 5xx, waits

Records are returned as the service sent them (unknown fields kept): the interface leaves their
fields open, so interpreting them is the harvester's business. Only the top-level shape the
interface promises (array or object) is checked.

Retries: idempotent GETs on 429, 500/502/503/504, transport errors and invalid JSON bodies;
POST only when the request provably never reached the server (connect failure) or on 429.
The wait is ``Retry-After`` exactly when the response carries one, else exponential backoff
with full jitter.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import re
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import msgspec
from aiolimiter import AsyncLimiter
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from .concurrency import Gate, adaptive_control
from .config import FieldSettings, Secret, Settings
from .errors import (
    ApiError,
    AuthError,
    BadRequest,
    BadResponse,
    MissingCredential,
    NotFound,
    RateLimited,
    ServerError,
    Unreachable,
)
from .json_codec import decode_json
from .redact import Redactor, redact_url

log = logging.getLogger("botstats.client")

MAX_BODY_BYTES = 1_000_000  # raw body kept on an error (BadResponse.body etc.)
SNIPPET_CHARS = 200  # of the body quoted in a message
RETRY_STATUSES = frozenset({500, 502, 503, 504})
# Failures where the request cannot have reached the server, so even a POST may be resent.
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Failures worth another try for an idempotent request (a bad URL scheme etc. is not).
TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


@dataclass
class ClientStats:
    """Counters of one client, shared by every request it makes.

    ``requests`` counts every HTTP attempt (retries included); ``retries`` the attempts that
    were repeats; ``rate_limited``/``server_errors``/``transport_errors``/``bad_responses`` the
    failed attempts by kind; ``waited_seconds`` the time slept between retries (backoff and
    Retry-After); ``throttled_seconds`` the time spent waiting for the request budget.
    """

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    bad_responses: int = 0
    waited_seconds: float = 0.0
    throttled_seconds: float = 0.0

    def as_dict(self) -> dict[str, int | float]:
        return asdict(self)


@dataclass
class _Call:
    """One logical request and the retry state its attempts hand to tenacity's hooks."""

    request: httpx.Request
    expect: type[list[Any]] | type[dict[str, Any]]
    idempotent: bool
    auth_hint: str  # what to check when the service refuses the credentials
    recheck: str = ""  # for a POST: how to tell whether a failed attempt was stored anyway
    raw: bool = False  # a list answer as a RawArray (elements undecoded) when it is plain JSON
    # Written by each attempt, read by the retry predicate and the wait.
    retryable: bool = False
    retry_after: float | None = None

    @property
    def where(self) -> str:
        return f"{self.request.method} {redact_url(str(self.request.url))}"


class _Lanes:
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
                return await _read_body(response)
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


class _CutBody(httpx.RemoteProtocolError):
    """A compressed body that ends before its end of stream, or does not decompress."""


# zlib window bits per Content-Encoding: gzip, and deflate with its zlib header (or raw).
_WBITS = {"gzip": (zlib.MAX_WBITS | 16,), "deflate": (zlib.MAX_WBITS, -zlib.MAX_WBITS)}


async def _read_body(response: httpx.Response) -> httpx.Response:
    """``response`` with its body read. A gzip or deflate body is decompressed here, not by
    httpx: httpx takes a stream cut short for a shorter body (a truncated page that reads as
    bad JSON, never retried as the transfer failure it is), and a corrupt one raises outside
    its transport errors. Both are :class:`_CutBody` here: a transport error, retried."""
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in _WBITS:
        try:
            await response.aread()
        except httpx.DecodingError as exc:  # an encoding httpx decodes (br, zstd, stacked)
            raise _CutBody(f"the {encoding} body does not decompress: {exc}",
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
    raise _CutBody(f"the {encoding} body {problem}")


class Client:
    """Async client of the bot-listing service; safe to share across concurrent tasks.

    Use it as ``async with Client(settings) as c``. ``transport`` is the test seam of httpx
    (e.g. ``httpx.MockTransport``); by default requests go over the network.
    """

    def __init__(
        self, settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        self.stats = ClientStats()
        svc = settings.service
        timeout = httpx.Timeout(svc.timeout, connect=svc.connect_timeout)
        tls = httpx.create_ssl_context()  # one for all: each costs milliseconds to build
        # What an httpx client would put on every request (its default headers with ours, the
        # timeouts); :meth:`_request` builds them for less CPU than build_request does.
        self._template = template = httpx.AsyncClient(
            base_url=svc.base_url, timeout=timeout, verify=tls, transport=transport,
            headers={"User-Agent": svc.user_agent, "Accept": "application/json"},
        )
        self._base = str(template.base_url).rstrip("/")
        self._headers = dict(template.headers)
        self._extensions = {"timeout": timeout.as_dict()}
        one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        proxy = env_proxy(svc.base_url)
        self._lanes = _Lanes(
            (lambda: transport) if transport is not None else
            (lambda: httpx.AsyncHTTPTransport(verify=tls, limits=one, proxy=proxy)),
            size=svc.max_connections, keep=svc.max_keepalive, wait=svc.timeout,
        )
        # One request per 1/budget seconds, no burst: a budget is a promise to the service.
        budget = svc.request_budget
        self._limiter = AsyncLimiter(1, 1.0 / budget) if budget > 0 else None
        # [service].concurrency = "auto": every attempt waits for its place in the adaptive
        # window and pace (pipeline.concurrency); a fixed number is kept by the caller's workers.
        self.gate = Gate(adaptive_control(svc.concurrency, svc.max_connections))
        # The service may echo a credential back in an error; never pass it on.
        self._redactor = Redactor([settings.user_token.get(), settings.bot_key.get()], patterns=())

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._lanes.aclose()
        await self._template.aclose()

    # --- user endpoints (Bearer user token) --------------------------------------------------
    async def me(self) -> dict[str, Any]:
        return await self._get("/users/@me", dict, auth=self._user_auth("/users/@me"))

    async def user(self, user_id: str | int) -> dict[str, Any]:
        path = f"/users/{_seg(user_id)}"
        return await self._get(path, dict, auth=self._user_auth(path))

    async def user_bots(self, user_id: str | int, *, limit: int | None = None,
                        skip: int = 0) -> list[Any]:
        return await self._user_list(user_id, "bots", limit, skip)

    async def user_servers(self, user_id: str | int, *, limit: int | None = None,
                           skip: int = 0) -> list[Any]:
        return await self._user_list(user_id, "servers", limit, skip)

    async def user_webhooks(self, user_id: str | int, *, limit: int | None = None,
                            skip: int = 0) -> list[Any]:
        return await self._user_list(user_id, "webhooks", limit, skip)

    async def _user_list(self, user_id: str | int, what: str, limit: int | None,
                         skip: int) -> list[Any]:
        """A user's bots, servers or webhooks; with ``limit``, one page (``limit``/``skip``)."""
        path = f"/users/{_seg(user_id)}/{what}"
        return await self._get(path, list, params=_page(limit, skip), auth=self._user_auth(path))

    # --- bot endpoints (no credentials, unless [service].token_on_bot_reads) ----------------
    async def list_bots(self, limit: int | None = None, skip: int = 0) -> list[Any]:
        """One page of GET /bots; ``limit`` defaults to [service].page_size.

        The service may return fewer than ``limit`` even when more bots follow: paging must
        not treat a short page as the last one.
        """
        limit = self.settings.service.page_size if limit is None else limit
        return await self._get("/bots", list, params={"limit": limit, "skip": skip},
                               auth=self._read_auth("/bots"))

    async def bot(self, bot_id: str | int) -> dict[str, Any]:
        path = f"/bots/{_seg(bot_id)}"
        return await self._get(path, dict, auth=self._read_auth(path))

    async def bot_stats(self, bot_id: str | int, *, limit: int | None = None,
                        skip: int = 0) -> list[Any]:
        """GET /bots/:bot_id/stats, decoded; with ``limit``, one page (``limit``/``skip``)."""
        path = f"/bots/{_seg(bot_id)}/stats"
        return await self._get(path, list, params=_page(limit, skip), auth=self._read_auth(path))

    async def bot_stats_raw(self, bot_id: str | int, *, limit: int | None = None,
                            skip: int = 0) -> RawArray | list[Any]:
        """GET /bots/:bot_id/stats as received: a :class:`RawArray` (each record's JSON text,
        not decoded: the harvester decodes a whole page at once), or the decoded list when only
        the lenient decoder reads the body (NaN, lone surrogates, UTF-16, ...). With ``limit``,
        one page of a service that pages the list (``limit``/``skip``, as GET /bots)."""
        path = f"/bots/{_seg(bot_id)}/stats"
        return await self._get(path, list, raw=True, params=_page(limit, skip),
                               auth=self._read_auth(path))

    async def bot_last_stat(self, bot_id: str | int) -> dict[str, Any]:
        path = f"/bots/{_seg(bot_id)}/stat"
        return await self._get(path, dict, auth=self._read_auth(path))

    async def post_stat(
        self, bot_id: str | int, payload: dict[str, Any], bot_key: str | Secret | None = None
    ) -> dict[str, Any]:
        """POST /bots/:bot_id/stats with the bot's own API key, sent as-is.

        Not retried on 5xx or read timeouts: the record may have been stored, and only the
        caller can tell whether posting it again is harmless.
        """
        key = bot_key.get() if isinstance(bot_key, Secret) else bot_key
        key = key or self.settings.bot_key.get()
        if not key:
            url = self._url(f"/bots/{_seg(bot_id)}/stats")
            raise MissingCredential(
                f"POST {url} needs the API key of bot {bot_id}: set BOTSTATS_BOT_KEY or pass "
                f"--bot-key.",
                method="POST",
                url=url,
            )
        self._redactor.add(key)
        request = self._request(
            "POST", f"/bots/{_seg(bot_id)}/stats", json=payload, headers={"Authorization": key}
        )
        hint = f"check that BOTSTATS_BOT_KEY / --bot-key is the API key of bot {bot_id}"
        recheck = (f"not resent because the record may have been stored: check with "
                   f"`botstats bots stat {bot_id}` before posting again")
        return await self._call(
            _Call(request, dict, idempotent=False, auth_hint=hint, recheck=recheck)
        )

    # --- any request, its answer as it came (botstats probe) -----------------------------------
    async def fetch(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                    auth: str = "read", payload: Any = None) -> Reply:
        """One request and its answer whatever the status, for looking at what the service does
        (``botstats probe``): only a 429 is retried, after its Retry-After (else the backoff),
        up to [retry].attempts and never longer than [retry].max_retry_after; transport failures
        raise as elsewhere. ``auth``: "read" (what bot reads send), "none", "user" (the user
        token), "bad" (a token no service issued), "bot" (the bot API key)."""
        headers = {
            "read": lambda: self._read_auth(path) or {},
            "none": dict,
            "user": lambda: self._user_auth(path),
            "bad": lambda: {"Authorization": "Bearer botstats-probe-not-a-token"},
            "bot": lambda: {"Authorization": self.settings.bot_key.get()},
        }[auth]()
        request = self._request(method, path, params=params, headers=headers or None,
                                json=payload)
        call = _Call(request, dict, idempotent=method == "GET", auth_hint="")
        retry = self.settings.retry
        waited: list[dict[str, str]] = []  # the headers of each 429 waited out
        for attempt in range(1, retry.attempts + 1):
            if self._limiter is not None:
                await self._limiter.acquire()
            self.stats.requests += 1
            started = time.monotonic()
            try:
                response = await self._send(request)
            except httpx.TransportError as exc:
                self.stats.transport_errors += 1
                raise self._transport_error(call, exc, attempt) from exc
            if response.status_code != 429:
                break
            self.stats.rate_limited += 1
            wait = parse_retry_after(response.headers.get("Retry-After"))
            wait = min(retry.backoff_max, retry.backoff_base * 2 ** attempt) if wait is None else wait
            if attempt == retry.attempts or wait > retry.max_retry_after:
                break
            self.stats.retries += 1
            self.stats.waited_seconds += wait
            waited.append(dict(response.headers))
            await asyncio.sleep(wait)
        return Reply(method=method, url=redact_url(str(request.url)), auth=auth,
                     status=response.status_code, headers=dict(response.headers),
                     body=self._body(response),
                     seconds=time.monotonic() - started, limited=tuple(waited))

    # --- plumbing ------------------------------------------------------------------------------
    async def _send(self, request: httpx.Request) -> httpx.Response:
        """One attempt through the gate (its place in the window and the pace) and a lane."""
        gate = self.gate
        sent = await gate.acquire()
        try:
            response = await self._lanes.send(request)
        except BaseException as exc:
            gate.release(sent, timeout=isinstance(exc, httpx.TimeoutException))
            raise
        gate.release(sent, response.status_code)
        return response

    def _request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None, json: Any = None) -> httpx.Request:
        """A request to ``path`` under the base URL (``path`` starts with '/')."""
        return httpx.Request(
            method, self._base + path, params=params, json=json,
            headers={**self._headers, **headers} if headers else self._headers,
            extensions=self._extensions)

    def _url(self, path: str) -> str:
        return redact_url(str(self._request("GET", path).url))

    def _read_auth(self, path: str) -> dict[str, str] | None:
        """Credentials of a bot read: none, unless [service].token_on_bot_reads sends the user
        token there too."""
        return self._user_auth(path) if self.settings.service.token_on_bot_reads else None

    def _user_auth(self, path: str) -> dict[str, str]:
        token = self.settings.user_token.get()
        if not token:
            url = self._url(path)
            raise MissingCredential(
                f"GET {url} needs a user token: set BOTSTATS_USER_TOKEN or pass --user-token.",
                method="GET",
                url=url,
            )
        # Tolerate a token pasted with its scheme so the header is never "Bearer Bearer ...".
        if token[:7].lower() == "bearer ":
            token = token[7:]
            self._redactor.add(token)
        return {"Authorization": f"Bearer {token}"}

    async def _get(
        self,
        path: str,
        expect: type[list[Any]] | type[dict[str, Any]],
        *,
        params: dict[str, Any] | None = None,
        auth: dict[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        request = self._request("GET", path, params=params, headers=auth)
        hint = (
            "check BOTSTATS_USER_TOKEN / --user-token"
            if auth
            else "this read sends no credentials, yet the service wants some: if it wants the "
                 "user token on bot reads, set [service].token_on_bot_reads = true (and "
                 "BOTSTATS_USER_TOKEN); else check --base-url"
        )
        return await self._call(_Call(request, expect, idempotent=True, auth_hint=hint, raw=raw))

    async def _call(self, call: _Call) -> Any:
        try:
            # The usual request pays nothing for the retry machinery (tenacity's per-call setup).
            return await self._attempt(call, 1)
        except ApiError as exc:
            if not call.retryable or self.settings.retry.attempts <= 1:
                raise
            first = exc
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.retry.attempts),
            wait=self._wait(call),
            retry=retry_if_exception(lambda exc: isinstance(exc, ApiError) and call.retryable),
            before_sleep=self._before_sleep(call),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                number = attempt.retry_state.attempt_number
                if number == 1:
                    raise first  # the attempt above: tenacity waits and logs it like any other
                return await self._attempt(call, number)
        raise AssertionError("unreachable: tenacity either returns or reraises")

    def _wait(self, call: _Call) -> Callable[[RetryCallState], float]:
        retry = self.settings.retry
        backoff = wait_random_exponential(multiplier=retry.backoff_base, max=retry.backoff_max)

        def wait(state: RetryCallState) -> float:
            # The server said when: wait exactly that, no jitter on top (meltano/sdk#1477).
            if call.retry_after is not None:
                return call.retry_after
            return backoff(state)

        return wait

    def _before_sleep(self, call: _Call) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            delay = state.next_action.sleep if state.next_action else 0.0
            self.stats.retries += 1
            self.stats.waited_seconds += delay
            exc = state.outcome.exception() if state.outcome else None
            log.info(
                "%s: %s; retrying in %.2f s (attempt %d of %d)",
                call.where, _reason(exc), delay, state.attempt_number + 1,
                self.settings.retry.attempts,
            )

        return before_sleep

    async def _attempt(self, call: _Call, attempt: int) -> Any:
        call.retryable, call.retry_after = False, None
        if self._limiter is not None:
            started = time.monotonic()
            await self._limiter.acquire()
            self.stats.throttled_seconds += time.monotonic() - started
        self.stats.requests += 1
        try:
            response = await self._send(call.request)
        except httpx.TransportError as exc:
            self.stats.transport_errors += 1
            call.retryable = isinstance(exc, NEVER_SENT if not call.idempotent else TRANSIENT)
            raise self._transport_error(call, exc, attempt) from exc
        if response.is_success:
            return self._decode(call, response, attempt)
        raise self._status_error(call, response, attempt)

    def _decode(self, call: _Call, response: httpx.Response, attempt: int) -> Any:
        if call.raw and (split := split_array(response.content)) is not None:
            return split
        try:
            data = decode_json(response.content)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            self.stats.bad_responses += 1
            # A truncated body may be transient; a POST was processed, so never resend it.
            call.retryable = call.idempotent
            raise BadResponse(
                f"{call.where} answered {response.status_code} with a body that is not JSON "
                f"({exc}){_after(attempt)}: {self._snippet(response)!r}. Check --base-url "
                f"points at the bot-listing service.",
                **self._error_fields(call, response),
            ) from exc
        if not isinstance(data, call.expect):
            self.stats.bad_responses += 1
            want = "an array" if call.expect is list else "an object"
            raise BadResponse(
                f"{call.where} answered a JSON {_json_kind(data)} where the interface promises "
                f"{want}: {self._snippet(response)!r}. Check --base-url points at the "
                f"bot-listing service.",
                **self._error_fields(call, response),
            )
        return data

    def _status_error(self, call: _Call, response: httpx.Response, attempt: int) -> ApiError:
        status = response.status_code
        said = self._service_said(response)
        head = f"{call.where} answered {status} {response.reason_phrase}{said}"
        fields = self._error_fields(call, response)
        if status in (400, 422):
            return BadRequest(
                f"{head}. The service refused what was sent; fix the request and try again.",
                details=_error_details(response),
                **fields,
            )
        if status in (401, 403):
            return AuthError(f"{head}. Credentials refused: {call.auth_hint}.", **fields)
        if status == 404:
            return NotFound(f"{head}. Check the id, and --base-url.", **fields)
        if 300 <= status < 400:
            where_to = response.headers.get("Location", "?")
            return ApiError(
                f"{head}, a redirect to {redact_url(where_to)}. Point --base-url at the "
                f"service itself.",
                **fields,
            )
        if status == 429:
            self.stats.rate_limited += 1
            return self._retryable_status(
                call, response, attempt, RateLimited, retry=True,
                advice="the service is rate limiting: lower [service].request_budget or "
                "[service].concurrency, or try again later",
            )
        if status >= 500:
            self.stats.server_errors += 1
            if call.idempotent:
                advice = "the service is failing: try again later or raise [retry].attempts"
            else:
                advice = call.recheck
            return self._retryable_status(
                call, response, attempt, ServerError,
                retry=call.idempotent and status in RETRY_STATUSES, advice=advice,
            )
        return ApiError(f"{head}. Unexpected status; check --base-url.", **fields)

    def _retryable_status(
        self,
        call: _Call,
        response: httpx.Response,
        attempt: int,
        cls: type[RateLimited] | type[ServerError],
        *,
        retry: bool,
        advice: str,
    ) -> ApiError:
        status = response.status_code
        head = f"{call.where} answered {status} {response.reason_phrase}"
        said = self._service_said(response)
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        limit = self.settings.retry.max_retry_after
        fields = self._error_fields(call, response)
        extra: dict[str, Any] = {"retry_after": retry_after} if cls is RateLimited else {}
        if retry and retry_after is not None and retry_after > limit:
            # Waiting that long would stall the run; the operator decides instead.
            return cls(
                f"{head}{said} asking to wait {retry_after:g} s (Retry-After), more than "
                f"[retry].max_retry_after = {limit:g} s, so gave up at once{_after(attempt)}; "
                f"{advice}, or raise [retry].max_retry_after.",
                **extra, **fields,
            )
        call.retryable, call.retry_after = retry, retry_after
        return cls(f"{head}{said}{_after(attempt)}; {advice}.", **extra, **fields)

    def _transport_error(self, call: _Call, exc: httpx.TransportError, attempt: int) -> ApiError:
        timeouts = self.settings.service
        if isinstance(exc, httpx.ConnectTimeout):
            what = f"could not connect within {timeouts.connect_timeout:g} s"
            advice = "check the service is up and --base-url, or raise [service].connect_timeout"
        elif isinstance(exc, httpx.PoolTimeout):
            what = f"waited {timeouts.timeout:g} s for a free connection"
            advice = "lower [service].concurrency or raise [service].max_connections"
        elif isinstance(exc, httpx.TimeoutException):
            what = f"got no answer within {timeouts.timeout:g} s"
            advice = "the service is slow: raise [service].timeout or try again later"
        elif isinstance(exc, _CutBody):
            what = "sent a compressed body that is cut short or corrupt"
            advice = ("the service or a proxy in front of it dropped part of the answer: try "
                      "again later")
        elif isinstance(exc, httpx.ConnectError):
            what = "could not connect"
            advice = "check the service is up and --base-url is right"
        elif isinstance(exc, httpx.UnsupportedProtocol):
            what = "has an unsupported URL scheme"
            advice = "use an http:// or https:// --base-url"
        else:
            what = "lost the connection"
            advice = "check the service is up and try again"
        if not call.idempotent and not isinstance(exc, NEVER_SENT):
            advice = call.recheck
        reason = self._redactor.text(str(exc))
        cause = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
        return Unreachable(
            f"{call.where} {what} ({cause}){_after(attempt)}; {advice}.",
            method=call.request.method,
            url=redact_url(str(call.request.url)),
        )

    # --- message helpers ----------------------------------------------------------------------
    def _body(self, response: httpx.Response) -> str:
        raw = response.content[:MAX_BODY_BYTES]
        return self._redactor.text(raw.decode(response.encoding or "utf-8", errors="replace"))

    def _snippet(self, response: httpx.Response) -> str:
        text = " ".join(self._body(response)[: SNIPPET_CHARS * 4].split())
        return text[:SNIPPET_CHARS] + ("..." if len(text) > SNIPPET_CHARS else "")

    def _service_said(self, response: httpx.Response) -> str:
        """': <error> (<details>)' from the JSON error body, else a snippet of the text."""
        try:
            data = response.json()
        except ValueError:
            snippet = self._snippet(response)
            return f": {snippet!r}" if snippet else ""
        if data is None:
            return ""
        if isinstance(data, dict) and "error" in data:
            text = str(data["error"])
            if data.get("details") not in (None, "", [], {}):
                text += f" ({_compact(data['details'])})"
        else:
            text = _compact(data)
        text = self._redactor.text(text)
        return f": {text[:SNIPPET_CHARS * 2]}" if text else ""

    def _error_fields(self, call: _Call, response: httpx.Response) -> dict[str, Any]:
        return {
            "method": call.request.method,
            "url": redact_url(str(call.request.url)),
            "status": response.status_code,
            "body": self._body(response),
        }


# --- pure helpers -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reply:
    """A request and what came back, as :meth:`Client.fetch` saw it (secrets redacted)."""

    method: str
    url: str
    auth: str
    status: int
    headers: dict[str, str]
    body: str
    seconds: float
    limited: tuple[dict[str, str], ...] = ()  # the headers of the 429s waited out before it

    def json(self) -> Any:
        """The body as JSON; None when it is not JSON."""
        try:
            return decode_json(self.body.encode())
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class RawArray:
    """A JSON array as received: the body, and each element's JSON text exactly as sent
    (``msgspec.Raw`` slices of the body, bytes-like)."""

    body: bytes
    items: list[msgspec.Raw]


_RAW_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])


def split_array(body: bytes) -> RawArray | None:
    """The elements of a plain-JSON UTF-8 array body, undecoded; None for any other body (the
    caller then reads it as :func:`decode_json` does, and words the error)."""
    try:
        items = _RAW_ARRAY.decode(body)
        body.decode()  # msgspec skips over strings without checking that they are UTF-8
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return RawArray(body, items)



def custom_value(raw: str) -> int | float | bool | str:
    """A custom field's value typed on a command line: an integer, a finite number, true/false,
    else the text itself."""
    if re.fullmatch(r"[+-]?\d+", raw):
        return int(raw)
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if math.isfinite(number):  # "nan"/"inf" are not JSON numbers: keep them as text
        return number
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw


def parse_custom(pairs: Iterable[str]) -> list[tuple[str, int | float | bool | str]]:
    """``NAME=VALUE`` texts as (name, typed value); ValueError names the one that is not."""
    parsed = []
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME=VALUE, got {pair!r}.")
        parsed.append((name.strip(), custom_value(raw)))
    return parsed


def stat_payload(fields: FieldSettings, counts: Mapping[str, int | None],
                 custom: Iterable[tuple[str, Any]] = ()) -> dict[str, Any]:
    """The body of ``POST /bots/:id/stats``: the counts that are given (None: left out) and the
    custom fields under the configured ``[fields]`` names."""
    payload: dict[str, Any] = {k: v for k, v in counts.items() if v is not None}
    pairs = list(custom)
    if pairs:
        payload["custom"] = [{fields.custom_name: name, fields.custom_value: value}
                             for name, value in pairs]
    return payload


def _page(limit: int | None, skip: int) -> dict[str, int] | None:
    """The query of one page of a list the service pages; none without a ``limit``: a list
    asked whole sends no paging parameters."""
    return None if limit is None else {"limit": limit, "skip": skip}


def _seg(value: str | int) -> str:
    """A path parameter as one URL segment (a '/' in an id must not change the route)."""
    return quote(str(value), safe="@")


def _after(attempt: int) -> str:
    return f" after {attempt} attempts" if attempt > 1 else ""


def _json_kind(data: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(data), "number" if isinstance(data, int | float) else "null"
    )


def _compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def _error_details(response: httpx.Response) -> Any:
    try:
        data = response.json()
    except ValueError:
        return None
    return data.get("details") if isinstance(data, dict) else None


def _reason(exc: BaseException | None) -> str:
    if isinstance(exc, ApiError) and exc.status is not None:
        return f"{exc.status}"
    if exc is not None and exc.__cause__ is not None:
        return type(exc.__cause__).__name__
    return type(exc).__name__ if exc else "?"


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if absent
    or unreadable, so the caller falls back to its own backoff."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # HTTP-dates are GMT; be lenient with ones that omit it
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


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
        bypass = not proxies or urllib.request.proxy_bypass_environment(host, proxies)
    proxy = None if bypass else proxies.get(urlsplit(url).scheme) or proxies.get("all")
    # "proxy:3128" means an HTTP proxy, as curl and httpx read it.
    return proxy if proxy is None or "://" in proxy else f"http://{proxy}"


__all__ = ["Client", "ClientStats", "RawArray", "Reply", "custom_value", "parse_custom",
           "parse_retry_after", "redact_url", "split_array", "stat_payload"]
