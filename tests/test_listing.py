"""Paging GET /bots: the pager returns every bot exactly once whatever the listing does.

`Pager` is a pure state machine, so the service is a Python list here: `Listing` serves
pages of it with an optional page cap below the `limit` asked, and changes it after given
requests the way a churning service does (bots inserted at the front, bots removed behind or
ahead of the pager). Each scenario checks the three promises:

- each bot the service served is returned once, in the order first served (no bot twice);
- every bot listed from the start to the end of the paging is returned;
- every bot added at the front before the pager's final look at the head is returned.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest

from pipeline.core._errors import ListingUnstable, SkipIgnored
from pipeline.harvester._paging import Pager

REQUEST_LIMIT = 20_000  # far above any bound of the pager: reaching it is an endless loop


@dataclass
class Listing:
    """GET /bots over a list. Changes happen right after a request is answered."""

    ids: list[str]
    cap: int | None = None  # the service's own page size limit, below the `limit` asked
    ignore_skip: bool = False
    insert_every: int = 0  # every N-th request, `insert_count` bots appear at the front
    insert_count: int = 1
    remove_every: int = 0  # every N-th request, one bot disappears
    remove_where: str = "anywhere"  # behind | ahead | anywhere (relative to the page served)
    changes_from: int = 1  # no change before this request
    changes_until: int = 0  # nor after this one (0 = no end)
    seed: int = 0
    requests: int = 0
    head_requests: list[int] = field(default_factory=list)  # request numbers at skip=0
    inserted_at: dict[str, int] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    served: list[str] = field(default_factory=list)  # every id of every page, in order

    def __post_init__(self) -> None:
        self.start = list(self.ids)
        self._rng = random.Random(self.seed)
        self._names = (f"new-{n}" for n in itertools.count())

    def get(self, skip: int, limit: int) -> list[str]:
        self.requests += 1
        if self.ignore_skip:
            skip = 0
        if skip == 0:
            self.head_requests.append(self.requests)
        size = limit if self.cap is None else min(limit, self.cap)
        page = self.ids[skip:skip + size]
        self.served.extend(page)
        if self.changes_from <= self.requests and not 0 < self.changes_until < self.requests:
            self._change(skip, len(page))
        return page

    def _change(self, skip: int, served: int) -> None:
        n = self.requests
        if self.insert_every and n % self.insert_every == 0:
            for _ in range(self.insert_count):
                bot = next(self._names)
                self.ids.insert(0, bot)
                self.inserted_at[bot] = n
        if self.remove_every and n % self.remove_every == 0 and self.ids:
            end = min(skip + served, len(self.ids))
            if self.remove_where == "behind":
                if end == 0:
                    return
                index = self._rng.randrange(0, end)
            elif self.remove_where == "ahead":
                if end >= len(self.ids):
                    return
                index = self._rng.randrange(end, len(self.ids))
            else:
                index = self._rng.randrange(len(self.ids))
            self.removed.add(self.ids.pop(index))

    # --- what the pager owes -----------------------------------------------------------------
    def must_return(self) -> set[str]:
        """Bots listed from start to end, and bots added before the final look at the head."""
        final_head = self.head_requests[-1] if self.head_requests else 0
        early = {bot for bot, at in self.inserted_at.items() if at < final_head}
        return (set(self.start) | early) - self.removed

    def ever_listed(self) -> set[str]:
        return set(self.start) | set(self.inserted_at)

    def first_served(self) -> list[str]:
        """Each id the service put on a page, once, in the order it first did."""
        return list(dict.fromkeys(self.served))


class BotsLost(AssertionError):
    """A bot the pager owed was not returned (the known limits below fail with exactly this)."""


def page_through(listing: Listing, page_size: int = 100) -> tuple[Pager, list[str]]:
    """Drive a pager over the listing to the end; return it and the ids it returned, in order."""
    pager = Pager(page_size=page_size)
    returned: list[str] = []
    while (request := pager.next_request()) is not None:
        assert listing.requests < REQUEST_LIMIT, "the pager never stops"
        skip, limit = request
        assert limit == page_size
        returned.extend(pager.feed(skip, listing.get(skip, limit)))
    return pager, returned


def assert_exactly_once(listing: Listing, pager: Pager, returned: list[str]) -> None:
    assert pager.complete
    # Row by row against what the service served: each bot it put on a page comes back once,
    # when first served; a bot returned twice, early or never served breaks the equality.
    assert returned == listing.first_served(), "the pager did not return each served bot once"
    missing = listing.must_return() - set(returned)
    if missing:
        raise BotsLost(f"{len(missing)} bot(s) lost: {sorted(missing)[:5]}")


def bots(n: int) -> list[str]:
    return [f"bot-{i:04d}" for i in range(n)]


# --- a listing that holds still ------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, 2, 7, 99, 100, 101, 250])
@pytest.mark.parametrize(("page_size", "cap"), [
    (100, None), (100, 1), (100, 3), (100, 7), (10, 3), (10, None), (1, None),
], ids=["no cap", "cap 1", "cap 3", "cap 7", "limit 10 cap 3", "limit 10", "limit 1"])
def test_a_still_listing_is_returned_once_in_order(size: int, page_size: int,
                                                   cap: int | None) -> None:
    listing = Listing(bots(size), cap=cap)
    pager, returned = page_through(listing, page_size)
    assert returned == bots(size)
    assert pager.complete


def test_a_short_page_is_not_taken_for_the_end() -> None:
    # The service returns 7 where 100 were asked: a pager that stops there loses 243 bots.
    listing = Listing(bots(250), cap=7)
    _, returned = page_through(listing)
    assert returned == bots(250)


def test_an_empty_listing_costs_one_request() -> None:
    listing = Listing([])
    pager, returned = page_through(listing)
    assert (returned, pager.complete, listing.requests) == ([], True, 1)


def test_a_still_listing_costs_its_pages_plus_a_few() -> None:
    listing = Listing(bots(1000))
    page_through(listing, page_size=100)
    # 1000 / (100 - 5 overlap) pages, the empty page at the end, the last page read again to
    # confirm it, and one look at the head.
    assert listing.requests <= 11 + 2 + 1 + 1


# --- a listing that changes while it is paged ---------------------------------------------------
CAPS = [pytest.param(None, id="no cap"), pytest.param(3, id="cap 3"), pytest.param(7, id="cap 7")]
SEEDS = range(4)


@pytest.mark.parametrize("every", [2, 3])
@pytest.mark.parametrize("cap", CAPS)
def test_bots_added_at_the_front_while_paging_are_returned(cap: int | None, every: int) -> None:
    listing = Listing(bots(60), cap=cap, insert_every=every)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)
    assert listing.inserted_at  # the scenario did change the listing


@pytest.mark.xfail(strict=True, raises=ListingUnstable, reason="known limit: a listing that "
                   "grows at the front on every request recedes at the tail as fast as the pager "
                   "reads it, so the empty page that confirms the end never comes; the pager "
                   "gives up (nothing lost, run partial) instead of finishing")
@pytest.mark.parametrize("cap", CAPS)
def test_bots_added_at_the_front_on_every_request_are_returned(cap: int | None) -> None:
    listing = Listing(bots(60), cap=cap, insert_every=1)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)


@pytest.mark.parametrize("every", [3, 5])
def test_bots_added_at_the_front_are_returned_with_a_page_cap_of_1(every: int) -> None:
    listing = Listing(bots(30), cap=1, insert_every=every)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)


def test_a_burst_of_bots_added_at_the_front_during_the_head_pass_is_returned() -> None:
    # The head is re-read after the end; a page there holding only bots the head walk has
    # just found means the listing shifted under it, not that the walk is over.
    listing = Listing(bots(40), cap=2, insert_every=2, changes_from=30)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)
    assert len(listing.inserted_at) > 10


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("where", ["behind", "ahead", "anywhere"])
@pytest.mark.parametrize("every", [1, 2, 3])
@pytest.mark.parametrize("cap", CAPS)
def test_bots_removed_while_paging_do_not_hide_others(cap: int | None, every: int, where: str,
                                                      seed: int) -> None:
    listing = Listing(bots(60), cap=cap, remove_every=every, remove_where=where, seed=seed)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)


@pytest.mark.parametrize("seed", SEEDS)
def test_bots_removed_ahead_are_harmless_with_a_page_cap_of_1(seed: int) -> None:
    listing = Listing(bots(30), cap=1, remove_every=3, remove_where="ahead", seed=seed)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)


@pytest.mark.xfail(strict=True, raises=ListingUnstable, reason="known limit: with a page cap of "
                   "1 the pager has no overlap to notice a shift back; reading the last page "
                   "again before believing the end sees the shifts, and with a removal behind "
                   "it every few requests it never confirms the end: it gives up (run partial, "
                   "nothing marked removed) instead of finishing with a bot hidden")
def test_bots_removed_behind_with_a_page_cap_of_1_do_not_hide_others() -> None:
    listing = Listing(bots(30), cap=1, remove_every=5, remove_where="behind")
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("every", [1, 2, 3])
@pytest.mark.parametrize("cap", CAPS)
def test_churn_while_paging_adds_at_the_front_and_removes_anywhere(cap: int | None, every: int,
                                                                   seed: int) -> None:
    # What the embedded service's `churn_every` does: one bot in at the front, one out.
    listing = Listing(bots(60), cap=cap, insert_every=every, remove_every=every, seed=seed)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)
    assert listing.removed and listing.inserted_at


# --- services the directory cannot be paged through -------------------------------------------------
@pytest.mark.parametrize(("size", "cap"), [(60, None), (60, 3), (5, None), (2, None)],
                         ids=["60 bots", "60 bots cap 3", "5 bots", "2 bots"])
def test_a_service_that_ignores_skip_is_refused(size: int, cap: int | None) -> None:
    # Even a listing that fits one page is caught: a page past its end is never empty.
    listing = Listing(bots(size), cap=cap, ignore_skip=True)
    with pytest.raises(SkipIgnored, match="ignores `skip`") as caught:
        page_through(listing, page_size=10)
    assert "GET /bots?skip=" in str(caught.value)
    assert listing.requests <= 10


@pytest.mark.parametrize(("size", "cap"), [(60, 1), (1, None)], ids=["cap 1", "1 bot"])
def test_a_service_that_ignores_skip_one_bot_at_a_time_is_given_up(size: int,
                                                                  cap: int | None) -> None:
    # One bot per page cannot tell an ignored skip from a shifting listing; still no loop.
    listing = Listing(bots(size), cap=cap, ignore_skip=True)
    with pytest.raises(ListingUnstable, match="gave up after"):
        page_through(listing, page_size=10)
    assert listing.requests < 200


def test_a_listing_that_grew_by_a_page_at_the_front_is_not_taken_for_ignored_skip() -> None:
    # The old first page shows up again at skip=10 once: that is growth, not a broken service.
    listing = Listing(bots(60), insert_every=1, insert_count=10, changes_until=1)
    pager, returned = page_through(listing, page_size=10)
    assert_exactly_once(listing, pager, returned)


@pytest.mark.parametrize("listing", [
    pytest.param(Listing(bots(40), cap=1, insert_every=1), id="shifts as fast as it is read"),
    pytest.param(Listing(bots(1), cap=3, insert_every=1), id="one bot, growing every request"),
])
def test_a_listing_that_never_settles_is_given_up_after_a_bounded_number_of_requests(
        listing: Listing) -> None:
    with pytest.raises(ListingUnstable, match="gave up after") as caught:
        page_through(listing, page_size=10)
    assert "run again later" in str(caught.value)
    assert listing.requests < 1000


def test_a_flood_at_the_front_during_the_head_walk_is_given_up() -> None:
    # Bots arrive at the front faster than the head walk reads them: every page is new, so
    # only the head walk's own bound stops it.
    still = Listing(bots(40), cap=3)
    page_through(still, page_size=10)
    end = still.head_requests[1] - 1  # the empty page that ends the walk; the head comes next
    listing = Listing(bots(40), cap=3, insert_every=1, insert_count=3, changes_from=end)
    with pytest.raises(ListingUnstable, match="kept growing at the front"):
        page_through(listing, page_size=10)
    assert listing.requests < 1000


@pytest.mark.parametrize(("size", "removals"), [
    # Two bots removed behind the pager after its first page, one more right before the empty
    # page that ends the listing: the last bot moves back into positions already read.
    (6, {1: [0, 0], 4: [0]}),
    # A page that starts past unread bots (two removed behind), then one more removal: the
    # step back lands on a bot that page read, which is no known ground.
    (7, {4: [0, 0], 5: [0]}),
    # One removal behind right before the page asked exactly past the end: that page starts
    # one bot past the last one read.
    (31, {12: [0, 0], 15: [0]}),
], ids=["moved back under the end", "stepped back onto a page past a gap",
        "a page past the end that skips one"])
def test_bots_removed_behind_at_the_worst_moments_hide_no_other(
        size: int, removals: dict[int, list[int]]) -> None:
    # Both found by the property test in tests/test_properties.py.
    ids = bots(size)
    pager = Pager(page_size=2 if size < 31 else 3)
    returned: list[str] = []
    requests = 0
    while (request := pager.next_request()) is not None:
        skip, limit = request
        returned.extend(pager.feed(skip, ids[skip:skip + limit]))
        requests += 1
        for index in removals.get(requests, []):  # after request n, these positions go
            ids.pop(index)
    assert sorted(returned) == bots(size)  # the last bot included, each once


# --- the tail of a list that grows at its end (a bot's /stats read on from the last read) -------
def read_tail(records: list[str], start: int, page_size: int, *, cap: int | None = None,
              appended: dict[int, list[str]] | None = None,
              dropped: dict[int, int] | None = None) -> tuple[Pager, list[str]]:
    """Drive a tail pager over ``records`` from ``start``; after request N, ``appended[N]`` is
    added at the end and the record at index ``dropped[N]`` is removed."""
    pager = Pager(page_size=page_size, start=start, reread_head=False)
    returned: list[str] = []
    while (request := pager.next_request()) is not None:
        assert pager.requests < REQUEST_LIMIT, "the pager never stops"
        skip, limit = request
        page = records[skip:skip + min(limit, cap or limit)]
        returned.extend(pager.feed(skip, page))
        if dropped and pager.requests in dropped:
            records.pop(dropped[pager.requests])
        records.extend((appended or {}).get(pager.requests, []))
    assert pager.complete
    return pager, returned


def test_a_tail_read_costs_the_page_that_holds_the_end_and_one_empty_page() -> None:
    records = [f"r{i}" for i in range(1_000)]
    pager, returned = read_tail(records, 992, page_size=100)
    assert returned == records[992:]
    assert pager.requests == 2  # not an overlap step, a re-read of the last page, nor the head


def test_records_appended_during_a_tail_read_are_read_once_in_order() -> None:
    records = [f"r{i}" for i in range(50)]
    pager, returned = read_tail(records, 45, page_size=10,
                                appended={1: ["a1", "a2"], 2: ["a3"], 3: ["a4"]})
    assert returned == [f"r{i}" for i in range(45, 50)] + ["a1", "a2", "a3", "a4"]


def test_a_tail_read_under_a_page_cap_reads_every_record_after_the_start() -> None:
    records = [f"r{i}" for i in range(200)]
    _, returned = read_tail(records, 20, page_size=100, cap=7)
    assert returned == records[20:]


def test_a_record_a_tail_read_misses_in_a_shift_is_read_by_the_next_read() -> None:
    # A record dropped before the end while one is appended moves the appended one back under
    # the end just read: this read misses it, and the next one, which starts a few records
    # before the newest record kept, reads it.
    records = [f"r{i}" for i in range(30)]
    _, first = read_tail(records, 25, page_size=10, dropped={1: 3}, appended={1: ["late"]})
    assert "late" not in first
    newest = records.index(first[-1])
    _, second = read_tail(records, max(0, newest - 8), page_size=10)
    assert second[second.index(first[-1]) + 1:] == ["late"]
