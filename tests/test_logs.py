"""Logs: readable text, JSON lines, an appended log file, and no secret in any record."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core._loading import load_settings
from pipeline.core._redact import Redactor
from pipeline.core._settings import Settings
from pipeline.operate._logs import setup_logging

TOKEN = "utok_0badc0de1234567890abcdef"
KEY = "bkey_feedbeef0987654321fedcba"
PLAIN = "s3cr3t-plain-value"  # a configured secret with no recognisable shape


@pytest.fixture
def restore_logging() -> Iterator[None]:
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).level,
                 logging.getLogger(n).propagate) for n in ("botstats", "apscheduler")}
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        for h in logger.handlers[:]:
            if h not in handlers:
                logger.removeHandler(h)
                h.close()
        logger.setLevel(level)
        logger.propagate = propagate


def _settings(**overrides: object) -> Settings:
    return load_settings(None, env={}, overrides=overrides)


@pytest.mark.parametrize(("text", "masked"), [
    (f"token {TOKEN} sent", "token *** sent"),
    (f"key={KEY}", "key=***"),
    ("Authorization: Bearer abc.DEF-123_x", "Authorization: Bearer ***"),
    ("authorization: bearer zzz", "authorization: bearer ***"),
    ("a utok_ prefix alone stays", "a utok_ prefix alone stays"),
    (f"configured {PLAIN}!", "configured ***!"),
    ("abc is too short to be a secret", "abc is too short to be a secret"),
])
def test_redactor_masks_configured_and_shaped_secrets(text: str, masked: str) -> None:
    assert Redactor([PLAIN, "abc", ""]).text(text) == masked


def test_json_lines_have_no_secret_anywhere(restore_logging: None) -> None:
    stream = io.StringIO()
    setup_logging(_settings(**{"log.format": "json", "user_token": PLAIN, "bot_key": KEY}),
                  stream=stream)
    log = logging.getLogger("botstats.test")
    log.info("calling with %s and %r", PLAIN, {"auth": f"Bearer {PLAIN}"},
             extra={"report": {"headers": [KEY], "n": 3}})
    try:
        raise ValueError(f"service echoed {KEY}")
    except ValueError:
        log.exception("request failed for %s", TOKEN)
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert len(lines) == 2
    assert lines[0]["level"] == "info" and lines[0]["logger"] == "botstats.test"
    assert lines[0]["msg"] == "calling with *** and {'auth': 'Bearer ***'}"
    assert lines[0]["report"] == {"headers": ["***"], "n": 3}
    assert "ValueError: service echoed ***" in lines[1]["exc"]
    for secret in (PLAIN, KEY, TOKEN):
        assert secret not in stream.getvalue()


def test_text_is_readable_and_setup_twice_does_not_double_lines(restore_logging: None) -> None:
    stream = io.StringIO()
    settings = _settings(**{"user_token": TOKEN})
    setup_logging(settings, stream=stream)
    setup_logging(settings, stream=stream)
    logging.getLogger("botstats.harvest").info("harvest %s complete", "r1")
    logging.getLogger("botstats.harvest").debug("not shown at info")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith(" INFO  harvest: harvest r1 complete")


def test_the_log_file_is_appended_to(tmp_path: Path, restore_logging: None) -> None:
    path = tmp_path / "logs" / "botstats.log"
    for run in ("one", "two"):
        setup_logging(_settings(**{"log.file": str(path), "log.format": "json"}),
                      stream=io.StringIO())
        logging.getLogger("botstats.run").warning("run %s with %s", run, TOKEN)
    records = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["msg"] for r in records] == ["run one with ***", "run two with ***"]


def test_cli_flags_choose_json_and_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          restore_logging: None) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [
        "--log-format", "json", "--log-file", "run.log", "--db", "a.ducklake",
        "--base-url", "http://127.0.0.1:9", "run", "--no-progress", "--lock-timeout", "1"],
        env={"BOTSTATS_CONFIG": "", "BOTSTATS_RETRY_ATTEMPTS": "1"})
    assert result.exit_code == 1, result.output
    records = [json.loads(x) for x in (tmp_path / "run.log").read_text().splitlines()]
    assert any(r["logger"] == "botstats.run" and "failed" in r["msg"] for r in records)


def test_an_unwritable_log_file_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  restore_logging: None) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    result = CliRunner().invoke(cli, ["--log-file", "dir", "run"], env={"BOTSTATS_CONFIG": ""})
    assert result.exit_code == 2
    assert "cannot open the log file dir" in result.output and "--log-file" in result.output
