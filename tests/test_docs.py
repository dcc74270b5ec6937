"""Docs are checked: every command has help text and appears in the README; the README opens
with the two front-door commands and .ci/run calls the README's test command; the README stays a
short front door that tells no history; every link between the docs leads somewhere."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from pipeline.cli import cli

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def all_commands(group: click.Group = cli, prefix: str = "") -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        path = f"{prefix}{name}"
        out.append((path, cmd))
        if isinstance(cmd, click.Group):
            out.extend(all_commands(cmd, path + " "))
    return out


@pytest.mark.parametrize(("path", "cmd"), all_commands(), ids=[p for p, _ in all_commands()])
def test_every_command_has_help_and_is_in_the_readme(path: str, cmd: click.Command) -> None:
    assert (cmd.help or "").strip(), f"botstats {path} has no help text"
    top = path.split()[0]
    assert f"botstats {top}" in README, f"README does not mention `botstats {top}`"
    if " " in path:
        sub = path.split()[-1]
        assert re.search(rf"botstats {top}\b[^\n]*\b{sub}\b", README), \
            f"README does not show `botstats {path}`"


def test_every_option_has_help_text() -> None:
    for path, cmd in all_commands():
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, f"botstats {path} {param.opts[0]} has no help text"


def test_readme_opens_with_the_two_front_door_commands() -> None:
    first_block = README.split("```", 2)[1]
    assert "make demo" in first_block and "make test" in first_block


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci


def test_python_dash_m_pipeline_is_the_same_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "pipeline", "--help"], capture_output=True,
                          text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0 and "harvest" in proc.stdout


DOCS = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The anchors a page offers: its headings, as GitHub spells them, and explicit ids."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no headings in code
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_between_the_docs_resolves(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target} leads nowhere"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{page.name}: {target}: no such heading"


def test_the_readme_is_a_short_front_door() -> None:
    lines = README.count("\n")
    assert lines <= 400, f"README.md has {lines} lines: move reference material to docs/"


DIARY = re.compile(r"\b(this|previous|last|earlier) (round|session)\b|\bsession \d|"
                   r"\blocal branch\b|tried and not adopted", re.I)


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_the_docs_describe_the_product_not_the_history_of_the_work(page: Path) -> None:
    text = page.read_text()
    assert not DIARY.findall(text), f"{page.name}: {DIARY.search(text)[0]!r}"
    if page.name == "README.md" and page.parent == REPO:
        assert not re.search(r"\b(sessions?|rounds?)\b", text, re.I), "diary words in README"


def test_every_test_the_reliability_table_names_exists() -> None:
    section = README.split("## Reliability", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(tests/\w+\.py)::(\w+)`", section)
    assert len(named) >= 15
    for path, name in named:
        assert f"def {name}(" in (REPO / path).read_text(), f"{path}::{name} does not exist"


# --- what the code's own words name exists ------------------------------------------------------
PACKAGE = REPO / "pipeline"
# Where the code and the docs name modules: the package's docstrings and comments, the docs, the
# benchmarks, the SQL.
NAMING = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi"), *(REPO / "docs").glob("*.md"),
                 REPO / "README.md", *(REPO / "bench").glob("*.py"), REPO / "bench" / "README.md",
                 *(REPO / "sql").rglob("*.sql")])
# A dotted name (pipeline.core.Settings) or a path (pipeline/harvester/_run.py) in the package.
_DOTTED = re.compile(r"\bpipeline(?:[./][A-Za-z_]\w*)+")
# A Sphinx role's target in a docstring: :mod:`._lock`, :func:`~pipeline.core.first_line`, ...
_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?([^`<]+?)(?:\(\))?`")
# A module named alone in backticks: `_lock`, ``_records``, `probe/_paging.py`.
_MODULE = re.compile(r"`+(?:[a-z]+/)*\.*(_[a-z][a-z0-9_]*)(?:\.pyi?)?`+")


@functools.cache
def _names(path: Path) -> frozenset[str]:
    """What a module's code defines or imports, at any depth (a method, a class attribute), read
    with ast: a name in its docstring does not count."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return frozenset(names)


def _defines(path: Path, name: str) -> bool:
    """Whether the module (or the package, its __init__ and its stub) at ``path`` has ``name``."""
    files = [path / "__init__.py", path / "__init__.pyi"] if path.is_dir() else [path]
    return any(f.exists() and name in _names(f) for f in files)


def _resolves(parts: list[str]) -> bool:
    """``parts`` (pipeline, a stage, ..., a name, an attribute) is a module of the tree followed
    by names each defined in the one before it."""
    where = REPO
    for i, part in enumerate(parts):
        if (where / part).is_dir():
            where = where / part
        elif (where / f"{part}.py").exists():
            where = where / f"{part}.py"
        elif part == "sql" and where == PACKAGE:  # the wheel's copy of the top-level sql/
            where = REPO / "sql"
        else:
            # A name of the module, then (a method, an attribute) names defined in it too.
            return all(_defines(where, name) for name in parts[i:])
    return True


def _module_of(path: Path) -> list[str]:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


MODULES = ({p.stem for folder in ("pipeline", "bench", "tests") for p in (REPO / folder).rglob("*.py")}
           | {p.name for p in PACKAGE.rglob("*") if p.is_dir()})
# Private names the tree defines (a function named in backticks is no stale module).
DEFINED = {name for folder in ("pipeline", "bench", "tests") for p in (REPO / folder).rglob("*.py")
           for name in re.findall(r"(?:def|class)\s+(_\w+)|^\s*(_\w+)\s*[:=]", p.read_text(), re.M)
           for name in name if name}


def stale_names(path: Path, text: str | None = None) -> list[str]:
    """The names of ``path``'s text (or ``text``, as if it were there) that lead nowhere."""
    stale = []
    text = path.read_text() if text is None else text
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path.relative_to(REPO)}:{number}"
        for match in _DOTTED.finditer(line):
            text = re.sub(r"\.pyi?$", "", match.group(0))
            if not _resolves(re.split(r"[./]", text)):
                stale.append(f"{where}: {match.group(0)}")
        if path.suffix in (".py", ".pyi") and path.is_relative_to(PACKAGE):
            for match in _ROLE.finditer(line):
                ref = match.group(1).strip()
                if ref.startswith("pipeline"):
                    continue  # a dotted name, checked above
                here = _module_of(path) if path.stem == "__init__" else _module_of(path)[:-1]
                if ref.startswith("."):
                    dots = len(ref) - len(ref.lstrip("."))
                    parts = here[:len(here) - dots + 1] + ref.lstrip(".").split(".")
                    ok = _resolves(parts)
                else:  # a name of this module, or of its package
                    ok = _defines(path, ref.split(".")[0]) or _resolves([*here, *ref.split(".")])
                if not ok:
                    stale.append(f"{where}: {match.group(0)}")
        for match in _MODULE.finditer(line):
            name = match.group(1)
            # Column suffixes (`*_change_7d`) and field names (`_id`) are no modules.
            if name in MODULES or name in DEFINED or re.search(r"_\d+d$|^_id$|^_x$", name):
                continue
            stale.append(f"{where}: {match.group(0)}")
    return stale


def test_the_modules_the_code_and_docs_name_exist() -> None:
    # The package moves (stages, folders, modules merged): a docstring or a doc that names a
    # module or a name that is gone sends the reader nowhere.
    assert [s for path in NAMING for s in stale_names(path)] == []


def test_a_stale_name_is_found() -> None:
    text = ("See :mod:`pipeline.errors`, :func:`._pager.walk`, `_probe_writing` and "
            "pipeline/harvester/_tail_read.py; :class:`~pipeline.core.Settings` and `_records` "
            "are fine.")
    found = stale_names(PACKAGE / "harvester" / "_run.py", f'"""{text}"""')
    assert [s.split(": ", 1)[1] for s in found] == [
        "pipeline.errors", "pipeline/harvester/_tail_read.py", ":func:`._pager.walk`",
        "`_probe_writing`"]
