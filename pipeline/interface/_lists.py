"""Lists as services send them: where an answer holds its list (the answer itself, or under a key
of an object), what the service says beside it (the list's total, a next page, a cursor), and how
each paging family asks for a part of a list.

The interface leaves all of it open, and real services fill it with a few well-known
conventions (dlt's rest_client knows the same): a bare array or ``{"results": [...], "total":
..}``; ``limit``/``skip`` (or ``offset``), ``page``/``per_page``, pages named in a ``Link``
header (RFC 8288, as GitHub does), a next URL or an opaque cursor in the answer, a total in the
answer or in ``X-Total-Count``. :class:`ListShape` is one endpoint's choice of them, from
``[service]``; :func:`read_list` reads an answer by it into a :class:`ListPage`.

Families that address a list by position (offset, page, link) read any window ``(skip,
limit)`` of it, so the harvest's pagers work on them alike (:meth:`ListShape.windows`); the
others (next, cursor) are read from the front, one page after another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ..core import ServiceSettings, decode_json
from ._payloads import RawArray, split_array

POSITIONAL = ("offset", "page", "link")
# The settings' prefix of each list endpoint kind, and what its messages call it.
KINDS = {"bots": "GET /bots", "stats": "GET /bots/:id/stats", "user_lists": "a user's lists"}
# Keys that commonly hold a list, for advice when an answer is an object (the probe looks at
# every key; these are tried first).
LIST_KEYS = ("results", "data", "items", "bots", "stats", "records", "entries", "values")
TOTAL_KEYS = ("total", "total_count", "totalCount", "total_results", "totalResults")


@dataclass(frozen=True, slots=True)
class ListShape:
    """How one list endpoint answers and pages, as ``[service]`` says."""

    kind: str  # bots | stats | user_lists (the settings' prefix)
    list_path: tuple[str, ...] = ()
    paging: str = "offset"
    page_size: int = 0  # 0: the list is read whole
    limit_param: str = "limit"
    offset_param: str = "skip"
    page_param: str = "page"
    size_param: str = "per_page"
    first_page: int = 1
    cursor_param: str = "cursor"
    next_path: tuple[str, ...] = ("next",)
    cursor_path: tuple[str, ...] = ("next_cursor",)
    total_path: tuple[str, ...] = ()
    total_header: str = ""

    @classmethod
    def of(cls, svc: ServiceSettings, kind: str) -> ListShape:
        sizes = {"bots": svc.page_size, "stats": svc.stats_page_size,
                 "user_lists": svc.user_lists_page_size}
        paths = {"bots": svc.bots_list_path, "stats": svc.stats_list_path,
                 "user_lists": svc.user_lists_path}
        return cls(
            kind=kind, list_path=_path(paths[kind]),
            paging=getattr(svc, f"{kind}_paging"), page_size=sizes[kind],
            limit_param=svc.limit_param, offset_param=svc.offset_param,
            page_param=svc.page_param, size_param=svc.size_param, first_page=svc.first_page,
            cursor_param=svc.cursor_param, next_path=_path(svc.next_path),
            cursor_path=_path(svc.cursor_path), total_path=_path(svc.total_path),
            total_header=svc.total_header)

    @property
    def positional(self) -> bool:
        """Whether any window of the list can be asked for (else it is read from the front)."""
        return self.paging in POSITIONAL

    @property
    def setting(self) -> str:
        """The setting that names this endpoint's paging family."""
        return f"[service].{self.kind}_paging"

    def windows(self, skip: int, limit: int) -> list[tuple[dict[str, Any], int]]:
        """The requests that read the window ``[skip, skip + limit)``: each one's query and the
        position of its first item. One for offset paging; for page numbers, the pages of
        ``limit`` items that cover the window (one when ``skip`` falls on a page's start)."""
        if self.paging == "offset":
            return [({self.limit_param: limit, self.offset_param: skip}, skip)]
        first, last = skip // limit, (skip + limit - 1) // limit
        return [({self.page_param: page + self.first_page, self.size_param: limit},
                 page * limit) for page in range(first, last + 1)]

    def front(self, limit: int, cursor: str | None = None) -> dict[str, Any]:
        """The query of a page read from the front: the first (``cursor`` None), or the one a
        cursor names. A next URL carries its own query."""
        if self.paging in ("page", "link"):
            query: dict[str, Any] = {self.page_param: self.first_page, self.size_param: limit}
        else:
            query = {self.limit_param: limit}
        if cursor is not None:
            query[self.cursor_param] = cursor
        return query


def _path(dotted: str) -> tuple[str, ...]:
    return tuple(part for part in dotted.split(".") if part)


@dataclass(frozen=True, slots=True)
class ListPage:
    """One answer of a list endpoint: its records, and what the service said beside them."""

    items: RawArray | list[Any]
    total: int | None = None  # the whole list's length, where the service says it
    next_url: str | None = None  # the Link header's rel="next", or a next URL in the answer
    last_url: str | None = None  # the Link header's rel="last"
    cursor: str | None = None  # the cursor of the next page
    has_more: bool | None = None

    def __len__(self) -> int:
        return len(self.items.items if isinstance(self.items, RawArray) else self.items)

    @property
    def records(self) -> list[Any]:
        """The records, each as its raw JSON text (a RawArray's) or decoded."""
        return self.items.items if isinstance(self.items, RawArray) else self.items

    def more(self, start: int = 0) -> str | None:
        """Why the service says the list goes on past this answer (which starts at ``start``);
        None when nothing it said does."""
        if self.next_url:
            return "it names a next page (a next link or URL)"
        if self.cursor:
            return "it gives a cursor for a next page"
        if self.has_more:
            return "it says has_more"
        if self.total is not None and self.total > start + len(self):
            return f"it says the list holds {self.total} records, and this answer ends at " \
                   f"{start + len(self)}"
        return None


class NotAList(ValueError):
    """An answer that holds no list where the shape says; ``advice`` says what would read it."""

    def __init__(self, found: str, advice: str) -> None:
        super().__init__(found)
        self.found = found
        self.advice = advice


_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])


def read_list(content: bytes, headers: Any, links: Mapping[Any, Mapping[str, str]],
              shape: ListShape, *, raw: bool) -> ListPage:
    """The list an answer holds by ``shape``, with what the service said beside it. ``raw``: the
    records as their JSON texts (a :class:`RawArray`) where the body is plain JSON.
    :class:`NotAList` (with the advice) when the answer holds none where the shape says;
    ValueError when the body is not JSON."""
    total = as_count(headers.get(shape.total_header)) if shape.total_header else None
    next_url = links.get("next", {}).get("url")
    last_url = links.get("last", {}).get("url")
    stripped = content.lstrip()
    if stripped[:1] == b"[":
        # A bare array is read whatever list_path says: a service may answer either.
        items = _array(content, raw)
        return ListPage(items, total, next_url, last_url)
    if not stripped[:1] == b"{":
        data = decode_json(content)  # raises ValueError for what is not JSON
        raise NotAList(f"a JSON {type(data).__name__}", "")
    try:
        fields = _OBJECT.decode(content)
    except msgspec.DecodeError:
        # Not plain JSON (NaN, lone surrogates...): the lenient decoder reads it whole.
        return _decoded_object(decode_json(content), total, next_url, last_url, shape)
    if not shape.list_path:
        raise NotAList("a JSON object", _object_advice(fields, shape))
    held = _descend(fields, shape.list_path)
    if held is None:
        raise NotAList(f"a JSON object without {'.'.join(shape.list_path)!r}",
                       _object_advice(fields, shape))
    try:
        items = _array(bytes(held), raw)
    except ValueError:
        raise NotAList(f"a JSON object whose {'.'.join(shape.list_path)!r} is not a list",
                       _object_advice(fields, shape)) from None
    if not isinstance(items, RawArray | list):
        raise NotAList(f"a JSON object whose {'.'.join(shape.list_path)!r} is not a list",
                       _object_advice(fields, shape))

    def value(path: tuple[str, ...]) -> Any:
        found = _descend(fields, path) if path else None
        if found is None:
            return None
        try:
            return decode_json(bytes(found))
        except ValueError:
            return None

    if total is None:
        total = as_count(value(shape.total_path))
    body_next = value(shape.next_path)
    cursor = value(shape.cursor_path)
    more = value(("has_more",))
    return ListPage(items, total, next_url or (body_next if isinstance(body_next, str) else None),
                    last_url,
                    str(cursor) if isinstance(cursor, str | int) and cursor != "" else None,
                    more if isinstance(more, bool) else None)


def _decoded_object(data: Any, total: int | None, next_url: str | None, last_url: str | None,
                    shape: ListShape) -> ListPage:
    if not isinstance(data, dict):
        raise NotAList(f"a JSON {type(data).__name__}", "")
    held: Any = data
    for key in shape.list_path:
        held = held.get(key) if isinstance(held, dict) else None
    if not shape.list_path or not isinstance(held, list):
        raise NotAList("a JSON object", "")
    return ListPage(held, total, next_url, last_url)


def _array(content: bytes, raw: bool) -> RawArray | list[Any]:
    if raw and (split := split_array(content)) is not None:
        return split
    data = decode_json(content)
    if not isinstance(data, list):
        raise ValueError("not a list")
    return data


def _descend(fields: dict[str, msgspec.Raw], path: tuple[str, ...]) -> msgspec.Raw | None:
    held: msgspec.Raw | None = fields.get(path[0])
    for key in path[1:]:
        if held is None:
            return None
        try:
            held = _OBJECT.decode(bytes(held)).get(key)
        except msgspec.DecodeError:
            return None
    return held


def as_count(value: Any) -> int | None:
    """A count the service said, as an int: a JSON integer or digits in text; None else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def list_keys(fields: dict[str, Any]) -> list[str]:
    """The keys of an object whose values are JSON arrays, the usual names first."""
    keys = []
    for key, held in fields.items():
        text = bytes(held).lstrip() if isinstance(held, msgspec.Raw) else None
        if (text is not None and text[:1] == b"[") or isinstance(held, list):
            keys.append(key)
    return sorted(keys, key=lambda k: (k not in LIST_KEYS, LIST_KEYS.index(k)
                                       if k in LIST_KEYS else 0, k))


def _object_advice(fields: dict[str, msgspec.Raw], shape: ListShape) -> str:
    keys = list_keys(fields)
    setting = ("[service].user_lists_path" if shape.kind == "user_lists"
               else f"[service].{shape.kind}_list_path")
    others = [k for k in fields if k not in keys][:6]
    beside = f" (beside {', '.join(others)})" if others else ""
    if not keys:
        return (f"it holds no list under any key (keys: {', '.join(list(fields)[:8]) or 'none'}): "
                f"check --base-url points at the bot-listing service")
    totals = [k for k in TOTAL_KEYS if k in fields]
    total = (f", and [service].total_path = {totals[0]!r} to check each read against its "
             f"total" if totals and not shape.total_path else "")
    return (f"it holds a list under {keys[0]!r}{beside}: set {setting} = {keys[0]!r}{total} "
            f"(or run `botstats probe --write config.toml`)")
