"""The public API: what `import pipeline` offers notebooks and scripts, pinned, lazily loaded,
and the only part of the package the docs show."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline
from pipeline.operate._memory import ARROW_POOL, POLARS_MALLOC_CONF

REPO = Path(__file__).resolve().parents[1]

PUBLIC = {
    # settings
    "Settings", "load_settings", "notebook_settings",
    # the jobs
    "harvest", "HarvestOptions", "HarvestReport", "build_trends", "TrendsReport", "run",
    "RunOptions", "RunReport",
    "build_report", "ReportResult",
    # reading the archive and the exports
    "open_archive", "query", "table_counts", "DATASETS", "scan_dataset", "load_dataset",
    "read_manifest", "compare", "forecast_curve", "forecast_reach",
    # what botstats' own processes tune first (a script at scale may too)
    "tune_allocators",
    # the error tree
    "BotstatsError", "ConfigError", "ApiError", "AuthError", "NotFound", "BadRequest",
    "BadResponse", "RateLimited", "ServerError", "Unreachable", "StoreError", "LockTimeout",
    "QueryError", "ExportError",
    "__version__",
}


def test_the_public_api_is_what_it_was_promised_to_be() -> None:
    assert set(pipeline.__all__) == PUBLIC
    assert len(pipeline.__all__) == len(PUBLIC)


def test_every_public_name_resolves_and_the_errors_form_one_tree() -> None:
    for name in pipeline.__all__:
        assert getattr(pipeline, name) is not None, name
    errors = [getattr(pipeline, n) for n in PUBLIC if n.endswith("Error") or n in
              ("AuthError", "NotFound", "BadRequest", "BadResponse", "RateLimited", "Unreachable",
               "LockTimeout")]
    assert all(issubclass(e, pipeline.BotstatsError) for e in errors)
    assert issubclass(pipeline.NotFound, pipeline.ApiError)
    assert issubclass(pipeline.LockTimeout, pipeline.StoreError)


def test_importing_the_package_loads_nothing_heavy() -> None:
    # `import pipeline` (and the CLI on top of it) loads a stage only when a name of it is used.
    code = ("import sys, pipeline, pipeline.cli; "
            "print(sorted(m for m in ('polars', 'duckdb', 'httpx', 'pipeline.archive._store', "
            "'pipeline.harvester._run') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = "import sys, pipeline; pipeline.harvest; print('pipeline.harvester._run' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# Run in a fresh interpreter: the environment variables jemalloc and pyarrow read, and how glibc
# serves a 4 MiB block after one was freed: still by a mapping of its own when the thresholds are held
# ("mapped"), from the heap when glibc raised its threshold to the freed block's size ("heap").
_ALLOCATORS = """
import ctypes, os
def allocators():
    libc = ctypes.CDLL("libc.so.6")
    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc.mallinfo2.restype = Info
    libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    libc.free(libc.malloc(4 << 20))
    before = libc.mallinfo2().hblks
    block = libc.malloc(4 << 20)
    mapped = libc.mallinfo2().hblks > before
    libc.free(block)
    return [os.environ.get("_RJEM_MALLOC_CONF"), os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
            "mapped" if mapped else "heap"]
"""


def _allocators(code: str, env: dict[str, str]) -> list[str | None]:
    out = subprocess.run([sys.executable, "-c", _ALLOCATORS + code], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or "musl" in sys.version,
                    reason="glibc's mallopt and mallinfo2")
def test_import_pipeline_leaves_the_process_as_it_was_and_botstats_tunes_its_own() -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("_RJEM_MALLOC_CONF", "ARROW_DEFAULT_MEMORY_POOL")
           and not k.startswith(("GLIBC_TUNABLES", "MALLOC_"))}
    # A notebook or a script importing the package keeps its environment and glibc's own
    # behaviour (polars, once loaded, sets its own default of the variable: not ours to test).
    host = _allocators("import json, pipeline, pipeline.cli; pipeline.Settings; "
                       "print(json.dumps(allocators()))", env)
    assert host == [None, None, "heap"]
    # The botstats command (`python -m pipeline` is the same main; the fresh image of a
    # `botstats run` comes back through it) tunes all three before its command runs.
    command = ("import json, sys, pipeline.cli._base as base\n"
               "base.cli = lambda **_: print(json.dumps(allocators()))\n"
               "sys.argv = ['botstats']; base.main()")
    assert _allocators(command, env) == [POLARS_MALLOC_CONF, ARROW_POOL, "mapped"]
    # What the user set wins.
    mine = env | {"_RJEM_MALLOC_CONF": "narenas:3", "ARROW_DEFAULT_MEMORY_POOL": "jemalloc",
                  "MALLOC_MMAP_THRESHOLD_": "8388608"}
    assert _allocators(command, mine) == ["narenas:3", "jemalloc", "heap"]


def _polars_allocator(env: dict[str, str]) -> dict[str, str]:
    """jemalloc's options as polars runs with them in a process tuned as botstats tunes its
    own, from the statistics jemalloc prints at exit (asked for before polars loads)."""
    code = ("import os, pipeline; pipeline.tune_allocators(); "
            "os.environ['_RJEM_MALLOC_CONF'] += ',stats_print:true'; "
            "import polars; polars.DataFrame({'a': [1]})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    found = re.findall(r"opt\.(narenas|muzzy_decay_ms): (\d+)", out.stdout + out.stderr)
    return dict(found)


def test_polars_runs_with_the_allocator_settings_that_keep_the_trends_step_small() -> None:
    # One jemalloc arena, freed pages returned at once (docs/design.md, "Memory"); a setting
    # the user made is kept as it is.
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    assert _polars_allocator(env) == {"narenas": "1", "muzzy_decay_ms": "0"}
    assert _polars_allocator(env | {"_RJEM_MALLOC_CONF": "narenas:3"})["narenas"] == "3"


def _arrow_pool(env: dict[str, str], *, tuned: bool) -> str:
    """The pool pyarrow allocates from in a fresh interpreter, tuned as botstats tunes its own
    processes or only importing the package."""
    code = ("import pipeline\n" + ("pipeline.tune_allocators()\n" if tuned else "") +
            "import pyarrow\nprint(pyarrow.default_memory_pool().backend_name)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env).stdout.strip()


def test_pyarrow_allocates_from_glibc_in_the_processes_botstats_tunes() -> None:
    # Its default pool (mimalloc) kept the pages the trends' in-memory streams freed
    # (docs/design.md, "Memory"); a host that only imports the package keeps its own pool, and
    # a pool the user chose is kept.
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _arrow_pool(env, tuned=False) != "system"
    assert _arrow_pool(env, tuned=True) == "system"
    assert _arrow_pool(env | {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}, tuned=True) == "jemalloc"


# `pipeline.<name>` in prose and code, and imports from inside the package, in the docs.
USES = re.compile(r"\bpipeline\.(\w+)")
DEEP_IMPORTS = re.compile(r"from\s+pipeline\.(\w+)")
# The embedded service is its own public surface (for tests, demos and benchmarks).
OWN_SURFACES = {"service"}


def test_the_docs_show_only_the_public_api() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    # development.md and design.md are about the inside: they name private modules by path.
    pages = [p for p in pages if p.name not in ("development.md", "design.md")]
    wrong = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        used = set(USES.findall(text)) | set(DEEP_IMPORTS.findall(text))
        beyond = used - set(pipeline.__all__) - OWN_SURFACES
        if beyond:
            wrong[page.name] = sorted(beyond)
    assert wrong == {}
