"""Validation of the BotStat creation payload (POST /bots/:bot_id/stats).

Every problem is collected, not just the first, so a 400 names each bad field at once.
"""

from __future__ import annotations

import math
from typing import Any

INT64_MAX = 2**63 - 1  # what the archive's BIGINT columns hold
MAX_CUSTOM_FIELDS = 50
MAX_NAME_LEN = 100
MAX_STRING_VALUE_LEN = 1000

# field -> (required, minimum, maximum)
_INT_FIELDS: dict[str, tuple[bool, int, int]] = {
    "users": (True, 0, INT64_MAX),
    "guilds": (True, 0, INT64_MAX),
    "shards": (False, 0, INT64_MAX),
    "memory_load": (False, 0, 100),
    "cpu_load": (False, 0, 100),
    "commands_executed": (False, 0, INT64_MAX),
}
ALLOWED_FIELDS = (*_INT_FIELDS, "custom")


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def _is_int(value: Any) -> bool:
    # JSON true/false arrive as bool, a subclass of int: they are not counts.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_custom(value: Any, problems: dict[str, str]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        problems["custom"] = f"must be an array of {{name, value}} objects, got {_describe(value)}"
        return []
    if len(value) > MAX_CUSTOM_FIELDS:
        problems["custom"] = f"at most {MAX_CUSTOM_FIELDS} items, got {len(value)}"
        return []
    clean: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, item in enumerate(value):
        where = f"custom[{n}]"
        if not isinstance(item, dict):
            problems[where] = f"must be an object {{name, value}}, got {_describe(item)}"
            continue
        extra = sorted(set(item) - {"name", "value"})
        if extra:
            problems[where] = f"unknown keys {extra}: allowed are name, value"
        name = item.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LEN:
            problems[f"{where}.name"] = (f"required: a non-empty string of at most {MAX_NAME_LEN}"
                                         f" characters, got {_describe(name)}")
        elif name in seen:
            problems[f"{where}.name"] = f"duplicate name {name!r}"
        else:
            seen.add(name)
        if "value" not in item:
            problems[f"{where}.value"] = "required: a string, number or boolean"
        else:
            val = item["value"]
            ok = (isinstance(val, str | bool | int)
                  or (isinstance(val, float) and math.isfinite(val)))
            if not ok:
                problems[f"{where}.value"] = f"must be a string, number or boolean, got {_describe(val)}"
            elif isinstance(val, str) and len(val) > MAX_STRING_VALUE_LEN:
                problems[f"{where}.value"] = f"at most {MAX_STRING_VALUE_LEN} characters"
        clean.append({"name": name, "value": item.get("value")})
    return clean


def validate_stat_payload(body: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """``(clean payload, problems by field)``; the payload is usable only if problems is empty.

    A null optional field counts as absent. Unknown fields are refused (a typo such as
    ``server_count`` would otherwise be dropped silently)."""
    if not isinstance(body, dict):
        return {}, {"body": f"must be a JSON object, got {_describe(body)}"}
    problems: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for name in sorted(set(body) - set(ALLOWED_FIELDS)):
        problems[name] = f"unknown field: allowed are {', '.join(ALLOWED_FIELDS)}"
    for name, (required, low, high) in _INT_FIELDS.items():
        value = body.get(name)
        if value is None:
            if required:
                problems[name] = f"required: an integer from {low} to {high}"
            continue
        if not _is_int(value) or not low <= value <= high:
            problems[name] = f"must be an integer from {low} to {high}, got {_describe(value)}"
            continue
        clean[name] = value
    if body.get("custom") is not None:
        clean["custom"] = _check_custom(body["custom"], problems)
    return clean, problems
