"""Configuration: defaults < config.toml < BOTSTATS_* environment < flags; bad input refused
before any I/O with the file, the key, what was expected and a did-you-mean."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core._errors import ConfigError
from pipeline.core._loading import as_dict, load_settings
from pipeline.core._settings import Secret, Settings

BAD = Path(__file__).parent / "bad_configs"
REPO = Path(__file__).resolve().parents[1]


def expected_words(path: Path) -> list[str]:
    first = path.read_bytes().splitlines()[0].decode()  # the rest may not even be UTF-8
    assert first.startswith("# expect:"), f"{path.name} must start with '# expect: words | words'"
    return [w.strip() for w in first.removeprefix("# expect:").split("|")]


@pytest.mark.parametrize("path", sorted(BAD.glob("*.toml")), ids=lambda p: p.stem)
def test_bad_config_file_is_refused_with_a_clear_message(path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={})
    message = str(info.value)
    assert str(path) in message, "every config error names the file"
    for words in expected_words(path):
        assert words in message
    assert "utok_do_not_echo_me" not in message


def test_the_shipped_config_toml_is_exactly_the_defaults() -> None:
    shipped = load_settings(REPO / "config.toml", env={})
    defaults = Settings()
    for section in as_dict(defaults):
        if section in ("source", "secrets"):
            continue
        assert getattr(shipped, section) == getattr(defaults, section), section


def test_every_setting_is_documented_in_config_toml() -> None:
    text = (REPO / "config.toml").read_text()
    for section, values in as_dict(Settings()).items():
        if section in ("source", "secrets"):
            continue
        assert f"[{section}]" in text
        for key in values:
            if (section, key) == ("alerts", "destinations"):  # tables, shown as an example
                assert "\n# [alerts.destinations.team]\n" in text
                continue
            assert f"\n{key} = " in text, f"[{section}].{key} missing from config.toml"


def test_precedence_defaults_file_environment_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[service]\npage_size = 50\nconcurrency = 4\ntimeout = 3\n[store]\ndb = "file.duckdb"\n')
    env = {"BOTSTATS_SERVICE_CONCURRENCY": "8", "BOTSTATS_DB": "env.duckdb"}
    s = load_settings(cfg, env=env, overrides={"store.db": "flag.duckdb"})
    assert s.service.page_size == 50  # file over default
    assert s.service.timeout == 3.0  # an integer where a number is expected is fine
    assert s.service.concurrency == 8  # environment over file
    assert s.store.db == "flag.duckdb"  # flag over environment
    assert s.service.max_connections == Settings().service.max_connections  # default kept
    assert s.source == str(cfg)


def test_a_list_of_field_names_comes_as_a_toml_array_or_as_commas_in_the_environment(
        tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[fields]\nstat_id = ""\nstat_key = "fields"\n'
                   'stat_key_fields = ["timestamp", "shard_id"]\n')
    fields = load_settings(cfg, env={}).fields
    assert (fields.stat_key, fields.stat_key_fields) == ("fields", ("timestamp", "shard_id"))
    env = {"BOTSTATS_FIELDS_STAT_KEY_FIELDS": "created_at, shard ,"}
    assert load_settings(cfg, env=env).fields.stat_key_fields == ("created_at", "shard")
    # stat_id = "" alone is still "no id: one record per bot and time".
    assert load_settings(env={"BOTSTATS_FIELDS_STAT_ID": ""}).fields.stat_keying == "time"
    assert Settings().fields.stat_keying == "id"


def test_config_file_comes_from_botstats_config_env(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[service]\npage_size = 7\n")
    assert load_settings(env={"BOTSTATS_CONFIG": str(cfg)}).service.page_size == 7


def test_a_named_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml", env={})


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"BOTSTATS_SERVICE_PAGE_SIZE": "many"}, ["BOTSTATS_SERVICE_PAGE_SIZE", "expected an integer"]),
        ({"BOTSTATS_BASE_URL": "ftp://x"}, ["base_url", "http(s) URL"]),
        ({"BOTSTATS_LOG_LEVEL": "loud"}, ["[log].level", "one of debug"]),
    ],
)
def test_bad_environment_is_refused(env: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(REPO / "config.toml", env=env)
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize(("name", "words"), [
    ("BOTSTATS_BASE_URLL", "Did you mean 'BOTSTATS_BASE_URL'?"),
    ("BOTSTATS_BIN", "ignored."),  # a variable of the user's own scripts
])
def test_an_unknown_environment_variable_is_a_warning_not_a_refusal(
        name: str, words: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="botstats.config"):
        settings = load_settings(REPO / "config.toml", env={name: "x"})
    assert settings.service.base_url == Settings().service.base_url
    assert f"environment: {name} is not a botstats setting; ignored." in caplog.text
    assert words in caplog.text


def test_unknown_keys_in_a_config_file_stay_an_error(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[service]\npage_sise = 5\n")
    with pytest.raises(ConfigError, match="unknown key 'page_sise'. Did you mean 'page_size'"):
        load_settings(config, env={})


def test_a_bad_value_is_blamed_on_where_it_was_typed(tmp_path: Path) -> None:
    # The value that fails validation may come from the file, the environment or a flag; the
    # message names that one, not the config file that merely was read too.
    config = tmp_path / "config.toml"
    config.write_text('[service]\nbase_url = "http://x:1"\nconcurrency = 0\n')
    cases = [
        ({}, {}, f"{config}: [service].concurrency must be greater than 0"),
        ({"BOTSTATS_SERVICE_CONCURRENCY": "2", "BOTSTATS_BASE_URL": "x"}, {},
         "environment: BOTSTATS_BASE_URL: [service].base_url must be an http(s) URL"),
        ({"BOTSTATS_SERVICE_CONCURRENCY": "2"}, {"service.base_url": "localhost:1"},
         "flag --base-url: [service].base_url must be an http(s) URL"),
        ({"BOTSTATS_SERVICE_CONCURRENCY": "-1"}, {},
         "environment: BOTSTATS_SERVICE_CONCURRENCY: [service].concurrency must be greater"),
    ]
    for env, flags, message in cases:
        with pytest.raises(ConfigError) as info:
            load_settings(config, env=env, overrides=flags)
        assert str(info.value).startswith(message), str(info.value)


def test_secrets_come_from_the_environment_and_never_print() -> None:
    s = load_settings(REPO / "config.toml", env={"BOTSTATS_USER_TOKEN": "utok_secret1",
                                                 "BOTSTATS_BOT_KEY": "bkey_secret2"})
    assert s.user_token.get() == "utok_secret1" and s.bot_key.get() == "bkey_secret2"
    shown = repr(s) + str(as_dict(s))
    assert "utok_secret1" not in shown and "bkey_secret2" not in shown
    assert as_dict(s)["secrets"] == {"user_token": "set", "bot_key": "set",
                                     "catalog_password": "unset", "s3_key_id": "unset",
                                     "s3_secret": "unset", "s3_session_token": "unset"}
    assert repr(Secret("x")) == "Secret('***')"


def test_cli_config_error_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = BAD / "unknown_key.toml"
    result = CliRunner().invoke(cli, ["--config", str(bad), "config"])
    assert result.exit_code == 2
    assert "unknown key 'base_ur'" in result.output
    assert "Traceback" not in result.output


def test_cli_config_prints_effective_settings(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["config", "--config", str(REPO / "config.toml"),
                                      "--base-url", "http://10.1.2.3:9"],
                                env={"BOTSTATS_USER_TOKEN": "utok_zzz"})
    assert result.exit_code == 0, result.output
    assert '"base_url": "http://10.1.2.3:9"' in result.output
    assert '"user_token": "set"' in result.output and "utok_zzz" not in result.output


@pytest.mark.parametrize(("args", "db", "base_url"), [
    (["--db", "a.ducklake", "config"], "a.ducklake", "http://127.0.0.1:8000"),
    (["config", "--db", "b.ducklake"], "b.ducklake", "http://127.0.0.1:8000"),
    (["--db", "a.ducklake", "--base-url", "http://10.0.0.1:1", "config", "--db", "b.ducklake"],
     "b.ducklake", "http://10.0.0.1:1"),
], ids=["before the command", "after it", "both: the later wins, the rest stays"])
def test_shared_flags_are_taken_before_and_after_the_command(args: list[str], db: str,
                                                              base_url: str) -> None:
    result = CliRunner().invoke(cli, ["--config", str(REPO / "config.toml"), *args], env={})
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["store"]["db"], shown["service"]["base_url"]) == (db, base_url)


def test_the_command_exits_at_once_yet_flushes_its_logs_and_output(tmp_path: Path) -> None:
    # botstats leaves with os._exit (no interpreter teardown): what it wrote must be out first.
    log = tmp_path / "botstats.log"
    code = ("import logging, sys; from pipeline.cli import exit_now; "
            f"logging.getLogger('botstats').addHandler(logging.FileHandler({str(log)!r})); "
            "logging.getLogger('botstats').warning('kept'); sys.stdout.write('out'); exit_now(3)")
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60, env=buffered)
    assert (proc.returncode, proc.stdout, log.read_text()) == (3, "out", "kept\n")
    proc = subprocess.run([sys.executable, "-c", "from pipeline.cli import exit_now; exit_now('why')"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (proc.returncode, proc.stderr) == (1, "why\n")  # as SystemExit('why') would


def test_bad_config_in_a_real_subprocess_has_no_traceback() -> None:
    proc = subprocess.run([sys.executable, "-m", "pipeline", "--config",
                           str(BAD / "bad_url.toml"), "status"], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert "base_url" in proc.stderr and "Traceback" not in proc.stderr


SETTINGS_DOC = REPO / "docs" / "configuration.md"
TABLE_BEGIN = ("<!-- settings table: generated from config.toml by "
               "`.venv/bin/python tests/test_config.py` -->")
TABLE_END = "<!-- end of the settings table -->"


def settings_table() -> str:
    """The settings table of docs/configuration.md, made from config.toml (which the tests above
    hold to be exactly the defaults, every setting present): setting, default, its comment."""
    rows: list[list[str]] = []
    section = ""
    for line in (REPO / "config.toml").read_text().splitlines():
        if header := re.fullmatch(r"\[(\w+)\]", line):
            section = header[1]
        elif setting := re.fullmatch(r'(\w+) = ("(?:[^"\\]|\\.)*"|[^\s#]+)\s*(?:#\s*(.*))?', line):
            rows.append([f"`[{section}].{setting[1]}`", f"`{setting[2]}`", setting[3] or ""])
        elif (more := re.fullmatch(r"\s+#\s*(.*)", line)) and rows:
            rows[-1][2] += " " + more[1]  # a comment that goes on under its setting
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def documented_settings_table() -> str:
    text = SETTINGS_DOC.read_text()
    assert TABLE_BEGIN in text and TABLE_END in text, f"{SETTINGS_DOC} lost its table markers"
    return text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip()


def test_the_settings_table_in_the_docs_is_generated_from_config_toml() -> None:
    assert documented_settings_table() == settings_table(), (
        "docs/configuration.md's settings table is out of date: "
        "run .venv/bin/python tests/test_config.py")
    for section, values in as_dict(Settings()).items():
        if section in ("source", "secrets"):
            continue
        for key in values:
            if (section, key) != ("alerts", "destinations"):  # tables: docs/alerts.md
                assert f"`[{section}].{key}`" in settings_table(), f"[{section}].{key} not in the table"


if __name__ == "__main__":
    head, rest = SETTINGS_DOC.read_text().split(TABLE_BEGIN, 1)
    tail = rest.split(TABLE_END, 1)[1]
    SETTINGS_DOC.write_text(f"{head}{TABLE_BEGIN}\n{settings_table()}\n{TABLE_END}{tail}")
