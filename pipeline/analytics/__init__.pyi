"""The surface of pipeline.analytics (imported lazily: see __init__.py)."""

from .build._build import ExportCompaction, TrendsReport, build_trends, compact_exports
from .exports._datasets import DATASETS, Dataset, load_dataset, scan_dataset
from .exports._exports import read_manifest, to_json, write_frame, write_text
from .read._compare import MAX_BOTS, compare, forecast_curve, forecast_reach
from .read._explore import (
    attach_sql,
    notebook_settings,
    parse_variables,
    query,
    read_query_file,
    run_query,
    table_counts,
)
from .report._report import ReportResult, build_report

__all__ = [
    "attach_sql",
    "build_report",
    "build_trends",
    "compact_exports",
    "compare",
    "Dataset",
    "DATASETS",
    "ExportCompaction",
    "forecast_curve",
    "forecast_reach",
    "load_dataset",
    "MAX_BOTS",
    "notebook_settings",
    "parse_variables",
    "query",
    "read_manifest",
    "read_query_file",
    "ReportResult",
    "run_query",
    "scan_dataset",
    "table_counts",
    "to_json",
    "TrendsReport",
    "write_frame",
    "write_text",
]
