"""``[alerts]``: what botstats tells, when, and where (its destinations).

Every destination is a table of its own, ``[alerts.destinations.NAME]``, with the kinds of alert
it receives. A webhook URL carries its credential in its path, and an SMTP password is one: both
are read only from the environment, ``BOTSTATS_ALERTS_<NAME>_URL`` and
``BOTSTATS_ALERTS_<NAME>_PASSWORD``, held in :class:`Secret`, and refused in the file (the same
rules as the user token). A destination whose variable is unset is not a config error: the
alerts for it are recorded undelivered, so a cron job missing the variable still archives.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from ._errors import ConfigError
from ._settings import Secret
from ._validation import parse_duration

# Every kind of alert, in the order a message shows them.
KINDS = ("failed", "partial", "lock", "stale", "resolved", "event", "milestone")
TYPES = ("discord", "slack", "webhook", "email")
SECURITY = ("starttls", "tls", "none")
SMTP_PORTS = {"starttls": 587, "tls": 465, "none": 25}
MILESTONE_METRICS = ("guilds", "users")
EVENTS_FOR = ("all", "watched")
ENV_PREFIX = "BOTSTATS_ALERTS_"
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# Keys of a destination's table that name a secret: never read from the file.
_SECRET_KEYS = {"url": "URL", "webhook": "URL", "webhook_url": "URL", "password": "PASSWORD"}
_KEYS = {
    "discord": ("type", "kinds"),
    "slack": ("type", "kinds"),
    "webhook": ("type", "kinds"),
    "email": ("type", "kinds", "host", "port", "security", "user", "sender", "to"),
}


@dataclass(frozen=True)
class Destination:
    """One place alerts go: a Discord or Slack webhook, a generic JSON POST, or mail."""

    name: str
    type: str
    kinds: tuple[str, ...] = KINDS
    # email only
    host: str = ""
    port: int = 0  # 0 = the usual port of ``security``: 587, 465 or 25
    security: str = "starttls"
    user: str = ""
    sender: str = ""  # the From address ("" = user)
    to: tuple[str, ...] = ()
    # Secrets, from the environment only.
    url: Secret = field(default_factory=lambda: Secret(""), compare=False)
    password: Secret = field(default_factory=lambda: Secret(""), compare=False)

    @property
    def url_env(self) -> str:
        return f"{ENV_PREFIX}{self.name.upper()}_URL"

    @property
    def password_env(self) -> str:
        return f"{ENV_PREFIX}{self.name.upper()}_PASSWORD"

    @property
    def is_email(self) -> bool:
        return self.type == "email"

    @property
    def smtp_port(self) -> int:
        return self.port or SMTP_PORTS[self.security]

    def takes(self, kind: str) -> bool:
        return kind in self.kinds

    def missing(self) -> str:
        """Why this destination cannot be reached as configured ('' when it can): a webhook
        whose URL variable is unset."""
        if not self.is_email and not self.url:
            return f"no URL: set {self.url_env} in the environment of the job"
        return ""

    def where(self) -> str:
        """Where it goes, for messages, without its secret: the webhook's host, the SMTP
        server and the recipients."""
        if self.is_email:
            return f"mail via {self.host}:{self.smtp_port} to {', '.join(self.to)}"
        host = urlsplit(self.url.get()).hostname if self.url else None
        return f"{self.type} webhook at {host}" if host else f"{self.type} webhook (no URL)"

    def secrets(self) -> list[str]:
        return [self.url.get(), self.password.get()]

    def as_dict(self) -> dict[str, Any]:
        """The destination as plain data, its secrets shown only as set/unset."""
        out: dict[str, Any] = {"name": self.name, "type": self.type, "kinds": list(self.kinds)}
        if self.is_email:
            out |= {"host": self.host, "port": self.smtp_port, "security": self.security,
                    "user": self.user, "sender": self.sender or self.user, "to": list(self.to),
                    "password": "set" if self.password else "unset"}
        else:
            out["url"] = "set" if self.url else "unset"
        return out


@dataclass(frozen=True)
class AlertSettings:
    """What is told, and when. Durations are text like ``6h`` (s, m, h, d); "" turns a
    condition off."""

    destinations: tuple[Destination, ...] = ()
    stale_after: str = "6h"  # no complete harvest within this: a stale alert ("" = never)
    lock_after: str = "2h"  # a job holding the archive lock longer: a lock alert ("" = never)
    repeat_interval: str = "24h"  # a condition still going reminds at most this often
    min_severity: float = 4.0  # anomaly events at or above this severity (log10 user-days)
    events: str = "all"  # all | watched: the bots whose events are told
    event_days: int = 7  # only events (and milestones reached) of the last this many days
    watch: str = ""  # bot ids whose milestones are told: "123, 456"
    milestones: str = "guilds:10000"  # sizes: "guilds:10000, users:1000000"
    forecast_days: int = 30  # a watched bot forecast to reach a size within this ("0" = off)
    budget: float = 30.0  # seconds all sending of one run may take, retries included
    timeout: float = 10.0  # seconds for one request or SMTP conversation
    give_up_after: str = "3d"  # an alert still undelivered this long after its first try

    @property
    def watch_list(self) -> tuple[str, ...]:
        return tuple(self.watch.replace(",", " ").split())

    @property
    def milestone_list(self) -> tuple[tuple[str, int], ...]:
        """(metric, size) of each milestone, in the order given."""
        return tuple(_milestone(item) for item in _items(self.milestones))

    def duration(self, key: str) -> timedelta | None:
        """The duration setting ``key``; None when it is "" (off)."""
        text = getattr(self, key)
        return parse_duration(text) if text else None

    def secrets(self) -> list[str]:
        return [s for d in self.destinations for s in d.secrets() if s]

    def secret_env(self) -> set[str]:
        """The environment variables the destinations read their secrets from."""
        return {name for d in self.destinations for name in (d.url_env, d.password_env)}

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "destinations"}
        return out | {"destinations": [d.as_dict() for d in self.destinations]}


SCALAR_KEYS = tuple(f.name for f in fields(AlertSettings) if f.name != "destinations")


def _items(text: str) -> list[str]:
    return [item for item in re.split(r"[,\s]+", text.strip()) if item]


def _milestone(item: str) -> tuple[str, int]:
    metric, _, size = item.partition(":")
    if metric not in MILESTONE_METRICS or not size.isdigit() or int(size) <= 0:
        raise ValueError(f"{item!r} is not a milestone: write metric:size with a metric of "
                         f"{', '.join(MILESTONE_METRICS)}, like guilds:10000")
    return metric, int(size)


def _suggest(word: str, options: tuple[str, ...] | list[str]) -> str:
    match = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" Did you mean '{match[0]}'?" if match else ""


def split_alerts(values: Mapping[str, Any], where: str) -> tuple[dict[str, Any],
                                                                  tuple[Destination, ...]]:
    """The ``[alerts]`` table of a config file as its plain settings and its destinations
    (the ``[alerts.destinations.NAME]`` tables), each destination checked."""
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
            f"environment variables of its secrets, {ENV_PREFIX}<NAME>_URL), got {name!r}.")
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table of settings, got {table!r}.")
    for key in table:
        if key in _SECRET_KEYS:
            raise ConfigError(
                f"{where}: '{key}' is a secret (a webhook URL carries its credential) and is not "
                f"read from the config file, so it never lands in version control. Set "
                f"{ENV_PREFIX}{name.upper()}_{_SECRET_KEYS[key]} in the environment instead.")
    kind = table.get("type")
    if kind not in TYPES:
        got = "none" if kind is None else repr(kind)
        raise ConfigError(f"{where}.type: must be one of {', '.join(TYPES)}, got {got}."
                          f"{_suggest(str(kind), TYPES) if kind else ''}")
    allowed = _KEYS[kind]
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key '{key}' for a {kind} destination."
                              f"{_suggest(key, allowed)} Allowed keys: {', '.join(allowed)}.")
        if key == "type":
            continue
        values[key] = _value(key, value, f"{where}.{key}")
    dest = Destination(name, kind, **values)
    if dest.is_email:
        _check_email(dest, where)
    return dest


def _value(key: str, value: Any, where: str) -> Any:
    if key in ("kinds", "to"):
        items = _items(value) if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}.")
        if key == "kinds":
            return _kinds(items, where)
        return tuple(items)
    if key == "port":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 65535:
            raise ConfigError(f"{where}: expected a port number (0 = the usual one), got {value!r}.")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r} ({type(value).__name__}).")
    if key == "security" and value not in SECURITY:
        raise ConfigError(f"{where}: must be one of {', '.join(SECURITY)}, got {value!r}."
                          f"{_suggest(value, SECURITY)}")
    return value


def _kinds(items: list[str], where: str) -> tuple[str, ...]:
    if items == ["all"]:
        return KINDS
    for item in items:
        if item not in KINDS:
            raise ConfigError(f"{where}: unknown kind {item!r}.{_suggest(item, KINDS)} Kinds: "
                              f"{', '.join(KINDS)} (or \"all\").")
    if not items:
        raise ConfigError(f"{where}: a destination receives at least one kind; kinds: "
                          f"{', '.join(KINDS)}.")
    return tuple(k for k in KINDS if k in items)


def _check_email(dest: Destination, where: str) -> None:
    if not dest.host:
        raise ConfigError(f"{where}.host: an email destination needs the SMTP server, like "
                          f'host = "smtp.example.com".')
    if not dest.to:
        raise ConfigError(f'{where}.to: an email destination needs recipients, like to = '
                          f'["ops@example.com"].')
    if not (dest.sender or dest.user):
        raise ConfigError(f'{where}.sender: an email destination needs a From address: sender = '
                          f'"botstats@example.com" (or user, when it is one).')
    for address in (*dest.to, dest.sender or dest.user):
        if "@" not in address or any(c in address for c in "\r\n"):
            raise ConfigError(f"{where}: {address!r} is not a mail address.")


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


def validate_alerts(alerts: AlertSettings, where: Callable[[str], str]) -> None:
    """Check the values types alone do not catch; ``where(dotted)`` names what set one."""

    def refuse(key: str, what: str) -> ConfigError:
        return ConfigError(f"{where(f'alerts.{key}')}: [alerts].{key} {what}")

    for key in ("stale_after", "lock_after", "repeat_interval", "give_up_after"):
        try:
            alerts.duration(key)
        except ValueError as exc:
            raise refuse(key, f"{exc}.") from None
    for key in ("repeat_interval", "give_up_after"):
        if not getattr(alerts, key):
            raise refuse(key, "must be a duration like 24h, got ''.")
    for key in ("budget", "timeout", "event_days"):
        if getattr(alerts, key) <= 0:
            raise refuse(key, f"must be greater than 0, got {getattr(alerts, key)}.")
    for key in ("min_severity", "forecast_days"):
        if getattr(alerts, key) < 0:
            raise refuse(key, f"must be 0 or more, got {getattr(alerts, key)}.")
    if alerts.events not in EVENTS_FOR:
        raise refuse("events", f"must be one of {', '.join(EVENTS_FOR)}, got {alerts.events!r}."
                               f"{_suggest(alerts.events, EVENTS_FOR)}")
    if alerts.events == "watched" and not alerts.watch_list:
        raise refuse("events", 'is "watched": name the bots in [alerts].watch, like '
                               'watch = "123, 456".')
    try:
        _ = alerts.milestone_list
    except ValueError as exc:
        raise refuse("milestones", f"{exc}.") from None
    names = [d.name for d in alerts.destinations]
    if len(set(names)) != len(names):
        raise refuse("destinations", f"names each destination once, got {', '.join(names)}.")
