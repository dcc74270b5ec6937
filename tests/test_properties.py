"""Guarantees that hold for every input, checked on generated ones (hypothesis; the "ci"
profile in conftest.py fixes the example count and seed).

- The page splitter and the record validator: on random and garbled ``/stats`` bodies the
  typed fast path and the record-by-record path give the same rows and reasons, and nothing
  raises an error the harvester does not expect.
- The listing pager: whatever bots are inserted at the front or removed anywhere between its
  requests (within the documented limits: no page cap of 1, the listing not growing on every
  request), every bot listed throughout is returned, none twice.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pipeline.core._settings import FieldSettings
from pipeline.harvester import _records as pages
from pipeline.harvester import _records as records
from pipeline.harvester._paging import Pager
from pipeline.harvester._records import (
    StatPage,
    _raw_page_by_record,
    latest_allowed,
    parse_stats,
    parse_stats_raw,
)
from pipeline.interface._client import decode_json, split_array

BOT = "1234567890123456789"
RECEIVED = datetime(2026, 1, 1, tzinfo=UTC)
FIELDS = [FieldSettings(), FieldSettings(max_future_skew="0s"),
          FieldSettings(stat_id="uuid", stat_time="at", custom_name="k", custom_value="v"),
          # records without an id: keyed by their time, by fields, by their content
          FieldSettings(stat_id="", stat_key="time"),
          FieldSettings(stat_key="fields", stat_key_fields=("timestamp", "id")),
          FieldSettings(stat_key="content")]

# --- records: values of every kind a service may send ----------------------------------------------
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                         st.floats(allow_nan=False), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)
times = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1),
                     timezones=st.sampled_from([None, UTC]))
timestamps = st.one_of(
    times.map(lambda t: t.isoformat()),  # aware or naive ISO
    times.map(lambda t: t.replace(tzinfo=t.tzinfo or UTC).isoformat().replace("+00:00", "Z")),
    st.integers(0, 7_000_000_000), st.integers(10**11, 7 * 10**12),  # epoch s and ms
    st.floats(0, 7e9, allow_nan=False), st.sampled_from(["yesterday", "", " 2026-01-01T00:00Z "]),
    json_values)
counts = st.one_of(st.integers(0, 2**63 - 1), st.integers(-5, 2**64), st.floats(allow_nan=False),
                   st.sampled_from(["12", "x", None, True]), json_values)
percents = st.one_of(st.integers(0, 100), st.floats(-10, 110, allow_nan=False),
                     st.sampled_from([None, "50", 150, False]))
customs = st.one_of(st.none(), st.lists(st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(["a", "b", " ", ""]), st.text(max_size=4), st.integers()),
     "value": json_values}), max_size=3), json_values)


@st.composite
def stat_records(draw: st.DrawFn, fields: FieldSettings) -> Any:
    """A record: usually of the usual shape, with any field missing, odd or of another type."""
    if draw(st.integers(0, 30)) == 0:
        return draw(json_values)  # not even an object
    record: dict[str, Any] = {
        fields.stat_id or "id": draw(st.one_of(st.text(min_size=1, max_size=6), st.integers(),
                                               st.sampled_from([" padded ", "", None]))),
        fields.stat_time: draw(timestamps),
        "users": draw(counts), "guilds": draw(counts),
    }
    for name, values in (("shards", counts), ("commands_executed", counts),
                         ("memory_load", percents), ("cpu_load", percents),
                         ("custom", customs)):
        if draw(st.booleans()):
            record[name] = draw(values)
    if isinstance(record.get("custom"), list) and fields.custom_name != "name":
        names = {"name": fields.custom_name, "value": fields.custom_value}
        record["custom"] = [{names.get(k, k): v for k, v in c.items()} if isinstance(c, dict)
                            else c for c in record["custom"]]
    for name in draw(st.sets(st.sampled_from(sorted(record)), max_size=2)):
        del record[name]  # a required field, or an optional one, missing
    if draw(st.booleans()):
        record[draw(st.text(max_size=4))] = draw(json_values)  # an unknown field
    return record


def body_of(page: list[Any], spacing: int) -> bytes:
    if spacing == 0:
        return json.dumps(page, separators=(",", ":"), ensure_ascii=False).encode()
    return json.dumps(page, indent=spacing, ensure_ascii=spacing % 2 == 0).encode()


def columns(page: StatPage) -> dict[str, Any]:
    return {name: getattr(page, name) for name in StatPage.__slots__}


def assert_paths_agree(body: bytes, fields: FieldSettings, chunk: int) -> None:
    split = split_array(body)
    if split is None:
        # The harvester then reads the body the careful way: either a ValueError (the page is
        # rejected) or a list each of whose records is archived or rejected.
        try:
            decoded = decode_json(body)
        except ValueError:
            return
        if isinstance(decoded, list):
            page = parse_stats(decoded, BOT, fields, received_at=RECEIVED)
            assert len(page.stat_id) + len(page.rejects) == len(decoded)
        return
    assert decode_json(b"[" + b",".join(map(bytes, split.items)) + b"]") == decode_json(body)
    latest = latest_allowed(fields, RECEIVED)
    saved, pages.TYPED_CHUNK = pages.TYPED_CHUNK, chunk
    try:
        fast = columns(parse_stats_raw(split.body, split.items, BOT, fields, received_at=RECEIVED))
    finally:
        pages.TYPED_CHUNK = saved
    slow = columns(_raw_page_by_record(split.items, BOT, fields, latest))
    assert fast == slow
    assert len(fast["stat_id"]) + len(fast["rejects"]) == len(split.items)  # none lost
    future = (latest - records.EPOCH) // records.ONE_US
    assert all(at <= future for at in fast["recorded_at"])


@given(data=st.data(), fields=st.sampled_from(FIELDS), spacing=st.integers(0, 2),
       chunk=st.integers(1, 8))
def test_the_fast_and_the_record_by_record_path_agree_on_random_pages(
        data: st.DataObject, fields: FieldSettings, spacing: int, chunk: int) -> None:
    page = data.draw(st.lists(stat_records(fields), max_size=12))
    assert_paths_agree(body_of(page, spacing), fields, chunk)


@given(data=st.data(), fields=st.sampled_from(FIELDS[:2]), chunk=st.integers(1, 8))
def test_the_fast_and_the_record_by_record_path_agree_on_garbled_pages(
        data: st.DataObject, fields: FieldSettings, chunk: int) -> None:
    page = data.draw(st.lists(stat_records(fields), min_size=1, max_size=8))
    body = bytearray(body_of(page, data.draw(st.integers(0, 2))))
    for _ in range(data.draw(st.integers(1, 3))):  # cut, drop, overwrite or insert bytes
        at = data.draw(st.integers(0, len(body)))
        action = data.draw(st.sampled_from(["cut", "drop", "set", "insert"]))
        junk = data.draw(st.binary(min_size=1, max_size=4) | st.sampled_from(
            [b",", b"]", b"{", b'"', b"\\", b"\xff", b"\xe2\x82", b"NaN", b"1e999"]))
        if action == "cut":
            del body[at:]
        elif action == "drop":
            del body[at:at + len(junk)]
        elif action == "set":
            body[at:at + len(junk)] = junk
        else:
            body[at:at] = junk
    assert_paths_agree(bytes(body), fields, chunk)


# --- the listing pager --------------------------------------------------------------------------
@st.composite
def schedules(draw: st.DrawFn) -> tuple[int, int, int | None, dict[int, tuple[int, list[float]]]]:
    """(bots at start, page size, page cap, {request number: (bots inserted at the front,
    removals as positions in [0, 1) of the listing)}). Inserts come on odd requests only: a
    listing that grows on every request is a documented limit."""
    size = draw(st.integers(0, 120))
    page_size = draw(st.integers(2, 40))
    cap = draw(st.one_of(st.none(), st.integers(2, page_size)))
    changes = draw(st.dictionaries(
        st.integers(1, 60),
        st.tuples(st.integers(0, 3), st.lists(st.floats(0, 1, exclude_max=True), max_size=2)),
        max_size=20))
    return size, page_size, cap, {n: (ins if n % 2 else 0, rem) for n, (ins, rem) in changes.items()}


@given(schedules())
def test_the_pager_returns_every_bot_once_whatever_changes_between_requests(
        schedule: tuple[int, int, int | None, dict[int, tuple[int, list[float]]]]) -> None:
    size, page_size, cap, changes = schedule
    listing = [f"bot-{i}" for i in range(size)]
    start = set(listing)
    inserted_at: dict[str, int] = {}
    removed: set[str] = set()
    heads: list[int] = []
    pager = Pager(page_size=page_size)
    returned: list[str] = []
    requests = 0
    while (request := pager.next_request()) is not None:
        requests += 1
        assert requests < 5_000, "the pager never stops"
        skip, limit = request
        if skip == 0:
            heads.append(requests)
        page = listing[skip:skip + (limit if cap is None else min(limit, cap))]
        returned.extend(pager.feed(skip, page))
        inserts, removals = changes.get(requests, (0, []))
        for k in range(inserts):
            bot = f"new-{requests}-{k}"
            listing.insert(0, bot)
            inserted_at[bot] = requests
        for where in removals:
            if listing:
                removed.add(listing.pop(int(where * len(listing))))
    assert pager.complete
    assert len(returned) == len(set(returned)), "a bot was returned twice"
    assert set(returned) <= start | set(inserted_at)
    # Every bot listed throughout, and every bot added before the pager's last look at the head.
    owed = (start | {b for b, at in inserted_at.items() if at < heads[-1]}) - removed
    missing = owed - set(returned)
    assert not missing, f"{len(missing)} bot(s) lost: {sorted(missing)[:5]}"


def test_the_typed_path_is_taken_for_usual_pages_in_chunks() -> None:
    """The property above compares the paths; this checks the fast one is really exercised."""
    usual = [{"id": f"r{i}", "timestamp": (RECEIVED - timedelta(hours=i)).isoformat(),
              "users": i, "guilds": 1} for i in range(10)]
    split = split_array(body_of(usual, 0))
    assert split is not None
    calls: list[int] = []
    typed = pages._typed_page

    def counting(recs: list[Any], items: Any, bot_id: str, fields: FieldSettings,
                 latest: Any = None) -> StatPage:
        calls.append(len(items))
        return typed(recs, items, bot_id, fields, latest)

    saved = pages.TYPED_CHUNK, pages._typed_page
    pages.TYPED_CHUNK, pages._typed_page = 4, counting  # type: ignore[assignment]
    try:
        page = parse_stats_raw(split.body, split.items, BOT, FieldSettings(), received_at=RECEIVED)
    finally:
        pages.TYPED_CHUNK, pages._typed_page = saved  # type: ignore[assignment]
    assert calls == [4, 4, 2] and len(page) == 10
