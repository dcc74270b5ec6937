"""Which pages of a bot's paged /stats to read for what is new since its newest archived record,
whichever way the service orders the list: a pure state machine (``next_request`` / ``feed``),
so every case is a unit test on lists in memory.

A service may list a bot's records oldest first (new records at the end) or newest first (new
records at the front); the interface does not say. Neither is a setting: the order is read off
the pages themselves. ``GET /stat``'s record (the newest) opens a newest-first list and closes an
oldest-first one, and record times rise or fall along a page. The run keeps the order its first
read saw as a hint for the others (``order``); each read checks it against its own pages, so a
wrong hint costs a request, never a record.

- **Newest first**: read from the front until a page holds the anchor (the bot's newest archived
  record), or a record older than it (the anchor was dropped: what follows is archived), or the
  list ends: ``GET /stat`` and one page for a bot with a few new records.
- **Oldest first**: start a few records before where the last read ended (``listed``), step back
  (a page, two, four...) while that page does not hold the anchor, then read on to the end with
  the :class:`Pager` in tail mode: ``GET /stat``, that page and the empty page after it.
- **Not found** anywhere: the whole list, as a first read pages it.

Records are told apart by their JSON text (the Pager's ids); what of them is newer than the
anchor is decided afterwards by time, as for a whole list, so where a read begins never decides
what is archived. A page's records are looked at lazily (``marks``): most pages are decided by
their first few records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from ._pager import Pager

# How many records before where the last read ended an oldest-first read starts (at most half a
# page): records dropped before the anchor shift it back by as many places and it stays on the
# first page read.
ANCHOR_WINDOW = 8


class Order(Enum):
    """How a service orders a bot's /stats list."""

    UNKNOWN = "unknown"
    OLDEST_FIRST = "oldest first"
    NEWEST_FIRST = "newest first"


@dataclass(frozen=True, slots=True)
class Mark:
    """What a read needs of one record: its archive key and its time (microseconds since the
    epoch); None for what the record does not give readably."""

    key: str | None
    at: int | None


@dataclass
class TailRead:
    """One bot's paged /stats read from where what is new lies.

    ``anchor``/``anchor_at``: the bot's newest archived record's key and time; ``newest``: the
    key ``GET /stat`` returned (None: unreadable); ``listed``: the list's length when last read
    (None: not known); ``order``: the run's hint. ``pager`` makes the Pager of a walk (start,
    whether to read the head again), with the messages of this list."""

    page_size: int
    anchor: str
    anchor_at: int
    newest: str | None
    listed: int | None
    pager: Callable[[int, bool], Pager]
    order: Order = Order.UNKNOWN
    found: Order = field(default=Order.UNKNOWN, init=False)  # the order this read saw
    whole: bool = field(default=False, init=False)  # read from the start to the end
    _state: str = field(default="guess", init=False)  # guess | back | front | tail | whole | done
    _back: int = field(default=0, init=False)
    _asked: tuple[int, int] | None = field(default=None, init=False)
    _walk: Pager | None = field(default=None, init=False)
    _start: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._back = min(ANCHOR_WINDOW, max(1, self.page_size // 2))

    @property
    def start(self) -> int:
        """Where the walk that ends the read began (the list's length is that plus what it
        read, for a walk to the end)."""
        return self._start

    def next_request(self) -> tuple[int, int] | None:
        """(skip, limit) of the next page to read, or None when the read is done."""
        if self._state == "done":
            return None
        if self._walk is not None:
            request = self._walk.next_request()
            if request is None:
                self._state = "done"
            return request
        if self._state == "guess" and (self.order is Order.NEWEST_FIRST or not self.listed):
            self._asked = (0, self.page_size)
        else:
            self._asked = (max(0, (self.listed or 0) - self._back), self.page_size)
        return self._asked

    def feed(self, skip: int, texts: list[str], marks: Sequence[Mark]) -> list[str]:
        """Take the page asked at ``skip``: its records' texts and marks (looked at lazily).
        Returns the texts not read before, in order."""
        if self._walk is not None:
            new = self._walk.feed(skip, texts)
            if self._state == "front" and self._reached_anchor(marks):
                self._state = "done"
            return new
        order = _order_of(marks, self.newest, skip)
        if order is not Order.UNKNOWN:
            self.found = order
        if order is Order.NEWEST_FIRST:
            return self._begin("front", 0, skip, texts, marks)
        if any(mark.key == self.anchor for mark in marks):
            if skip:
                self.found = Order.OLDEST_FIRST
            return self._begin("tail", skip, skip, texts, marks)
        if skip == 0 and self._state == "guess" and (self.listed or 0) > self._back:
            # The front, asked on the run's hint, is not where this list grows: look where
            # the last read ended.
            self._state = "back"
            return []
        if skip == 0:
            return self._begin("whole", 0, skip, texts, marks)  # not found anywhere: all of it
        # Oldest first (or undecided): the anchor lies before this page; step further back.
        self._state = "back"
        self._back = self.page_size if self._back < self.page_size else self._back * 2
        return []

    def _begin(self, state: str, start: int, skip: int, texts: list[str],
               marks: Sequence[Mark]) -> list[str]:
        """Start the walk of ``state`` at ``start``, with the page just read if it is the walk's
        first page (else it is asked again by the walk)."""
        self._state, self._start = state, start
        self.whole = state == "whole"
        self._walk = self.pager(start, state == "whole")
        if skip != start:
            return []
        request = self._walk.next_request()
        assert request == (start, self.page_size), request
        return self.feed(skip, texts, marks)

    def _reached_anchor(self, marks: Sequence[Mark]) -> bool:
        """Whether a newest-first page reaches what is archived: the anchor, or a record older
        than it (the anchor was dropped)."""
        for mark in marks:
            if mark.key == self.anchor or (mark.at is not None and mark.at < self.anchor_at):
                return True
        return False


def _order_of(marks: Sequence[Mark], newest: str | None, skip: int) -> Order:
    """The order a page shows: the newest record opening the list, or times falling or rising
    from its first readable record to its last."""
    if not marks:
        return Order.UNKNOWN
    if skip == 0 and newest is not None and len(marks) > 1 and marks[0].key == newest:
        return Order.NEWEST_FIRST
    first = next((m.at for m in marks if m.at is not None), None)
    last = next((m.at for m in reversed(marks) if m.at is not None), None)
    if first is None or last is None or first == last:
        return Order.UNKNOWN
    return Order.NEWEST_FIRST if first > last else Order.OLDEST_FIRST
