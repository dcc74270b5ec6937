"""The Directory: the service's state and the ground truth tests compare an archive with.

State is small whatever the size: the virtual clock (a tick count), the churn bookkeeping
(bots inserted at the front, bots removed) and the stats bots posted. Everything else is
derived on demand by ``_data``. The listing is ``[added bots, newest first] + [base bots
0..n-1 minus the removed ones]``; a position maps to a bot index with a bisect over the
removals, so a page costs O(page * log(removals)), never O(directory).

Thread-safe: the server's event loop and a test thread may use it at the same time.

``rendered_stats`` memoises what the HTTP layer makes of a bot's records (its encoded bodies),
per bot, for as long as those records stay the same: a bounded LRU, so memory stays flat
however many bots there are. ``stats_tail`` keeps each bot's series where it stopped and its
newest records encoded, so a page near the end of a long list, or the newest record, costs
what is new since the last read, as a real service's index would, not the whole history.
"""

from __future__ import annotations

import bisect
import hmac
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from random import Random
from typing import Any, ClassVar, TypeVar

from ._config import Faults, ServiceConfig
from ._data import (
    BOT_KIND,
    HOSTILE_CUSTOM,
    HOSTILE_NAMES,
    LOW_BITS,
    USER_KIND,
    BotProfile,
    Scrambler,
    Series,
    Timeline,
    UserProfile,
    generate_series,
    iso,
    make_bot,
    make_servers,
    make_user,
    make_webhooks,
    malform,
    malformation,
    scrambler,
    secret,
    snowflake_low,
    unit,
)
from ._events import plan, truth
from ._json import dumps
from ._shapes import Shapes

USER_TOKEN_PREFIX = "utok_"
BOT_KEY_PREFIX = "bkey_"
_CREDENTIAL_LEN = 5 + 8 + 32  # prefix, scrambled index (hex), HMAC (hex)
_CO_OWNER_SHARE = 0.10
HOSTILE_EVERY = 4  # every 4th bot gets a hostile name (Faults.hostile_names)
_ONE_MS = timedelta(milliseconds=1)
# Bounds of the rendered-stats memo: bots held, and bytes held (as the renderer counts them).
# 2,000 bots x 90 days of records encode to ~45 MB.
RENDERED_STATS_MAX_BOTS = 4096
RENDERED_STATS_MAX_BYTES = 256 * 1024 * 1024
# Bounds of the stats tails: the bytes all tails hold (as _Tail.size counts them), and the
# newest records each holds (encoded). A tail is its generator's state plus its records.
STATS_TAIL_MAX_BYTES = 384 * 1024 * 1024
STATS_TAIL_RECORDS = 24

Record = dict[str, Any]
T = TypeVar("T")
# (directory, bot index, served records) -> (what to keep, its size in bytes); see
# Directory.rendered_stats.
Renderer = Callable[["Directory", int, list[Record]], tuple[T, int]]


class Directory:
    """All bots, users and stats of one service; see the module docstring."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        seed = config.seed
        self._seed = seed
        initial = config.history_days * config.stats_per_day
        interval = timedelta(seconds=config.interval_seconds)
        clock = config.start_clock()
        self.timeline = Timeline(slot0=clock - interval * (initial - 1), interval=interval,
                                 initial=initial, per_day=config.stats_per_day)
        self._lock = threading.RLock()
        self._base = config.bots
        self._user_count = config.user_count
        self._universe = config.bots  # bot indices below this exist or existed
        self._added: list[int] = []  # live churn-inserted bots, oldest first (listed newest first)
        self._added_all: list[int] = []
        self._added_slot: dict[int, int] = {}
        self._removed_base: list[int] = []  # sorted, for the bisect in _index_at
        self._removed: dict[int, int] = {}  # bot index -> last slot it got records for
        # Posted stats per bot: (slot that was newest when posted, timestamp, record).
        self._posted: dict[int, list[tuple[int, datetime, Record]]] = {}
        self._ticks = 0
        self._live_start = time.monotonic()
        self._listing_requests = 0
        self._churns = 0
        self._spoiled: dict[int, int] = {}  # bot index -> /stats answers a body fault spoiled
        self._bot_ids = scrambler(seed, "bot", LOW_BITS)
        self._user_ids = scrambler(seed, "user", LOW_BITS)
        self._keys = scrambler(seed, "key", 32)
        self._tokens = scrambler(seed, "token", 32)
        # Profiles are pure functions of (seed, index); caching them keeps pages and repeated
        # lookups cheap without holding the whole directory in memory.
        self._profile = lru_cache(maxsize=16384)(self._make_profile)
        self._user_profile = lru_cache(maxsize=4096)(self._make_user_profile)
        self._rendered = _Memo(RENDERED_STATS_MAX_BOTS, RENDERED_STATS_MAX_BYTES)
        self._tails: dict[int, _Tail] = {}
        self._tail_bytes = 0
        self.shapes = Shapes.of(config)

    # --- clock -------------------------------------------------------------------------
    def last_slot(self) -> int:
        """The newest slot of the grid that has happened (records exist up to it)."""
        live = self.config.faults.live_interval
        ticks = self._ticks
        if live > 0:
            ticks += int((time.monotonic() - self._live_start) / live)
        return self.timeline.initial - 1 + ticks

    def clock(self) -> datetime:
        """The virtual now: the time of the newest slot."""
        return self.timeline.time(self.last_slot())

    def advance(self, intervals: int = 1) -> None:
        """New stat records arrive: every live bot gets ``intervals`` more. O(1)."""
        if isinstance(intervals, bool) or not isinstance(intervals, int) or intervals < 0:
            raise ValueError(f"intervals={intervals!r}: expected an integer >= 0")
        with self._lock:
            self._ticks += intervals

    # --- profiles ----------------------------------------------------------------------
    def _make_profile(self, index: int) -> BotProfile:
        users = self._user_count
        owners = [self._user_profile(index % users).id]
        if users > 1 and unit(self._seed, "co-owner", index) < _CO_OWNER_SHARE:
            owners.append(self._user_profile((index + 1) % users).id)
        profile = make_bot(self._seed, index, self.timeline, owners, self._added_slot.get(index))
        changes: dict[str, Any] = {}
        if self.config.events > 0:
            timeline = self.timeline
            changes["events"] = plan(self._seed, index, timeline.day(profile.first_slot),
                                     timeline.day(timeline.initial - 1), self.config.events)
        if self.config.faults.hostile_names and index % HOSTILE_EVERY == 0:
            name = HOSTILE_NAMES[index // HOSTILE_EVERY % len(HOSTILE_NAMES)]
            changes["record"] = {**profile.record, "name": name}
            changes["custom_labels"] = HOSTILE_CUSTOM
        return replace(profile, **changes) if changes else profile

    def _make_user_profile(self, index: int) -> UserProfile:
        return make_user(self._seed, index, self.timeline)

    def _index_of(self, bot_id: str) -> int | None:
        """Index of a bot that exists or existed (removed included), else None. O(1)."""
        low = snowflake_low(bot_id, BOT_KIND)
        if low is None:
            return None
        index = self._bot_ids.decode(low)
        if index >= self._universe or self._profile(index).id != bot_id:
            return None
        return index

    def _live_index(self, bot_id: str) -> int | None:
        index = self._index_of(bot_id)
        return None if index is None or index in self._removed else index

    def _user_index(self, user_id: str) -> int | None:
        low = snowflake_low(user_id, USER_KIND)
        if low is None:
            return None
        index = self._user_ids.decode(low)
        if index >= self._user_count or self._user_profile(index).id != user_id:
            return None
        return index

    # --- listing and churn -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._added) + self._base - len(self._removed_base)

    def _index_at(self, position: int) -> int:
        added = self._added
        if position < len(added):
            return added[len(added) - 1 - position]
        wanted = position - len(added)
        removed = self._removed_base
        # Smallest base index x with (x + 1 - removals <= x) > wanted present bots up to x.
        lo, hi = wanted, wanted + len(removed)
        while lo < hi:
            mid = (lo + hi) // 2
            if mid + 1 - bisect.bisect_right(removed, mid) > wanted:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def page(self, skip: int, limit: int) -> list[Record]:
        """Listing positions ``skip .. skip+limit-1`` (fewer at the end)."""
        with self._lock:
            stop = min(len(self), skip + limit)
            indices = [self._index_at(p) for p in range(skip, stop)]
        return [self._bot_record(i) for i in indices]

    def served_page(self, skip: int, limit: int) -> list[Record]:
        """A page of GET /bots as the listing faults serve it: the listing cut short
        (``listing_cut``) and with repeats (``duplicate_every``). Without them, :meth:`page`."""
        faults = self.config.faults
        every = faults.duplicate_every
        if not every and not faults.listing_cut:
            return self.page(skip, limit)
        with self._lock:
            real = len(self)
            served = real + real // every if every else real
            served -= round(served * faults.listing_cut)
            stop = min(served, skip + limit)
            indices = [self._index_at(_repeated(p, every) if every else p)
                       for p in range(skip, stop)]
        return [self._bot_record(i) for i in indices]

    def count_listing_request(self) -> tuple[str, str] | None:
        """Called once per served GET /bots: every ``churn_every``-th one churns after it."""
        every = self.config.faults.churn_every
        with self._lock:
            self._listing_requests += 1
            if every and self._listing_requests % every == 0:
                return self.churn()
        return None

    def churn(self) -> tuple[str, str]:
        """Insert a new bot at the front of the listing and remove one listed before it.

        Returns ``(added_id, removed_id)``. The removed bot is drawn from the whole listing,
        so a client paging with ``skip`` sees both a shift forward (the insertion) and a
        shift back (the removal, if it was behind the client's position)."""
        with self._lock:
            if self._universe >= 1 << LOW_BITS:
                raise RuntimeError("the directory is full: no more bots can be added")
            rng = Random(f"{self._seed}:churn:{self._churns}")
            self._churns += 1
            victim = self._index_at(rng.randrange(len(self)))
            last = self.last_slot()
            new = self._universe
            self._added_slot[new] = last
            self._universe += 1
            if victim in self._added_slot:
                self._added.remove(victim)
            else:
                bisect.insort(self._removed_base, victim)
            self._removed[victim] = last
            self._added.append(new)
            self._added_all.append(new)
            return self._profile(new).id, self._profile(victim).id

    def grow(self, count: int = 1) -> list[str]:
        """Insert ``count`` new bots at the front of the listing (none removed): a directory
        that grows. Returns their ids, newest last."""
        with self._lock:
            if self._universe + count > 1 << LOW_BITS:
                raise RuntimeError("the directory is full: no more bots can be added")
            last = self.last_slot()
            added = []
            for _ in range(count):
                new = self._universe
                self._added_slot[new] = last
                self._universe += 1
                self._added.append(new)
                self._added_all.append(new)
                added.append(self._profile(new).id)
            return added

    # --- records -----------------------------------------------------------------------
    def _bot_record(self, index: int) -> Record:
        record = dict(self._profile(index).record)
        record["tags"] = list(record["tags"])
        record["owners"] = list(record["owners"])
        posted = self._posted.get(index)
        if posted:
            # A listing shows what the bot last reported about itself.
            last = posted[-1][2]
            record["server_count"] = last["guilds"]
            if last["shards"] is not None:
                record["shard_count"] = last["shards"]
        return self.shapes.served("bot", record)

    def _served(self, record: Record) -> Record:
        """A stat record as this service spells it (:class:`Shapes`)."""
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
        if getattr(self.served_stats, "__func__", None) is not Directory.served_stats:
            return render(self, index, self.served_stats(index))[0]
        snapshot = self._stats_snapshot(index)
        _, last, posted = snapshot
        version = (last, len(posted), self.config.faults, render)
        # The version holds `render`: an entry found is what this very render made, a T.
        value: T = self._rendered.get(index, version)
        if value is _Memo.MISSING:
            records = [record for _, record in self._stats_with_kinds(index, snapshot)]
            value, size = render(self, index, records)
            self._rendered.put(index, version, value, size)
        return value

    def stats_tail(self, index: int, skip: int, limit: int, *,
                   newest_first: bool = False) -> list[bytes] | None:
        """The bot's served records ``skip``..``skip + limit`` (those there are), each encoded
        as in a /stats body, when they lie among its newest records; None otherwise (or for a
        bot with posted stats, a bad-JSON bot, or a replaced ``served_stats``): build the page
        from ``served_stats``. A ``skip`` below 0 counts from the end (-1: the newest).
        ``newest_first``: positions count from the newest record, and the page is in that order."""
        if (getattr(self.served_stats, "__func__", None) is not Directory.served_stats
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

    # --- users -------------------------------------------------------------------------
    def _user_bot_indices(self, user: int) -> list[int]:
        users = self._user_count
        with self._lock:
            universe = self._universe
            owned = set(range(user, universe, users))
            if users > 1:
                co_owned = range((user - 1) % users, universe, users)
                owned.update(i for i in co_owned
                             if unit(self._seed, "co-owner", i) < _CO_OWNER_SHARE)
            return sorted(i for i in owned if i not in self._removed)

    def user_record(self, user: int) -> Record:
        record = dict(self._user_profile(user).record)
        record["bot_ids"] = [self._profile(i).id for i in self._user_bot_indices(user)]
        return self.shapes.served("user", record)

    def user_bots(self, user: int) -> list[Record]:
        return [self._bot_record(i) for i in self._user_bot_indices(user)]

    def user_servers(self, user: int) -> list[Record]:
        users = self._user_count
        others = [self._user_profile((user + k) % users).id for k in (1, 2, 3)
                  if (user + k) % users != user]
        return [self.shapes.served("server", r) for r in
                make_servers(self._seed, self._user_profile(user), others, self.timeline)]

    def user_webhooks(self, user: int) -> list[Record]:
        # Webhooks point at the user's original bots; one may outlive its bot under churn.
        bots = [self._profile(i).id for i in range(user, self._base, self._user_count)]
        return [self.shapes.served("webhook", r) for r in
                make_webhooks(self._seed, self._user_profile(user), bots, self.timeline)]

    # --- credentials -------------------------------------------------------------------
    def _user_token(self, user: int) -> str:
        scrambled = self._tokens.encode(user)
        return f"{USER_TOKEN_PREFIX}{scrambled:08x}{secret(self._seed, 'user', self._user_profile(user).id)}"

    def _bot_key(self, index: int) -> str:
        scrambled = self._keys.encode(index)
        return f"{BOT_KEY_PREFIX}{scrambled:08x}{secret(self._seed, 'bot', self._profile(index).id)}"

    def user_for_token(self, token: str) -> int | None:
        """The user a token belongs to, or None. O(1): the token carries its user index."""
        index = _credential_index(token, USER_TOKEN_PREFIX, self._tokens)
        if index is None or index >= self._user_count:
            return None
        return index if hmac.compare_digest(token, self._user_token(index)) else None

    def bot_for_key(self, key: str) -> int | None:
        """The bot (live or removed) an API key belongs to, or None. O(1)."""
        index = _credential_index(key, BOT_KEY_PREFIX, self._keys)
        with self._lock:
            if index is None or index >= self._universe:
                return None
        return index if hmac.compare_digest(key, self._bot_key(index)) else None

    def user_index(self, user_id: str) -> int | None:
        return self._user_index(user_id)

    def live_index(self, bot_id: str) -> int | None:
        with self._lock:
            return self._live_index(bot_id)

    # --- ground truth (tests, demos) ---------------------------------------------------
    def listing(self) -> list[Record]:
        """The whole listing in order. O(n): for tests and small directories."""
        with self._lock:
            return self.page(0, len(self))

    def bot_ids(self) -> list[str]:
        with self._lock:
            return [self._profile(self._index_at(p)).id for p in range(len(self))]

    def bot(self, bot_id: str) -> Record | None:
        """The bot as GET /bots/:id serves it; None if unknown or removed."""
        index = self.live_index(bot_id)
        return None if index is None else self._bot_record(index)

    def stats(self, bot_id: str, include_removed: bool = False) -> list[Record]:
        """Every record as GET /bots/:id/stats serves it, oldest first (malformed and posted
        included). [] for an unknown bot, and for a removed one unless ``include_removed``
        (then: the records it had when it was removed)."""
        index = self._known(bot_id, include_removed)
        return [] if index is None else self.served_stats(index)

    def valid_stats(self, bot_id: str, include_removed: bool = False) -> list[Record]:
        index = self._known(bot_id, include_removed)
        if index is None:
            return []
        return [r for kind, r in self._stats_with_kinds(index) if kind is None]

    def malformed_stats(self, bot_id: str, include_removed: bool = False) -> list[Record]:
        """The malformed records exactly as served."""
        index = self._known(bot_id, include_removed)
        if index is None:
            return []
        return [r for kind, r in self._stats_with_kinds(index) if kind is not None]

    def malformation_of(self, bot_id: str, slot: int) -> str | None:
        """How generated record ``slot`` of the bot is broken (see docs/service.md), or None."""
        index = self._index_of(bot_id)
        if index is None:
            return None
        return malformation(self._seed, index, slot, self.config.faults.malformed_rate)

    def bad_json_bots(self) -> set[str]:
        """Bots (listed or removed) whose /stats body is never valid JSON. O(n)."""
        with self._lock:
            universe = self._universe
        if self.config.faults.bad_json_rate <= 0:
            return set()
        return {self._profile(i).id for i in range(universe) if self.is_bad_json(i)}

    def users(self) -> list[str]:
        return [self._user_profile(j).id for j in range(self._user_count)]

    def user(self, user_id: str) -> Record | None:
        index = self._user_index(user_id)
        return None if index is None else self.user_record(index)

    def user_tokens(self) -> dict[str, str]:
        return {self._user_profile(j).id: self._user_token(j) for j in range(self._user_count)}

    def bot_key(self, bot_id: str) -> str:
        index = self._index_of(bot_id)
        if index is None:
            raise KeyError(f"unknown bot {bot_id!r}")
        return self._bot_key(index)

    def bot_keys(self) -> dict[str, str]:
        """API keys of the listed bots, in listing order. O(n)."""
        return {bot_id: self.bot_key(bot_id) for bot_id in self.bot_ids()}

    def events(self) -> list[Record]:
        """The planted events of every bot that exists or existed, by bot index then day, as
        ``GET /_admin/events`` serves them ([] without ``ServiceConfig.events``). O(bots)."""
        with self._lock:
            universe = self._universe
        if self.config.events <= 0:
            return []
        day0 = self.timeline.time(0).date()
        out: list[Record] = []
        for index in range(universe):
            profile = self._profile(index)
            out.extend(truth(profile.id, profile.events or (), day0))
        return out

    def removed_ids(self) -> set[str]:
        with self._lock:
            return {self._profile(i).id for i in self._removed}

    def added_ids(self) -> list[str]:
        """Bots inserted by churn, oldest first (removed ones included)."""
        with self._lock:
            return [self._profile(i).id for i in self._added_all]

    def summary(self) -> Record:
        with self._lock:
            return {
                "bots": len(self),
                "users": self._user_count,
                "seed": self._seed,
                "clock": iso(self.clock()),
                "slot": self.last_slot(),
                "stats_per_day": self.config.stats_per_day,
                "added": len(self._added_all),
                "removed": len(self._removed),
                "posted": sum(len(p) for p in self._posted.values()),
                "listing_requests": self._listing_requests,
                "faults": self.config.faults.active(),
            }

    def _known(self, bot_id: str, include_removed: bool) -> int | None:
        with self._lock:
            return self._index_of(bot_id) if include_removed else self._live_index(bot_id)


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


def _repeated(position: int, every: int) -> int:
    """The listing position served at ``position`` when a bot is repeated after every
    ``every``-th one: the repeat is the bot just before it (the same page, usually) in even
    blocks, and one about two blocks back (an earlier page) in odd ones."""
    block, offset = divmod(position, every + 1)
    if offset < every:
        return block * every + offset
    last = block * every + every - 1
    return last if block % 2 == 0 else max(0, last - 2 * every - 1)


def _copy_stat(record: Record) -> Record:
    copy = dict(record)
    if isinstance(copy.get("custom"), list):
        copy["custom"] = [dict(item) for item in copy["custom"]]
    return copy


def _credential_index(value: str, prefix: str, scrambler: Scrambler) -> int | None:
    """The index a token/key claims to be for; the caller still checks its HMAC."""
    if len(value) != _CREDENTIAL_LEN or not value.startswith(prefix):
        return None
    try:
        return scrambler.decode(int(value[len(prefix):len(prefix) + 8], 16))
    except ValueError:
        return None
