"""Frames that outlive the slice of bots they were computed from."""

from __future__ import annotations

import io

import polars as pl


def detached(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of ``frame`` that shares no buffer with the frames it came from.

    A polars result (a group_by's, a filter's, a head) points into its source's buffers, its
    strings most of all, so a few rows kept across slices of bots hold each slice's whole
    columns alive; ``shrink_to_fit`` and ``rechunk`` keep them too. Written out and read back,
    the rows own their bytes. For small frames: it costs a copy of them."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="uncompressed")
    buffer.seek(0)
    return pl.read_ipc(buffer)
