"""Files that are whole or absent: write beside the target under a hidden name, then rename it
over the target in one step. A reader (or a crash) sees the old file or the new one, never half
of one; the hidden ``.<name>.<tag>.tmp`` names match no reader's glob (``*.parquet``,
``*.duckdb``), and a sweep of ``.*.tmp`` removes what a killed writer left."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

TMP_SUFFIX = ".tmp"


def aside(path: Path, tag: str | None = None) -> Path:
    """The hidden temporary name beside ``path``; ``tag`` (default: this process and thread)
    keeps concurrent writers apart."""
    tag = tag or f"{os.getpid()}.{threading.get_ident()}"
    return path.with_name(f".{path.name}.{tag}{TMP_SUFFIX}")


@contextmanager
def replacing(path: Path, *, tag: str | None = None, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write; on a clean exit it is renamed over
    ``path``, on an error it is removed and ``path`` stays as it was.

    ``durable``: fsync the file before the rename and its directory after, so the rename
    survives a power cut (exports and the published archive; not the lock's holder note).
    """
    tmp = aside(path, tag)
    try:
        yield tmp
        if durable:
            fsync_file(tmp)
        os.replace(tmp, path)
        if durable:
            fsync_dir(path.parent)
    finally:
        # Never created, or already renamed; or under a path that is not even a directory.
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


def fsync_file(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def fsync_dir(path: Path) -> None:
    """Make a rename durable: fsync the directory that holds it (a no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
