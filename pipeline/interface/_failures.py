"""Failures worded as errors of ours: each HTTP status and transport failure becomes an error of
:mod:`pipeline.core` that says what was asked, what came back (secrets redacted) and what to do;
and the wait a Retry-After asks for."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import httpx

from ..core import (
    ApiError,
    AuthError,
    BadRequest,
    NotFound,
    RateLimited,
    Redactor,
    ServerError,
    Settings,
    Unreachable,
    redact_url,
)
from ._call import Call, ClientStats
from ._ratelimit import is_rate_limited, read_rate_limit
from ._transport import NEVER_SENT, CutBody

MAX_BODY_BYTES = 1_000_000  # raw body kept on an error (BadResponse.body etc.)


SNIPPET_CHARS = 200  # of the body quoted in a message


RETRY_STATUSES = frozenset({500, 502, 503, 504})


def after_attempts(attempt: int) -> str:
    return f" after {attempt} attempts" if attempt > 1 else ""


def json_kind(data: Any) -> str:
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


def reason_of(exc: BaseException | None) -> str:
    if isinstance(exc, ApiError) and exc.status is not None:
        return f"{exc.status}"
    if exc is not None and exc.__cause__ is not None:
        return type(exc.__cause__).__name__
    return type(exc).__name__ if exc else "?"


class Verdict(NamedTuple):
    """What a status that may pass in time means: the error it is, whether the call is tried
    again, and what to do if it never passes."""

    error: type[RateLimited] | type[ServerError]
    retry: bool
    advice: str


class Failures:
    """Words a failed attempt as an error of ours: what was asked, what came back (secrets
    redacted), and what to do. Counts each failure in the client's stats."""

    def __init__(self, settings: Settings, stats: ClientStats, redactor: Redactor) -> None:
        self._settings = settings
        self._stats = stats
        self._redactor = redactor

    def status_error(self, call: Call, response: httpx.Response, attempt: int) -> ApiError:
        status = response.status_code
        said = self.service_said(response)
        head = f"{call.where} answered {status} {response.reason_phrase}{said}"
        fields = self.error_fields(call, response)
        if status in (400, 422):
            return BadRequest(
                f"{head}. The service refused what was sent; fix the request and try again.",
                details=_error_details(response),
                **fields,
            )
        if is_rate_limited(status, read_rate_limit(response.headers)):
            # A 429, or a 403 that says the quota is spent (GitHub's): not the credentials.
            self._stats.rate_limited += 1
            return self.retryable_status(call, response, attempt, Verdict(
                RateLimited, retry=True,
                advice="the service is rate limiting: lower [service].request_budget or "
                "[service].concurrency, or try again later",
            ))
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
        if status >= 500:
            self._stats.server_errors += 1
            if call.idempotent:
                advice = "the service is failing: try again later or raise [retry].attempts"
            else:
                advice = call.recheck
            return self.retryable_status(call, response, attempt, Verdict(
                ServerError, retry=call.idempotent and status in RETRY_STATUSES, advice=advice,
            ))
        return ApiError(f"{head}. Unexpected status; check --base-url.", **fields)

    def retryable_status(self, call: Call, response: httpx.Response, attempt: int,
                         verdict: Verdict) -> ApiError:
        cls, retry, advice = verdict
        status = response.status_code
        head = f"{call.where} answered {status} {response.reason_phrase}"
        said = self.service_said(response)
        told = read_rate_limit(response.headers)
        retry_after = told.retry_wait()
        limit = self._settings.retry.max_retry_after
        fields = self.error_fields(call, response)
        extra: dict[str, Any] = {"retry_after": retry_after} if cls is RateLimited else {}
        if retry and retry_after is not None and retry_after > limit:
            # Waiting that long would stall the run; the operator decides instead.
            return cls(
                f"{head}{said} asking to wait {retry_after:g} s ({told.told_by}), more than "
                f"[retry].max_retry_after = {limit:g} s, so gave up at once{after_attempts(attempt)}; "
                f"{advice}, or raise [retry].max_retry_after.",
                **extra, **fields,
            )
        if retry and cls is RateLimited and retry_after:
            if call.told_seconds + retry_after > limit:
                return cls(
                    f"{head}{said} asking to wait {retry_after:g} s ({told.told_by}) after "
                    f"{call.told_seconds:g} s of waits it told already, more than "
                    f"[retry].max_retry_after = {limit:g} s in all, so gave up"
                    f"{after_attempts(attempt)}; {advice}, or raise [retry].max_retry_after.",
                    **extra, **fields,
                )
            call.told += 1
            call.told_seconds += retry_after
        call.retryable, call.retry_after = retry, retry_after
        return cls(f"{head}{said}{after_attempts(attempt)}; {advice}.", **extra, **fields)

    def transport_error(self, call: Call, exc: httpx.TransportError, attempt: int) -> ApiError:
        timeouts = self._settings.service
        if isinstance(exc, httpx.ConnectTimeout):
            what = f"could not connect within {timeouts.connect_timeout:g} s"
            advice = "check the service is up and --base-url, or raise [service].connect_timeout"
        elif isinstance(exc, httpx.PoolTimeout):
            what = f"waited {timeouts.timeout:g} s for a free connection"
            advice = "lower [service].concurrency or raise [service].max_connections"
        elif isinstance(exc, httpx.TimeoutException):
            what = f"got no answer within {timeouts.timeout:g} s"
            advice = "the service is slow: raise [service].timeout or try again later"
        elif isinstance(exc, CutBody):
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
            f"{call.where} {what} ({cause}){after_attempts(attempt)}; {advice}.",
            method=call.request.method,
            url=redact_url(str(call.request.url)),
        )

    def body(self, response: httpx.Response) -> str:
        raw = response.content[:MAX_BODY_BYTES]
        return self._redactor.text(raw.decode(response.encoding or "utf-8", errors="replace"))

    def snippet(self, response: httpx.Response) -> str:
        text = " ".join(self.body(response)[: SNIPPET_CHARS * 4].split())
        return text[:SNIPPET_CHARS] + ("..." if len(text) > SNIPPET_CHARS else "")

    def service_said(self, response: httpx.Response) -> str:
        """': <error> (<details>)' from the JSON error body, else a snippet of the text."""
        try:
            data = response.json()
        except ValueError:
            snippet = self.snippet(response)
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

    def error_fields(self, call: Call, response: httpx.Response) -> dict[str, Any]:
        return {
            "method": call.request.method,
            "url": redact_url(str(call.request.url)),
            "status": response.status_code,
            "body": self.body(response),
        }
