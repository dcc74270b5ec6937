"""The API client of the bot-listing service: one async class over httpx.

It owns everything between a method call and a JSON value: the URL, the auth header of each
endpoint kind, the client-side request budget, retries with backoff and ``Retry-After``, and the
translation of every failure into the error tree of :mod:`pipeline.core`::

    async with Client(settings) as c:
        bots = await c.list_bots(limit=100, skip=0)   # the raw JSON array, elements untouched
        print(c.stats)                                 # attempts, retries, 429s, 5xx, waits

Records are returned as the service sent them (unknown fields kept): the interface leaves their
fields open, so interpreting them is the harvester's business. Only the top-level shape the
interface promises (array or object) is checked.

Retries: idempotent GETs on 429 (and a 403 that says its quota is spent, as GitHub answers),
500/502/503/504, transport errors and invalid JSON bodies; POST only when the request provably
never reached the server (connect failure) or on such a refusal. The wait is what the response
tells (``Retry-After``, else the reset of a spent quota) exactly, else exponential backoff
with full jitter. A 429 that tells its wait does not spend one of [retry].attempts: the waits
told to one request are bounded by [retry].max_retry_after in all instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Literal, TypeVar, overload

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_if_result,
    wait_random_exponential,
)

from ..core import (
    ApiError,
    BadResponse,
    MissingCredential,
    Redactor,
    Secret,
    Settings,
    decode_json,
    redact_url,
)
from ._call import Call, ClientStats
from ._concurrency import Gate, adaptive_control
from ._failures import RETRY_STATUSES, Failures, after_attempts, json_kind, reason_of
from ._lists import KINDS, ListPage, ListShape, NotAList, read_list
from ._pacing import Pace
from ._payloads import RawArray, Reply, segment, split_array
from ._ratelimit import NOTHING_SAID, RateLimit, is_rate_limited, read_rate_limit
from ._transport import NEVER_SENT, TRANSIENT, Lanes, env_proxy

log = logging.getLogger("botstats.client")

_T = TypeVar("_T")


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
        self._lanes = Lanes(
            (lambda: transport) if transport is not None else
            (lambda: httpx.AsyncHTTPTransport(verify=tls, limits=one, proxy=proxy)),
            size=svc.max_connections, keep=svc.max_keepalive, wait=svc.timeout,
        )
        # Every attempt waits at the gate for its turn in the pace (the service's rate limit,
        # and [service].request_budget: one request per 1/budget seconds, no burst, a promise to
        # the service) and, with [service].concurrency = "auto", for its place in the adaptive
        # window; a fixed number in flight is kept by the caller's workers.
        self.gate = Gate(adaptive_control(svc.concurrency, svc.max_connections),
                         Pace(budget=svc.request_budget))
        # The service may echo a credential back in an error; never pass it on.
        self._redactor = Redactor([settings.user_token.get(), settings.bot_key.get()], patterns=())
        self._failures = Failures(settings, self.stats, self._redactor)
        self.shapes = {kind: ListShape.of(svc, kind) for kind in KINDS}

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
        path = f"/users/{segment(user_id)}"
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
        """A user's bots, servers or webhooks; with ``limit``, one window (``limit``/``skip``)."""
        path = user_list_path(user_id, what)
        if limit is None:
            page = await self.list_whole("user_lists", path)
        else:
            page = await self.list_window("user_lists", path, skip, limit)
        return page.records

    # --- bot endpoints (no credentials, unless [service].token_on_bot_reads) ----------------
    async def list_bots(self, limit: int | None = None, skip: int = 0) -> list[Any]:
        """The bots of GET /bots at ``[skip, skip + limit)``; ``limit`` defaults to
        [service].page_size.

        The service may return fewer than ``limit`` even when more bots follow: paging must
        not treat a short page as the last one.
        """
        limit = self.settings.service.page_size if limit is None else limit
        if self.shapes["bots"].positional:
            return (await self.list_window("bots", "/bots", skip, limit)).records
        return (await self.list_front("bots", "/bots", limit)).records

    async def bot(self, bot_id: str | int) -> dict[str, Any]:
        path = f"/bots/{segment(bot_id)}"
        return await self._get(path, dict, auth=self._read_auth(path))

    async def bot_stats(self, bot_id: str | int, *, limit: int | None = None,
                        skip: int = 0) -> list[Any]:
        """GET /bots/:bot_id/stats, decoded; with ``limit``, one window (``limit``/``skip``)."""
        path = stats_path(bot_id)
        if limit is None:
            return (await self.list_whole("stats", path)).records
        return (await self.list_window("stats", path, skip, limit)).records

    # --- a list endpoint's answers, as [service] says it pages (ListShape) -------------------
    async def list_whole(self, kind: str, path: str, *, raw: bool = False) -> ListPage:
        """A list asked whole (no paging parameters). ``raw``: the records as their JSON texts
        (a :class:`RawArray`: the harvester decodes a whole page at once) where the body is
        plain JSON, else decoded (NaN, lone surrogates, UTF-16, ... read leniently)."""
        return await self._list(kind, self._request("GET", path, headers=self._auth_of(kind, path)),
                                raw)

    async def list_window(self, kind: str, path: str, skip: int, limit: int, *,
                          raw: bool = False) -> ListPage:
        """The records at ``[skip, skip + limit)`` of a list paged by position (offset, page
        number, Link header): one request, or the two pages that hold a window that does not
        start on a page's start. What the service said is the last page's."""
        shape = self.shapes[kind]
        pages = []
        for query, start in shape.windows(skip, limit):
            request = self._request("GET", path, params=query, headers=self._auth_of(kind, path))
            page = await self._list(kind, request, raw)
            self._check_page_size(shape, request, page, start, limit)
            pages.append((page, start))
            if len(page) < limit:
                break  # the list ends within this page: the next one is past its end
        if len(pages) == 1 and pages[0][1] == skip:
            return pages[0][0]
        records = [r for page, _ in pages for r in page.records]
        cut = records[skip - pages[0][1]:skip - pages[0][1] + limit]
        last = pages[-1][0]
        items: RawArray | list[Any] = cut
        if isinstance(pages[0][0].items, RawArray) and all(
                isinstance(page.items, RawArray) for page, _ in pages):
            items = joined(cut)
        return ListPage(items, last.total, last.next_url, last.last_url, last.cursor,
                        last.has_more)

    async def list_front(self, kind: str, path: str, limit: int, *, after: str | None = None,
                         raw: bool = False) -> ListPage:
        """A page of a list read from the front: the first (``after`` None), or the one after a
        page, named by that page's next URL (families "link", "next") or its cursor
        ("cursor"). A next URL must stay on the service's origin: a credential never follows
        it elsewhere."""
        shape = self.shapes[kind]
        headers = self._auth_of(kind, path)
        if after is None or shape.paging == "cursor":
            request = self._request("GET", path, params=shape.front(limit, after),
                                    headers=headers)
        else:
            request = self._request_url(after, headers)
        return await self._list(kind, request, raw)

    def _request_url(self, url: str, headers: dict[str, str] | None) -> httpx.Request:
        base = httpx.URL(self._base + "/")
        target = base.join(url)
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            raise BadResponse(
                f"the service named a next page on another origin ({redact_url(str(target))}, "
                f"not {base.scheme}://{base.netloc.decode()}): not followed, so that no "
                f"credential leaves the service. Check [service].base_url.")
        return httpx.Request("GET", target, headers={**self._headers, **(headers or {})},
                             extensions=self._extensions)

    def _check_page_size(self, shape: ListShape, request: httpx.Request, page: ListPage,
                         start: int, limit: int) -> None:
        """A page-numbered list whose page came back shorter than asked while the service says
        more follow: page N is then not at (N - 1) x the size asked, and reading on by numbers
        would skip records. Said, never read past."""
        if shape.paging == "offset" or len(page) >= limit or page.more(start) is None:
            return
        setting = "page_size" if shape.kind == "bots" else f"{shape.kind}_page_size"
        raise BadResponse(
            f"GET {redact_url(str(request.url))} answered {len(page)} records where "
            f"{shape.size_param}={limit} was asked, and {page.more(start)}: the service caps "
            f"its pages at {len(page)}. Set [service].{setting} = {len(page)}.",
            method="GET", url=redact_url(str(request.url)))

    async def _list(self, kind: str, request: httpx.Request, raw: bool) -> ListPage:
        hint = self._auth_hint(bool(request.headers.get("Authorization")))
        page: ListPage = await self._call(Call(request, list, idempotent=True, auth_hint=hint,
                                               raw=raw, shape=self.shapes[kind]))
        return page

    def _auth_of(self, kind: str, path: str) -> dict[str, str] | None:
        return self._user_auth(path) if kind == "user_lists" else self._read_auth(path)

    async def bot_last_stat(self, bot_id: str | int) -> dict[str, Any]:
        path = f"/bots/{segment(bot_id)}/stat"
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
            url = self._url(f"/bots/{segment(bot_id)}/stats")
            raise MissingCredential(
                f"POST {url} needs the API key of bot {bot_id}: set BOTSTATS_BOT_KEY or pass "
                f"--bot-key.",
                method="POST",
                url=url,
            )
        self._redactor.add(key)
        request = self._request(
            "POST", f"/bots/{segment(bot_id)}/stats", json=payload, headers={"Authorization": key}
        )
        hint = f"check that BOTSTATS_BOT_KEY / --bot-key is the API key of bot {bot_id}"
        recheck = (f"not resent because the record may have been stored: check with "
                   f"`botstats bots stat {bot_id}` before posting again")
        stored: dict[str, Any] = await self._call(  # _decode refuses a body that is not an object
            Call(request, dict, idempotent=False, auth_hint=hint, recheck=recheck)
        )
        return stored

    # --- any request, its answer as it came (botstats probe) -----------------------------------
    async def fetch(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                    auth: str = "read", payload: Any = None) -> Reply:
        """One request and its answer whatever the status, for looking at what the service does
        (``botstats probe``). A 429 (or a 403 that says its quota is spent) is retried after
        the wait its headers tell (else the backoff); a GET
        answered 500/502/503/504 or cut off in transit is retried as the harvest retries it; up
        to [retry].attempts and never longer than [retry].max_retry_after. A transport failure
        after the last try raises as elsewhere; a status is the answer. ``auth``: "read" (what
        bot reads send), "none", "user" (the user token), "bad" (a token no service issued),
        "bot" (the bot API key)."""
        headers_of: dict[str, Callable[[], dict[str, str]]] = {
            "read": lambda: self._read_auth(path) or {},
            "none": dict,
            "user": lambda: self._user_auth(path),
            "bad": lambda: {"Authorization": "Bearer botstats-probe-not-a-token"},
            "bot": lambda: {"Authorization": self.settings.bot_key.get()},
        }
        headers = headers_of[auth]()
        request = self._request(method, path, params=params, headers=headers or None,
                                json=payload)
        call = Call(request, dict, idempotent=method == "GET", auth_hint="")
        answers: list[httpx.Response] = []
        started = time.monotonic()

        async def attempt(number: int) -> httpx.Response:
            nonlocal started
            call.retryable, call.retry_after = False, None
            self.stats.requests += 1
            started = time.monotonic()
            try:
                response = await self._send(request)
            except httpx.TransportError as exc:
                self.stats.transport_errors += 1
                call.retryable = isinstance(exc, TRANSIENT if call.idempotent else NEVER_SENT)
                raise self._failures.transport_error(call, exc, number) from exc
            answers.append(response)
            status = response.status_code
            if is_rate_limited(status, rate_limit_of(response)):
                self.stats.rate_limited += 1
            elif call.idempotent and status in RETRY_STATUSES:
                self.stats.server_errors += 1
            else:
                return response
            # Retried as the harvest retries it, unless the wait it tells is over the limit.
            call.retry_after = read_rate_limit(response.headers).retry_wait()
            call.retryable = (call.retry_after is None
                              or call.retry_after <= self.settings.retry.max_retry_after)
            return response

        response = await self._retried(call, attempt)
        return Reply(method=method, url=redact_url(str(request.url)), auth=auth,
                     status=response.status_code, headers=dict(response.headers),
                     body=self._failures.body(response),
                     seconds=time.monotonic() - started,
                     limited=tuple(dict(a.headers) for a in answers[:-1]
                                   if is_rate_limited(a.status_code, rate_limit_of(a))))

    # --- plumbing ------------------------------------------------------------------------------
    async def _send(self, request: httpx.Request) -> httpx.Response:
        """One attempt through the gate (its place in the window and the pace) and a lane."""
        gate = self.gate
        sent = await gate.acquire()
        self.stats.throttled_seconds = gate.paced_seconds
        try:
            response = await self._lanes.send(request)
        except BaseException as exc:
            gate.release(sent, timeout=isinstance(exc, httpx.TimeoutException))
            raise
        gate.release(sent, response.status_code, rate_limit_of(response))
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

    # What a read returns follows from what it expects: _decode refuses any other body.
    @overload
    async def _get(self, path: str, expect: type[dict[str, Any]], *,
                   params: dict[str, Any] | None = None,
                   auth: dict[str, str] | None = None) -> dict[str, Any]: ...

    @overload
    async def _get(self, path: str, expect: type[list[Any]], *,
                   params: dict[str, Any] | None = None,
                   auth: dict[str, str] | None = None) -> list[Any]: ...

    @overload
    async def _get(self, path: str, expect: type[list[Any]], *, raw: Literal[True],
                   params: dict[str, Any] | None = None,
                   auth: dict[str, str] | None = None) -> RawArray | list[Any]: ...

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
        return await self._call(Call(request, expect, idempotent=True,
                                     auth_hint=self._auth_hint(bool(auth)), raw=raw))

    @staticmethod
    def _auth_hint(sent: bool) -> str:
        return (
            "check BOTSTATS_USER_TOKEN / --user-token"
            if sent
            else "this read sends no credentials, yet the service wants some: if it wants the "
                 "user token on bot reads, set [service].token_on_bot_reads = true (and "
                 "BOTSTATS_USER_TOKEN); else check --base-url"
        )

    async def _call(self, call: Call) -> Any:
        return await self._retried(call, lambda number: self._attempt(call, number))

    async def _retried(self, call: Call, attempt: Callable[[int], Awaitable[_T]]) -> _T:
        """``attempt(1)``, then again as long as it leaves ``call.retryable`` set (an ApiError
        raised, or an answer returned that asks to be retried: :meth:`fetch`), as [retry]
        allows: the one retry path of the client. When the attempts run out, the last attempt's
        error is raised, or its answer returned."""
        # The usual request pays nothing for the retry machinery (tenacity's per-call setup).
        try:
            first = await attempt(1)
        except ApiError as exc:
            if not call.retryable or (self.settings.retry.attempts <= 1 and not call.told):
                raise
            failed: ApiError | None = exc
        else:
            if not call.retryable or (self.settings.retry.attempts <= 1 and not call.told):
                return first
            failed = None
        number = 0

        async def again() -> _T:
            nonlocal number
            number += 1
            if number > 1:
                return await attempt(number)
            if failed is not None:
                raise failed  # the attempt above: tenacity waits and logs it like any other
            return first

        retrying = AsyncRetrying(
            stop=self._stop(call),
            wait=self._wait(call),
            retry=(retry_if_exception(lambda exc: isinstance(exc, ApiError) and call.retryable)
                   | retry_if_result(lambda _: call.retryable)),
            before_sleep=self._before_sleep(call),
            # Out of attempts: the last error raised again, or the last answer as it came.
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )
        answer: _T = await retrying(again)
        return answer

    def _stop(self, call: Call) -> Callable[[RetryCallState], bool]:
        attempts = self.settings.retry.attempts

        def stop(state: RetryCallState) -> bool:
            # A 429 that told its wait is the service's pace, not a failure: against a token
            # bucket, requests told the same second wake together and some lose again, at
            # times many times in a row while the pace comes down to the service's rate.
            # Their waits are bounded instead ([retry].max_retry_after in all, _failures).
            return state.attempt_number - call.told >= attempts

        return stop

    def _wait(self, call: Call) -> Callable[[RetryCallState], float]:
        retry = self.settings.retry
        backoff = wait_random_exponential(multiplier=retry.backoff_base, max=retry.backoff_max)

        def wait(state: RetryCallState) -> float:
            # The server said when: wait exactly that, no jitter on top (meltano/sdk#1477).
            if call.retry_after is not None:
                return call.retry_after
            return backoff(state)

        return wait

    def _before_sleep(self, call: Call) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            delay = state.next_action.sleep if state.next_action else 0.0
            self.stats.retries += 1
            self.stats.waited_seconds += delay
            outcome = state.outcome
            if outcome is None or outcome.failed:
                reason = reason_of(outcome.exception() if outcome else None)
            else:  # an answer returned to be retried (fetch)
                reason = str(getattr(outcome.result(), "status_code", "?"))
            log.info(
                "%s: %s; retrying in %.2f s (attempt %d; %d of %d spent, told waits aside)",
                call.where, reason, delay, state.attempt_number + 1,
                state.attempt_number - call.told, self.settings.retry.attempts,
            )

        return before_sleep

    async def _attempt(self, call: Call, attempt: int) -> Any:
        call.retryable, call.retry_after = False, None
        self.stats.requests += 1
        try:
            response = await self._send(call.request)
        except httpx.TransportError as exc:
            self.stats.transport_errors += 1
            call.retryable = isinstance(exc, NEVER_SENT if not call.idempotent else TRANSIENT)
            raise self._failures.transport_error(call, exc, attempt) from exc
        if response.is_success:
            return self._decode(call, response, attempt)
        raise self._failures.status_error(call, response, attempt)

    def _decode(self, call: Call, response: httpx.Response, attempt: int) -> Any:
        if call.shape is not None:
            return self._decode_list(call, response, attempt)
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
                f"({exc}){after_attempts(attempt)}: {self._failures.snippet(response)!r}. Check --base-url "
                f"points at the bot-listing service.",
                **self._failures.error_fields(call, response),
            ) from exc
        if not isinstance(data, call.expect):
            self.stats.bad_responses += 1
            want = "an array" if call.expect is list else "an object"
            raise BadResponse(
                f"{call.where} answered a JSON {json_kind(data)} where the interface promises "
                f"{want}: {self._failures.snippet(response)!r}. Check --base-url points at the "
                f"bot-listing service.",
                **self._failures.error_fields(call, response),
            )
        return data


    def _decode_list(self, call: Call, response: httpx.Response, attempt: int) -> ListPage:
        shape = call.shape
        assert shape is not None
        try:
            return read_list(response.content, response.headers, response.links, shape,
                             raw=call.raw)
        except NotAList as exc:
            self.stats.bad_responses += 1
            advice = exc.advice or "check --base-url points at the bot-listing service"
            raise BadResponse(
                f"{call.where} answered {exc.found} where a list was expected"
                f"{after_attempts(attempt)}: {self._failures.snippet(response)!r}. "
                f"{advice[0].upper()}{advice[1:]}.",
                **self._failures.error_fields(call, response),
            ) from None
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            self.stats.bad_responses += 1
            call.retryable = True  # a truncated body may be transient
            raise BadResponse(
                f"{call.where} answered {response.status_code} with a body that is not JSON "
                f"({exc}){after_attempts(attempt)}: {self._failures.snippet(response)!r}. Check "
                f"--base-url points at the bot-listing service.",
                **self._failures.error_fields(call, response),
            ) from exc


def stats_path(bot_id: str | int) -> str:
    return f"/bots/{segment(bot_id)}/stats"


def user_list_path(user_id: str | int, what: str) -> str:
    return f"/users/{segment(user_id)}/{what}"


def joined(texts: list[Any]) -> RawArray:
    """A RawArray of records' JSON texts (a page cut out of others, or pages put together)."""
    body = b"[" + b",".join(bytes(text) for text in texts) + b"]"
    split = split_array(body)
    assert split is not None  # each text was a JSON value of an array that split
    return split


# The names that start every header of a rate limit (lowercased, as httpx gives them).
_RATE_LIMIT_NAMES = ("retry-after", "ratelimit", "x-ratelimit")


def rate_limit_of(response: httpx.Response) -> RateLimit:
    """What ``response``'s headers say about the rate limit; most answers say nothing, and are
    told so by one pass over their header names."""
    if not any(name.startswith(_RATE_LIMIT_NAMES) for name in response.headers.keys()):
        return NOTHING_SAID
    return read_rate_limit(response.headers)
