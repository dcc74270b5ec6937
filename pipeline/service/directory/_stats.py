"""A bot's stat records (GET /bots/:id/stats): generated, malformed and posted, as served.

``rendered_stats`` memoises what the HTTP layer makes of a bot's records (its encoded bodies),
per bot, for as long as those records stay the same: a bounded LRU, so memory stays flat
however many bots there are. ``stats_tail`` keeps each bot's series where it stopped and its
newest records encoded, so a page near the end of a long list, or the newest record, costs
what is new since the last read, as a real service's index would, not the whole history.
The body faults (a stall, a gzip body cut short) are counted here too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from .._config import Faults, ServiceConfig
from .._data import BotProfile, Series, generate_series, iso, malform, malformation, unit
from .._json import dumps
from ._listing import Listing
from ._state import Record

if TYPE_CHECKING:
    from ._truth import Directory

_ONE_MS = timedelta(milliseconds=1)
# Bounds of the rendered-stats memo: bots held, and bytes held (as the renderer counts them).
# 2,000 bots x 90 days of records encode to ~45 MB.
RENDERED_STATS_MAX_BOTS = 4096
RENDERED_STATS_MAX_BYTES = 256 * 1024 * 1024
# Bounds of the stats tails: the bytes all tails hold (as _Tail.size counts them), and the
# newest records each holds (encoded). A tail is its generator's state plus its records.
STATS_TAIL_MAX_BYTES = 384 * 1024 * 1024
STATS_TAIL_RECORDS = 24

T = TypeVar("T")
# (directory, bot index, served records) -> (what to keep, its size in bytes); see
# Directory.rendered_stats.
Renderer = Callable[["Directory", int, list[Record]], tuple[T, int]]


class Stats(Listing):
    """Stat records as served, memoised bodies, tails, posted records and body faults."""

    def __init__(self, config: ServiceConfig) -> None:
        super().__init__(config)
        self._rendered = _Memo(RENDERED_STATS_MAX_BOTS, RENDERED_STATS_MAX_BYTES)
        self._tails: dict[int, _Tail] = {}
        self._tail_bytes = 0

    def _served(self, record: Record) -> Record:
        """A stat record as this service spells it (:class:`~pipeline.service._shapes.Shapes`)."""
        return self.shapes.stat(record)

    def _bot_last_slot(self, index: int) -> int:
        last = self.last_slot()
        return min(last, self._removed[index]) if index in self._removed else last

    def _stats_snapshot(self, index: int) -> tuple[BotProfile, int, list[tuple[int, datetime, Record]]]:
        """What the bot's records are made of: its profile, newest slot and posted stats."""
        with self._lock:
            return (self._profile(index), self._bot_last_slot(index),
                    list(self._posted.get(index, ())))

    def _stats_with_kinds(self, index: int, snapshot: tuple[BotProfile, int, list[Any]] | None = None,
                          ) -> list[tuple[str | None, Record]]:
        """Every record of the bot as served, oldest first, with its malformation (or None).

        Posted records come after the generated record that was newest when they were
        posted, which is also timestamp order (see ``post_stat``)."""
        profile, last, posted = snapshot or self._stats_snapshot(index)
        rate = self.config.faults.malformed_rate
        out: list[tuple[str | None, Record]] = []
        j = 0
        for slot, record in generate_series(self._seed, profile, self.timeline, last):
            while j < len(posted) and posted[j][0] < slot:
                out.append((None, _copy_stat(posted[j][2])))
                j += 1
            kind = malformation(self._seed, index, slot, rate)
            if kind is not None:
                malform(record, kind, slot)
            out.append((kind, record))
        out.extend((None, _copy_stat(p[2])) for p in posted[j:])
        if self.shapes.stats_differ:
            out = [(kind, self._served(record)) for kind, record in out]
        return out

    def served_stats(self, index: int) -> list[Record]:
        return [record for _, record in self._stats_with_kinds(index)]

    def rendered_stats(self, index: int, render: Renderer[T]) -> T:
        """``render(self, index, served_stats(index))[0]``, memoised per bot.

        Records are a pure function of the bot, its newest slot (the clock, or the slot it
        was removed at), how many stats it posted (they are only ever appended) and the faults
        (malformed records, bad JSON): a memo entry is used only while all of these, and
        ``render`` itself, are what it was made from, so ``advance``, the live clock, a POST,
        churn and every fault show on the next request exactly as without the memo. LRU,
        bounded in bots and in the bytes ``render`` reports; a body bigger than an eighth of
        the budget is never kept. If ``served_stats`` has been replaced (a subclass, or a test
        counting answers), nothing is memoised: every call goes through the replacement."""
        directory = cast("Directory", self)  # the parts are only ever a Directory
        if getattr(self.served_stats, "__func__", None) is not Stats.served_stats:
            return render(directory, index, self.served_stats(index))[0]
        snapshot = self._stats_snapshot(index)
        _, last, posted = snapshot
        version = (last, len(posted), self.config.faults, render)
        # The version holds `render`: an entry found is what this very render made, a T.
        value: T = self._rendered.get(index, version)
        if value is _Memo.MISSING:
            records = [record for _, record in self._stats_with_kinds(index, snapshot)]
            value, size = render(directory, index, records)
            self._rendered.put(index, version, value, size)
        return value

    def stats_tail(self, index: int, skip: int, limit: int, *,
                   newest_first: bool = False) -> list[bytes] | None:
        """The bot's served records ``skip``..``skip + limit`` (those there are), each encoded
        as in a /stats body, when they lie among its newest records; None otherwise (or for a
        bot with posted stats, a bad-JSON bot, or a replaced ``served_stats``): build the page
        from ``served_stats``. A ``skip`` below 0 counts from the end (-1: the newest).
        ``newest_first``: positions count from the newest record, and the page is in that order."""
        if (getattr(self.served_stats, "__func__", None) is not Stats.served_stats
                or self.is_bad_json(index)):
            return None
        with self._lock:
            if index in self._posted:
                return None
            tail = self._tail(index, self._bot_last_slot(index))
            first = tail.count - len(tail.items)
            if newest_first:
                # Position p from the newest is position count - 1 - p from the oldest.
                end = tail.count - skip
                if end <= 0:
                    return []
                skip, limit = max(0, end - limit), min(limit, end)
            if skip < 0:
                skip = max(0, tail.count + skip)
            if skip >= tail.count:
                return []
            if skip < first:
                return None
            items = list(tail.items)[skip - first:skip - first + limit]
            return items[::-1] if newest_first else items

    def warm(self) -> int:
        """Make every live bot's stats tail now (a whole pass over each history), so that
        reads near the end of a list, and of the newest record, cost O(new) from the first
        request on, as from an indexed service. Returns how many bots it warmed."""
        bots = 0
        for bot_id in self.bot_ids():
            index = self.live_index(bot_id)
            if index is not None:
                self.stats_tail(index, -1, 1)
                bots += 1
        return bots

    def _tail(self, index: int, last: int) -> _Tail:
        """The bot's tail brought up to ``last`` (made anew when it is missing, stale or ahead).

        Tails are kept while they fit ``STATS_TAIL_MAX_BYTES``; past it a bot's tail is made for
        the request and dropped. Not an LRU: reads go through the listing in order, so a
        directory larger than the budget would cycle an LRU and never hit; this way the bots
        that fit stay O(new) and the others cost their history, once per request."""
        tail = self._tails.get(index)
        faults = self.config.faults
        if tail is None or tail.faults is not faults or tail.series.next_slot > last + 1:
            if tail is not None:
                self._tail_bytes -= tail.size
                del self._tails[index]
            tail = _Tail(Series(self._seed, self._profile(index), self.timeline), faults,
                         deque(maxlen=self._tail_records()), 0)
            kept = self._tail_bytes + _Tail.BASE <= STATS_TAIL_MAX_BYTES
        else:
            kept = True
            self._tail_bytes -= tail.size
        made = tail.series.until(last)
        newest = made[-self._tail_records():]  # only the newest are served from here
        for slot, record in newest:
            kind = malformation(self._seed, index, slot, faults.malformed_rate)
            if kind is not None:
                malform(record, kind, slot)
            # A copy of exactly its length: orjson's bytes keep its whole output buffer (4 KB
            # for a 300-byte record), and a tail keeps its records for hours.
            tail.items.append(bytes(memoryview(dumps(self._served(record)))))
        tail.count += len(made)
        if kept:
            self._tails[index] = tail
            self._tail_bytes += tail.size
        return tail

    def _tail_records(self) -> int:
        """Records a tail keeps: newest first, a whole first page (what an hourly read asks)."""
        config = self.config
        if config.stats_order == "newest":
            return max(STATS_TAIL_RECORDS, config.stats_page_size)
        return STATS_TAIL_RECORDS

    def post_stat(self, index: int, payload: Record) -> Record:
        """Append a posted record (already validated) and return it as served.

        Its timestamp is the real time now, clamped into the current interval of the virtual
        clock (after the bot's newest record, before the next generated one), so ``/stats``
        stays in timestamp order even when the virtual clock is not today."""
        with self._lock:
            profile = self._profile(index)
            last = self.last_slot()
            posted = self._posted.setdefault(index, [])
            floor = self.timeline.time(last)
            if posted and posted[-1][0] == last:
                floor = posted[-1][1]
            ceiling = self.timeline.time(last + 1) - _ONE_MS
            now = datetime.now(UTC)
            now = now.replace(microsecond=now.microsecond // 1000 * 1000)
            stamp = max(floor + _ONE_MS, min(now, ceiling))
            record: Record = {
                "id": f"{profile.id}-post-{len(posted) + 1}",
                "bot_id": profile.id,
                "timestamp": iso(stamp, millis=True),
                "users": payload["users"],
                "guilds": payload["guilds"],
                "shards": payload.get("shards"),
                "memory_load": payload.get("memory_load"),
                "cpu_load": payload.get("cpu_load"),
                "commands_executed": payload.get("commands_executed"),
                "custom": [dict(item) for item in payload.get("custom") or []],
            }
            posted.append((last, stamp, record))
            return self._served(_copy_stat(record))

    def is_bad_json(self, index: int) -> bool:
        rate = self.config.faults.bad_json_rate
        return rate > 0 and unit(self._seed, "bad-json", index) < rate

    def _body_fault_kind(self, index: int) -> str | None:
        faults = self.config.faults
        for kind, rate in (("stall", faults.stall_rate), ("gzip_cut", faults.gzip_cut_rate)):
            if rate > 0 and unit(self._seed, kind, index) < rate:
                return kind
        return None

    def body_fault(self, index: int) -> str | None:
        """How this /stats answer of the bot is spoiled ("stall", "gzip_cut"), or None; counts
        it, so after ``body_fault_times`` spoiled answers the bot is answered whole."""
        kind = self._body_fault_kind(index)
        if kind is None:
            return None
        times = self.config.faults.body_fault_times
        with self._lock:
            spoiled = self._spoiled.get(index, 0)
            if times and spoiled >= times:
                return None
            self._spoiled[index] = spoiled + 1
        return kind

    def body_fault_bots(self, kind: str) -> set[str]:
        """Listed bots whose /stats answers the body fault ``kind`` spoils. O(n)."""
        with self._lock:
            return {self._profile(self._index_at(p)).id for p in range(len(self))
                    if self._body_fault_kind(self._index_at(p)) == kind}

    def spoiled_answers(self, bot_id: str) -> int:
        """/stats answers of the bot a body fault has spoiled so far."""
        index = self._index_of(bot_id)
        with self._lock:
            return 0 if index is None else self._spoiled.get(index, 0)


@dataclass
class _Tail:
    """A bot's series where it stopped, and its newest served records, encoded."""

    series: Series
    faults: Faults  # what the records were made under: other faults, another tail
    items: deque[bytes]
    count: int  # records made in all (the list's length)

    BASE: ClassVar[int] = 4096  # the generator's state (its Random) and the objects around it

    @property
    def size(self) -> int:
        return self.BASE + sum(len(item) + 40 for item in self.items)


class _Memo:
    """A thread-safe LRU of ``key -> (version, value, size)``: ``get`` answers only for the
    same version; at most ``max_entries`` entries and ``max_bytes`` of summed sizes."""

    MISSING: Any = object()

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[int, tuple[object, Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: int, version: object) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return self.MISSING
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: int, version: object, value: Any, size: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[2]
            if size > self.max_bytes // 8:
                return
            self._entries[key] = (version, value, size)
            self.bytes += size
            while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped


def _copy_stat(record: Record) -> Record:
    copy = dict(record)
    if isinstance(copy.get("custom"), list):
        copy["custom"] = [dict(item) for item in copy["custom"]]
    return copy
