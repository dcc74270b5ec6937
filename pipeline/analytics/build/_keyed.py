"""Rows spread over one scratch stream per key, so that one scan serves many keyed reads.

The trends read the archive a slice of bots at a time and rank a group of days at a time; a
query per slice (or group) scans everything once for each, which grows with the square of the
archive. Instead one scan's batches are split by key and appended to an Arrow IPC stream per
key (zstd), then each key's rows are read back whole, in the order they came. The streams are
files, or buffers in memory when the caller knows the rows are few (an hourly run's days): a
scratch file is bytes written, and those would be most of what an hourly run writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl
import pyarrow as pa

_KEY = "_key"


_OPTIONS = pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=1))


class KeyedFiles:
    """Rows by key in ``folder`` (or, ``in_memory``, in buffers): :meth:`add` batches, then
    :meth:`take` each key's rows once."""

    def __init__(self, folder: Path, schema: pl.Schema, *, in_memory: bool = False) -> None:
        if not in_memory:
            folder.mkdir(parents=True, exist_ok=True)
        self._folder = folder
        self._schema = schema
        self._in_memory = in_memory
        self._writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
        self._sinks: dict[int, pa.BufferOutputStream] = {}
        self._buffers: dict[int, pa.Buffer] = {}
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
                self._writers[k] = pa.ipc.new_file(self._sink(k), table.schema, options=_OPTIONS)
            self._writers[k].write_table(table)

    def _sink(self, key: int) -> str | pa.BufferOutputStream:
        if self._in_memory:
            self._sinks[key] = pa.BufferOutputStream()
            return self._sinks[key]
        self._files[key] = self._folder / f"{id(self)}-{key}.arrow"
        return str(self._files[key])

    def finish(self) -> None:
        """Every stream complete; call before the first :meth:`take`."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        self._buffers.update({k: sink.getvalue() for k, sink in self._sinks.items()})
        self._sinks.clear()

    def take(self, key: int) -> pl.DataFrame:
        """``key``'s rows (none: an empty frame of the schema), and its stream dropped."""
        buffer = self._buffers.pop(key, None)
        path = self._files.pop(key, None)
        if buffer is not None:
            table = pa.ipc.open_file(buffer).read_all()
        elif path is not None:
            with pa.OSFile(str(path)) as source:  # read into memory: the file goes next
                table = pa.ipc.open_file(source).read_all()
            path.unlink()
        else:
            return pl.DataFrame(schema=self._schema)
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        return frame

    def close(self) -> None:
        self.finish()
        for path in self._files.values():
            path.unlink(missing_ok=True)
        self._files.clear()
        self._buffers.clear()


def spread(batches: Iterable[pl.DataFrame], key: Callable[[pl.DataFrame], pl.Series],
           folder: Path, schema: pl.Schema, *, in_memory: bool = False) -> KeyedFiles:
    """``batches`` spread by ``key`` (each row's integer key, from its batch)."""
    files = KeyedFiles(folder, schema, in_memory=in_memory)
    try:
        for batch in batches:
            files.add(batch, key(batch))
        files.finish()
    except BaseException:
        files.close()
        raise
    return files
