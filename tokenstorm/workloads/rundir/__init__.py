"""The run directory — the contract between the parts — as typed, versioned files.

===================  ===========================  =======================================  =========================
file                 type                         written by                               read by
===================  ===========================  =======================================  =========================
``requests/``        ``RequestRecord`` segments   plugin (``RunContext`` / ``SegmentWriter``) ``read_requests_frame``
``requests.jsonl``   ``RequestRecord`` per line   ``--records jsonl``; ``reports export``  ``read_records``
``run.json``         ``RunMeta``                  plugin (``lifecycle``)                   ``read_run_meta``
``load.jsonl``       ``LoadSample`` per line      plugin (``monitoring``)                  ``read_load``
``gpu.jsonl``        ``GpuSample``/``MonitorGap``  ``monitors`` (collector process)          ``read_samples``
``server.jsonl``     ``ServerSample``/gap         ``monitors`` (collector process)          ``read_samples``
``capacity.json``    ``CapacityResult``           plugin (``capacity``)                    ``read_capacity``
``sweep.json``       ``SweepResult``              plugin (``sweep``)                       ``read_sweep``
``summary.json``     dict (vLLM bench names)      ``reports``                              ``read_summary``
``probes.jsonl``     ``ProbeLine`` per line       plugin (``quality``)                     ``read_probes``
===================  ===========================  =======================================  =========================

This package imports nothing else of tokenstorm: every other layer may use it.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .capacity import CapacityResult, CapacityStep, read_capacity, write_capacity
from .meta import (
    CAPACITY_FILE,
    DEFAULT_CONFIDENCE,
    EXIT_CODES,
    EXIT_RUN_FAILED,
    FIDELITY_MAX_LATE_SHARE,
    FIDELITY_MAX_LOOP_LAG_P99_MS,
    FIDELITY_MAX_READ_AT_ONCE_SHARE,
    FIDELITY_MAX_TTFT_LATE_SHARE,
    FIDELITY_MIN_LATE,
    FIDELITY_READ_AT_ONCE_MIN_GAPS,
    GPU_FILE,
    JUNIT_FILE,
    LOAD_FILE,
    RECORDS_FORMAT_VERSION,
    REPORT_FILE,
    REQUESTS_FILE,
    RUN_FILE,
    RUN_SCHEMA_VERSION,
    SEGMENTS_DIR,
    SERVER_FILE,
    SPANS_FILE,
    SUMMARY_FILE,
    SUMMARY_SCHEMA_VERSION,
    LoadSample,
    LoadWriter,
    NewerSchema,
    RunMeta,
    parse_confidence,
    read_load,
    read_run_meta,
    read_summary,
    write_json_atomic,
    write_run_meta,
    write_summary,
)
from .probes import PROBES_FILE, ProbeLine, consistency_counts, read_probes
from .records import (
    CHECK_NAMES,
    LATE_EVENT_S,
    RECORD_SCHEMA_VERSION,
    ErrorCategory,
    RecordTail,
    RecordWriter,
    RequestRecord,
)
from .samples import MONITOR_SCHEMA_VERSION, GpuSample, MonitorGap, ServerSample, read_samples, to_line
from .sweep import (
    SWEEP_FILE,
    SWEEP_METRICS,
    SWEEP_MIN_REQUESTS,
    SWEEP_PERCENTILES,
    SweepLevel,
    SweepResult,
    SweepVerdict,
    knee_span,
    level_outcome,
    read_sweep,
    sweep_knee,
    write_sweep,
)

if TYPE_CHECKING:
    from .frame import FRAME_COLUMNS, ItlHistogram, ItlSource, frame_from_rows, read_requests_frame
    from .reading import export_jsonl, iter_batches, read_records
    from .segments import compact_segments
    from .span_join import join_spans
    from .writer import SegmentWriter

# Arrow/Parquet and pandas load only when a name that needs them is used (PEP 562): the monitor
# process and Locust workers never pay for them.
_LAZY = {
    "FRAME_COLUMNS": "frame",
    "ItlHistogram": "frame",
    "ItlSource": "frame",
    "frame_from_rows": "frame",
    "read_requests_frame": "frame",
    "export_jsonl": "reading",
    "iter_batches": "reading",
    "read_records": "reading",
    "compact_segments": "segments",
    "SegmentWriter": "writer",
    "join_spans": "span_join",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "CAPACITY_FILE",
    "CHECK_NAMES",
    "DEFAULT_CONFIDENCE",
    "EXIT_CODES",
    "EXIT_RUN_FAILED",
    "FIDELITY_MAX_LATE_SHARE",
    "FIDELITY_MAX_LOOP_LAG_P99_MS",
    "FIDELITY_MAX_READ_AT_ONCE_SHARE",
    "FIDELITY_MAX_TTFT_LATE_SHARE",
    "FIDELITY_MIN_LATE",
    "FIDELITY_READ_AT_ONCE_MIN_GAPS",
    "FRAME_COLUMNS",
    "GPU_FILE",
    "JUNIT_FILE",
    "LATE_EVENT_S",
    "LOAD_FILE",
    "MONITOR_SCHEMA_VERSION",
    "PROBES_FILE",
    "RECORDS_FORMAT_VERSION",
    "RECORD_SCHEMA_VERSION",
    "REPORT_FILE",
    "REQUESTS_FILE",
    "RUN_FILE",
    "RUN_SCHEMA_VERSION",
    "SEGMENTS_DIR",
    "SERVER_FILE",
    "SPANS_FILE",
    "SUMMARY_FILE",
    "SUMMARY_SCHEMA_VERSION",
    "SWEEP_FILE",
    "SWEEP_METRICS",
    "SWEEP_MIN_REQUESTS",
    "SWEEP_PERCENTILES",
    "CapacityResult",
    "CapacityStep",
    "ErrorCategory",
    "GpuSample",
    "ItlHistogram",
    "ItlSource",
    "LoadSample",
    "LoadWriter",
    "MonitorGap",
    "NewerSchema",
    "ProbeLine",
    "RecordTail",
    "RecordWriter",
    "RequestRecord",
    "RunMeta",
    "SegmentWriter",
    "ServerSample",
    "SweepLevel",
    "SweepResult",
    "SweepVerdict",
    "compact_segments",
    "consistency_counts",
    "export_jsonl",
    "frame_from_rows",
    "iter_batches",
    "join_spans",
    "knee_span",
    "level_outcome",
    "parse_confidence",
    "read_capacity",
    "read_load",
    "read_probes",
    "read_records",
    "read_requests_frame",
    "read_run_meta",
    "read_samples",
    "read_summary",
    "read_sweep",
    "sweep_knee",
    "to_line",
    "write_capacity",
    "write_json_atomic",
    "write_run_meta",
    "write_summary",
    "write_sweep",
]
