"""PostgreSQL connection strings ([store].catalog): checked before any I/O, and their password
taken out, so the string botstats hands DuckDB, prints or logs never carries it.

Both forms libpq reads are accepted: a URI (``postgresql://user@host:5432/dbname``) and
key=value words (``host=db dbname=botstats user=botstats``). DuckDB repeats the whole string in
its connection errors, so a password in it would reach messages and logs; botstats gives it to
libpq in ``PGPASSWORD`` instead (see pipeline.archive), as an operator may do themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import first_line


@dataclass(frozen=True)
class Dsn:
    """A connection string without its password, and the password ("" when none)."""

    text: str
    password: str = ""


def parse_dsn(text: str) -> Dsn:
    """``text`` checked and split; ValueError says what is wrong with it."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    if not text.strip():
        raise ValueError("it is empty")
    if "://" in text and not text.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"a URI must start with postgresql://, got {text.split('://')[0]}://")
    if "://" not in text and "=" not in text:
        raise ValueError("it is neither a URI (postgresql://user@host/dbname) nor key=value "
                         "words (host=... dbname=... user=...)")
    try:
        words = conninfo_to_dict(text)
    except ProgrammingError as exc:
        raise ValueError(first_line(exc)) from None
    password = str(words.pop("password", "") or "")
    if not words.get("dbname"):
        raise ValueError("it names no database (dbname=..., or /dbname at the end of a URI)")
    if not password:
        return Dsn(text)
    return Dsn(make_conninfo("", **{k: str(v) for k, v in words.items()}), password)


__all__ = ["Dsn", "parse_dsn"]
