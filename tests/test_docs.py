"""Docs are checked: every command has help text and appears in the README; the README opens
with the two front-door commands and .ci/run calls the README's test command; the README stays a
short front door that tells no history; every link between the docs leads somewhere."""

from __future__ import annotations

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
