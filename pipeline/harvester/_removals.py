"""Whether a complete listing's removals are believed.

A service having a bad day can answer ``GET /bots`` with an empty or cut list and no error. Taken
at its word, one hourly run would mark most of the directory removed, and every trend that
counts the directory would show it emptying. So a listing that would remove more than
``[harvest].max_removed_share`` of the archive's live bots (or an empty listing of an archive
that has bots) is not believed: nothing is marked, the run ends ``partial``, and the message
says how to accept it when it is true. A pure function, so every case is a unit test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RemovalVerdict:
    believed: bool
    message: str = ""  # why not, and how to accept it (empty when believed)


def judge_removals(known_live: int, removing: int, seen: int, max_share: float,
                   accept: bool) -> RemovalVerdict:
    """Whether to mark ``removing`` of the ``known_live`` bots removed after a complete listing
    that showed ``seen`` bots. ``accept`` (``--accept-removals``) believes any listing."""
    if accept or removing == 0 or known_live == 0:
        return RemovalVerdict(True)
    share = removing / known_live
    if seen > 0 and share <= max_share:
        return RemovalVerdict(True)
    head = (f"the listing of GET /bots was complete and would mark {removing} of the "
            f"{known_live} live bots removed ({share:.0%}); it showed {seen} bot(s)")
    if seen == 0:
        why = "an empty listing of an archive that has bots is never taken at its word"
        fix = "run again with --accept-removals"
    else:
        why = f"more than [harvest].max_removed_share ({max_share:g})"
        fix = ("run again with --accept-removals, or raise [harvest].max_removed_share "
               f"to {math.ceil(share * 100) / 100:g} or more")
    return RemovalVerdict(False, f"{head}: {why}, so no bot was marked removed. If the directory "
                                 f"really shrank, {fix}; otherwise the next run sees the bots "
                                 f"again and nothing is lost.")
