"""Micro-benchmarks behind choices the code's comments explain without figures.

Each case times two ways of doing one thing, in this process, best of ``--repeat`` runs, and
prints the ratio. Nothing is asserted; the figures move with the machine, the ratios much less.

    python bench/micro.py              # every case, seconds
    python bench/micro.py --json out.json

Cases (where the choice lives in brackets):
  canonical_json   orjson with sorted keys vs json.dumps(sort_keys=True), one stat record
                   [pipeline/core/_json.py canonical_json]
  decode_page      orjson.loads vs json.loads, one /stats page of 90 records
                   [pipeline/core/_json.py decode_json]
  column_from      a polars Datetime column from int microseconds vs from datetime objects
                   [pipeline/harvester/_records.py StatPage]
  zstd_level       parquet with zstd level 1 vs the default level 3: write time and size
                   [pipeline/analytics/exports/_exports.py ZSTD_LEVEL]
  failed_import    an import of a module that is not installed (what httpcore does per request
                   without sniffio) vs a dict lookup [pyproject.toml sniffio]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import polars as pl

RECORD = {
    "id": "1234567890123456789", "recorded_at": "2026-11-01T00:00:00Z", "users": 123456,
    "guilds": 4321, "shards": 4, "memory_load": 41, "cpu_load": 12, "commands_executed": 987654,
    "custom": [{"name": "region", "value": "eu-west"}, {"name": "latency_ms", "value": 12.5}],
}


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def case_canonical_json(repeat: int) -> dict[str, Any]:
    n = 50_000
    fast = best(lambda: [orjson.dumps(RECORD, option=orjson.OPT_SORT_KEYS).decode()
                         for _ in range(n)], repeat)
    slow = best(lambda: [json.dumps(RECORD, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False) for _ in range(n)], repeat)
    return {"n": n, "orjson_s": fast, "json_s": slow, "ratio": slow / fast}


def case_decode_page(repeat: int) -> dict[str, Any]:
    body = json.dumps([RECORD] * 90).encode()
    n = 2_000
    fast = best(lambda: [orjson.loads(body) for _ in range(n)], repeat)
    slow = best(lambda: [json.loads(body) for _ in range(n)], repeat)
    return {"pages": n, "orjson_s": fast, "json_s": slow, "ratio": slow / fast}


def case_column_from(repeat: int) -> dict[str, Any]:
    n = 1_000_000
    start = datetime(2026, 1, 1, tzinfo=UTC)
    micros = [int(start.timestamp() * 1e6) + i * 60_000_000 for i in range(n)]
    stamps = [start + timedelta(minutes=i) for i in range(n)]
    dtype = pl.Datetime("us", "UTC")
    fast = best(lambda: pl.Series("t", micros, dtype=pl.Int64).cast(dtype), repeat)
    slow = best(lambda: pl.Series("t", stamps, dtype=dtype), repeat)
    return {"rows": n, "from_ints_s": fast, "from_datetimes_s": slow, "ratio": slow / fast}


def case_zstd_level(repeat: int) -> dict[str, Any]:
    n = 1_000_000
    frame = pl.DataFrame({
        "bot_id": [f"{1_000_000_000 + i % 10_000}" for i in range(n)],
        "day": pl.date_range(datetime(2020, 1, 1), datetime(2020, 1, 1) + timedelta(days=n - 1),
                             eager=True).head(n),
        "guilds": [i % 5000 for i in range(n)],
        "cpu_load_mean": [(i % 1000) / 10 for i in range(n)],
    })

    def write(level: int) -> int:
        buf = io.BytesIO()
        frame.write_parquet(buf, compression="zstd", compression_level=level)
        return buf.tell()

    out = {"rows": n}
    for level in (1, 3):
        out[f"level{level}_s"] = best(lambda level=level: write(level), repeat)
        out[f"level{level}_bytes"] = write(level)
    out["time_ratio"] = out["level3_s"] / out["level1_s"]
    out["size_ratio"] = out["level1_bytes"] / out["level3_bytes"]
    return out


def case_failed_import(repeat: int) -> dict[str, Any]:
    n = 2_000
    table = {"asyncio": "asyncio"}

    def failing() -> None:
        for _ in range(n):
            try:
                import botstats_bench_not_installed  # type: ignore[import-not-found]  # noqa: F401
            except ImportError:
                pass

    slow = best(failing, repeat)
    fast = best(lambda: [table.get("asyncio") for _ in range(n)], repeat)
    return {"n": n, "failed_import_s": slow, "lookup_s": fast,
            "failed_import_us_each": slow / n * 1e6}


CASES = {
    "canonical_json": case_canonical_json,
    "decode_page": case_decode_page,
    "column_from": case_column_from,
    "zstd_level": case_zstd_level,
    "failed_import": case_failed_import,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per case; the best counts")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
               "python": platform.python_version(), "polars": pl.__version__,
               "orjson": orjson.__version__, "cases": {}}
    for name, case in CASES.items():
        figures = case(args.repeat)
        results["cases"][name] = figures
        shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in figures.items())
        print(f"{name:15} {shown}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
