"""Command-line arguments that are values: a custom field typed as NAME=VALUE."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable


def custom_value(raw: str) -> int | float | bool | str:
    """A custom field's value typed on a command line: an integer, a finite number, true/false,
    else the text itself."""
    if re.fullmatch(r"[+-]?\d+", raw):
        return int(raw)
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if math.isfinite(number):  # "nan"/"inf" are not JSON numbers: keep them as text
        return number
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    return raw


def parse_custom(pairs: Iterable[str]) -> list[tuple[str, int | float | bool | str]]:
    """``NAME=VALUE`` texts as (name, typed value); ValueError names the one that is not."""
    parsed = []
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME=VALUE, got {pair!r}.")
        parsed.append((name.strip(), custom_value(raw)))
    return parsed
