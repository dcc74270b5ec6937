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


__all__ = ["decode_json"]
