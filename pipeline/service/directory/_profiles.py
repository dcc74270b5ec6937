"""Bot and user profiles: each a pure function of (seed, index), cached; a bot or user found by
id in O(1); a bot's record as the listing serves it."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from .._config import ServiceConfig
from .._data import (
    BOT_KIND,
    HOSTILE_CUSTOM,
    HOSTILE_NAMES,
    USER_KIND,
    BotProfile,
    UserProfile,
    make_bot,
    make_user,
    snowflake_low,
    unit,
)
from .._events import Days, plan
from ._state import Record, State

CO_OWNER_SHARE = 0.10
HOSTILE_EVERY = 4  # every 4th bot gets a hostile name (Faults.hostile_names)


class Profiles(State):
    """Profiles, and lookups by id."""

    def __init__(self, config: ServiceConfig) -> None:
        super().__init__(config)
        # Profiles are pure functions of (seed, index); caching them keeps pages and repeated
        # lookups cheap without holding the whole directory in memory.
        self._profile = lru_cache(maxsize=16384)(self._make_profile)
        self._user_profile = lru_cache(maxsize=4096)(self._make_user_profile)

    def _make_profile(self, index: int) -> BotProfile:
        users = self._user_count
        owners = [self._user_profile(index % users).id]
        if users > 1 and unit(self._seed, "co-owner", index) < CO_OWNER_SHARE:
            owners.append(self._user_profile((index + 1) % users).id)
        profile = make_bot(self._seed, index, self.timeline, owners, self._added_slot.get(index))
        changes: dict[str, Any] = {}
        if self.config.events > 0:
            timeline = self.timeline
            days = Days(timeline.day(profile.first_slot), timeline.day(timeline.initial - 1))
            changes["events"] = plan(self._seed, index, days, self.config.events,
                                     lambda day: profile.scale(day, timeline.per_day))
        share = self.config.repeated_times  # of bots posting one record per shard
        if share and unit(self._seed, "per-shard", index) < share:
            changes["per_shard"] = True
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

    def live_index(self, bot_id: str) -> int | None:
        with self._lock:
            return self._live_index(bot_id)

    def user_index(self, user_id: str) -> int | None:
        return self._user_index(user_id)

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
