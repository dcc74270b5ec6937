"""What a job locks: the whole archive, one shard's harvest, or the trends build.

With a SQLite catalog every scope is the one file lock (one writing job at a time, as on one
machine); with a PostgreSQL catalog each is a lock of its own (``_advisory``), so the workers of
different shards, and a trends build, run side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core import Shard


@dataclass(frozen=True)
class Scope:
    """``archive`` (compaction, backup, restore, conversion: alone), ``shard`` (a harvest of
    ``shard``) or ``trends``."""

    name: str = "archive"
    shard: Shard = field(default_factory=Shard)

    @classmethod
    def harvest(cls, shard: Shard | None = None) -> Scope:
        return cls("shard", shard or Shard())

    def lock_name(self, *, archive_lock: bool = False) -> str:
        """The lock, for messages (``archive_lock``: the shared archive lock that held it)."""
        if archive_lock or self.name == "archive":
            return "the archive lock"
        if self.name == "trends":
            return "the trends lock"
        return "the harvest lock" if self.shard.whole else f"the lock of shard {self.shard}"


ARCHIVE_SCOPE = Scope()
TRENDS_SCOPE = Scope("trends")

__all__ = ["ARCHIVE_SCOPE", "TRENDS_SCOPE", "Scope"]
