"""The Directory: all bots, users and stats of one service (its parts are the modules beside this
one), and the ground truth tests and demos compare an archive with."""

from __future__ import annotations

from .._data import iso, malformation, routine_days
from .._events import truth
from ._credentials import Credentials
from ._state import Record


class Directory(Credentials):
    """All bots, users and stats of one service; see this folder's docstring."""

    def listing(self) -> list[Record]:
        """The whole listing in order. O(n): for tests and small directories."""
        with self._lock:
            return self.page(0, len(self))

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
        """The planted events of every bot that exists or existed, by bot index then day, each
        bot's routine spikes and restarts after its events, as ``GET /_admin/events`` serves
        them ([] without ``ServiceConfig.events``). O(bots x slots)."""
        with self._lock:
            universe = self._universe
            lasts = [self._bot_last_slot(index) for index in range(universe)]
        if self.config.events <= 0:
            return []
        day0 = self.timeline.time(0).date()
        out: list[Record] = []
        for index in range(universe):
            profile = self._profile(index)
            routine = routine_days(self._seed, profile, self.timeline, lasts[index])
            out.extend(truth(profile.id, profile.events or (), day0, routine))
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
