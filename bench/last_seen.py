"""Where `bots.last_seen_at` lives, measured: what an hourly listing of N bots writes when
nothing about the bots changed but that they were seen.

Each candidate keeps a DuckLake (SQLite catalog, held open as a job holds it) of N bots with
records like the embedded service's (about 600 bytes of JSON each), lists every bot once per
"hour", in batches of 8,192 bots as the harvester commits them, and reads `bots` as the
removals and the trends do. Per listing: the bytes of the data and delete files it added, the
kernel's count of bytes written by this process (the catalog's log included), its time; and
the time to read every bot's `last_seen_at` once the archive has seen ``--hours`` listings
(before any compaction).

- ``rewrite``: one `bots` table, every listed bot's row merged in each hour (botstats <= 0.3);
- ``narrow``: `bot_listing` rewritten only where the record changed, and `bot_last_seen` (bot,
  time, run) merged with each batch; `bots` a view that joins them;
- ``narrow-once`` (shipped): the same tables, the sightings merged once for the whole listing
  (one commit and one file of ids instead of one a batch);
- ``narrow-v2``: as ``narrow-once``, the files written in Parquet's format version 2 (delta
  encodings: DuckLake's ``parquet_version`` option);
- ``append``: `bot_listing` as above and a sighting row appended per bot and hour; `bots` a view
  taking each bot's newest sighting (until a compaction would fold them).

    .venv/bin/python bench/last_seen.py --bots 10000,100000 [--hours 24]

The figures are in docs/design.md, "Writes proportional to what is new".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.archive import _store as store  # noqa: E402
from pipeline.archive._sql import run_with_frames  # noqa: E402

BATCH = 8_192

SCHEMAS = {
    "rewrite": [
        "CREATE TABLE bots (bot_id VARCHAR, name VARCHAR, raw JSON, first_seen_at TIMESTAMPTZ, "
        "last_seen_at TIMESTAMPTZ, removed_at TIMESTAMPTZ, run_id VARCHAR)"],
    "narrow": [
        "CREATE TABLE bot_listing (bot_id VARCHAR, name VARCHAR, raw JSON, first_seen_at "
        "TIMESTAMPTZ, removed_at TIMESTAMPTZ, run_id VARCHAR)",
        "CREATE TABLE bot_last_seen (bot_id VARCHAR, last_seen_at TIMESTAMPTZ, run_id VARCHAR)",
        "CREATE VIEW bots AS SELECT l.bot_id, l.name, l.raw, l.first_seen_at, s.last_seen_at, "
        "l.removed_at, s.run_id FROM bot_listing l JOIN bot_last_seen s USING (bot_id)"],
    "append": [
        "CREATE TABLE bot_listing (bot_id VARCHAR, name VARCHAR, raw JSON, first_seen_at "
        "TIMESTAMPTZ, removed_at TIMESTAMPTZ, run_id VARCHAR)",
        "CREATE TABLE bot_seen (bot_id VARCHAR, seen_at TIMESTAMPTZ, run_id VARCHAR)",
        "CREATE VIEW bots AS SELECT l.bot_id, l.name, l.raw, l.first_seen_at, s.last_seen_at, "
        "l.removed_at, s.run_id FROM bot_listing l JOIN (SELECT bot_id, max(seen_at) AS "
        "last_seen_at, arg_max(run_id, seen_at) AS run_id FROM bot_seen GROUP BY bot_id) s "
        "USING (bot_id)"],
}

SEEN_MERGE = ("MERGE INTO bot_last_seen AS t USING {source} AS n ON t.bot_id = n.bot_id WHEN "
              "MATCHED THEN UPDATE SET last_seen_at = n.seen_at, run_id = n.run_id WHEN NOT "
              "MATCHED THEN INSERT VALUES (n.bot_id, n.seen_at, n.run_id)")

SCHEMA_OF = {"narrow-once": "narrow", "narrow-v2": "narrow"}

# One batch of listed bots, each candidate's way (the harvester's MERGEs, as _writes has them).
LISTING = {
    "rewrite": [
        "MERGE INTO bots USING batch AS n ON bots.bot_id = n.bot_id WHEN MATCHED THEN UPDATE SET "
        "name = n.name, raw = n.raw, last_seen_at = n.seen_at, removed_at = NULL, run_id = "
        "n.run_id WHEN NOT MATCHED THEN INSERT (bot_id, name, raw, first_seen_at, last_seen_at, "
        "run_id) VALUES (n.bot_id, n.name, n.raw, n.seen_at, n.seen_at, n.run_id)"],
    "narrow": [
        "MERGE INTO bot_listing AS t USING (SELECT n.* FROM batch n LEFT JOIN bot_listing o USING "
        "(bot_id) WHERE o.bot_id IS NULL OR o.raw::VARCHAR IS DISTINCT FROM n.raw) AS n ON "
        "t.bot_id = n.bot_id WHEN MATCHED THEN UPDATE SET raw = n.raw WHEN NOT MATCHED THEN "
        "INSERT (bot_id, name, raw, first_seen_at, run_id) VALUES (n.bot_id, n.name, n.raw, "
        "n.seen_at, n.run_id)",
        SEEN_MERGE.format(source="batch")],
    "append": [
        "MERGE INTO bot_listing AS t USING (SELECT n.* FROM batch n LEFT JOIN bot_listing o USING "
        "(bot_id) WHERE o.bot_id IS NULL OR o.raw::VARCHAR IS DISTINCT FROM n.raw) AS n ON "
        "t.bot_id = n.bot_id WHEN MATCHED THEN UPDATE SET raw = n.raw WHEN NOT MATCHED THEN "
        "INSERT (bot_id, name, raw, first_seen_at, run_id) VALUES (n.bot_id, n.name, n.raw, "
        "n.seen_at, n.run_id)",
        "INSERT INTO bot_seen SELECT bot_id, seen_at, run_id FROM batch"],
}
LISTING["narrow-once"] = LISTING["narrow-v2"] = LISTING["narrow"][:1]
# After the listing's last batch, over every bot it listed (``listed``), in one transaction.
AFTER = {"narrow-once": [SEEN_MERGE.format(source="listed")],
         "narrow-v2": [SEEN_MERGE.format(source="listed")]}
OPTIONS = {"narrow-v2": ["CALL archive.set_option('parquet_version', '2')"]}


def written() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes"):
            return int(line.split()[1])
    return 0


def files_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*.parquet"))


def directory(bots: int) -> pl.DataFrame:
    """The embedded service's listing of ``bots`` bots: id, name, the record as it sends it."""
    from pipeline.service import Directory, ServiceConfig

    pages = Directory(ServiceConfig(bots=bots)).page(0, bots)
    return pl.DataFrame({"bot_id": [str(r["id"]) for r in pages],
                         "name": [r.get("name") for r in pages],
                         "raw": [json.dumps(r, separators=(",", ":"), sort_keys=True)
                                 for r in pages]})


def listing(con: object, how: str, bots: pl.DataFrame, hour: int) -> None:
    seen = pl.datetime(2026, 10, 26, time_zone="UTC") + pl.duration(hours=hour)
    listed = bots.with_columns(seen_at=seen, run_id=pl.lit(f"run-{hour:04d}"))
    for lo in range(0, bots.height, BATCH):
        con.execute("BEGIN TRANSACTION")  # type: ignore[attr-defined]
        for sql in LISTING[how]:
            run_with_frames(con, sql, batch=listed.slice(lo, BATCH))  # type: ignore[arg-type]
        con.execute("COMMIT")  # type: ignore[attr-defined]
    if how in AFTER:
        con.execute("BEGIN TRANSACTION")  # type: ignore[attr-defined]
        for sql in AFTER[how]:
            run_with_frames(con, sql, listed=listed.select("bot_id", "seen_at", "run_id"))  # type: ignore[arg-type]
        con.execute("COMMIT")  # type: ignore[attr-defined]


def measure(how: str, bots: int, hours: int, root: Path) -> dict[str, float]:
    catalog = root / how / "archive.ducklake"
    catalog.parent.mkdir(parents=True)
    paths = store.ArchivePaths(catalog)
    con = store.connect(paths)
    listed = directory(bots)
    with store.holding_catalog(paths):
        con.execute("CALL archive.set_option('parquet_compression', 'zstd')")
        for sql in OPTIONS.get(how, []) + SCHEMAS[SCHEMA_OF.get(how, how)]:
            con.execute(sql)
        listing(con, how, listed, 0)  # the first listing: every bot new
        files, kernel, started = files_bytes(paths.data), written(), time.perf_counter()
        listing(con, how, listed, 1)  # an hour later: every bot seen again, nothing else new
        hourly = {"files_mb": (files_bytes(paths.data) - files) / 1e6,
                  "kernel_mb": (written() - kernel) / 1e6,
                  "seconds": time.perf_counter() - started}
        for hour in range(2, hours + 1):
            listing(con, how, listed, hour)
        started = time.perf_counter()
        con.execute("SELECT count(*) FROM bots WHERE last_seen_at < TIMESTAMPTZ "
                    "'2026-10-26 05:00:00+00' AND removed_at IS NULL").fetchall()
        read = time.perf_counter() - started
    con.close()
    return {**hourly, "read_after_s": read, "on_disk_mb": files_bytes(paths.data) / 1e6}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bots", default="10000,100000")
    p.add_argument("--hours", type=int, default=24)
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args()
    rows = []
    root = Path(tempfile.mkdtemp(prefix="botstats-last-seen-"))
    try:
        for bots in (int(b) for b in args.bots.split(",")):
            for how in LISTING:
                r = {"bots": bots, "candidate": how, **measure(how, bots, args.hours, root)}
                rows.append(r)
                print(f"{bots:>8,} {how:<11} hourly: files {r['files_mb']:7.2f} MB, kernel "
                      f"{r['kernel_mb']:7.2f} MB, {r['seconds']:5.2f} s; after {args.hours} h: "
                      f"read {r['read_after_s']:.3f} s, on disk {r['on_disk_mb']:7.1f} MB",
                      flush=True)
            for how in LISTING:
                shutil.rmtree(root / how, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    os._exit(0)


if __name__ == "__main__":
    main()
