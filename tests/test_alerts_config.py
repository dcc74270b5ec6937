"""Alerts, the settings and the commands: destinations read from [alerts.destinations.NAME]
tables with their secrets from the environment only (refused in the file: tests/bad_configs),
never shown; `botstats alerts test` says what each destination answered; `botstats alerts list`
shows the ledger."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from _alerts_support import Answer, Receiver, receiver
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core import ConfigError, load_settings
from pipeline.operate._logs import redactor_for

__all__ = ["receiver"]  # the fixture

TOKEN = "cfgT0KENdoNotShow0123456789"
CONFIG = """
[alerts]
min_severity = 5.0

[alerts.destinations.team]
type = "discord"
kinds = ["failed", "resolved"]

[alerts.destinations.analysts]
type = "slack"
kinds = "event, milestone"

[alerts.destinations.mail]
type = "email"
host = "smtp.example.com"
security = "tls"
user = "botstats@example.com"
to = ["ops@example.com"]
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG + f'\n[store]\ndb = "{tmp_path / "archive.ducklake"}"\n')
    return path


def test_destinations_are_read_with_their_secrets_from_the_environment(config: Path) -> None:
    url = f"https://discord.com/api/webhooks/123/{TOKEN}"
    settings = load_settings(config, env={"BOTSTATS_ALERTS_TEAM_URL": url,
                                          "BOTSTATS_ALERTS_MAIL_PASSWORD": f"pw-{TOKEN}",
                                          "BOTSTATS_ALERTS_MIN_SEVERITY": "6.5"})
    team, analysts, mail = settings.alerts.destinations
    assert (team.name, team.type, team.kinds, team.url.get()) == (
        "team", "discord", ("failed", "resolved"), url)
    assert (analysts.kinds, analysts.url.get(), analysts.missing()) == (
        ("event", "milestone"), "",
        "no URL: set BOTSTATS_ALERTS_ANALYSTS_URL in the environment of the job")
    assert (mail.smtp_port, mail.password.get(), mail.where()) == (
        465, f"pw-{TOKEN}", "mail via smtp.example.com:465 to ops@example.com")
    assert settings.alerts.min_severity == 6.5  # BOTSTATS_ALERTS_<KEY>, as every section
    assert TOKEN not in repr(settings) and TOKEN not in team.where()
    assert TOKEN not in redactor_for(settings).text(f"POST {url} failed; login pw-{TOKEN}")


def test_botstats_config_shows_the_destinations_and_their_secrets_as_set_or_unset(
        config: Path) -> None:
    result = CliRunner().invoke(cli, ["--config", str(config), "config"], env={
        "BOTSTATS_ALERTS_TEAM_URL": f"https://discord.com/api/webhooks/1/{TOKEN}"})
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["alerts"]
    assert shown["destinations"][0] == {"name": "team", "type": "discord",
                                        "kinds": ["failed", "resolved"], "url": "set"}
    assert shown["destinations"][1]["url"] == "unset"
    assert shown["destinations"][2]["password"] == "unset" and shown["min_severity"] == 5.0
    assert TOKEN not in result.output


def test_a_webhook_url_that_is_not_http_is_refused_without_showing_it(config: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(config, env={"BOTSTATS_ALERTS_TEAM_URL": f"discord.com/api/{TOKEN}"})
    assert str(info.value).startswith("environment: BOTSTATS_ALERTS_TEAM_URL: the webhook URL "
                                      "of destination 'team' must be an http(s) URL")
    assert TOKEN not in str(info.value)


def test_a_secret_variable_of_no_destination_is_a_warning(
        config: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="botstats.config"):
        load_settings(config, env={"BOTSTATS_ALERTS_TAEM_URL": "https://x.example/1"})
    assert ("environment: BOTSTATS_ALERTS_TAEM_URL is not a botstats setting; ignored. Did you "
            "mean 'BOTSTATS_ALERTS_TEAM_URL'?") in caplog.text


def test_botstats_alerts_test_says_what_each_destination_answered(
        tmp_path: Path, receiver: Receiver) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[alerts]\ntimeout = 2.0\n[alerts.destinations.team]\ntype = "discord"\n'
                      '[alerts.destinations.analysts]\ntype = "slack"\n')
    receiver.always(f"/gone/{TOKEN}", Answer(404, b'{"message": "Unknown Webhook"}'))
    env = {"BOTSTATS_ALERTS_TEAM_URL": receiver.url(f"/team/{TOKEN}"),
           "BOTSTATS_ALERTS_ANALYSTS_URL": receiver.url(f"/gone/{TOKEN}")}
    result = CliRunner().invoke(cli, ["--config", str(config), "alerts", "test"], env=env)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "team (discord webhook at 127.0.0.1): delivered: HTTP 204",
        "analysts (slack webhook at 127.0.0.1): NOT delivered: HTTP 404: the webhook refused it "
        "or no longer exists ({\"message\": \"Unknown Webhook\"}): check "
        "BOTSTATS_ALERTS_ANALYSTS_URL"]
    (body,) = receiver.received(f"/team/{TOKEN}")
    assert body["embeds"][0]["title"] == "botstats alerts test: this destination works"
    assert not (tmp_path / "data").exists()  # nothing recorded, no archive needed
    receiver.always(f"/gone/{TOKEN}", None)
    again = CliRunner().invoke(cli, ["--config", str(config), "alerts", "test", "--json"], env=env)
    assert again.exit_code == 0
    assert [r["delivered"] for r in json.loads(again.output)] == [True, True]
    assert TOKEN not in result.output + again.output


def test_botstats_alerts_test_without_destinations_says_how_to_declare_one(tmp_path: Path) -> None:
    (tmp_path / "empty.toml").touch()
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "empty.toml"), "alerts", "test"])
    assert result.exit_code == 2
    assert "no alert destinations" in result.output and "[alerts.destinations.NAME]" in result.output


def test_botstats_alerts_list_of_an_archive_that_told_nothing(tmp_path: Path,
                                                             config: Path) -> None:
    from pipeline.archive import writer

    with writer(load_settings(config, env={})):
        pass  # a new archive: migrated, the ledger empty
    result = CliRunner().invoke(cli, ["--config", str(config), "alerts", "list"])
    assert (result.exit_code, result.output) == (0, "no alerts told yet\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "alerts", "list", "--undelivered"])
    assert (result.exit_code, result.output) == (0, "no alerts not yet delivered\n")
