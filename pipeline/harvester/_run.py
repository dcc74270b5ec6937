"""The harvester: archive the whole directory into DuckDB, incrementally and exactly once.

One run:

1. records itself in ``harvest_runs`` (status ``running``) and marks any run a killed process
   left ``running`` as ``interrupted``;
2. snapshots the configured user (me, bots, servers, webhooks) when a user token is set;
3. pages through ``GET /bots`` with :class:`~._paging.Pager` (no bot lost or
   read twice, whatever the service does), and for each listing page looks up, in one query,
   the newest archived record of its bots;
4. hands bots to ``concurrency`` workers: a bot whose newest record (``GET /bots/:id/stat``) is
   already archived costs that one request; any other bot's ``/stats`` is read and validated;
5. buffers rows column-wise and writes them in batches through polars, one transaction per
   batch that also carries the run's counters, so a run killed at any moment leaves whole
   batches only and the next run (records keyed by id, upserted) completes the work;
6. marks bots missing from a *complete* listing as removed, unless that listing collapsed
   (:mod:`._removals`), and ends the run ``complete``, ``partial`` (some bots failed:
   retried next run; or a listing not believed), ``failed`` or ``interrupted``.

DuckDB work happens on one dedicated thread so HTTP never waits on a write.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

from .. import archive
from ..archive import describe_fields, note_fields
from ..core import (
    ApiError,
    BotstatsError,
    FieldSettings,
    RunStatus,
    Settings,
    Shard,
    decode_json,
    new_run_id,
    redact_url,
)
from ..interface import Client, RawArray, stats_path, workers
from ._batch import Batch, Db
from ._context import Run
from ._listing import list_directory
from ._removals import judge_removals
from ._report import HarvestOptions, HarvestReport, ProgressFn
from ._snapshot import snapshot_user
from ._tail import OrderHint
from ._verdict import Verdict, checks, cut_check, cut_message, judge
from ._workers import Workers, worker

log = logging.getLogger("botstats.harvest")
T = TypeVar("T")


def harvest(
    settings: Settings,
    options: HarvestOptions | None = None,
    *,
    on_progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
    dead: Callable[[Shard], bool] | None = None,
) -> HarvestReport:
    """Run one harvest (as ``options`` ask: full, believing removals, of a shard) into the
    archive named by ``settings``; return what it did.

    The caller holds the run lock (operate's ``run_lock``) when other runs may start, and says
    with ``dead`` which runs left ``running`` no live job holds the lock of (default: all of
    them, as under a lock that excludes every other writer).
    """
    options = options or HarvestOptions()
    report = HarvestReport(run_id=new_run_id(), mode="full" if options.full else "incremental",
                           base_url=redact_url(settings.service.base_url),
                           shard=options.shard or Shard())
    with archive.writer(settings) as con:
        archive.begin_run(con, report, dead)
        db = Db(con)
        try:
            asyncio.run(_harvest(settings, options, report, db,
                                 _Hooks(on_progress, stop or threading.Event())))
        except (KeyboardInterrupt, asyncio.CancelledError):
            report.status, report.message = RunStatus.INTERRUPTED, "interrupted by the user"
            raise
        except BotstatsError as exc:
            report.status, report.message = RunStatus.FAILED, str(exc)
        finally:
            db.shutdown()
            report.finished_at = datetime.now(UTC)
            archive.finish_run(con, report)
    log.info("harvest %s %s", report.run_id, report.status, extra={"report": report.as_dict()})
    return report


class _Hooks(NamedTuple):
    """How the caller follows a run (``on_progress``) and ends it (``stop``: once set, the run
    ends after its current batch, ``interrupted``)."""

    on_progress: ProgressFn | None
    stop: threading.Event


async def _harvest(settings: Settings, options: HarvestOptions, report: HarvestReport, db: Db,
                   hooks: _Hooks) -> None:
    on_progress, stop = hooks
    buffer = Batch(db, report, settings.store.batch_rows,
                    new_only=await db.call(archive.nothing_archived), fields=settings.fields)
    known_live = await db.call(archive.live_bots, report.shard)  # before this run writes any bot
    judged: Verdict | None = None
    async with Client(settings) as client:
        run = Run(client, settings.fields, report, buffer, options.full, stop)
        try:
            if settings.user_token and report.shard.leads:
                await snapshot_user(run)
            tasks = workers(settings.service.concurrency, settings.service.max_connections)
            queue: asyncio.Queue[tuple[str, archive.Newest | None] | None] = asyncio.Queue(
                maxsize=tasks * 4)
            order = OrderHint()  # how the service orders /stats, once a read has seen it
            pool = Workers(lambda: worker(run, queue, on_progress, pool, order), tasks,
                           client.gate.control)
            pool.grow()
            try:
                await list_directory(run, db, queue)
            finally:
                for _ in pool.close():
                    await queue.put(None)
                await asyncio.gather(*pool.tasks)
            if not stop.is_set():
                judged = await _judged(client, settings.fields, buffer)
        finally:
            report.requests = client.stats.requests
            report.retries = client.stats.retries
            await buffer.flush(last=True)
    if buffer.refused is not None:
        raise buffer.refused
    refused = ""
    if report.listing_complete and not stop.is_set() and not buffer.halted:
        removing = await db.call(archive.live_bots, report.shard, report.started_at)
        verdict = judge_removals(known_live, removing, report.bots_seen,
                                 settings.harvest.max_removed_share, options.accept_removals)
        if not verdict.believed:
            refused = verdict.message
            log.warning("removals not believed: %s", refused)
        elif removing:  # none: no commit (about 100 KB of catalog)
            report.bots_removed = await db.call(archive.mark_removed, report)
    # A run that wrote no record (failed for a setting) saw the fields of records it refused.
    seen = {} if buffer.halted else buffer.tally.fields
    drift = await db.call(note_fields, report, seen, datetime.now(UTC))
    if drift:
        report.new_fields = describe_fields(drift)
        log.warning("the service sends record fields this archive has not seen before: %s "
                    "(kept in the raw column)", report.new_fields)
    if stop.is_set():
        report.status = RunStatus.INTERRUPTED
        report.message = "stopped on request after the current batch"
    elif report.errors or not report.listing_complete or refused:
        report.status = RunStatus.PARTIAL
        failed = (f"{report.errors} request(s) failed after retries or read incomplete data; see "
                  f"harvest_errors. The next run tries them again.") if report.errors else ""
        report.message = report.message or " ".join(filter(None, (refused, failed)))
    else:
        report.status = RunStatus.COMPLETE
    if not stop.is_set():
        _apply(report, judged, dropped=buffer.dropped_for)


async def _judged(client: Client, fields: FieldSettings, buffer: Batch) -> Verdict | None:
    """The run's verdict (``_verdict.judge``), with the reads its advice needs answered: does
    the service answer ``/bots/<value>`` or ``/users/<value>`` with the record it was taken
    from."""
    await buffer.settle()
    if (whole := cut_check(buffer.tally)) is not None:
        buffer.tally.cut = await _read_past(client, *whole)
    answers = {}
    for check in checks(buffer.tally, fields):
        read = client.bot if check.kind == "bot" else client.user
        try:
            record = await read(check.value)
        except ApiError:
            answers[check] = False
            continue
        answers[check] = str(record.get(check.field, "")).strip() == check.value
    return judge(buffer.tally, fields, answers)


async def _read_past(client: Client, bot_id: str, length: int, first: Any) -> str | None:
    """Whether a bot's /stats, read whole as ``length`` records from ``first``, goes on past
    them: ``?limit=length&skip=length`` answers records, not the same list again (a service
    that ignores both) nor none. The message for :func:`judge` when it does."""
    try:
        more = (await client.list_window("stats", stats_path(bot_id), length, length,
                                         raw=True)).items
    except ApiError:
        return None  # cannot tell
    records = more.items if isinstance(more, RawArray) else more
    if not records:
        return None
    try:
        head = decode_json(bytes(records[0])) if isinstance(more, RawArray) else records[0]
    except ValueError:
        head = None
    if head == first:
        return None
    return cut_message(bot_id, length, len(records))


def _apply(report: HarvestReport, verdict: Verdict | None, dropped: str) -> None:
    """The verdict over what the run decided so far (errors, the listing, removals): the worse
    status wins, its message first when it fails the run."""
    if verdict is None and dropped:  # the rows went, whatever the end says: never complete
        verdict = Verdict(RunStatus.FAILED, dropped, setting=True)
    if verdict is None:
        return
    if verdict.status == RunStatus.FAILED:
        report.status = RunStatus.FAILED
        written = (" Nothing of this run was archived but its rejects and errors."
                   if verdict.setting else "")
        report.message = " ".join(filter(None, (verdict.message + written, report.message)))
    elif report.status != RunStatus.FAILED:
        report.status = RunStatus.PARTIAL
        report.message = " ".join(filter(None, (report.message, verdict.message)))


