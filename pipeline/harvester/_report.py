"""What a harvest run is asked to do (its options), what it did (the report it returns and leaves
in harvest_runs), and its exit codes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from ..core import RunStatus, Shard

# Exit codes of `botstats harvest` (and `botstats run`), documented in the README.
EXIT_CODES: dict[str, int] = {RunStatus.COMPLETE: 0, RunStatus.FAILED: 1, RunStatus.PARTIAL: 3,
                              RunStatus.INTERRUPTED: 4}


@dataclass(frozen=True)
class HarvestOptions:
    """What one harvest is asked to do: ``full`` re-reads every bot's whole /stats list;
    ``accept_removals`` believes a complete listing however many bots it would mark removed
    (see ``_removals``); ``shard`` (default 0/1, every bot) archives only the bots whose id
    hashes to it, beside workers harvesting the other shards."""

    full: bool = False
    accept_removals: bool = False
    shard: Shard | None = None


@dataclass
class HarvestReport:
    """What a run did; also the row it leaves in ``harvest_runs``."""

    run_id: str
    mode: str
    status: RunStatus = RunStatus.RUNNING
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    base_url: str = ""
    bots_seen: int = 0
    bots_new: int = 0
    bots_removed: int = 0
    bots_fetched: int = 0
    bots_up_to_date: int = 0
    stats_added: int = 0
    stats_updated: int = 0
    requests: int = 0
    retries: int = 0
    rejects: int = 0
    errors: int = 0
    commit_retries: int = 0  # commits that collided with another worker's and ran again
    shard: Shard = field(default_factory=Shard)  # the bots this run archives (0/1: all)
    listing_complete: bool = False
    message: str = ""
    new_fields: str = ""  # record fields the archive had not seen before this run (drift)

    @property
    def seconds(self) -> float:
        end = self.finished_at or datetime.now(UTC)
        return (end - self.started_at).total_seconds()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        out["shard"] = str(self.shard)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HarvestReport:
        """The report again from :meth:`as_dict` (read back as JSON: times as ISO text)."""
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        for key in ("started_at", "finished_at"):
            if isinstance(values.get(key), str):
                values[key] = datetime.fromisoformat(values[key])
        values["shard"] = Shard.parse(str(data.get("shard", "0/1")))
        if "status" in values:
            values["status"] = RunStatus(values["status"])
        return cls(**values)


ProgressFn = Callable[[HarvestReport], None]
