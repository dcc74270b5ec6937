"""Lists the service may page besides the directory (a bot's /stats, a user's lists): read once each and in order with the Pager."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from ._pager import Pager

T = TypeVar("T")



async def read_paged(fetch: Callable[[int, int], Awaitable[list[T]]], key: Callable[[T], str],
                      pager: Pager) -> list[T]:
    """Every item of a list the service pages, once each and in order: ``fetch(limit, skip)``
    reads a page, ``pager`` pages as the listing is paged (an overlap, an empty page to end,
    ``skip`` checked), ``key`` tells items apart (the overlap re-reads some)."""
    kept: list[T] = []
    while (request := pager.next_request()) is not None:
        skip, limit = request
        items = await fetch(limit, skip)
        keys = [key(item) for item in items]
        new = set(pager.feed(skip, keys))
        for item, item_key in zip(items, keys, strict=True):
            if item_key in new:
                new.discard(item_key)  # an item twice in one page is kept once
                kept.append(item)
    return kept


def paged_list(what: str, items: str, setting: str, page_size: int, *, start: int = 0,
                reread_head: bool = True) -> Pager:
    return Pager(
        page_size=page_size, what=what, items=items, start=start, reread_head=reread_head,
        skip_advice=f"the list cannot be paged: set [service].{setting} = 0 if the service "
                    f"sends whole lists.",
        unstable_advice="Nothing of this list is archived this run; it is read again next run.")
