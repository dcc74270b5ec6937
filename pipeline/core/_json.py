"""JSON as the service's bodies need reading: fast on the usual body, and every body the standard
library reads still read the same way."""

from __future__ import annotations

import json
from typing import Any

import orjson


def decode_json(body: bytes | str) -> Any:
    """A body or a record's text as JSON: orjson first (every /stats page goes through here, and
    it is the faster reader), else :func:`json.loads`, which reads what orjson refuses (NaN,
    Infinity, lone surrogates, UTF-16/32 bodies) as ``Response.json()`` does, so every body
    reads as before. orjson reads integers beyond 64 bits as floats (out of any count's range).
    ValueError when neither reads it."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)

def canonical_json(value: Any) -> str:
    """One spelling per value, so an unchanged record compares equal run after run.

    orjson (sorted keys, compact, UTF-8) is much faster than ``json.dumps`` (bench/README.md)
    and this runs once per record. What orjson refuses (integers beyond 64 bits, lone surrogates, non-JSON
    objects) is spelled by ``json.dumps`` instead.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=str)


def same_record(a: str, b: str) -> bool:
    """Two JSON texts of a record say the same (key order and spacing aside; ``1`` and ``1.0``
    or ``true`` differ), e.g. the text archived and the text received again."""
    if a == b:
        return True
    try:
        return canonical_json(decode_json(a)) == canonical_json(decode_json(b))
    except ValueError:
        return False
