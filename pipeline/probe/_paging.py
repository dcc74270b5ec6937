"""How a list endpoint answers and pages, read off what it sends: where the answer holds its
list, what it says beside it (a total, a next page named in a ``Link`` header or in the answer,
a cursor), and which paging family its parameters follow, with the page cap.

The conventions are the ones real services use (docs/probe.md, "Conventions"): the probe
decides one only from what the service answered, and says it cannot decide where the answers
do not tell. A failed read is never evidence: a 4xx to a large page size means "try a smaller
one, reading the error's words for the cap", a 5xx or no answer means "unknown".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from ..interface import LIST_KEYS, TOTAL_KEYS, Reply, as_count
from ._report import BIG_LIMIT, NO_ANSWER, Finding, Proposal

# Keys that commonly hold the list, a total, a next URL or a cursor (tried in this order).
NEXT_KEYS = ("next", "next_url", "nextUrl", "next_page_url", "next_link")
CURSOR_KEYS = ("next_cursor", "nextCursor", "cursor", "next_page_token", "nextPageToken",
               "after", "next_token")
TOTAL_HEADERS = ("x-total-count", "x-total", "total-count")
SIZE_PARAMS = ("per_page", "limit", "size", "page_size", "pageSize")
# The words a service says its cap with in a 400 ("limit must be at most 500").
_CAP_WORDS = re.compile(r"(?:at most|<=|maximum(?: is| of)?|max(?:imum)?\s*[:=]?|up to|not exceed"
                        r"|less than or equal to|cannot exceed|exceeds?)\s*(\d+)", re.IGNORECASE)

Get = Callable[[str, dict[str, Any] | None], Awaitable[Reply]]


@dataclass
class Answer:
    """What one answer of a list endpoint holds: the list (None: no list found), where, and
    what the service said beside it."""

    records: list[Any] | None
    list_path: str = ""  # "" = the answer is the array
    total: int | None = None
    total_path: str = ""
    total_header: str = ""
    next_url: str | None = None  # a Link header's rel="next" or a next URL in the answer
    next_path: str = ""  # where the answer holds it ("" = the Link header)
    last_url: str | None = None
    cursor: str | None = None
    cursor_path: str = ""
    has_more: bool | None = None
    keys: list[str] = field(default_factory=list)  # an object's keys, for messages

    @property
    def said_more(self) -> str | None:
        """Why the answer says the list goes on past it (None: nothing says so)."""
        if self.next_url:
            return "a next page is named" + (" in its Link header" if not self.next_path
                                             else f" under '{self.next_path}'")
        if self.cursor:
            return f"it holds a cursor under '{self.cursor_path}'"
        if self.has_more:
            return "it says has_more"
        if self.total is not None and self.records is not None and self.total > len(self.records):
            return f"it says the list holds {self.total} and sends {len(self.records)}"
        return None


def answer_of(reply: Reply | None) -> Answer:
    """The list a 200 answer holds, wherever it is, and what it says beside it."""
    if reply is None or reply.status != 200:
        return Answer(None)
    data = reply.json()
    headers = {k.lower(): v for k, v in reply.headers.items()}
    links = httpx.Response(200, headers={"link": headers["link"]}).links \
        if "link" in headers else {}
    total_header = next((h for h in TOTAL_HEADERS if as_count(headers.get(h)) is not None), "")
    answer = Answer(None, total=as_count(headers.get(total_header)) if total_header else None,
                    total_header=_header_name(reply.headers, total_header),
                    next_url=(links.get("next") or {}).get("url"),
                    last_url=(links.get("last") or {}).get("url"))
    if isinstance(data, list):
        answer.records = data
        return answer
    if not isinstance(data, dict):
        return answer
    answer.keys = list(data)
    path, held = _list_in(data)
    if held is None:
        return answer
    answer.records, answer.list_path = held, path
    scope: dict[str, Any] = data
    if "." in path:  # look beside the list as well as at the top
        for key in path.split(".")[:-1]:
            inner = scope.get(key)
            scope = {**scope, **(inner if isinstance(inner, dict) else {})}
    for key in TOTAL_KEYS:
        if as_count(scope.get(key)) is not None:
            answer.total, answer.total_path = as_count(scope[key]), key
            break
    else:
        # "count" is the whole list's length at some services and the page's at others: it
        # counts as a total only where it says more than the page holds.
        count = as_count(scope.get("count"))
        if count is not None and count != len(held):
            answer.total, answer.total_path = count, "count"
    for key in NEXT_KEYS:
        if isinstance(scope.get(key), str) and scope[key]:
            answer.next_url = answer.next_url or scope[key]
            answer.next_path = key
            break
        if key in scope and scope[key] is None:
            answer.next_path = key  # the key is there, saying no next page
    for key in CURSOR_KEYS:
        if isinstance(scope.get(key), str | int) and not isinstance(scope[key], bool) \
                and scope[key] != "":
            answer.cursor, answer.cursor_path = str(scope[key]), key
            break
        if key in scope and scope[key] is None:
            answer.cursor_path = key
    if isinstance(scope.get("has_more"), bool):
        answer.has_more = scope["has_more"]
    return answer


def _list_in(data: dict[str, Any]) -> tuple[str, list[Any] | None]:
    """Where an object holds its list: a known key first, then any key holding an array of
    objects, one level down too ("data.items")."""
    keys = sorted(data, key=lambda k: (k not in LIST_KEYS,
                                       LIST_KEYS.index(k) if k in LIST_KEYS else 0))
    for key in keys:
        if isinstance(data[key], list):
            return key, data[key]
    for key in keys:
        if isinstance(data[key], dict):
            inner, held = _list_in(data[key])
            if held is not None:
                return f"{key}.{inner}", held
    return "", None


def _header_name(headers: dict[str, str], lower: str) -> str:
    return next((name for name in headers if name.lower() == lower), lower) if lower else ""


def brief(reply: Reply) -> str:
    """'GET http://x/bots?limit=5 -> 200, an array of 5' (the evidence of a finding)."""
    auth = {"read": "", "none": " (no token)", "user": " (user token)", "bad": " (a bad token)",
            "bot": " (bot key)"}[reply.auth]
    if reply.status == NO_ANSWER:
        return f"{reply.method} {reply.url}{auth} -> no answer: {reply.body[:120]}"
    data = reply.json()
    if isinstance(data, list):
        shape = f"an array of {len(data)}"
    elif isinstance(data, dict):
        keys = ", ".join(list(data)[:8]) + (", ..." if len(data) > 8 else "")
        shape = f"an object with {keys}" if data else "an empty object"
    elif not reply.body.strip():
        shape = "an empty body"
    else:
        text = " ".join(reply.body.split())
        shape = f"text {text[:60]!r}"
    tries = " after every retry" if failed(reply) else ""
    return f"{reply.method} {reply.url}{auth} -> {reply.status}{tries}, {shape}"


def failed(reply: Reply | None) -> bool:
    """A read that got no usable answer after its retries (no answer, a 5xx, a rate limit's
    429 or 403): it is evidence of nothing, and what it was to show is unknown."""
    return reply is not None and (reply.status == NO_ANSWER or reply.status >= 500
                                  or reply.rate_limited)


def failed_read(*replies: Reply | None) -> Reply | None:
    """The first of ``replies`` that :func:`failed`, if any."""
    return next((r for r in replies if r is not None and failed(r)), None)


def items(reply: Reply | None) -> list[Any]:
    """The records a 200 answer holds: the array, or the list an object holds."""
    return answer_of(reply).records or []


def said_cap(reply: Reply) -> int | None:
    """The page size a 4xx answer's words allow ("limit must be at most 500"), if they say."""
    match = _CAP_WORDS.search(reply.body or "")
    return int(match.group(1)) if match and int(match.group(1)) > 0 else None


def refused(reply: Reply | None) -> bool:
    """A 4xx other than a rate limit's: the service refused what was asked (a page too large,
    a parameter it does not take), which says nothing about the list."""
    return reply is not None and 400 <= reply.status < 500 and not reply.rate_limited


@dataclass
class Paging:
    """How one list endpoint answers and pages, as the probe found it."""

    kind: str  # bots | stats | user_lists (the settings' prefix)
    what: str  # "GET /bots" (for messages)
    family: str | None = None  # offset | page | link | next | cursor; "whole"; None: unknown
    why: str = ""
    cap: int | None = None  # the most a page holds (None: unknown or none seen)
    params: dict[str, Any] = field(default_factory=dict)  # [service] names it uses
    first: Answer = field(default_factory=lambda: Answer(None))
    evidence: list[str] = field(default_factory=list)
    records: list[Any] = field(default_factory=list)  # the records of the first answer
    capless: bool = False  # the whole list came in one page: its cap, if any, is larger

    def findings(self) -> list[Finding]:
        topic = {"bots": "listing", "stats": "stats", "user_lists": "user lists"}[self.kind]
        first = self.first
        held = ("an array" if not first.list_path else
                f"an object holding the list under '{first.list_path}'"
                + (f" (beside {', '.join(k for k in first.keys if k != first.list_path)[:80]})"
                   if len(first.keys) > 1 else ""))
        out = [Finding(topic, "list", held if first.records is not None else "no list read",
                       self.evidence[:1])]
        if first.total_path or first.total_header:
            out.append(Finding(topic, "total", f"said as {first.total_path or first.total_header}"
                               f" ({first.total})"))
        family = self.family or "unknown"
        out.append(Finding(topic, "paging", f"{family}: {self.why}", self.evidence[1:]))
        return out

    def proposals(self) -> list[Proposal]:
        path_key = "user_lists_path" if self.kind == "user_lists" else f"{self.kind}_list_path"
        size_key = "page_size" if self.kind == "bots" else f"{self.kind}_page_size"
        out: list[Proposal] = []
        if self.first.records is not None:
            out.append(Proposal(f"service.{path_key}", self.first.list_path,
                                "where the answer holds the list"))
        else:
            out.append(Proposal(f"service.{path_key}", None, self.why or "no list was read"))
        if self.family in (None, "whole"):
            out.append(Proposal(f"service.{self.kind}_paging", None if self.family is None
                                else "offset", self.why if self.family is None else
                                "the list comes whole (no paging to choose)"))
        else:
            out.append(Proposal(f"service.{self.kind}_paging", self.family, self.why))
        if self.family == "whole" and self.kind != "bots":
            out.append(Proposal(f"service.{size_key}", 0, f"{self.what} sends the whole list"))
        elif self.family is None:
            out.append(Proposal(f"service.{size_key}", None, self.why))
        elif self.cap is not None and self.capless and self.kind == "bots":
            out.append(Proposal(f"service.{size_key}", None, f"no cap seen (the list has "
                                f"{self.cap}); keep the default"))
        elif self.cap is not None:
            out.append(Proposal(f"service.{size_key}", self.cap,
                                f"no cap seen: {self.cap} records came in one page"
                                if self.capless else f"the most a page holds ({self.what})"))
        elif self.kind != "bots":
            out.append(Proposal(f"service.{size_key}", None,
                                f"{self.what} pages, and its page cap is unknown"))
        return out


async def probe_paging(get: Get, kind: str, path: str, first: Reply,
                       newest: Any = None) -> Paging:
    """How the list at ``path`` answers and pages: ``first`` is its answer to a plain GET;
    ``newest``, a record the list must hold if it is whole (``/stat``'s, for ``/stats``)."""
    what = f"GET {path}" if kind != "user_lists" else "a user's lists"
    found = Paging(kind, what, first=answer_of(first), evidence=[brief_answer(first)])
    answer = found.first
    if failed(first) or first.status != 200:
        found.why = f"a read failed ({brief_answer(first)})"
        return found
    if answer.records is None:
        found.why = ("the answer holds no list" + (f" (keys: {', '.join(answer.keys[:8])})"
                                                    if answer.keys else ""))
        return found
    found.records = answer.records
    if answer.next_url and not answer.next_path:
        return await _link(get, path, found)
    if answer.next_url:
        return await _next(get, path, found)
    if answer.cursor:
        return await _cursor(get, path, found)
    return await _positional(get, path, found, newest)


def brief_answer(reply: Reply | None) -> str:
    """'GET http://x/bots?limit=5 -> 200, an array of 5' (with the total or next it said)."""
    if reply is None:
        return "(not asked)"
    text = brief(reply)
    answer = answer_of(reply)
    if answer.list_path and answer.records is not None:
        text += f" ({len(answer.records)} under '{answer.list_path}')"
    if answer.next_url and not answer.next_path:
        text += "; Link: next"
    if answer.total_header:
        text += f"; {answer.total_header}: {answer.total}"
    return text


async def _link(get: Get, path: str, found: Paging) -> Paging:
    """Pages named in a Link header: the page and size parameters read off the next link."""
    answer = found.first
    query = dict(parse_qsl(urlsplit(answer.next_url or "").query))
    page_param = next((k for k in ("page", "p", "page_number", "pageNumber") if k in query),
                      None)
    size_param = next((k for k in SIZE_PARAMS if k in query), None)
    if page_param is None:
        found.family = "next"
        found.why = ("its Link header names the next page, with no page number in it: read "
                     "from the front, following it")
        found.params = {"next_path": ""}
        return found
    size_param = size_param or "per_page"
    found.params = {"page_param": page_param, "size_param": size_param,
                    "first_page": int(query[page_param]) - 1 if query[page_param].isdigit()
                    else 1}
    found.family = "link"
    found.why = (f"its Link header names the next page (`{page_param}`"
                 f"{', `' + size_param + '`' if size_param else ''}); pages are read by number "
                 f"and checked against the header")
    cap = await _cap(get, path, found, lambda n: {size_param: n, page_param: found.params[
        "first_page"]})
    found.cap = cap
    return found


async def _next(get: Get, path: str, found: Paging) -> Paging:
    answer = found.first
    found.family = "next"
    found.params = {"next_path": answer.next_path}
    found.why = f"the answer names its next page under '{answer.next_path}'"
    found.cap = await _cap(get, path, found, lambda n: {"limit": n})
    return found


async def _cursor(get: Get, path: str, found: Paging) -> Paging:
    """A cursor in the answer: which parameter takes it back, tried with the usual names."""
    answer = found.first
    first_ids = _keys(answer.records or [])
    names = ("cursor", "after", "page_token", "pageToken", "starting_after", "next_cursor",
             answer.cursor_path)
    for name in dict.fromkeys(names):
        reply = await get(path, {name: answer.cursor})
        found.evidence.append(brief_answer(reply))
        if failed(reply):
            found.why = f"a read failed ({brief_answer(reply)})"
            return found
        nxt = answer_of(reply)
        if nxt.records is not None and _keys(nxt.records) and _keys(nxt.records) != first_ids:
            found.family = "cursor"
            found.params = {"cursor_path": answer.cursor_path, "cursor_param": name}
            found.why = (f"the answer holds a cursor under '{answer.cursor_path}', taken back "
                         f"as `{name}`")
            found.cap = await _cap(get, path, found, lambda n: {"limit": n})
            return found
    found.why = (f"the answer holds a cursor under '{answer.cursor_path}', and no parameter "
                 f"tried ({', '.join(dict.fromkeys(names))}) took it back: tell botstats which "
                 f"([service].cursor_param)")
    return found


async def _positional(get: Get, path: str, found: Paging, newest: Any) -> Paging:
    """No next page named: try the position families (``limit``/``skip``, ``limit``/
    ``offset``, ``page``/``per_page``) with windows of two, and decide "whole" only when
    nothing says the list goes on."""
    records = found.records
    ids = _keys(records)
    more = found.first.said_more
    if len(records) < 2 and more is None:
        found.why = "the list holds fewer than two records: too few to tell how it pages"
        return found
    # Windows of two where the list shows three or more, else of one: the second window must
    # lie within what the list holds for it to tell anything.
    w = 2 if len(records) >= 3 else 1
    tries: Sequence[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = (
        ("offset", {"limit": w, "skip": 0}, {"limit": w, "skip": w},
         {"limit_param": "limit", "offset_param": "skip"}),
        ("offset", {"limit": w, "offset": 0}, {"limit": w, "offset": w},
         {"limit_param": "limit", "offset_param": "offset"}),
        ("page", {"page": 1, "per_page": w}, {"page": 2, "per_page": w},
         {"page_param": "page", "size_param": "per_page", "first_page": 1}),
        ("page", {"page": 1, "limit": w}, {"page": 2, "limit": w},
         {"page_param": "page", "size_param": "limit", "first_page": 1}),
        ("page", {"page": 1, "size": w}, {"page": 2, "size": w},
         {"page_param": "page", "size_param": "size", "first_page": 1}),
    )
    limited = False
    for family, one, two, params in tries:
        if (a := await _read(get, path, one, found)) is None:
            return found
        small = answer_of(a)
        first_two = _keys(small.records or [])
        if len(first_two) != w:
            continue  # the size parameter is not this one
        if small.cursor or (small.next_url and small.next_path):
            # A short page names the next one (the list came whole before): that family.
            found.first = small
            return await (_cursor if small.cursor else _next)(get, path, found)
        limited = True
        if (b := await _read(get, path, two, found)) is None:
            return found
        second = _keys(answer_of(b).records or [])
        if second and second != first_two and (second == ids[w:2 * w]
                                               or second[0] not in first_two):
            found.family, found.params = family, params
            linked = answer_of(a)
            if family == "page" and linked.next_url and not linked.next_path:
                found.family = "link"  # numbered pages that a Link header names too
            found.why = (f"`{next(iter(two))}` and `{list(two)[1]}` are honoured (two windows of "
                         f"{w} differ)")
            size = params.get("size_param", params.get("limit_param", "limit"))
            start = {k: v for k, v in one.items() if k != size}

            def query(n: int, s: str = size, st: dict[str, Any] = start) -> dict[str, Any]:
                return {s: n, **st}

            def after(got: int, s: str = size, p: dict[str, Any] = params) -> dict[str, Any]:
                if "offset_param" in p:
                    return {s: got, p["offset_param"]: got}
                return {s: got, p["page_param"]: p["first_page"] + 1}

            found.cap = await _cap(get, path, found, query, after)
            return found
    if more is not None:
        found.why = (f"{more}, and none of limit/skip, limit/offset, page/per_page, page/limit, "
                     f"page/size reads another part: tell botstats how it pages "
                     f"([service].{found.kind}_paging and the parameter names)")
        return found
    if limited:
        found.why = ("a size is honoured but no position parameter moves the window: tell "
                     "botstats how it pages")
        return found
    if not _holds(records, newest):
        found.why = ("no paging parameter changes the answer, yet it lacks the newest record "
                     "(GET /bots/:id/stat's): tell botstats how it pages")
        return found
    found.family = "whole"
    found.why = (f"no paging parameter changes the answer (limit={w} still gave "
                 f"{len(records)}), nothing says it goes on"
                 + (", and it holds the newest record" if newest is not None else ""))
    return found


async def _read(get: Get, path: str, query: dict[str, Any], found: Paging) -> Reply | None:
    """One read, kept as evidence; None (the reason in ``found.why``) when it failed: a failed
    read decides nothing."""
    reply = await get(path, query)
    found.evidence.append(brief_answer(reply))
    if failed(reply):
        found.why = f"a read failed ({brief_answer(reply)})"
        return None
    return reply


async def _cap(get: Get, path: str, found: Paging, query: Callable[[int], dict[str, Any]],
               after: Callable[[int], dict[str, Any]] | None = None) -> int | None:
    """The most a page holds: ask for BIG_LIMIT; a 4xx is not evidence of an empty list but a
    refusal of the size, so its words (or halving) give a smaller size to ask."""
    size = BIG_LIMIT
    for _ in range(4):
        reply = await get(path, query(size))
        found.evidence.append(brief_answer(reply))
        if failed(reply):
            return None
        if refused(reply):
            told = said_cap(reply)
            size = told if told is not None and told < size else size // 2
            continue
        answer = answer_of(reply)
        if answer.records is None:
            return None
        got = len(answer.records)
        if got > len(found.records):
            found.records = answer.records  # a larger sample of the records
        if got >= size:
            return size  # no cap below what was asked
        if answer.said_more is not None:
            return got  # fewer than asked, and more follow: the cap
        if after is not None and got:
            # Fewer than asked and nothing said: ask past them before calling it the end.
            more = await get(path, after(got))
            found.evidence.append(brief_answer(more))
            if failed(more) or refused(more):
                return None
            if items(more) and _keys(items(more)) != _keys(answer.records):
                return got  # more follow: the cap
        # The whole list fits: no cap seen, and pages of that size are answered whole.
        found.capless = True
        return max(got, 2)
    return None


def _keys(records: Sequence[Any]) -> list[str]:
    import json

    return [json.dumps(r, sort_keys=True, default=str) for r in records]


def _holds(records: Sequence[Any], newest: Any) -> bool:
    return newest is None or newest in records


def settings_of(pagings: Sequence[Paging]) -> list[Proposal]:
    """The [service] names the decided lists use (parameters, where a total, a next URL or a
    cursor is said), proposed where they agree and undecided where they differ."""
    said: dict[str, dict[Any, list[str]]] = {}
    for paging in pagings:
        if paging.family in (None, "whole"):
            continue
        names = dict(paging.params)
        if paging.first.total_path:
            names["total_path"] = paging.first.total_path
        if paging.first.total_header:
            names["total_header"] = paging.first.total_header
        if paging.first.next_path and paging.family == "next":
            names["next_path"] = paging.first.next_path
        for key, value in names.items():
            if key == "next_path" and not value:
                continue  # a next link in the Link header: no key to name
            said.setdefault(key, {}).setdefault(value, []).append(paging.what)
    out = []
    for key, values in said.items():
        if len(values) == 1:
            value, where = next(iter(values.items()))
            out.append(Proposal(f"service.{key}", value, f"as {', '.join(where)} uses it"))
        else:
            out.append(Proposal(f"service.{key}", None, "the lists differ: " + "; ".join(
                f"{', '.join(w)}: {v!r}" for v, w in values.items())))
    return out
