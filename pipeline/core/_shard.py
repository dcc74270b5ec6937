"""Which bots a harvest worker owns: ``--shard K/N`` keeps the bots whose id hashes to K of N.

N workers, each with its own K, harvest the directory into one archive at the same time; each
pages the whole listing and keeps its own bots, so no two workers ever write the same bot.

The hash is md5 of the id's UTF-8 bytes, its first 64 bits taken as a number, modulo N: the same
in Python and in DuckDB SQL (removals are judged in SQL), on every machine and version, unlike
Python's ``hash()``. K counts from 0, as a Kubernetes indexed Job numbers its pods.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MAX_SHARDS = 1024
_FORM = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``k`` of ``n`` (0 <= k < n); ``Shard(0, 1)`` is the whole directory."""

    k: int = 0
    n: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.n <= MAX_SHARDS:
            raise ValueError(f"N must be from 1 to {MAX_SHARDS}, got {self.n}")
        if not 0 <= self.k < self.n:
            raise ValueError(f"K counts from 0 to N-1 (as a Kubernetes completion index does): "
                             f"{', '.join(f'{i}/{self.n}' for i in range(min(self.n, 3)))}"
                             f"{', ...' if self.n > 3 else ''}; got {self.k}/{self.n}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"1/3"``; ValueError says what is wrong."""
        match = _FORM.fullmatch(text)
        if not match:
            raise ValueError(f"{text!r} is not K/N, like 0/3 (shard 0 of 3)")
        return cls(int(match[1]), int(match[2]))

    @property
    def whole(self) -> bool:
        return self.n == 1

    @property
    def leads(self) -> bool:
        """Shard 0 also does what only one worker should: the user snapshot."""
        return self.k == 0

    def owns(self, bot_id: str) -> bool:
        return self.whole or bucket(bot_id, self.n) == self.k

    def sql(self, column: str) -> str:
        """A SQL condition true for the rows whose ``column`` this shard owns."""
        if self.whole:
            return "true"
        return f"(('0x' || md5({column})[1:16])::UBIGINT % {self.n}) = {self.k}"

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


def bucket(bot_id: str, n: int) -> int:
    return int(hashlib.md5(bot_id.encode("utf-8")).hexdigest()[:16], 16) % n
