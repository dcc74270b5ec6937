"""How a list is asked for in parts and answered: the paging families, the list envelope, the
total header and the cap (``ServiceConfig.paging``, ``list_envelope``, ``total_header``,
``over_cap``).

The interface shows ``limit``/``skip`` on GET /bots and leaves the other lists' paging open;
real services fill it with a few well-known conventions, and the service plays each on every
list endpoint that pages (GET /bots; ``/stats`` and the user lists when their page size is set):

- ``skip``: ``?limit=N&skip=K`` (the interface's);
- ``offset``: ``?limit=N&offset=K``;
- ``page``: ``?page=P&per_page=N``, P from 1;
- ``link``: the same, and an RFC 8288 ``Link`` header naming the next, last, previous and
  first pages, as absolute URLs that keep the request's other parameters (GitHub's);
- ``next-url``: ``?limit=N``, then the URL the answer's ``"next"`` holds (with an opaque
  ``after``), ``null`` on the last page;
- ``cursor``: ``?limit=N&cursor=C``, C the answer's ``"next_cursor"`` (``null`` on the last
  page, beside ``"has_more"``).

A family reads only its own parameters; the others' are ignored, as a service ignores what it
does not know (``skip`` asked of a ``page`` service gives the first page again). A page size
above the cap is capped, or refused with a 400 that names the cap (``over_cap``). The tokens of
the last two families are opaque to clients but deterministic (:func:`token`), so a test can
name them.

With ``list_envelope`` a list is answered as an object holding it under that key, beside
``"total"`` (the whole list's length), ``"count"`` (this answer's) and, for a page, its
family's keys: ``"limit"`` and ``"offset"`` (skip, offset), ``"page"`` and ``"per_page"`` (page,
link), ``"next"`` (next-url), ``"next_cursor"`` and ``"has_more"`` (cursor). ``total_header``
adds ``X-Total-Count`` to every list answer.

An endpoint asks :func:`window` what part of its list a request wants (or the 400 it gets), and
hands :func:`answer` that part, encoded, with the whole list's length.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import Response

from ._config import ServiceConfig
from ._endpoint import _query_int, error
from ._json import JSONResponse, dumps

PAGE_FAMILIES = ("page", "link")
FIRST_PAGE = 1
# The parameter each token family reads its token from.
TOKEN_PARAMS = {"next-url": "after", "cursor": "cursor"}


@dataclass(frozen=True)
class Window:
    """The part of a list a request asks for: ``limit`` items from position ``skip``."""

    skip: int
    limit: int


@dataclass(frozen=True, slots=True)
class Items:
    """A JSON array as it is sent: its encoded bytes, and how many items it holds."""

    array: bytes
    count: int

    @classmethod
    def of(cls, values: list[Any]) -> Items:
        return cls(dumps(values), len(values))

    @classmethod
    def joined(cls, encoded: list[bytes]) -> Items:
        """Items encoded one by one, as one array."""
        return cls(b"[" + b",".join(encoded) + b"]", len(encoded))


def token(position: int) -> str:
    """The opaque token of a list position (a cursor, a next URL's ``after``): the position's
    digits in unpadded base64url (0 -> ``MA``, 20 -> ``MjA``)."""
    return base64.urlsafe_b64encode(str(position).encode()).decode().rstrip("=")


def position_of(text: str) -> int | None:
    """The position a token of :func:`token` names; None for anything it did not make."""
    try:
        digits = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        return None
    if not digits.isdigit() or len(digits) > 18 or token(int(digits)) != text:
        return None
    return int(digits)


def tells_total(config: ServiceConfig) -> bool:
    """Whether a page's answer says anything that needs the whole list's length (a total, a
    last page, whether more follow); without it a page is its items alone."""
    return bool(config.list_envelope) or config.total_header or config.paging == "link"


def window(request: Request, config: ServiceConfig, default: int, cap: int) -> Window | Response:
    """The part of its list ``request`` asks for in the service's family, or the 400 for a bad
    ask; ``default``: the page size when none is asked, ``cap``: the largest one served."""
    family = config.paging
    size = _page_size(request, "per_page" if family in PAGE_FAMILIES else "limit", default, cap,
                      config.over_cap)
    if isinstance(size, Response):
        return size
    if family in PAGE_FAMILIES:
        page = _query_int(request, "page", FIRST_PAGE)
        if isinstance(page, Response):
            return page
        if page < FIRST_PAGE:
            return error(400, f"query parameter 'page' must be at least {FIRST_PAGE}",
                         {"page": page})
        if size < 1:
            return error(400, "query parameter 'per_page' must be at least 1", {"per_page": size})
        return Window((page - FIRST_PAGE) * size, size)
    if family in ("skip", "offset"):
        skip = _query_int(request, family, 0)
        return skip if isinstance(skip, Response) else Window(skip, size)
    name = TOKEN_PARAMS[family]
    given = request.query_params.get(name)
    if given is None:
        return Window(0, size)
    position = position_of(given)
    if position is None:
        return error(400, f"query parameter {name!r} is not one this service gave", {name: given})
    return Window(position, size)


def _page_size(request: Request, name: str, default: int, cap: int,
               over_cap: str) -> int | Response:
    if request.query_params.get(name) is None:
        return min(default, cap)
    asked = _query_int(request, name, default)
    if isinstance(asked, Response) or asked <= cap:
        return asked
    if over_cap == "400":
        return error(400, f"{name} must be at most {cap}", {name: asked, "max": cap})
    # Capped silently: a client must not read a short page as the last one.
    return cap


def answer(request: Request, config: ServiceConfig, items: Items, total: int,
           part: Window | None = None) -> Response:
    """The answer of a list endpoint: ``items`` are the ``part`` of a list of ``total`` items
    that a request asked for (None: the whole list)."""
    keys: dict[str, Any] = {}
    headers = total_headers(config, total)
    if part is not None:
        following = part.skip + items.count
        more = following < total
        keys = _family_keys(request.url, config.paging, part, following if more else None)
        if config.paging == "link":
            headers["Link"] = _links(request.url, part, total, more)
    return Response(body(config, items, total, keys), media_type=JSONResponse.media_type,
                    headers=headers)


def body(config: ServiceConfig, items: Items, total: int,
         keys: dict[str, Any] | None = None) -> bytes:
    """A list answer's body: the array of ``items`` itself, or with ``list_envelope`` the object
    holding it beside the total, the count and ``keys`` (a page's family keys)."""
    if not config.list_envelope:
        return items.array
    rest = dumps({"total": total, "count": items.count, **(keys or {})})
    return b"{" + dumps(config.list_envelope) + b":" + items.array + b"," + rest[1:]


def total_headers(config: ServiceConfig, total: int) -> dict[str, str]:
    """The headers every list answer carries: ``X-Total-Count`` with ``total_header``."""
    return {"X-Total-Count": str(total)} if config.total_header else {}


def _family_keys(url: URL, family: str, part: Window, following: int | None) -> dict[str, Any]:
    """The keys of ``family`` for a page; ``following``: the position of the next page, None
    when this one is the last."""
    if family in ("skip", "offset"):
        return {"limit": part.limit, "offset": part.skip}
    if family in PAGE_FAMILIES:
        return {"page": part.skip // part.limit + FIRST_PAGE, "per_page": part.limit}
    after = None if following is None else token(following)
    if family == "next-url":
        return {"next": None if after is None else str(url.include_query_params(after=after))}
    return {"next_cursor": after, "has_more": after is not None}


def _links(url: URL, part: Window, total: int, more: bool) -> str:
    """The ``Link`` header of a page (RFC 8288): next (unless it is the last page), last, prev
    (unless it is the first) and first."""
    page = part.skip // part.limit + FIRST_PAGE
    last = max(FIRST_PAGE, -(-total // part.limit) - 1 + FIRST_PAGE)
    rels = [("next", page + 1)] if more else []
    rels.append(("last", last))
    if page > FIRST_PAGE:
        rels.append(("prev", page - 1))
    rels.append(("first", FIRST_PAGE))
    return ", ".join(f'<{url.include_query_params(page=n)}>; rel="{rel}"' for rel, n in rels)
