"""The gates (ruff, and mypy over the package) run before the suite, a failing gate fails the
command, and nothing quietly takes a file out of either: the ways gates rot without anyone
seeing them go red."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "pipeline"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
# Never rebuild the venv from a test: .venv/.dev is taken as up to date.
MAKE = ["make", "--no-print-directory", "-o", ".venv/.dev"]


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MAKE, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_ci_and_make_test_run_ruff_and_mypy_before_the_suite() -> None:
    ci = [line.strip() for line in (REPO / ".ci/run").read_text(encoding="utf-8").splitlines()]
    assert "make test" in ci
    planned = _make("-n", "test").stdout.splitlines()  # -n: prints the commands, runs none

    def first(command: str) -> int:
        return next(i for i, line in enumerate(planned) if re.search(command, line))

    suite = first(r"-m pytest\b")
    assert first(r"\bruff check \.") < suite
    assert first(r"\bmypy$") < suite


def test_make_lint_holds_the_package_to_five_arguments_a_function() -> None:
    planned = _make("-n", "lint").stdout.splitlines()
    assert any(re.search(r"\bruff check --select PLR0913 pipeline$", line) for line in planned)
    assert PYPROJECT["tool"]["ruff"]["lint"].get("pylint", {}).get("max-args", 5) <= 5
    six = "def six(a: int, b: int, c: int, d: int, e: int, f: int) -> int:\n    return a\n"
    found = subprocess.run([str(REPO / ".venv/bin/ruff"), "check", "--select", "PLR0913",
                            "--stdin-filename", "pipeline/core/_six.py", "-"], input=six,
                           capture_output=True, text=True, cwd=REPO)
    assert found.returncode != 0 and "PLR0913" in found.stdout


@pytest.mark.parametrize("failing", ["RUFF", "MYPY"])
def test_a_failing_gate_fails_make_lint(failing: str) -> None:
    tools = {"RUFF": "true", "MYPY": "true"}
    assert _make("lint", *(f"{k}={v}" for k, v in tools.items())).returncode == 0
    tools[failing] = "false"
    assert _make("lint", *(f"{k}={v}" for k, v in tools.items())).returncode != 0


def test_a_failing_gate_stops_make_test_before_the_suite() -> None:
    done = _make("test", "RUFF=true", "MYPY=false", "PYTEST=echo the-suite-ran")
    assert done.returncode != 0
    assert "the-suite-ran" not in done.stdout


def test_mypy_checks_the_whole_package_strictly() -> None:
    mypy = PYPROJECT["tool"]["mypy"]
    assert mypy["files"] == ["pipeline"]
    assert mypy["strict"] is True
    assert "ignore-without-code" in mypy["enable_error_code"]
    assert not {"exclude", "follow_imports", "ignore_errors"} & set(mypy)
    for override in mypy.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        # Relaxed only for third-party libraries without types, and only about their imports.
        assert not [m for m in modules if m.split(".")[0] == "pipeline"], override
        assert set(override) == {"module", "ignore_missing_imports"}, override


def test_ruff_keeps_the_rules_that_catch_redefinitions_unused_imports_and_shadowing() -> None:
    lint = PYPROJECT["tool"]["ruff"]["lint"]
    assert {"E", "F", "W", "I", "B", "UP", "A", "PLW", "RUF100"} <= set(lint["select"])
    assert not {"exclude", "extend-exclude", "per-file-ignores"} & set(PYPROJECT["tool"]["ruff"])
    assert "per-file-ignores" not in lint
    listed = subprocess.run([str(REPO / ".venv/bin/ruff"), "check", "--show-files", "pipeline"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout
    checked = {Path(line.strip()).resolve() for line in listed.splitlines() if line.strip()}
    assert set(PACKAGE.rglob("*.py")) <= checked


def test_no_module_opts_out_of_a_gate() -> None:
    opt_outs = re.compile(
        r"#\s*mypy:"  # per-file mypy settings (ignore-errors, disable-error-code, ...)
        r"|#\s*type:\s*ignore(?!\[)"  # an ignore without an error code (on line 1: the file)
        r"|#\s*(ruff|flake8):\s*noqa"  # a file exempt from ruff
        r"|#\s*noqa(?!:)"  # a noqa without a rule code
    )
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}"
             for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi")])
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if opt_outs.search(line)]
    assert found == []


def test_a_lazy_init_beside_its_stub_holds_no_code_mypy_would_not_see() -> None:
    # mypy reads a stage's __init__.pyi instead of its __init__.py: the .py must stay the
    # lazy_loader call and nothing else.
    for stub in sorted(PACKAGE.rglob("__init__.pyi")):
        lazy = ast.parse(stub.with_suffix(".py").read_text(encoding="utf-8"))
        kinds = {type(node).__name__ for node in lazy.body}
        imports = {alias.name for node in lazy.body if isinstance(node, ast.Import)
                   for alias in node.names}
        assert kinds <= {"Expr", "Import", "Assign", "AnnAssign"}, stub
        assert all(isinstance(node.value, ast.Constant) for node in lazy.body
                   if isinstance(node, ast.Expr)), stub  # docstrings only, no calls
        assert imports <= {"lazy_loader"}, stub


def test_a_hung_test_fails_with_its_name_instead_of_hanging_the_suite(tmp_path: Path) -> None:
    # pytest-timeout comes with the dev extra and the suite's settings give every test a limit.
    assert any(dep.startswith("pytest-timeout") for dep in
               PYPROJECT["project"]["optional-dependencies"]["dev"])
    assert PYPROJECT["tool"]["pytest"]["ini_options"]["timeout"] > 0
    # A test that never returns, under the suite's own settings with a limit of 1 s.
    (tmp_path / "test_hangs.py").write_text(
        "import time\n\ndef test_waits_for_an_answer_that_never_comes():\n    time.sleep(60)\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pyproject.toml"), "--rootdir",
         str(tmp_path), "-n", "0", "-p", "no:cacheprovider", "-o", "timeout=1",
         str(tmp_path / "test_hangs.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "FAILED test_hangs.py::test_waits_for_an_answer_that_never_comes" in done.stdout
    assert "Timeout" in done.stdout
