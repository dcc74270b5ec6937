"""Reading ``[alerts]``'s destinations: each ``[alerts.destinations.NAME]`` table of the config
file checked into a :class:`Destination`, and its secrets taken from the environment.

A webhook URL carries its credential in its path, and an SMTP password is one: both are read
only from ``BOTSTATS_ALERTS_<NAME>_URL`` and ``BOTSTATS_ALERTS_<NAME>_PASSWORD`` and refused in
the file (the same rules as the user token). A variable left unset is not a config error: that
destination's alerts are recorded undelivered, so a cron job missing it still archives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from ._errors import ConfigError
from ._settings import (
    ALERT_KINDS,
    ALERTS_ENV,
    DESTINATION_TYPES,
    SMTP_PORTS,
    AlertSettings,
    Destination,
    Secret,
)
from ._validation import suggest

_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# Keys of a destination's table that would hold a secret: never read from the file.
_SECRET_KEYS = {"url": "URL", "webhook": "URL", "webhook_url": "URL", "password": "PASSWORD"}
_KEYS = {
    "discord": ("type", "kinds"),
    "slack": ("type", "kinds"),
    "webhook": ("type", "kinds"),
    "email": ("type", "kinds", "host", "port", "security", "user", "sender", "to"),
}


def read_destinations(values: Mapping[str, Any], where: str) -> tuple[dict[str, Any],
                                                                       tuple[Destination, ...]]:
    """The ``[alerts]`` table as its plain settings and its destinations (the
    ``[alerts.destinations.NAME]`` tables), each destination checked."""
    plain = {k: v for k, v in values.items() if k != "destinations"}
    tables = values.get("destinations", {})
    if not isinstance(tables, Mapping):
        raise ConfigError(f"{where}.destinations: each destination is a table of its own, like "
                          f'[alerts.destinations.team] with type = "discord"; got {tables!r}.')
    return plain, tuple(_destination(name, table, f"{where}.destinations.{name}")
                        for name, table in tables.items())


def _destination(name: str, table: Any, where: str) -> Destination:
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: a destination's name is lowercase letters, digits and _ (it names the "
            f"environment variables of its secrets, {ALERTS_ENV}<NAME>_URL), got {name!r}.")
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table of settings, got {table!r}.")
    for key in table:
        if key in _SECRET_KEYS:
            raise ConfigError(
                f"{where}: '{key}' is a secret (a webhook URL carries its credential) and is not "
                f"read from the config file, so it never lands in version control. Set "
                f"{ALERTS_ENV}{name.upper()}_{_SECRET_KEYS[key]} in the environment instead.")
    kind = table.get("type")
    if kind not in DESTINATION_TYPES:
        got = "none" if kind is None else repr(kind)
        raise ConfigError(f"{where}.type: must be one of {', '.join(DESTINATION_TYPES)}, got "
                          f"{got}.{suggest(str(kind), DESTINATION_TYPES) if kind else ''}")
    allowed = _KEYS[kind]
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key '{key}' for a {kind} destination."
                              f"{suggest(key, allowed)} Allowed keys: {', '.join(allowed)}.")
        if key != "type":
            values[key] = _value(key, value, f"{where}.{key}")
    dest = Destination(name, kind, **values)
    if dest.is_email:
        _check_email(dest, where)
    return dest


def _value(key: str, value: Any, where: str) -> Any:
    if key in ("kinds", "to"):
        items = value.replace(",", " ").split() if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}.")
        return _kinds(items, where) if key == "kinds" else tuple(items)
    if key == "port":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
            raise ConfigError(f"{where}: expected a port number (0 = the usual one), got {value!r}.")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r} ({type(value).__name__}).")
    if key == "security" and value not in SMTP_PORTS:
        raise ConfigError(f"{where}: must be one of {', '.join(SMTP_PORTS)}, got {value!r}."
                          f"{suggest(value, SMTP_PORTS)}")
    return value


def _kinds(items: list[str], where: str) -> tuple[str, ...]:
    if items == ["all"]:
        return ALERT_KINDS
    if not items:
        raise ConfigError(f"{where}: a destination receives at least one kind; kinds: "
                          f"{', '.join(ALERT_KINDS)} (or \"all\").")
    for item in items:
        if item not in ALERT_KINDS:
            raise ConfigError(f"{where}: unknown kind {item!r}.{suggest(item, ALERT_KINDS)} "
                              f"Kinds: {', '.join(ALERT_KINDS)} (or \"all\").")
    return tuple(k for k in ALERT_KINDS if k in items)


def _check_email(dest: Destination, where: str) -> None:
    if not dest.host:
        raise ConfigError(f'{where}: an email destination needs host, the SMTP server, like '
                          f'host = "smtp.example.com".')
    if not dest.to:
        raise ConfigError(f'{where}: an email destination needs to, its recipients, like '
                          f'to = ["ops@example.com"].')
    if not (dest.sender or dest.user):
        raise ConfigError(f'{where}: an email destination needs a From address: sender = '
                          f'"botstats@example.com" (or user, when it is one).')
    for address in (*dest.to, dest.sender or dest.user):
        if "@" not in address or any(c in address for c in "\r\n"):
            raise ConfigError(f"{where}: {address!r} is not a mail address.")


def secret_env(alerts: AlertSettings) -> set[str]:
    """The environment variables the destinations read their secrets from."""
    return {name for d in alerts.destinations for name in (d.url_env, d.password_env)}


def with_secrets(alerts: AlertSettings, env: Mapping[str, str]) -> AlertSettings:
    """The destinations with their URL and password from ``env``. A URL that is not http(s)
    is refused, naming its variable and never its value."""
    destinations = []
    for dest in alerts.destinations:
        url, password = env.get(dest.url_env, "").strip(), env.get(dest.password_env, "")
        if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
            raise ConfigError(
                f"environment: {dest.url_env}: the webhook URL of destination {dest.name!r} "
                f"must be an http(s) URL, like the one Discord or Slack shows when the webhook "
                f"is made (its value is not shown: it is a secret).")
        destinations.append(replace(dest, url=Secret(url), password=Secret(password)))
    return replace(alerts, destinations=tuple(destinations))
