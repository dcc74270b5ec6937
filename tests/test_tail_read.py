"""Which pages of a bot's paged /stats an incremental read asks for (``TailRead``), on lists in
memory: oldest or newest first, a right or a wrong hint, records dropped or arriving meanwhile."""

from __future__ import annotations

import pytest

from pipeline.harvester._paging import Mark, Order, Pager, TailRead

REQUEST_LIMIT = 200


def stamp(key: str) -> int:
    return int(key[1:]) * 1_000_000  # r17: 17 seconds after the epoch


def read(listed: list[str], *, anchor: str, newest: str | None, last_length: int | None,
         hint: Order = Order.UNKNOWN, page_size: int = 10, before: dict[int, list[str]] | None
         = None, times: bool = True) -> tuple[TailRead, list[str], list[int]]:
    """Drive a read over ``listed`` (the service's list, in its order); after request N the
    records ``before[N]`` are put at the front. Returns the machine, what it kept and the
    skips it asked."""
    tail = TailRead(page_size, anchor, stamp(anchor), newest, last_length,
                    lambda start, whole: Pager(page_size=page_size, start=start,
                                               reread_head=whole), hint)
    kept: list[str] = []
    asked: list[int] = []
    while (request := tail.next_request()) is not None:
        assert len(asked) < REQUEST_LIMIT, "the read never stops"
        skip, limit = request
        asked.append(skip)
        page = listed[skip:skip + limit]
        kept += tail.feed(skip, page, [Mark(k, stamp(k) if times else None) for k in page])
        listed[:0] = (before or {}).get(len(asked), [])
    return tail, kept, asked


def records(n: int) -> list[str]:
    return [f"r{i}" for i in range(n)]


def newer_than(kept: list[str], anchor: str) -> set[str]:
    return {k for k in kept if stamp(k) > stamp(anchor)}


def test_oldest_first_costs_the_page_that_holds_the_anchor_and_the_empty_page_after() -> None:
    listed = records(103)  # 100 read last time, 3 new
    tail, kept, asked = read(listed, anchor="r99", newest="r102", last_length=100)
    assert asked == [95, 103]  # half a page before the end, then past it
    assert newer_than(kept, "r99") == {"r100", "r101", "r102"}
    assert (tail.found, tail.start + len(kept)) == (Order.OLDEST_FIRST, 103)  # the new length


@pytest.mark.parametrize("hint", [Order.UNKNOWN, Order.NEWEST_FIRST])
def test_newest_first_costs_one_page_once_the_order_is_known(hint: Order) -> None:
    listed = records(103)[::-1]
    tail, kept, asked = read(listed, anchor="r99", newest="r102", last_length=100, hint=hint)
    # Unknown: the end where an oldest-first list grows is asked first, and its times fall.
    assert asked == ([95, 0] if hint is Order.UNKNOWN else [0])
    assert newer_than(kept, "r99") == {"r100", "r101", "r102"}
    assert tail.found is Order.NEWEST_FIRST


def test_a_wrong_hint_costs_one_request_and_no_record() -> None:
    tail, kept, asked = read(records(103), anchor="r99", newest="r102", last_length=100,
                             hint=Order.NEWEST_FIRST)
    assert asked == [0, 95, 103]
    assert newer_than(kept, "r99") == {"r100", "r101", "r102"}
    assert tail.found is Order.OLDEST_FIRST


def test_newest_first_with_more_new_records_than_a_page_reads_until_the_anchor() -> None:
    listed = records(125)[::-1]
    _, kept, asked = read(listed, anchor="r99", newest="r124", last_length=100,
                          hint=Order.NEWEST_FIRST)
    assert asked == [0, 5, 10, 15, 20]  # pages overlap by half as the listing's do
    assert newer_than(kept, "r99") == {f"r{i}" for i in range(100, 125)}


def test_newest_first_stops_at_an_older_record_when_the_anchor_was_dropped() -> None:
    listed = [k for k in records(103) if k != "r99"][::-1]
    _, kept, asked = read(listed, anchor="r99", newest="r102", last_length=100,
                          hint=Order.NEWEST_FIRST)
    assert asked == [0]
    assert newer_than(kept, "r99") == {"r100", "r101", "r102"}


def test_records_arriving_at_the_front_during_a_newest_first_read_lose_nothing() -> None:
    listed = records(130)[::-1]
    _, kept, _ = read(listed, anchor="r99", newest="r129", last_length=100,
                      hint=Order.NEWEST_FIRST, before={1: ["r131", "r130"], 2: ["r132"]})
    # What was there when the read began is read; what came later is newer than all of it,
    # so the next run's GET /stat shows it and that read starts from it.
    assert newer_than(kept, "r99") >= {f"r{i}" for i in range(100, 130)}


def test_without_the_last_length_an_oldest_first_list_is_read_whole_from_the_front() -> None:
    listed = records(25)
    tail, kept, asked = read(listed, anchor="r20", newest="r24", last_length=None)
    assert kept == listed and asked[0] == 0 and tail.whole


def test_an_anchor_found_nowhere_reads_the_whole_list() -> None:
    listed = [k for k in records(60) if k != "r40"]
    tail, kept, asked = read(listed, anchor="r40", newest="r59", last_length=41)
    assert sorted(kept, key=stamp) == listed and tail.whole
    assert asked[:3] == [36, 31, 21]  # stepping back a page, two, four... to the front


def test_records_dropped_before_the_anchor_leave_it_on_the_first_page_read() -> None:
    listed = records(85)
    del listed[:3]  # the service dropped its three oldest records: r79 moved back three places
    _, kept, asked = read(listed, anchor="r79", newest="r84", last_length=80)
    assert asked == [75, 82]
    assert newer_than(kept, "r79") == {f"r{i}" for i in range(80, 85)}


def test_the_newest_record_opening_page_zero_tells_the_order_without_times() -> None:
    listed = records(12)[::-1]
    tail, kept, asked = read(listed, anchor="r9", newest="r11", last_length=None, times=False)
    assert asked == [0] and tail.found is Order.NEWEST_FIRST
    assert {"r10", "r11"} <= set(kept)
