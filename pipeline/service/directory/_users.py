"""Users (GET /users/:id and /users/@me): a user's record, bots, servers and webhooks."""

from __future__ import annotations

from .._data import make_servers, make_webhooks, unit
from ._profiles import CO_OWNER_SHARE
from ._state import Record
from ._stats import Stats


class Users(Stats):
    """What the user endpoints serve of a user."""

    def _user_bot_indices(self, user: int) -> list[int]:
        users = self._user_count
        with self._lock:
            universe = self._universe
            owned = set(range(user, universe, users))
            if users > 1:
                co_owned = range((user - 1) % users, universe, users)
                owned.update(i for i in co_owned
                             if unit(self._seed, "co-owner", i) < CO_OWNER_SHARE)
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
