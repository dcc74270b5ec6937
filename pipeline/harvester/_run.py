"""The harvester: archive the whole directory into DuckDB, incrementally and exactly once.

One run:

1. records itself in ``harvest_runs`` (status ``running``) and marks any run a killed process
   left ``running`` as ``interrupted``;
2. snapshots the configured user (me, bots, servers, webhooks) when a user token is set;
3. pages through ``GET /bots`` with :class:`~pipeline.listing.Pager` (no bot lost or
   read twice, whatever the service does), and for each listing page looks up, in one query,
   the newest archived record of its bots;
4. hands bots to ``concurrency`` workers: a bot whose newest record (``GET /bots/:id/stat``) is
   already archived costs that one request; any other bot's ``/stats`` is read and validated;
5. buffers rows column-wise and writes them in batches through polars, one transaction per
   batch that also carries the run's counters, so a run killed at any moment leaves whole
   batches only and the next run (records keyed by id, upserted) completes the work;
6. marks bots missing from a *complete* listing as removed, unless that listing collapsed
   (:mod:`pipeline.removals`), and ends the run ``complete``, ``partial`` (some bots failed:
   retried next run; or a listing not believed), ``failed`` or ``interrupted``.

DuckDB work happens on one dedicated thread so HTTP never waits on a write.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from .. import archive
from ..archive import describe_fields, note_fields
from ..core import (
    BotstatsError,
    Settings,
    Shard,
    new_run_id,
    redact_url,
)
from ..interface import Client, workers
from ._batch import Batch, Db
from ._listing import list_directory
from ._removals import judge_removals
from ._report import HarvestReport, ProgressFn
from ._snapshot import snapshot_user
from ._verdict import field_verdict
from ._workers import Workers, worker

log = logging.getLogger("botstats.harvest")
T = TypeVar("T")


def harvest(
    settings: Settings,
    *,
    full: bool = False,
    accept_removals: bool = False,
    on_progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
    shard: Shard | None = None,
    dead: Callable[[Shard], bool] | None = None,
) -> HarvestReport:
    """Run one harvest into the archive named by ``settings``; return what it did.

    ``accept_removals`` believes a complete listing however many bots it would mark removed
    (see :mod:`pipeline.removals`). ``shard`` (default 0/1, every bot): archive only the bots
    whose id hashes to it, beside workers harvesting the other shards.

    The caller holds the run lock (operate's ``run_lock``) when other runs may start, and says
    with ``dead`` which runs left ``running`` no live job holds the lock of (default: all of
    them, as under a lock that excludes every other writer).
    """
    report = HarvestReport(run_id=new_run_id(), mode="full" if full else "incremental",
                           base_url=redact_url(settings.service.base_url),
                           shard=shard or Shard())
    with archive.writer(settings) as con:
        archive.begin_run(con, report, dead)
        db = Db(con)
        try:
            asyncio.run(_harvest(settings, report, db, full, accept_removals, on_progress,
                                 stop or threading.Event()))
        except (KeyboardInterrupt, asyncio.CancelledError):
            report.status, report.message = "interrupted", "interrupted by the user"
            raise
        except BotstatsError as exc:
            report.status, report.message = "failed", str(exc)
        finally:
            db.shutdown()
            report.finished_at = datetime.now(UTC)
            archive.finish_run(con, report)
    log.info("harvest %s %s", report.run_id, report.status, extra={"report": report.as_dict()})
    return report


async def _harvest(
    settings: Settings,
    report: HarvestReport,
    db: Db,
    full: bool,
    accept_removals: bool,
    on_progress: ProgressFn | None,
    stop: threading.Event,
) -> None:
    buffer = Batch(db, report, settings.store.batch_rows,
                    new_only=await db.call(archive.nothing_archived))
    known_live = await db.call(archive.live_bots, report.shard)  # before this run writes any bot
    async with Client(settings) as client:
        try:
            if settings.user_token and report.shard.leads:
                await snapshot_user(client, settings, report, buffer)
            tasks = workers(settings.service.concurrency, settings.service.max_connections)
            queue: asyncio.Queue[tuple[str, archive.Newest | None] | None] = asyncio.Queue(
                maxsize=tasks * 4)
            pool = Workers(lambda: worker(client, settings, report, buffer, queue, full, stop,
                                            on_progress, pool), tasks, client.gate.control)
            pool.grow()
            try:
                await list_directory(client, settings, report, buffer, db, queue, full, stop)
            finally:
                for _ in pool.close():
                    await queue.put(None)
                await asyncio.gather(*pool.tasks)
        finally:
            report.requests = client.stats.requests
            report.retries = client.stats.retries
            await buffer.flush()
    refused = ""
    if report.listing_complete and not stop.is_set():
        verdict = judge_removals(known_live, await db.call(archive.live_bots, report.shard,
                                                           report.started_at),
                                 report.bots_seen, settings.harvest.max_removed_share,
                                 accept_removals)
        if verdict.believed:
            report.bots_removed = await db.call(archive.mark_removed, report)
        else:
            refused = verdict.message
            log.warning("removals not believed: %s", refused)
    drift = await db.call(note_fields, report, buffer.tally.fields, datetime.now(UTC))
    if drift:
        report.new_fields = describe_fields(drift)
        log.warning("the service sends record fields this archive has not seen before: %s "
                    "(kept in the raw column)", report.new_fields)
    if stop.is_set():
        report.status, report.message = "interrupted", "stopped on request after the current batch"
    elif report.errors or not report.listing_complete or refused:
        report.status = "partial"
        failed = (f"{report.errors} request(s) failed after retries or read incomplete data; see "
                  f"harvest_errors. The next run tries them again.") if report.errors else ""
        report.message = report.message or " ".join(filter(None, (refused, failed)))
    else:
        report.status = "complete"
    wrong_field = field_verdict(settings.fields, buffer.tally)
    if wrong_field is not None and not stop.is_set():
        report.status, report.message = "failed", wrong_field


