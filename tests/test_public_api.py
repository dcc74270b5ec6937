"""The public API: what `import pipeline` offers notebooks and scripts, pinned, lazily loaded,
and the only part of the package the docs show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pipeline

REPO = Path(__file__).resolve().parents[1]

PUBLIC = {
    # settings
    "Settings", "load_settings", "notebook_settings",
    # the jobs
    "harvest", "HarvestReport", "build_trends", "TrendsReport", "run", "RunReport",
    "build_report", "ReportResult",
    # reading the archive and the exports
    "open_archive", "query", "table_counts", "DATASETS", "scan_dataset", "load_dataset",
    "read_manifest", "compare", "forecast_curve", "forecast_reach",
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


def _polars_allocator(env: dict[str, str]) -> dict[str, str]:
    """jemalloc's options as polars runs with them after `import pipeline`, from the statistics
    jemalloc prints at exit (asked for after pipeline set its default, before polars loads)."""
    code = ("import os, pipeline; os.environ['_RJEM_MALLOC_CONF'] += ',stats_print:true'; "
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
