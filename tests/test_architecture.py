"""The package's shape, read from the source's imports (a lazy import inside a function counts as
much as one at the top; ``if TYPE_CHECKING:`` imports do not): one folder per stage, data
flowing one way between them and between the folders inside a stage, each stage used only
through the surface its ``__init__`` names, modules private by name, no import cycle, and the
CLI a shell over the library."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"

# Which stage may import which: the whiteboard of the layering. Data flows
# service <- interface <- harvester -> archive -> analytics; operate runs them; cli is the shell.
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "service": set(),
    "interface": {"core"},
    "archive": {"core"},
    "harvester": {"core", "interface", "archive"},
    # The probe reads the service as the harvest would, with the harvest's record rules.
    "probe": {"core", "interface", "harvester"},
    "analytics": {"core", "archive"},
    # Alerts follow a run: the archive's runs and ledger, the exports' events and forecasts; the
    # interface's reading of rate-limit headers for the destinations' 429s.
    "alerts": {"core", "interface", "archive", "analytics"},
    "operate": {"core", "interface", "harvester", "archive", "analytics", "alerts", "service"},
    # The CLI reads its version from the package root, which never imports the CLI.
    "cli": {"", "core", "interface", "harvester", "probe", "analytics", "alerts", "operate",
            "service"},
    "": {"core", "harvester", "archive", "analytics", "operate", "cli"},  # pipeline/__init__, __main__
}

# Inside a stage, which of its folders (subpackages) may import which; "" is the stage's own
# modules beside them. Every folder on disk must be listed here.
FOLDERS: dict[str, dict[str, set[str]]] = {
    # The exports' format, the build that writes them, the readers and the report that read them.
    "analytics": {
        "exports": set(),
        "build": {"exports"},
        "read": {"exports", "build"},
        "report": {"exports", "build", "read"},
        "": {"exports", "build", "read", "report"},  # the stage's __init__ (its surface)
    },
    # The service's endpoints ask the Directory, whose parts draw records from the service's
    # generators (_data, _events) and spell them (_shapes): each side uses the other.
    "service": {
        "directory": {""},
        "": {"directory"},
    },
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
# A stage's surface stub: its lazy __init__ imports what the stub names.
STUBS: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("__init__.pyi"))}


def stage_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and (PACKAGE / parts[1]).is_dir() else ""


def folder_of(name: str) -> str:
    """The folder inside its stage that holds module ``name`` ("": the stage's own modules)."""
    parts = name.split(".")
    stage = stage_of(name)
    return parts[2] if stage and len(parts) > 2 and (PACKAGE / stage / parts[2]).is_dir() else ""


def is_folder(name: str) -> bool:
    """Whether ``name`` is a subpackage inside a stage (a folder, not a module)."""
    return bool(stage_of(name)) and name.count(".") >= 2 and MODULES[name].name == "__init__.py"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str) -> tuple[set[str], set[str]]:
    """(our modules, top-level foreign packages) that module ``name`` imports at run time."""
    paths = [MODULES[name], *([STUBS[name]] if name in STUBS else [])]
    package = name if paths[0].name == "__init__.py" else name.rpartition(".")[0]
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
                    # `from . import _store` names a module; `from ._store import X` does not.
                    sub = f"{target}.{alias.name}"
                    _add(sub if sub in MODULES else target)
            visit(child)

    def _add(target: str) -> None:
        if target == "pipeline" or target.startswith("pipeline."):
            if target in MODULES and target != name:
                ours.add(target)
        elif target != "__future__":
            foreign.add(target.split(".")[0])

    for path in paths:
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
    assert "pipeline.core._crontab" in GRAPH["pipeline.core._validation"]
    assert {"pipeline.interface", "pipeline.archive"} <= GRAPH["pipeline.harvester._run"]
    assert "pipeline.analytics" in GRAPH["pipeline.operate._runner"]  # lazy, inside a function
    assert "pipeline.analytics.build._build" in GRAPH["pipeline.analytics"]  # read from the stub
    assert set(LAYERS) - {""} == {p.name for p in PACKAGE.iterdir()
                                 if p.is_dir() and (p / "__init__.py").exists()}


def test_the_import_graph_has_no_cycle() -> None:
    cycles = [c for name in GRAPH if (c := _cycle_from(name))]
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("stage", sorted(LAYERS))
def test_a_stage_imports_only_the_stages_below_it(stage: str) -> None:
    wrong = {(name, target) for name in MODULES if stage_of(name) == stage
             for target in GRAPH[name]
             if stage_of(target) not in LAYERS[stage] | {stage}}
    assert wrong == set()


@pytest.mark.parametrize("stage", sorted(FOLDERS))
def test_a_folder_imports_only_the_folders_below_it(stage: str) -> None:
    wrong = {(name, target) for name in MODULES if stage_of(name) == stage
             for target in GRAPH[name]
             if stage_of(target) == stage
             and folder_of(target) not in FOLDERS[stage][folder_of(name)] | {folder_of(name)}}
    assert wrong == set()


def test_other_stages_use_a_stage_only_through_its_surface() -> None:
    # `from ..archive import writer`, never `from ..archive._store import writer`: what a stage
    # offers is what its __init__ names, and everything else may change without notice.
    wrong = {(name, target) for name in MODULES for target in GRAPH[name]
             if stage_of(target) and stage_of(target) != stage_of(name)
             and target != f"pipeline.{stage_of(target)}"}
    assert wrong == set()


def test_modules_inside_a_stage_are_private_by_name() -> None:
    # At any depth: a folder inside a stage may have a plain noun for a name, but not a module.
    public = [n for n in MODULES if stage_of(n) and n.count(".") >= 2 and not is_folder(n)
              and not n.rpartition(".")[2].startswith("_")]
    assert public == []


def test_a_folder_inside_a_stage_offers_nothing_of_its_own() -> None:
    # The stage's __init__ stays its one surface: a folder's __init__ says what the folder
    # holds (a docstring) and names nothing, and it has no stub of its own.
    folders = [n for n in MODULES if is_folder(n)]
    assert len(folders) >= 4
    for name in folders:
        body = ast.parse(MODULES[name].read_text(encoding="utf-8")).body
        assert ast.get_docstring(ast.Module(body=body, type_ignores=[])), name
        assert len(body) == 1, name
        assert name not in STUBS, name
        # Importing a folder sets it on the stage's package, hiding a surface name it shares.
        surface = importlib.import_module(f"pipeline.{stage_of(name)}").__all__
        assert folder_of(name) not in surface, name


@pytest.mark.parametrize("stage", sorted(s for s in LAYERS if s))
def test_each_stage_says_what_it_offers(stage: str) -> None:
    package = importlib.import_module(f"pipeline.{stage}")
    assert package.__doc__ and len(package.__doc__.split()) > 20, stage
    for name in package.__all__:  # every name of a lazy surface resolves to a real object
        assert getattr(package, name) is not None, (stage, name)


def test_no_module_is_divided_into_parts_by_banners() -> None:
    # A `# --- part ---` banner between a module's functions marks a seam between two concerns:
    # each part wants a module. (Inside a class, banners may group its methods.)
    banners = [(n, i) for n, p in MODULES.items()
               for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
               if line.startswith("# ---")]
    assert banners == []


def test_the_crontab_language_depends_on_nothing_but_errors() -> None:
    assert _reaches("pipeline.core._crontab") == {"pipeline.core._errors"}


def test_the_core_depends_on_nothing_else_of_ours() -> None:
    core = [name for name in MODULES if stage_of(name) == "core"]
    assert len(core) > 3
    for name in core:
        assert all(stage_of(t) == "core" for t in _reaches(name)), name


def test_the_embedded_service_imports_nothing_else_of_ours() -> None:
    service = {n for n in MODULES if stage_of(n) == "service"}
    assert len(service) > 3
    for name in service:
        assert GRAPH[name] <= service, name


def test_the_cli_is_a_shell_over_the_library() -> None:
    # It parses (click), prints (rich) and calls the library: it opens no archive, takes no
    # lock, runs no harvest step and speaks no HTTP by itself.
    cli = [n for n in MODULES if stage_of(n) == "cli"]
    assert len(cli) > 1
    for name in cli:
        ours, foreign = _imports(name)
        assert foreign - sys.stdlib_module_names <= {"click", "rich"}, (name, foreign)
        assert "pipeline.archive" not in ours, name
