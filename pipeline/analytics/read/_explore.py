"""Helpers for notebooks and other ad-hoc readers: find the archive, query it read-only.

A notebook's kernel runs in the notebook's folder (``notebooks/``), so a relative path such as
the default ``[store].db = "data/archive.ducklake"`` would point inside ``notebooks/``.
:func:`notebook_settings` reads the settings the usual way (``$BOTSTATS_CONFIG``, else the
project's ``config.toml``, then ``BOTSTATS_*`` variables such as ``BOTSTATS_DB`` and
``BOTSTATS_EXPORT_DIR``) and resolves relative paths against the project root, where
``botstats`` itself would be run.

:func:`query` opens the archive read-only for one query and closes it before
returning, so a notebook never holds the file between cells and never gets in a harvest's way.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import duckdb
import polars as pl

from ... import archive
from ...core import DEFAULT_CONFIG_FILE, QueryError, Settings, load_settings

# A folder holding one of these is the project root (the first found walking up).
ROOT_MARKERS = (DEFAULT_CONFIG_FILE, "pyproject.toml")


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) that holds
    ``config.toml`` or ``pyproject.toml``; ``start`` itself when there is none."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if any((folder / marker).is_file() for marker in ROOT_MARKERS):
            return folder
    return here


def notebook_settings(
    start: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None
) -> Settings:
    """Settings for a notebook: ``$BOTSTATS_CONFIG`` if set, else ``<root>/config.toml`` if it
    exists, else the defaults; then ``BOTSTATS_*`` variables. Relative ``[store].db`` and
    ``[exports].dir`` (from any of these) are taken from the project root."""
    env = os.environ if env is None else env
    root = project_root(start)
    config: Path | None = None
    if env.get("BOTSTATS_CONFIG"):
        config = Path(env["BOTSTATS_CONFIG"])
        config = config if config.is_absolute() else root / config
    elif (root / DEFAULT_CONFIG_FILE).is_file():
        config = root / DEFAULT_CONFIG_FILE
    settings = load_settings(config, env={k: v for k, v in env.items() if k != "BOTSTATS_CONFIG"})
    db = _under(root, settings.store.db)
    export_dir = _under(root, settings.exports.dir)
    lock_file = _under(root, settings.run.lock_file) if settings.run.lock_file else ""
    return replace(
        settings,
        store=replace(settings.store, db=db),
        exports=replace(settings.exports, dir=export_dir),
        run=replace(settings.run, lock_file=lock_file),
    )


def _under(root: Path, path: str) -> str:
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else root / p)


def parse_variables(items: Iterable[str]) -> dict[str, str]:
    """``NAME=VALUE`` texts (``botstats sql --param``) as DuckDB variables; a repeated name: the
    last wins. ValueError names the item that is not ``NAME=VALUE``."""
    variables = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not NAME=VALUE.")
        variables[name.strip()] = value
    return variables


def query(
    settings: Settings, sql: str, params: Mapping[str, object] | None = None
) -> pl.DataFrame:
    """Run one SELECT against the archive (tables and ``trend_*`` views) and return
    the result; the archive is opened read-only and closed before this returns.

    ``params`` become DuckDB variables, read in the query as ``getvariable('name')``; values
    are passed as text, so cast them in SQL when a number is meant. A statement that returns
    no rows returns an empty frame.
    """
    text_params = {k: str(v) for k, v in (params or {}).items()}
    result = run_query(settings, sql, text_params or None)
    return pl.DataFrame() if result is None else result


def table_counts(settings: Settings) -> dict[str, int]:
    """Rows in each table of the archive (read-only, closed before this returns)."""
    with archive.reader(settings) as con:
        return archive.table_counts(con)


def attach_sql(settings: Settings) -> str:
    """The SQL that opens the archive read-only in a DuckDB 1.5 session of one's own (the
    ``duckdb`` CLI, another program)."""
    from ...archive import ArchivePaths, attach_statements

    return ";\n".join(attach_statements(ArchivePaths.of(settings), read_only=True,
                                         reveal=False)) + ";"




_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def read_query_file(path: str | Path) -> str:
    """The SQL in a file given to `botstats sql --file`, as UTF-8 text."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise QueryError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}). Save the "
                         f"query as UTF-8 and run again.") from exc
    except OSError as exc:
        raise QueryError(f"cannot read the query file {path}: {exc.strerror or exc}.") from exc


def run_query(settings: Settings, query: str, params: Mapping[str, str] | None = None,
              *, limit: int | None = None) -> pl.DataFrame | None:
    """Run SQL against the archive (read-only, as of its last commit; closed before returning).

    ``params`` become DuckDB variables, read in the query as ``getvariable('name')``.
    ``limit`` fetches at most that many rows. None when the last statement returns nothing.
    """
    for key in params or {}:
        if not _PARAM_NAME.match(key):
            raise QueryError(f"--param {key!r}: a name must be letters, digits and _, like bot_id.")
    with archive.reader(settings) as con:
        try:
            for key, value in (params or {}).items():
                con.execute(f"SET VARIABLE {key} = ?", [value])
            # None for a statement that returns nothing (SET, CREATE), though the stub says not.
            rel: duckdb.DuckDBPyRelation | None = con.sql(query)
            if rel is None:
                return None
            if limit is not None:
                rel = rel.limit(limit)
            result = pl.from_arrow(rel.to_arrow_table())
        except duckdb.CatalogException as exc:
            hint = (" The trend_* views exist once `botstats trends` has run."
                    if "trend_" in query else "")
            raise QueryError(f"the query failed: {exc}{hint}") from exc
        except duckdb.Error as exc:
            raise QueryError(f"the query failed: {exc}") from exc
    assert isinstance(result, pl.DataFrame)
    return result
