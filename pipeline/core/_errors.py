"""The one error tree of botstats.

    BotstatsError                 every error botstats raises on purpose
    ├── ConfigError               bad config file, environment or flag (exit 2)
    ├── ApiError                  the service answered badly or could not be reached (exit 1)
    │   ├── AuthError             401/403: missing, wrong or foreign token/key
    │   │   └── MissingCredential no token/key configured; raised before any request (exit 2)
    │   ├── NotFound              404
    │   ├── BadRequest            400: the service refused the payload
    │   ├── RateLimited           429 still returned after every retry
    │   ├── ServerError           5xx still returned after every retry
    │   ├── Unreachable           connect/read failures after every retry
    │   └── BadResponse           2xx whose body is not the JSON shape the interface promises
    │       ├── SkipIgnored       a paged list returns its first page whatever `skip` says
    │       └── ListingUnstable   a paged list kept changing for longer than the request bound
    ├── StoreError                the DuckDB archive cannot be opened, locked or written
    │   ├── LockTimeout           another run holds the run lock
    │   └── QueryError            a `botstats sql` query failed to parse, bind or run (exit 2)
    ├── ExportError               trends/exports could not be written
    └── IdsNotUnique              a field taken as an id repeats over different records

Foreign errors (httpx, duckdb, polars, OS) are translated where they enter, with ``from exc``.
Every message says what went wrong, where (URL, key, file) and what to do next.
"""

from __future__ import annotations

from typing import Any


class BotstatsError(Exception):
    """Root of every error botstats raises on purpose; the CLI prints these without traceback."""

    exit_code: int = 1


class ConfigError(BotstatsError):
    """A config file, environment variable or flag is wrong."""

    exit_code = 2


class ApiError(BotstatsError):
    """The service answered with an error, an unusable body, or not at all."""

    def __init__(
        self,
        message: str,
        *,
        method: str = "",
        url: str = "",
        status: int | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.method = method
        self.url = url
        self.status = status
        # Raw body (truncated, secrets redacted) so a harvest can keep it in `rejects`.
        self.body = body


class AuthError(ApiError):
    """401 or 403."""


class MissingCredential(AuthError):
    """No user token / bot key is configured: a config mistake, caught before any request."""

    exit_code = 2


class NotFound(ApiError):
    """404."""


class BadRequest(ApiError):
    """400: the service rejected what we sent."""

    def __init__(self, message: str, *, details: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.details = details


class RateLimited(ApiError):
    """429 after every retry."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx after every retry."""


class Unreachable(ApiError):
    """Connection refused, timed out or reset after every retry."""


class BadResponse(ApiError):
    """A 2xx answer whose body is not valid JSON or not the shape the interface promises."""


class SkipIgnored(BadResponse):
    """A paged list returns its first page whatever `skip` says: it cannot be paged."""


class ListingUnstable(BadResponse):
    """A paged list kept changing for longer than the request bound."""


class StoreError(BotstatsError):
    """The DuckDB archive cannot be opened, migrated or written."""


class LockTimeout(StoreError):
    """Another run holds the run lock for longer than we were willing to wait."""

    exit_code = 75  # EX_TEMPFAIL: cron may try again later


class QueryError(StoreError):
    """A query given to `botstats sql` failed to parse, bind or run (exit 2: fix the query)."""

    exit_code = 2


class ExportError(BotstatsError):
    """Trend datasets or parquet exports could not be written."""


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """An exception's first line of text, for a message of ours that quotes it: foreign errors
    (DuckDB, polars, libpq) follow theirs with context lines, a query plan or a hint. Blank
    lines around it are dropped; an exception with no text gives its class's name. ``limit``
    cuts it to that many characters (a line kept per failed read, say)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if limit is None else line[:limit]


class IdsNotUnique(BotstatsError):
    """The field a setting takes as records' id repeats over records that differ: keyed by it,
    two records of the service would become one row, so nothing is written."""
