"""The surface of pipeline.harvester (imported lazily: see __init__.py)."""

from ._probe import run_probe
from ._probe_writing import write_settings
from ._report import EXIT_CODES, HarvestReport, ProgressFn
from ._run import harvest

__all__ = [
    "EXIT_CODES",
    "harvest",
    "HarvestReport",
    "ProgressFn",
    "run_probe",
    "write_settings",
]
