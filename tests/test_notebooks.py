"""Notebooks: committed without outputs, and executed by a real Jupyter kernel on a freshly
harvested archive, where they must run clean, draw their charts, show what the archive holds and
never keep the archive open between cells."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import child_env, start_service
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

import pipeline
from pipeline.analytics.build._build import TrendsReport, build_trends
from pipeline.analytics.read import _explore as explore
from pipeline.archive import _store as store
from pipeline.core._errors import StoreError
from pipeline.core._loading import load_settings
from pipeline.core._settings import Settings
from pipeline.harvester._run import harvest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("*.ipynb"))
# A small directory with every kind of bot, 40 days so 30-day growth and movers have values.
ARCHIVE_SERVICE: dict[str, Any] = {
    "bots": 40, "history_days": 40, "stats_per_day": 2, "malformed_rate": 0.02,
}
# How a notebook may reach our package: `import pipeline`, then names of its public API.
IMPORTS = re.compile(r"^\s*(?:from\s+(pipeline\S*)\s+import|import\s+(pipeline\S*))", re.M)
ATTRIBUTES = re.compile(r"\bpipeline\.(\w+)")


# --- committed notebooks -----------------------------------------------------------------------
def test_both_notebooks_are_committed() -> None:
    assert {p.name for p in NOTEBOOK_FILES} >= {"explore.ipynb", "trends.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.name)
def test_committed_notebook_carries_no_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {index} has outputs: clear them"
            assert cell.execution_count is None, f"{path.name} cell {index} has an execution count"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda p: p.name)
def test_notebook_is_narrated_and_uses_only_the_public_api(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown", f"{path.name} opens without an introduction"
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    prose = [c.source for c in nb.cells if c.cell_type == "markdown"]
    assert len(prose) * 2 >= len(code), f"{path.name}: too little narration for its code"
    used: set[str] = set()
    for source in code:
        assert {a or b for a, b in IMPORTS.findall(source)} <= {"pipeline"}, source
        used |= set(ATTRIBUTES.findall(source))
    assert used, f"{path.name} does not use botstats at all"
    assert used <= set(pipeline.__all__), f"{path.name} reaches past the public API: {used}"
    for source in code:
        assert "read_only=False" not in source and ".writer(" not in source


# --- explore helpers ---------------------------------------------------------------------------
def test_notebook_settings_resolve_relative_paths_from_the_project_root(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "notebooks").mkdir()
    s = explore.notebook_settings(tmp_path / "notebooks", env={})
    assert s.db_path == tmp_path / "data" / "archive.ducklake"
    assert s.export_dir == tmp_path / "data" / "exports"

    (tmp_path / "config.toml").write_text('[store]\ndb = "elsewhere/a.ducklake"\n')
    s = explore.notebook_settings(tmp_path / "notebooks", env={"BOTSTATS_EXPORT_DIR": "out"})
    assert s.db_path == tmp_path / "elsewhere" / "a.ducklake"
    assert s.export_dir == tmp_path / "out"

    env = {"BOTSTATS_DB": str(tmp_path / "abs.duckdb"), "BOTSTATS_CONFIG": "config.toml"}
    s = explore.notebook_settings(tmp_path / "notebooks", env=env)
    assert s.db_path == tmp_path / "abs.duckdb"
    assert s.source == str(tmp_path / "config.toml")


def test_query_reads_the_archive_and_closes_it(tmp_path: Path) -> None:
    db = tmp_path / "archive.ducklake"
    with store.connect(store.ArchivePaths(db)) as con:
        con.execute("CREATE TABLE bots AS SELECT '1' AS bot_id, 'one' AS name")
    settings = load_settings(env={}, overrides={"store.db": str(db)})
    frame = explore.query(settings, "SELECT name FROM bots WHERE bot_id = getvariable('b')",
                          {"b": 1})
    assert frame.to_dicts() == [{"name": "one"}]
    # Closed: this process holds no file of the archive open any more.
    held = [os.readlink(fd) for fd in Path("/proc/self/fd").iterdir() if fd.is_symlink()]
    assert not [f for f in held if f.startswith(str(db))], held


# --- executed by a kernel ----------------------------------------------------------------------
@dataclass(frozen=True)
class Archive:
    settings: Settings
    trends: TrendsReport


@pytest.fixture(scope="module")
def harvested_archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archive]:
    """A small service harvested into a fresh archive, with the trends built."""
    root = tmp_path_factory.mktemp("notebook-archive")
    with start_service(**ARCHIVE_SERVICE) as svc:
        settings = load_settings(env={}, overrides={
            "service.base_url": svc.base_url,
            "store.db": str(root / "archive.ducklake"),
            "exports.dir": str(root / "exports"),
        })
        report = harvest(settings)
        assert report.status == "complete", report.message
    yield Archive(settings, build_trends(settings))


def kernel_env(settings: Settings) -> dict[str, str]:
    """This process's environment pointed at the test archive, without a developer's own
    BOTSTATS_* settings or a matplotlib backend that would keep charts out of the outputs."""
    env = {k: v for k, v in child_env().items() if k != "MPLBACKEND"}
    env["BOTSTATS_DB"] = str(settings.db_path)
    env["BOTSTATS_EXPORT_DIR"] = str(settings.export_dir)
    return env


def run_notebook(name: str, settings: Settings) -> nbformat.NotebookNode:
    """Execute a notebook as Jupyter would (cwd = notebooks/), checking after every cell that
    the kernel does not hold the archive: a read-write open here would then be refused."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    # jupyter_client runs a spec whose argv[0] is "python" with this interpreter (the venv's).
    assert spec.argv[0] in ("python", "python3", sys.executable), spec.argv
    held: list[str] = []

    def archive_is_free(cell: Any, cell_index: int, **_: Any) -> None:
        try:  # a writer opens the archive whatever the kernel holds
            store.connect(store.ArchivePaths(settings.db_path)).close()
        except StoreError as exc:
            held.append(f"cell {cell_index}: {exc}")

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}},
                            on_cell_executed=archive_is_free)
    client.execute(env=kernel_env(settings))
    assert held == [], "the notebook kept the archive open: " + "; ".join(held)
    return nb


def outputs(nb: nbformat.NotebookNode) -> tuple[str, int]:
    """All text the notebook printed or displayed, and how many images it drew."""
    text, images = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"{out.ename}: {out.evalue}"
            if out.output_type == "stream":
                text.append(out.text)
            elif "data" in out:
                text.append(out.data.get("text/plain", ""))
                images += "image/png" in out.data
    return "\n".join(text), images


def largest_bot(settings: Settings) -> str:
    """Name of the bot with the most guilds in its latest record, worked out here in SQL."""
    frame = explore.query(settings, """
        SELECT b.name FROM bots b JOIN bot_stats s USING (bot_id)
        QUALIFY row_number() OVER (PARTITION BY bot_id ORDER BY recorded_at DESC) = 1
        ORDER BY s.guilds DESC, bot_id LIMIT 1""")
    return frame["name"][0]


@pytest.mark.slow
def test_explore_notebook_runs_on_a_fresh_archive(harvested_archive: Archive) -> None:
    settings = harvested_archive.settings
    text, images = outputs(run_notebook("explore.ipynb", settings))
    assert f"archive: {settings.db_path}" in text
    bots = ARCHIVE_SERVICE["bots"]
    assert f"{bots} bots in the archive: {bots} listed now, 0 removed" in text
    assert f"{largest_bot(settings)} (" in text, "one bot's history follows the largest bot"
    # The custom fields' bot by name too (the largest bot that reports any).
    assert re.search(r"^\S.* \(\d+\): numeric fields", text, re.M)
    assert images >= 4, "directory, records per day, one bot's history, custom fields"


@pytest.mark.slow
def test_trends_notebook_runs_on_the_fresh_exports(harvested_archive: Archive) -> None:
    settings, report = harvested_archive.settings, harvested_archive.trends
    text, images = outputs(run_notebook("trends.ipynb", settings))
    assert f"exports: {settings.export_dir} (run {report.run_id}" in text
    for dataset in report.datasets:
        assert dataset.name in text, f"the manifest table lists {dataset.name}"
    assert largest_bot(settings) in text
    assert images >= 7, "directory, ranks, growth, spread, movers, anomaly, health, forecast"
    # The compare view lists the three largest bots side by side, and the forecast view
    # answers when the largest doubles (or says it will not at this pace).
    ids = re.search(r"^\s+\d+\s+\d+\s+\d+$", text, re.M)
    assert ids, "the comparison's header of bot ids"
    # ... under a line of their names, the largest first; the forecast's answer by name too.
    names = text[:ids.start()].rstrip("\n").splitlines()[-1]
    assert names.split()[0] == largest_bot(settings).split()[0], names
    assert "guilds in 30d, 80%" in text and "guilds model" in text
    assert re.search(rf"{re.escape(largest_bot(settings))} \(\d+\) guilds [\d,]+: (at the current "
                     r"pace, about \d{4}-\d\d-\d\d; 80% between|not at the current pace)", text)
