"""The listing (GET /bots) and its churn.

The listing is ``[added bots, newest first] + [base bots 0..n-1 minus the removed ones]``; a
position maps to a bot index with a bisect over the removals, so a page costs
O(page * log(removals)), never O(directory).
"""

from __future__ import annotations

import bisect
from random import Random

from .._data import LOW_BITS
from ._profiles import Profiles
from ._state import Record


class Listing(Profiles):
    """Listing positions, pages as served (with the listing faults), churn and growth."""

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
            stop = min(self.served_length(), skip + limit)
            indices = [self._index_at(_repeated(p, every) if every else p)
                       for p in range(skip, stop)]
        return [self._bot_record(i) for i in indices]

    def served_length(self) -> int:
        """The length of the listing GET /bots serves (cut and repeated by the listing faults)."""
        faults = self.config.faults
        every = faults.duplicate_every
        with self._lock:
            real = len(self)
        served = real + real // every if every else real
        return served - round(served * faults.listing_cut)

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

    def bot_ids(self) -> list[str]:
        with self._lock:
            return [self._profile(self._index_at(p)).id for p in range(len(self))]


def _repeated(position: int, every: int) -> int:
    """The listing position served at ``position`` when a bot is repeated after every
    ``every``-th one: the repeat is the bot just before it (the same page, usually) in even
    blocks, and one about two blocks back (an earlier page) in odd ones."""
    block, offset = divmod(position, every + 1)
    if offset < every:
        return block * every + offset
    last = block * every + every - 1
    return last if block % 2 == 0 else max(0, last - 2 * every - 1)
