"""Reading the settings: defaults < ``config.toml`` < ``BOTSTATS_*`` environment < flags typed on
the command line, precedence stated once in :func:`load_settings`.

Unknown keys and wrong types are refused with the file, the key, what was expected and a
did-you-mean; a value set by other than the file is blamed on the variable or flag that set it
(``Settings.origins``). Secrets (user token, bot API key, a catalog password) come only from the
environment or a flag and are refused in the file, so they never end up in version control.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ._destinations import read_destinations, secret_env, with_secrets
from ._dsn import parse_dsn
from ._errors import ConfigError
from ._settings import AUTO, AUTO_OR_INT, NAMES, SECTIONS, S3Keys, Secret, Settings
from ._validation import suggest, validate

log = logging.getLogger("botstats.config")

DEFAULT_CONFIG_FILE = "config.toml"
ENV_PREFIX = "BOTSTATS_"
SECRET_ENV = {"user_token": "BOTSTATS_USER_TOKEN", "bot_key": "BOTSTATS_BOT_KEY"}
# Short environment names for the settings operators change most; every setting also has
# BOTSTATS_<SECTION>_<KEY>.
ENV_ALIASES = {
    "BOTSTATS_BASE_URL": ("service", "base_url"),
    "BOTSTATS_DB": ("store", "db"),
    "BOTSTATS_EXPORT_DIR": ("exports", "dir"),
    "BOTSTATS_LOG_FORMAT": ("log", "format"),
    "BOTSTATS_LOG_LEVEL": ("log", "level"),
    "BOTSTATS_LOG_FILE": ("log", "file"),
}
S3_ENV = {"key_id": "AWS_ACCESS_KEY_ID", "secret": "AWS_SECRET_ACCESS_KEY",
          "session_token": "AWS_SESSION_TOKEN"}


def _type_name(tp: Any) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            NAMES: "a list of strings"}.get(tp, str(tp))


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check a TOML value against a field type; ints are accepted where floats are expected."""
    if tp == AUTO_OR_INT:
        if value == AUTO or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise ConfigError(f'{where}: expected an integer or "auto", got {value!r}.')
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (str, bool) and type(value) is tp:
        return value
    if tp == NAMES and isinstance(value, list | tuple) and all(type(v) is str for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__}).")


def _parse_env(raw: str, tp: Any, where: str) -> Any:
    """Environment values are strings; convert them to the field's type."""
    try:
        if tp == AUTO_OR_INT:
            return AUTO if raw.strip().lower() == AUTO else int(raw)
        if tp == NAMES:  # "timestamp,shard_id"
            return tuple(name.strip() for name in raw.split(",") if name.strip())
        if tp is bool:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        return tp(raw)
    except ValueError:
        wanted = 'an integer or "auto"' if tp == AUTO_OR_INT else _type_name(tp)
        raise ConfigError(f"{where}: expected {wanted}, got {raw!r}.") from None


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def _apply_section(section_obj: Any, values: Mapping[str, Any], where: str) -> Any:
    types_ = _field_types(type(section_obj))
    changes = {}
    for key, value in values.items():
        if key not in types_:
            raise ConfigError(
                f"{where}: unknown key '{key}'.{suggest(key, types_)} "
                f"Allowed keys: {', '.join(types_)}."
            )
        changes[key] = value if key == "destinations" else _coerce(value, types_[key],
                                                                     f"{where}.{key}")
    return replace(section_obj, **changes)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(
            f"Config file {path} does not exist. Pass an existing file with --config, "
            f"or run without --config to use {DEFAULT_CONFIG_FILE} or the defaults."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}. Fix the file and run again.") from exc
    except UnicodeDecodeError as exc:  # TOML is UTF-8 by definition
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); TOML files "
                          f"are UTF-8. Save it as UTF-8 and run again.") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}.") from exc


def _from_mapping(settings: Settings, data: Mapping[str, Any], path: Path) -> Settings:
    changes: dict[str, Any] = {}
    for name, value in data.items():
        if name in SECRET_ENV:
            raise ConfigError(
                f"{path}: '{name}' is a secret and is not read from the config file, so it "
                f"never lands in version control. Set {SECRET_ENV[name]} in the environment "
                f"or pass --{name.replace('_', '-')} instead."
            )
        if name not in SECTIONS:
            raise ConfigError(
                f"{path}: unknown section [{name}].{suggest(name, SECTIONS)} "
                f"Allowed sections: {', '.join(SECTIONS)}."
            )
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [{name}] must be a table of settings, got {value!r}.")
        table = value
        if name == "alerts":  # its [alerts.destinations.NAME] tables are not plain settings
            table, destinations = read_destinations(value, f"{path}: [alerts]")
            table["destinations"] = destinations
        changes[name] = _apply_section(getattr(settings, name), table, f"{path}: [{name}]")
    return replace(settings, **changes)


def _from_env(settings: Settings, env: Mapping[str, str]) -> Settings:
    known: dict[str, tuple[str, str]] = dict(ENV_ALIASES)
    for section in SECTIONS:
        for key in _field_types(type(getattr(settings, section))):
            if key != "destinations":  # tables of the file, their secrets below
                known[f"{ENV_PREFIX}{section.upper()}_{key.upper()}"] = (section, key)
    ignored = {"BOTSTATS_CONFIG", *SECRET_ENV.values(), *secret_env(settings.alerts)}
    for name in env:
        if name.startswith(ENV_PREFIX) and name not in known and name not in ignored:
            # A warning, not a refusal: a user's own scripts may set BOTSTATS_BIN and the like.
            log.warning("environment: %s is not a botstats setting; ignored.%s", name,
                        suggest(name, [*known, *ignored]))
    for name, (section, key) in known.items():
        if name in env:
            sec = getattr(settings, section)
            tp = _field_types(type(sec))[key]
            value = _parse_env(env[name], tp, f"environment: {name}")
            settings = replace(settings, **{section: replace(sec, **{key: value})},
                               origins={**settings.origins, f"{section}.{key}": f"environment: {name}"})
    secrets = {k: Secret(env[v]) for k, v in SECRET_ENV.items() if env.get(v)}
    s3 = S3Keys(**{k: Secret(env.get(v, "")) for k, v in S3_ENV.items()})
    return replace(_with_secrets(settings, secrets), s3_keys=s3,
                   alerts=with_secrets(settings.alerts, env))


def _with_secrets(settings: Settings, secrets: Mapping[str, Secret]) -> Settings:
    """The settings with the secrets named in ``secrets`` (user_token, bot_key) replaced."""
    return replace(settings, user_token=secrets.get("user_token", settings.user_token),
                   bot_key=secrets.get("bot_key", settings.bot_key))


def _overrides(settings: Settings, overrides: Mapping[str, Any]) -> Settings:
    """Flags typed on the command line: keys are 'section.key' or a secret name."""
    for dotted, value in overrides.items():
        if value is None:
            continue
        if dotted in SECRET_ENV:
            settings = _with_secrets(settings, {dotted: Secret(str(value))})
            continue
        section, key = dotted.split(".", 1)
        sec = getattr(settings, section)
        tp = _field_types(type(sec))[key]
        flag = f"flag --{key.replace('_', '-')}"
        typed = _coerce(value, tp, flag)
        settings = replace(settings, **{section: replace(sec, **{key: typed})},
                           origins={**settings.origins, dotted: flag})
    return settings


def _take_catalog_password(settings: Settings) -> Settings:
    """A password in [store].catalog is a secret: refused in the config file (it would end up
    in version control), else moved out of the connection string into ``catalog_password``."""
    if not settings.store.catalog:
        return settings
    try:
        dsn = parse_dsn(settings.store.catalog)
    except ValueError:
        return settings  # validate() says what is wrong with it
    if not dsn.password:
        return settings
    origin = settings.origins.get("store.catalog")
    if origin is None:
        raise ConfigError(
            f"{settings.source or 'settings'}: [store].catalog carries a password, a secret, "
            f"which is not read from the config file so it never lands in version control. Put "
            f"it in PGPASSWORD or ~/.pgpass (libpq reads both), or set the whole string in "
            f"BOTSTATS_STORE_CATALOG.")
    return replace(settings, store=replace(settings.store, catalog=dsn.text),
                   catalog_password=Secret(dsn.password))


def load_settings(
    config: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: defaults < config file < BOTSTATS_* environment < overrides.

    ``config`` None means ``$BOTSTATS_CONFIG`` if set, else ``./config.toml`` if it exists,
    else defaults only. An explicitly named file must exist.
    """
    env = os.environ if env is None else env
    settings = Settings()
    explicit = config if config is not None else env.get("BOTSTATS_CONFIG")
    path = Path(explicit) if explicit else Path(DEFAULT_CONFIG_FILE)
    if explicit or path.exists():
        settings = replace(_from_mapping(settings, _read_toml(path), path), source=str(path))
    settings = _from_env(settings, env)
    settings = _overrides(settings, overrides or {})
    return validate(_take_catalog_password(settings))


def as_dict(settings: Settings) -> dict[str, Any]:
    """The settings as plain data with secrets shown only as set/unset (for `botstats config`)."""
    out: dict[str, Any] = {name: dataclasses.asdict(getattr(settings, name)) for name in SECTIONS
                           if name != "alerts"}
    out["alerts"] = settings.alerts.as_dict()  # the destinations' secrets as set/unset
    out["secrets"] = {k: ("set" if getattr(settings, k) else "unset")
                      for k in (*SECRET_ENV, "catalog_password")}
    out["secrets"].update({f"s3_{k}": ("set" if getattr(settings.s3_keys, k) else "unset")
                           for k in S3_ENV})
    out["source"] = settings.source or "(defaults)"
    return out
