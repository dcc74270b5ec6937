"""Logging: readable text on a terminal, JSON lines on request, an optional file, no secrets.

:func:`setup_logging` is called once per command after the settings are loaded. It installs
handlers on the ``botstats`` and ``apscheduler`` loggers (not the root logger, so libraries and
the embedded service keep their own output):

- stderr: ``text`` (``16:15:02 INFO  harvest: ...``) or ``json`` (one object a line);
- ``[log].file`` / ``--log-file``: the same records appended to a file, in the same format.

Every handler carries a :class:`RedactSecrets` filter: the configured user token and bot key,
the catalog's password and the object storage keys, and anything shaped like one (``utok_...``, ``bkey_...``, ``Bearer ...``), become ``***`` in
the message, its arguments, extra fields and exception text before any formatter sees them.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ..core import ConfigError, Redactor, Settings

LOGGERS = ("botstats", "apscheduler")
_HANDLER_MARK = "_botstats_handler"
# LogRecord attributes that are not `extra=` fields.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class RedactSecrets(logging.Filter):
    """Rewrites each record so no formatter or handler downstream can see a secret."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        r = self.redactor
        if getattr(record, "_botstats_redacted", None) is r:
            return True  # the same record reaching a second handler
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: keep what there is
            message = str(record.msg)
        record.msg, record.args = r.text(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = r.text(record.exc_text)
        if record.stack_info:
            record.stack_info = r.text(record.stack_info)
        for key, value in list(vars(record).items()):
            if key not in _STANDARD and not key.startswith("_"):
                setattr(record, key, r.data(value))
        record._botstats_redacted = r
        return True


class TextFormatter(logging.Formatter):
    """``2026-11-22 16:15:02 INFO  harvest: message`` (the ``botstats.`` prefix dropped)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-5s %(short)s: %(message)s", "%Y-%m-%d %H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        record.short = record.name.removeprefix("botstats.")
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts (UTC), level, logger, msg, extra fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key != "short":
                out[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)


def redactor_for(settings: Settings) -> Redactor:
    """Masks every secret the settings hold: the service's token and key, the catalog's
    password, the object storage keys, the alert destinations' URLs and SMTP passwords."""
    return Redactor([settings.user_token.get(), settings.bot_key.get(),
                     settings.catalog_password.get(), *settings.s3_keys.values(),
                     *settings.alerts.secrets()])


def setup_logging(settings: Settings, *, stream: TextIO | None = None) -> None:
    """(Re)configure botstats logging from ``[log]``; safe to call more than once."""
    level = getattr(logging, settings.log.level.upper())
    formatter: logging.Formatter = JsonFormatter() if settings.log.format == "json" else TextFormatter()
    redact = RedactSecrets(redactor_for(settings))
    handlers: list[logging.Handler] = [logging.StreamHandler(stream or sys.stderr)]
    if settings.log.file:
        path = Path(settings.log.file)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handlers.append(logging.FileHandler(path, mode="a", encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(
                f"cannot open the log file {path} ([log].file / --log-file): {exc.strerror or exc}. "
                f"Choose a writable path."
            ) from exc
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(redact)
        setattr(handler, _HANDLER_MARK, True)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, _HANDLER_MARK, False)]:
            logger.removeHandler(old)
            old.close()
        for handler in handlers:
            logger.addHandler(handler)
        logger.propagate = False
        # APScheduler's own INFO lines repeat what our listeners say; keep its errors only.
        logger.setLevel(level if name == "botstats" else max(level, logging.ERROR))
