"""The surface of pipeline.harvester (imported lazily: see __init__.py)."""

from ._records import Invalid, entity_id, parse_bot, parse_stats, parse_time
from ._report import EXIT_CODES, HarvestOptions, HarvestReport, ProgressFn
from ._run import harvest
from ._shapes import (
    TIME_NAMES,
    Candidate,
    custom_keys,
    decided_id,
    id_candidates,
    name_candidates,
    stat_key_choice,
    time_candidates,
    time_kind,
    value_types,
)

__all__ = [
    "EXIT_CODES",
    "TIME_NAMES",
    "Candidate",
    "HarvestOptions",
    "HarvestReport",
    "Invalid",
    "ProgressFn",
    "custom_keys",
    "decided_id",
    "entity_id",
    "harvest",
    "id_candidates",
    "name_candidates",
    "parse_bot",
    "parse_stats",
    "parse_time",
    "stat_key_choice",
    "time_candidates",
    "time_kind",
    "value_types",
]
