"""The ground every stage stands on: the error tree, the settings, and the small helpers each
stage would otherwise write twice.

``_errors`` (the one error tree, an exit code per class, and ``first_line``: what of a foreign
error a message quotes), the typed settings in three modules:
``_settings`` (the schema: a frozen section per table), ``_loading`` (TOML, environment and
flags, in that precedence) and ``_validation`` (what types alone do not catch, before any I/O),
with ``_destinations`` (``[alerts]``'s destination tables, their secrets from the environment);
``_crontab`` (crontab expressions, for the settings and the scheduler), ``_oncalendar``,
``_files`` (atomic file replacement), ``_json`` (reading bodies, spelling records canonically),
``_redact`` (secrets out of URLs and texts), ``_run_id``, ``_run_status`` (how a run ends), ``_shard`` (which bots a harvest
worker owns), ``_dsn`` (PostgreSQL connection strings).
It imports nothing else of ours.
"""

from __future__ import annotations

from ._crontab import cron_trigger, next_fire_times, parse_crontab
from ._dsn import parse_dsn
from ._errors import (
    ApiError,
    AuthError,
    BadRequest,
    BadResponse,
    BotstatsError,
    ConfigError,
    ExportError,
    IdsNotUnique,
    ListingUnstable,
    LockTimeout,
    MissingCredential,
    NotFound,
    QueryError,
    RateLimited,
    ServerError,
    SkipIgnored,
    StoreError,
    Unreachable,
    first_line,
)
from ._files import TMP_SUFFIX, aside, fsync_dir, replacing
from ._json import canonical_json, decode_json, same_record
from ._loading import DEFAULT_CONFIG_FILE, as_dict, load_settings
from ._oncalendar import on_calendar
from ._redact import Redactor, redact_url
from ._run_id import new_run_id
from ._run_status import RunStatus
from ._settings import (
    AlertSettings,
    Destination,
    FieldSettings,
    ScheduleSettings,
    Secret,
    ServiceSettings,
    Settings,
    TrendSettings,
)
from ._shard import Shard
from ._validation import PAGING_FAMILIES, parse_duration

__all__ = [
    "AlertSettings",
    "ApiError",
    "as_dict",
    "aside",
    "AuthError",
    "BadRequest",
    "BadResponse",
    "BotstatsError",
    "canonical_json",
    "ConfigError",
    "cron_trigger",
    "decode_json",
    "DEFAULT_CONFIG_FILE",
    "Destination",
    "ExportError",
    "IdsNotUnique",
    "FieldSettings",
    "first_line",
    "fsync_dir",
    "ListingUnstable",
    "load_settings",
    "LockTimeout",
    "MissingCredential",
    "new_run_id",
    "next_fire_times",
    "NotFound",
    "on_calendar",
    "PAGING_FAMILIES",
    "parse_crontab",
    "parse_dsn",
    "parse_duration",
    "QueryError",
    "RateLimited",
    "redact_url",
    "Redactor",
    "replacing",
    "RunStatus",
    "same_record",
    "Secret",
    "ServerError",
    "ScheduleSettings",
    "ServiceSettings",
    "Settings",
    "Shard",
    "SkipIgnored",
    "StoreError",
    "TMP_SUFFIX",
    "TrendSettings",
    "Unreachable",
]
