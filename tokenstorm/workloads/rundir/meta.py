"""The run directory's small files, typed: ``run.json``, ``load.jsonl``, ``summary.json``
(``capacity.json``: :mod:`.capacity`).

Each has one dataclass here, one writer and one reader; the Locust plugin writes through
them and ``reports`` reads through them. Readers accept every earlier ``schema`` version
and ignore keys a newer writer added (kept in ``extra`` where a round trip needs them).
Verdicts, exit codes and the timing-fidelity bounds are defined here once.
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from .faults import AppendFile, write_bytes_atomic

__all__ = [
    "CAPACITY_FILE",
    "DEFAULT_CONFIDENCE",
    "EXIT_CODES",
    "EXIT_RUN_FAILED",
    "FIDELITY_MAX_LATE_SHARE",
    "FIDELITY_MAX_LOOP_LAG_P99_MS",
    "FIDELITY_MAX_READ_AT_ONCE_SHARE",
    "FIDELITY_MAX_TTFT_LATE_SHARE",
    "FIDELITY_MIN_LATE",
    "FIDELITY_READ_AT_ONCE_MIN_GAPS",
    "GPU_FILE",
    "JUNIT_FILE",
    "LOAD_FILE",
    "RECORDS_FORMAT_VERSION",
    "REPORT_FILE",
    "REQUESTS_FILE",
    "RUN_FILE",
    "RUN_SCHEMA_VERSION",
    "SEGMENTS_DIR",
    "SERVER_FILE",
    "SPANS_FILE",
    "SUMMARY_FILE",
    "SUMMARY_SCHEMA_VERSION",
    "LoadSample",
    "LoadWriter",
    "NewerSchema",
    "RunMeta",
    "parse_confidence",
    "read_json_object",
    "read_load",
    "read_run_meta",
    "read_summary",
    "read_versioned",
    "versions",
    "write_json_atomic",
    "write_run_meta",
    "write_summary",
]

# -- the files of a run directory ----------------------------------------------------------
SEGMENTS_DIR = "requests"  # request records, compact (segments.py)
#: 1 = ``requests.jsonl`` (0.1), 2 = Arrow/Parquet segments with ITL gaps in integer microseconds
RECORDS_FORMAT_VERSION = 2
REQUESTS_FILE = "requests.jsonl"  # RequestRecord per line (records.py)
RUN_FILE = "run.json"  # RunMeta
LOAD_FILE = "load.jsonl"  # LoadSample per line
GPU_FILE = "gpu.jsonl"  # GpuSample / MonitorGap per line (samples.py)
SERVER_FILE = "server.jsonl"  # ServerSample / MonitorGap per line (samples.py)
SPANS_FILE = "spans.jsonl"  # ServerSpan per line (spans.py): the server's own llm_request spans (--otlp-port)
CAPACITY_FILE = "capacity.json"  # CapacityResult (capacity-search runs only)
SUMMARY_FILE = "summary.json"  # written by reports
REPORT_FILE = "report.html"
JUNIT_FILE = "junit.xml"

#: run.json versions: 1 (first release). Readers accept every version up to this one.
RUN_SCHEMA_VERSION = 1
#: summary.json versions: 1 added ``schema`` (files without it are version 0, same fields).
SUMMARY_SCHEMA_VERSION = 1
#: capacity.json versions: 1 (first release).
CAPACITY_SCHEMA_VERSION = 1

# -- verdicts and exit codes ----------------------------------------------------------------
#: Exit code of a run whose SLOs held / broke / that itself failed (target unusable, too many
#: errors) / that did not run as planned (a worker lost, never finished: its figures are partial) /
#: whose SLOs held or broke but whose timing is not trustworthy (the load generator read late).
EXIT_CODES = {"passed": 0, "failed": 1, "run_failed": 3, "incomplete": 4, "unreliable": 5, "inconclusive": 6}
EXIT_RUN_FAILED = EXIT_CODES["run_failed"]

#: the confidence of the SLO intervals when a run does not say (``--confidence``; 0: point estimates)
DEFAULT_CONFIDENCE = 0.95


def parse_confidence(value: Any, error: type[ValueError] = ValueError) -> float:
    """``--confidence``: 0 (judge point estimates) or a share from 0.5 to below 1; ``error`` (one line) else."""
    try:
        v = float(DEFAULT_CONFIDENCE if value in (None, "") else value)
    except (TypeError, ValueError):
        raise error(f"--confidence {value!r}: not a number") from None
    if v != 0 and not 0.5 <= v < 1:
        raise error(f"--confidence {value}: a share from 0.5 to below 1, e.g. 0.95 (0: judge point estimates)")
    return v


# -- timing fidelity: when a run's timing is trustworthy (reports' evaluate_fidelity) -------------
#: At most this share of token events may be *late* (read together with a later one after waiting
#: in the socket for over ``LATE_EVENT_S``: their own arrival times are lost).
FIDELITY_MAX_LATE_SHARE = 0.05
#: At most this share of streamed records with a first token may have that first token (TTFT) late.
FIDELITY_MAX_TTFT_LATE_SHARE = 0.05
#: ... and a bound is only broken by at least this many late ones: in a short run one late TTFT of
#: 40 is 2.5%, and a quiet load generator reads ~0.5% of them late (two events that left together)
FIDELITY_MIN_LATE = 5
#: At most this share of streams may be *read at once*: more than half of their gaps after a late
#: event (their ITLs and TPOT are the reader's, not the server's). Late events spread thinly cost a
#: gap each; bunched into a few streams they make up whole records, and over 1% of the records is
#: what a p99 the report quotes is made of. No minimum count: in a 40-request run one such stream is its p99.
FIDELITY_MAX_READ_AT_ONCE_SHARE = 0.01
#: ... of the streams with at least this many gaps (a 1- or 2-token answer has no ITL to make up: its
#: late first token is the TTFT bound's business)
FIDELITY_READ_AT_ONCE_MIN_GAPS = 2
#: Records read without kernel receive stamps (TLS, non-Linux) cannot say which events were late:
#: for them the load generators' event-loop lag p99 (mean over the run's seconds) must stay within this.
FIDELITY_MAX_LOOP_LAG_P99_MS = 5.0


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` as indented JSON via a temporary file, so a reader never sees half of it
    (:class:`~.faults.WriteFailed` when it cannot be written; no temporary file is left)."""
    write_bytes_atomic(path, json.dumps(doc, indent=2, sort_keys=True, default=str).encode())


class NewerSchema(ValueError):
    """A run directory's file written by a newer tokenstorm than this one (its message names the file)."""


def refuse_newer(path: Path, version: int | None, known: int) -> None:
    """Every reader's rule: a file of an earlier schema version is read, a newer one refused with the file named."""
    if version is not None and version > known:
        raise NewerSchema(f"{path}: schema {version} is newer than this tokenstorm reads ({known})")


def read_versioned(
    run_dir: Path | str, name: str, known: int, unversioned: int = 1
) -> tuple[dict[str, Any], int] | None:
    """The JSON object of file ``name`` in ``run_dir`` and its schema version (``unversioned`` when it has no
    ``schema``), a newer one than ``known`` refused (:func:`refuse_newer`); ``None`` when there is no such file."""
    path = Path(run_dir) / name  # a str as README shows it, or a Path
    if not path.exists():
        return None
    data = read_json_object(path)
    version = int(data.get("schema", unversioned) or unversioned)
    refuse_newer(path, version, known)
    return data, version


def read_json_object(path: Path) -> dict[str, Any]:
    """A run directory's JSON file, which must hold an object (one line naming the file if not)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def _split(cls: type, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    names = {f.name for f in fields(cls)} - {"extra"}
    return {k: v for k, v in data.items() if k in names}, {k: v for k, v in data.items() if k not in names}


# -- run.json ----------------------------------------------------------------------------------
@dataclass
class RunMeta:
    """``run.json``: what ran, against what, and how it ended. Secrets are never in ``options``."""

    status: str = "running"  # running, failed, stopped, finished, interrupted (a signal before its planned end)
    target: str | None = None
    simulated: bool = False
    model: str | None = None
    started_epoch_s: float | None = None
    stopped_epoch_s: float | None = None
    host: str = ""
    pid: int = 0
    versions: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    workers_seen: list[str] = field(default_factory=list)
    requests_by_workload: dict[str, int] = field(default_factory=dict)
    records: int = 0
    problem: str | None = None
    slo_spec_text: str | None = None
    slo_spec_source: str | None = None
    workers_lost: dict[str, dict[str, Any]] = field(default_factory=dict)
    gc: dict[str, Any] = field(default_factory=dict)
    #: A/B runs (--targets): [{"label": ..., "url": ...}] in the order given; empty: one target
    targets: list[dict[str, str]] = field(default_factory=list)
    #: What served the run, captured from the server, not typed: per target label ("" for a one-target
    #: run) {"url": display URL, "server_version": str | None (GET /version), "engine": {info name ->
    #: {label -> value}} (vLLM's ``vllm:<name>_info`` gauges, e.g. "cache_config" -> {"block_size": "16",
    #: ...}), "model": {"id": str, "max_model_len": int | None} (GET /v1/models), "problems": [one line
    #: per source that could not be read]}. Empty: not captured (an older run).
    deployment: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The GPUs the sidecar saw: [{"index": int, "name": str, "memory_total_mib": float | None,
    #: "driver": str | None}]; empty: no GPU monitor or no GPU.
    gpus: list[dict[str, Any]] = field(default_factory=list)
    #: Workloads left out of the run's mix: name -> the one line saying why (agent sessions against a server
    #: that does not call tools). Empty: none (and no key in the file).
    left_out: dict[str, str] = field(default_factory=dict)
    #: each option's default at the run (durations in seconds; no secret, none empty): what the report sets
    #: ``options`` against to show only those set away from it. Empty (no key): an older run.
    option_defaults: dict[str, Any] = field(default_factory=dict)
    #: status ``interrupted``: by what, when ("SIGTERM 3 s into its planned 30 s"); None (no key): not interrupted
    interrupted: str | None = None
    schema: int = RUN_SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer writer, kept as they were

    def option(self, name: str, default: Any = None) -> Any:
        """One option of the run (``None``/empty gives ``default``)."""
        value = self.options.get(name)
        return default if value in (None, "") else value

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written to ``run.json``."""
        doc = asdict(self)
        extra = doc.pop("extra")
        for key in ("targets", "deployment", "gpus", "left_out", "interrupted", "option_defaults"):
            if not doc[key]:
                del doc[key]  # a one-target run's run.json stays as 0.1 wrote it
        return {**extra, **doc}


def write_run_meta(run_dir: Path, meta: RunMeta) -> None:
    """Write ``run.json`` atomically."""
    write_json_atomic(run_dir / RUN_FILE, meta.to_dict())


def read_run_meta(run_dir: Path | str) -> RunMeta | None:
    """``run.json`` of ``run_dir``; ``None`` when there is none."""
    read = read_versioned(run_dir, RUN_FILE, RUN_SCHEMA_VERSION)
    if read is None:
        return None
    known, extra = _split(RunMeta, read[0])
    known.setdefault("status", "unknown")  # a hand-made run.json: not known to be still running
    return RunMeta(**known, extra=extra)


# -- load.jsonl ----------------------------------------------------------------------------------
@dataclass(slots=True)
class LoadSample:
    """Offered load at one instant: users, each load generator's CPU % (worker id -> %, 100 = one
    core) and its timekeeping figures (worker id -> ``ClockSample.as_dict()``: ``interval_s``,
    ``cpu_pct``, ``runq_wait_ms_per_s``, ``throttled_ms_per_s``, ``nr_throttled``,
    ``loop_lag_p99_ms``, ``loop_lag_max_ms``; ``None`` where not measurable). Files written before
    the timekeeping figures existed read with ``clock`` empty."""

    epoch_s: float
    users: int
    cpu: dict[str, float] = field(default_factory=dict)
    clock: dict[str, dict[str, float | None]] = field(default_factory=dict)


class LoadWriter:
    """Appends a :class:`LoadSample` per line to ``load.jsonl`` (flushed each line: one a second)."""

    def __init__(self, run_dir: Path) -> None:
        self._fh = AppendFile(run_dir / LOAD_FILE, "load samples")

    def write(self, sample: LoadSample) -> None:
        """Append one sample (:class:`~.faults.WriteFailed` when it cannot be written; none after that)."""
        if not self._fh.closed:
            self._fh.write(
                orjson.dumps(
                    {"epoch_s": sample.epoch_s, "users": sample.users, "cpu": sample.cpu, "clock": sample.clock}
                )
                + b"\n"
            )
            self._fh.mark(1)
            self._fh.push()

    def close(self) -> None:
        """Close the file."""
        self._fh.close()


def read_load(run_dir: Path | str) -> list[LoadSample]:
    """The samples of ``load.jsonl`` (a line torn by a crash is skipped)."""
    run_dir = Path(run_dir)  # a str as README shows it, or a Path
    path = run_dir / LOAD_FILE
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                d = json.loads(line)
                clock = {
                    str(w): {str(k): None if v is None else float(v) for k, v in figures.items()}
                    for w, figures in (d.get("clock") or {}).items()
                }
                out.append(
                    LoadSample(
                        float(d["epoch_s"]),
                        int(d.get("users") or 0),
                        {str(k): float(v) for k, v in (d.get("cpu") or {}).items()},
                        clock,
                    )
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return out


# -- summary.json ----------------------------------------------------------------------------------
def write_summary(run_dir: Path, doc: dict[str, Any]) -> Path:
    """Write ``summary.json`` (built by ``reports``; vLLM benchmark field names) with its schema version."""
    path = run_dir / SUMMARY_FILE
    write_json_atomic(path, {**doc, "schema": SUMMARY_SCHEMA_VERSION})
    return path


def read_summary(run_dir: Path | str) -> dict[str, Any] | None:
    """``summary.json`` of ``run_dir`` (any version); ``None`` when the report was never built."""
    read = read_versioned(run_dir, SUMMARY_FILE, SUMMARY_SCHEMA_VERSION, unversioned=0)
    return None if read is None else read[0]


def versions() -> dict[str, str]:
    """Versions of the pieces that shape the numbers, for ``run.json``."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for dist in ("tokenstorm", "locust", "gevent", "httptools", "orjson"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out
