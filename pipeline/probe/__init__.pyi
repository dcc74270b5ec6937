"""The surface of pipeline.probe (imported lazily: see __init__.py)."""

from ._probe import run_probe
from ._report import ProbeReport
from ._writing import write_settings

__all__ = ["ProbeReport", "run_probe", "write_settings"]
