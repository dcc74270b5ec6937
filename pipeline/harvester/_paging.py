"""Paging the lists the service pages (the directory, a bot's /stats, a user's lists) so that
nothing is lost or read twice: pure state machines (``next_request`` / ``feed``), so every case
is a unit test on lists in memory, and the one loop that drives them.

**The Pager.** Offset paging of GET /bots (and of a paged /stats list) that never loses or duplicates an
item, whatever the service does.

Peers lose records here (a short page taken for the last page; a listing that shifts while it is
paged). So the pager trusts nothing about page sizes and re-reads a small overlap:

- each request starts ``overlap`` positions before the end of what was read, so a shift of the
  listing by fewer than ``overlap`` positions (bots removed or added ahead) still lands on bots
  already seen, and nothing between is skipped;
- a page whose first bot was never seen (a shift larger than the overlap) makes it step back a
  page until it stands on known ground again;
- a short page is not the end: the end is an *empty* page at exactly the position after the last
  bot read, and the last page read again unchanged (bots removed behind the pager just before
  the empty page would have moved unread bots back into what it had read); then the head is
  read again, to catch bots added at the front while we paged;
- a service that ignores ``skip`` (the first page again and again) is detected and refused, and
  a listing that keeps moving is given up after a bounded number of requests.

It is a pure state machine (``next_request`` / ``feed``), so every case is a unit test.


**A tail read.** Which pages of a bot's paged /stats to read for what is new since its newest archived record,
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
their first few records."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar, overload

from ..core import FieldSettings, ListingUnstable, SkipIgnored, decode_json
from ..interface import ListPage, ListShape
from ._records import EPOCH, ONE_US, Invalid, parse_time, stat_key


@dataclass
class Pager:
    page_size: int
    # What is paged, for messages: the directory by default; a bot's /stats list too.
    what: str = "GET /bots"
    items: str = "bots"
    skip_advice: str = ("the directory cannot be paged. Stopped instead of looping; check "
                        "[service].base_url points at the bot-listing service.")
    unstable_advice: str = "The bots seen are harvested; run again later."
    overlap: int = 5
    max_requests: int = 0  # 0 = derive from what has been seen
    seen: set[str] = field(default_factory=set)
    requests: int = 0
    wasted: int = 0
    complete: bool = False
    _next_skip: int | None = 0
    _pos: int = 0  # furthest position read
    _state: str = "walk"  # walk | probe | verify | head
    _walked: set[str] = field(default_factory=set)  # bots read by pages on known ground
    _last_skip: int = 0  # where the last page read before the end starts
    _last_end: int = 0  # and where it ends
    _largest_page: int = 0
    _first_page: list[str] | None = None
    _head_found: bool = False
    _head_passes: int = 0
    _same_as_first: int = 0
    max_head_passes: int = 3
    # Read on from where an earlier read ended (a bot's /stats, which grows at its end): the
    # first request asks ``start``, and the end of the list is the end (no head walk after).
    start: int = 0
    reread_head: bool = True
    _head_ids: set[str] = field(default_factory=set)  # bots first seen by the head walk
    total: int | None = None  # the list's length, as the last page that said it did
    _walk_requests: int = 0  # requests made before the head walk began

    def __post_init__(self) -> None:
        self._next_skip = self.start

    def next_request(self) -> tuple[int, int] | None:
        """(skip, limit) of the next GET /bots, or None when the listing is complete."""
        if self._next_skip is None:
            return None
        # Requests that brought nothing new are the cost of shifts; bound them, not progress.
        bound = self.max_requests or (2 * (len(self.seen) // max(self._largest_page, 1)) + 50)
        if self.wasted >= bound:
            raise ListingUnstable(
                f"{self.what} kept shifting: gave up after {self.requests} requests with "
                f"{len(self.seen)} {self.items} seen. {self.unstable_advice}"
            )
        # Bots arriving at the front faster than the head walk reads them would keep it going
        # for ever (each page brings new bots, so `wasted` stays low): bound it by the walk.
        head_bound = (self.max_head_passes + 1) * self._walk_requests + 50
        if self._state == "head" and self.requests - self._walk_requests > head_bound:
            raise ListingUnstable(
                f"{self.what} kept growing at the front: gave up after {self.requests} requests "
                f"with {len(self.seen)} {self.items} seen. {self.unstable_advice}"
            )
        return self._next_skip, self.page_size

    def feed(self, skip: int, ids: list[str], page: ListPage | None = None) -> list[str]:
        """Take the bot ids of the page asked at ``skip``; return those not seen before, in order.
        ``page``: what the service said beside them (its total is kept, to check the read)."""
        self.requests += 1
        if page is not None and page.total is not None:
            self.total = page.total
        self._check_skip_honoured(skip, ids)
        self._largest_page = max(self._largest_page, len(ids))
        overlap = min(self.overlap, self._largest_page // 2)
        # A page must start on known ground: ``start``, or a bot read by a page that did (a
        # page that did not may itself lie past unread bots). Else the listing moved back, and unread bots
        # may lie between what was read and this page. Pages too small to overlap (a cap of
        # 1) cannot tell: a page asked past the end is taken as it comes.
        # The tail of a list read on from an earlier read is confirmed by asking exactly past
        # its end: records appended meanwhile start that page, and are no sign of a move.
        tail_probe = self._state == "probe" and not self.reread_head and skip == self._pos
        moved_back = (skip > self.start and bool(ids) and ids[0] not in self._walked
                      and (skip < self._pos or overlap > 0) and not tail_probe)
        new: list[str] = []
        for bot_id in ids:
            if bot_id not in self.seen:
                self.seen.add(bot_id)
                new.append(bot_id)
        if self._state == "head":
            self._head_ids.update(new)
        self.wasted += not new
        end = skip + len(ids)

        if not ids:
            self._on_empty(skip, overlap)
        elif moved_back and self._state != "head":
            # The page does not start on known ground: the listing moved back by more than the
            # overlap and bots may lie unseen before this page. Step back onto known ground.
            self._next_skip = max(0, skip - max(self._largest_page - overlap, 1))
            self._state = "walk"
        elif self._state == "head":
            self._on_head(skip, ids, end, bool(new), overlap)
        elif self._state == "verify" and not new:
            # The last page read again holds no bot we had not seen. An unread bot moved back
            # under the end would lie in it, or before it, and then every bot in it would be
            # one we had not read either (removals keep the order).
            self._start_head()
        elif new and not self.reread_head and len(ids) < self.page_size:
            # A list that grows only at its end, read to a short page: ask right past it. An
            # overlap would guard against records dropped before it meanwhile; a record this
            # misses lies after the newest one kept, so the next read starts before it.
            self._state = "probe"
            self._next_skip = end
        elif new or end > self._pos or self._state == "verify":
            self._state = "walk"
            self._next_skip = max(end - overlap, 0) if end - overlap > skip else end
        else:
            # Nothing new and no further than before: ask exactly past the end to confirm it.
            self._state = "probe"
            self._next_skip = end
        self._pos = max(self._pos, end)
        if not moved_back:
            self._walked.update(ids)
        if ids and self._state != "head":
            self._last_skip, self._last_end = skip, end
        return new

    def _on_head(self, skip: int, ids: list[str], end: int, found: bool, overlap: int) -> None:
        # Walk the head until a page reaches bots the walk had seen (bots arrive at the front,
        # so everything before them has been read); if the head walk found bots, more may have
        # arrived at the front meanwhile, so look at the first page once more. A page of bots
        # found by this head walk only is not the end: the listing shifted under the walk.
        self._head_found = self._head_found or found
        if not any(bot_id not in self._head_ids for bot_id in ids):
            self._next_skip = max(end - overlap, skip + 1)
        elif skip == 0 or not self._head_found or self._head_passes >= self.max_head_passes:
            # Bots still arriving at the front after a few passes are the next run's.
            self._next_skip, self.complete = None, True
        else:
            self._head_found, self._next_skip = False, 0
            self._head_passes += 1

    def _on_empty(self, skip: int, overlap: int) -> None:
        # Past the furthest bot read, or exactly past the last page when asked to confirm its
        # end (a listing shrinking as fast as the pager steps back must still end).
        at_end = skip >= self._pos or (self._state == "probe" and skip == self._last_end)
        if self._state == "head" or skip == 0:
            self._next_skip, self.complete = None, True
        elif at_end and not self.reread_head:
            # A list read on from where an earlier read ended only grows at its end.
            self._next_skip, self.complete = None, True
        elif at_end and self._state != "verify":
            # Empty right after the last bot read: the end, unless bots were removed behind us
            # meanwhile (the unread tail then moved back into what we read). Read the last
            # page again before believing it.
            self._state, self._next_skip = "verify", self._last_skip
        elif at_end:
            self._start_head()
        else:
            # Empty before the end we knew: the listing shrank under us. Step back.
            self._next_skip = max(0, skip - max(self._largest_page - overlap, 1))
            self._pos = skip
            self._state = "walk"

    def _start_head(self) -> None:
        # The end is confirmed: re-read the head to catch bots added at the front meanwhile.
        self._state, self._next_skip = "head", 0
        self._head_passes = 1
        self._walk_requests = self.requests

    def _check_skip_honoured(self, skip: int, ids: list[str]) -> None:
        if skip == 0:
            if self._first_page is None:
                self._first_page = list(ids)
            return
        first = self._first_page
        # A listing that grew at the front can show the old first page further down once;
        # a service that ignores skip shows it at every skip.
        same = bool(first) and len(ids) > 1 and skip >= len(ids) and ids == first
        self._same_as_first = self._same_as_first + 1 if same else 0
        if self._same_as_first >= 2:
            raise SkipIgnored(
                f"{self.what}?skip={skip} returned the same {len(ids)} {self.items} as skip=0: "
                f"the service ignores `skip`, so {self.skip_advice}"
            )


T = TypeVar("T")



@dataclass
class FrontPager:
    """A list read from its front, one page after another, each named by the one before it (a
    next URL or a cursor in the answer): the end is a page that names no next one. What a
    service names twice is a loop, refused; ``seen`` and ``total`` as the :class:`Pager`'s."""

    page_size: int
    what: str = "GET /bots"
    items: str = "bots"
    unstable_advice: str = "The bots seen are harvested; run again later."
    seen: set[str] = field(default_factory=set)
    requests: int = 0
    complete: bool = False
    total: int | None = None
    after: str | None = None  # what names the next page (a URL or a cursor); None: the first
    _pos: int = 0
    _named: set[str] = field(default_factory=set)

    def next_request(self) -> tuple[int, int] | None:
        """(position, limit) of the next page (its name is :attr:`after`), or None at the end."""
        return None if self.complete else (self._pos, self.page_size)

    def feed(self, skip: int, ids: list[str], page: ListPage | None = None) -> list[str]:
        self.requests += 1
        new = [i for i in dict.fromkeys(ids) if i not in self.seen]
        self.seen.update(new)
        self._pos += len(ids)
        if page is not None and page.total is not None:
            self.total = page.total
        after = None if page is None else page.next_url or (
            str(page.cursor) if page.cursor is not None else None)
        if after is None or not ids:
            self.complete, self.after = True, None
        elif after in self._named:
            raise ListingUnstable(
                f"{self.what} named the same next page twice ({self.requests} requests, "
                f"{len(self.seen)} {self.items} seen): it would loop. {self.unstable_advice}")
        else:
            self._named.add(after)
            self.after = after
        return new


Walk = Pager | FrontPager


def walk_for(shape: ListShape, what: str, items: str, *, start: int = 0,
             reread_head: bool = True) -> Walk:
    """The walk of a list the service pages as ``shape`` says, with the messages of this list:
    the :class:`Pager` where any window can be asked (from ``start``), else from the front."""
    setting = "page_size" if shape.kind == "bots" else f"{shape.kind}_page_size"
    unstable = "Nothing of this list is archived this run; it is read again next run."
    if not shape.positional:
        return FrontPager(page_size=shape.page_size, what=what, items=items,
                          unstable_advice=unstable)
    family = {"offset": f"`{shape.offset_param}`", "page": f"`{shape.page_param}`",
              "link": f"`{shape.page_param}`"}[shape.paging]
    return Pager(
        page_size=shape.page_size, what=what, items=items, start=start, reread_head=reread_head,
        # Page numbers cannot be asked from the middle of a page: no overlap, whole pages.
        overlap=5 if shape.paging == "offset" else 0,
        skip_advice=f"the list cannot be paged by {family}: set {shape.setting} to how the "
                    f"service pages it (`botstats probe` tells), or [service].{setting} = 0 if "
                    f"it sends whole lists.",
        unstable_advice=unstable)


async def read_paged(fetch: Callable[[Walk, int, int], Awaitable[tuple[list[T], ListPage]]],
                     key: Callable[[T], str], walk: Walk) -> list[T]:
    """Every item of a list the service pages, once each and in order: ``fetch(walk, skip,
    limit)`` reads a page and says what the service said beside it, ``walk`` pages it (an
    overlap, an empty page to end, ``skip`` checked; or from the front), ``key`` tells items
    apart (the overlap re-reads some)."""
    kept: list[T] = []
    while (request := walk.next_request()) is not None:
        skip, limit = request
        items, page = await fetch(walk, skip, limit)
        keys = [key(item) for item in items]
        new = set(walk.feed(skip, keys, page))
        for item, item_key in zip(items, keys, strict=True):
            if item_key in new:
                new.discard(item_key)  # an item twice in one page is kept once
                kept.append(item)
    return kept


def shortfall(walk: Walk, start: int = 0) -> str | None:
    """Why a walk read to its end did not read the whole list (None: nothing says so): the
    service said the list is longer than what was read."""
    read = start + len(walk.seen)
    if walk.total is not None and walk.total > read:
        return (f"the service says the list holds {walk.total} {walk.items}, and "
                f"{read} were read")
    return None


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


@dataclass(frozen=True, slots=True)
class Keying:
    """How one bot's records are keyed and timed: its id (a record keyed by its time takes the
    bot's id into its key) and the ``[fields]`` that name the key and the time."""

    bot_id: str
    fields: FieldSettings

    def mark(self, text: bytes) -> Mark:
        """A record's key and time as the tail reads them; None for what it does not give."""
        try:
            record = decode_json(text)
        except ValueError:
            return Mark(None, None)
        try:
            key: str | None = stat_key(record, self.bot_id, self.fields)
        except Invalid:
            key = None
        try:
            at: int | None = (parse_time(record[self.fields.stat_time]) - EPOCH) // ONE_US
        except (Invalid, KeyError, TypeError):
            at = None
        return Mark(key, at)


class Marks(Sequence[Mark]):
    """A page's marks, each decoded when first looked at."""

    def __init__(self, texts: list[bytes], keying: Keying) -> None:
        self._texts, self._keying = texts, keying
        self._marks: dict[int, Mark] = {}

    def __len__(self) -> int:
        return len(self._texts)

    @overload
    def __getitem__(self, index: int) -> Mark: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Mark]: ...
    def __getitem__(self, index: int | slice) -> Mark | Sequence[Mark]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._texts)
        if index not in self._marks:
            self._marks[index] = self._keying.mark(self._texts[index])
        return self._marks[index]


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
