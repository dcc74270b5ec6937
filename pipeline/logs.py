"""Logging setup (minimal version; the operate work extends it with JSON lines and redaction)."""

from __future__ import annotations

import logging

from .config import Settings


def setup_logging(settings: Settings) -> None:
    level = getattr(logging, settings.log.level.upper(), logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
