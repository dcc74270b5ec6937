"""The bodies that cross the interface: a JSON array split into its records undecoded, a reply as the probe sees it, the stat record a bot posts, and the query of one page."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import msgspec

from ..core import (
    FieldSettings,
    decode_json,
)
from ._ratelimit import is_rate_limited, read_rate_limit


@dataclass(frozen=True)
class Reply:
    """A request and what came back, as :meth:`._client.Client.fetch` saw it (secrets redacted)."""

    method: str
    url: str
    auth: str
    status: int
    headers: dict[str, str]
    body: str
    seconds: float
    limited: tuple[dict[str, str], ...] = ()  # the headers of the 429s waited out before it

    @property
    def rate_limited(self) -> bool:
        """Whether the service's rate limit refused it (a 429, or a 403 that says so)."""
        return is_rate_limited(self.status, read_rate_limit(self.headers))

    def json(self) -> Any:
        """The body as JSON; None when it is not JSON."""
        try:
            return decode_json(self.body.encode())
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class RawArray:
    """A JSON array as received: the body, and each element's JSON text exactly as sent
    (``msgspec.Raw`` slices of the body, bytes-like)."""

    body: bytes
    items: list[msgspec.Raw]


_RAW_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])


def split_array(body: bytes) -> RawArray | None:
    """The elements of a plain-JSON UTF-8 array body, undecoded; None for any other body (the
    caller then reads it as :func:`decode_json` does, and words the error)."""
    try:
        items = _RAW_ARRAY.decode(body)
        body.decode()  # msgspec skips over strings without checking that they are UTF-8
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return RawArray(body, items)


def stat_payload(fields: FieldSettings, counts: Mapping[str, int | None],
                 custom: Iterable[tuple[str, Any]] = ()) -> dict[str, Any]:
    """The body of ``POST /bots/:id/stats``: the counts that are given (None: left out) and the
    custom fields under the configured ``[fields]`` names."""
    payload: dict[str, Any] = {k: v for k, v in counts.items() if v is not None}
    pairs = list(custom)
    if pairs:
        payload["custom"] = [{fields.custom_name: name, fields.custom_value: value}
                             for name, value in pairs]
    return payload



def segment(value: str | int) -> str:
    """A path parameter as one URL segment (a '/' in an id must not change the route)."""
    return quote(str(value), safe="@")
