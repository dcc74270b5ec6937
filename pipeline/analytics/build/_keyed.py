"""Rows spread over one scratch file per key, so that one scan serves many keyed reads.

The trends read the archive a slice of bots at a time and rank a group of days at a time; a
query per slice (or group) scans everything once for each, which grows with the square of the
archive. Instead one scan's batches are split by key and appended to an Arrow IPC file per key,
then each key's rows are read back whole, in the order they came.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl
import pyarrow as pa

_KEY = "_key"


class KeyedFiles:
    """Rows by key in ``folder``: :meth:`add` batches, then :meth:`take` each key's rows once."""

    def __init__(self, folder: Path, schema: pl.Schema) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._folder = folder
        self._schema = schema
        self._writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
        self._files: dict[int, Path] = {}

    def add(self, frame: pl.DataFrame, keys: pl.Series) -> None:
        """Append each row of ``frame`` to the file of its key (``keys``, one per row)."""
        if not frame.height:
            return
        parts = frame.with_columns(keys.alias(_KEY)).partition_by(
            _KEY, as_dict=True, include_key=False, maintain_order=True)
        for (key,), rows in parts.items():
            k = int(key)
            table = rows.to_arrow()
            if k not in self._writers:
                self._files[k] = self._folder / f"{id(self)}-{k}.arrow"
                self._writers[k] = pa.ipc.new_file(str(self._files[k]), table.schema)
            self._writers[k].write_table(table)

    def finish(self) -> None:
        """Every file complete; call before the first :meth:`take`."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def take(self, key: int) -> pl.DataFrame:
        """``key``'s rows (none: an empty frame of the schema), and its file deleted."""
        path = self._files.pop(key, None)
        if path is None:
            return pl.DataFrame(schema=self._schema)
        with pa.OSFile(str(path)) as source:  # read into memory: the file goes next
            table = pa.ipc.open_file(source).read_all()
        path.unlink()
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return frame

    def close(self) -> None:
        self.finish()
        for path in self._files.values():
            path.unlink(missing_ok=True)
        self._files.clear()


def spread(batches: Iterable[pl.DataFrame], key: Callable[[pl.DataFrame], pl.Series],
           folder: Path, schema: pl.Schema) -> KeyedFiles:
    """``batches`` spread by ``key`` (each row's integer key, from its batch)."""
    files = KeyedFiles(folder, schema)
    try:
        for batch in batches:
            files.add(batch, key(batch))
        files.finish()
    except BaseException:
        files.close()
        raise
    return files
