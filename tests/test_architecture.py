"""The package's shape: its import graph has no cycle, data flows one way, and the CLI is a shell
that parses, calls the library and prints. Read from the source's AST, so a lazy import inside
a function counts as much as one at the top (only ``if TYPE_CHECKING:`` imports do not)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str) -> tuple[set[str], set[str]]:
    """(our modules, top-level foreign packages) that module ``name`` imports at run time."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    ours: set[str] = set()
    foreign: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.orelse:
                    visit(stmt)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    _add(alias.name)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join([*base, *([child.module] if child.module else [])])
                else:
                    target = child.module or ""
                for alias in child.names:
                    # `from . import store` names a module; `from .config import X` does not.
                    sub = f"{target}.{alias.name}"
                    _add(sub if sub in MODULES else target)
            visit(child)

    def _add(target: str) -> None:
        if target == "pipeline" or target.startswith("pipeline."):
            if target in MODULES and target != name:
                ours.add(target)
        elif target != "__future__":
            foreign.add(target.split(".")[0])

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return ours, foreign


GRAPH = {name: _imports(name)[0] for name in MODULES}


def _reaches(start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in GRAPH[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _cycle_from(start: str) -> list[str] | None:
    """A path start -> ... -> start, if there is one."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(GRAPH[node]):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_the_graph_is_read_from_the_source() -> None:
    # A guard for the guards below: a reader that found no edges would pass them all.
    assert "pipeline.crontab" in GRAPH["pipeline.config"]
    assert {"pipeline.client", "pipeline.store"} <= GRAPH["pipeline.harvest"]
    assert "pipeline.trends" in GRAPH["pipeline.runner"]  # a lazy import, inside a function


def test_the_import_graph_has_no_cycle() -> None:
    cycles = [c for name in GRAPH if (c := _cycle_from(name))]
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize(("module", "forbidden"), [
    # Data flows one way: service <- client <- harvest -> store -> trends -> exports.
    ("pipeline.client", {"pipeline.harvest", "pipeline.store", "pipeline.trends",
                         "pipeline.exports", "pipeline.runner"}),
    ("pipeline.store", {"pipeline.harvest", "pipeline.trends", "pipeline.exports",
                        "pipeline.runner", "pipeline.client"}),
    ("pipeline.exports", {"pipeline.trends", "pipeline.harvest", "pipeline.runner"}),
    ("pipeline.trends", {"pipeline.harvest", "pipeline.client", "pipeline.runner"}),
    ("pipeline.harvest", {"pipeline.trends", "pipeline.runner", "pipeline.schedule"}),
    # The config is the bottom layer: it borrows nothing from the jobs or the scheduler.
    ("pipeline.config", {"pipeline.schedule", "pipeline.deploy", "pipeline.lock",
                         "pipeline.runner"}),
])
def test_a_stage_never_imports_one_downstream_of_it(module: str, forbidden: set[str]) -> None:
    assert not (_reaches(module) & forbidden)


def test_the_crontab_language_depends_on_nothing_but_errors() -> None:
    assert _reaches("pipeline.crontab") == {"pipeline.errors"}


def test_the_embedded_service_imports_nothing_else_of_ours() -> None:
    service = {n for n in MODULES if n.startswith("pipeline.service")}
    for name in service:
        assert GRAPH[name] <= service, name


def test_the_cli_is_a_shell_over_the_library() -> None:
    # It parses (click), prints (rich via console) and calls the library: it opens no archive,
    # takes no lock, runs no harvest step and speaks no HTTP by itself.
    cli = [n for n in MODULES if n == "pipeline.cli" or n.startswith("pipeline.cli.")]
    assert len(cli) > 1
    for name in cli:
        ours, foreign = _imports(name)
        assert foreign - sys.stdlib_module_names <= {"click", "rich"}, (name, foreign)
        assert not ours & {"pipeline.store", "pipeline.lock", "pipeline.harvest",
                           "pipeline.records", "pipeline.listing"}, (name, ours)
