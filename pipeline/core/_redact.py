"""Secrets out of everything we show: known token and key values, strings shaped like one, and
credentials in URLs become ``***``. Used by the client (what the service echoes back, the URLs in
messages) and by the logs (every record, before any formatter sees it)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
# Shapes of credentials whatever their value: the service's tokens and keys, and auth headers.
SECRET_PATTERNS = (
    re.compile(r"\butok_[A-Za-z0-9_\-]+"),
    re.compile(r"\bbkey_[A-Za-z0-9_\-]+"),
    re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]+"),
)
# Masking a 1-3 character "secret" would mangle every line and protect nothing.
MIN_SECRET = 4
# Query parameters whose values are credentials, whatever the service calls them.
SECRET_PARAM = re.compile(r"token|key|secret|password|passwd|auth|signature|sig", re.I)


class Redactor:
    """Masks known secret values, and strings shaped like secrets (``patterns``), in text and
    nested data. The client learns secrets as it sends them (``add``) and masks only those in
    what the service echoes back; the logs mask the shapes too."""

    def __init__(self, secrets: Iterable[str] = (),
                 patterns: Iterable[re.Pattern[str]] = SECRET_PATTERNS) -> None:
        self.secrets: list[str] = []
        self.patterns = tuple(patterns)
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        if secret and len(secret) >= MIN_SECRET and secret not in self.secrets:
            # Longest first: a secret that contains another is masked whole.
            self.secrets = sorted([*self.secrets, secret], key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, MASK)
        for pattern in self.patterns:
            value = pattern.sub(_mask_match, value)
        return value

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.data(v) for v in value)
        return value


def _mask_match(match: re.Match[str]) -> str:
    # "Bearer abc" -> "Bearer ***": keep the scheme so the line still says what it was.
    scheme = match.group(1) if match.re.groups else None
    return f"{scheme} {MASK}" if scheme else MASK


def redact_url(url: str) -> str:
    """The URL with credentials in the userinfo and token/key-like query params masked."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, MASK if SECRET_PARAM.search(k) else v) for k, v in pairs], safe="*@"
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
