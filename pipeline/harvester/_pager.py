"""Offset paging of GET /bots (and of a paged /stats list) that never loses or duplicates an
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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core import ListingUnstable, SkipIgnored


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

    def feed(self, skip: int, ids: list[str]) -> list[str]:
        """Take the bot ids of the page asked at ``skip``; return those not seen before, in order."""
        self.requests += 1
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
