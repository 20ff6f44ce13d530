"""The run directory's small files, typed: ``run.json``, ``load.jsonl``, ``capacity.json``, ``summary.json``.

Each has one dataclass here, one writer and one reader; the Locust plugin writes through
them and ``reports`` reads through them. Readers accept every earlier ``schema`` version
and ignore keys a newer writer added (kept in ``extra`` where a round trip needs them).
Verdicts, exit codes and the client-bound threshold are defined here once.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = [
    "CAPACITY_FILE",
    "CLIENT_BOUND_CPU_PCT",
    "EXIT_CODES",
    "EXIT_RUN_FAILED",
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
    "SUMMARY_FILE",
    "SUMMARY_SCHEMA_VERSION",
    "CapacityResult",
    "CapacityStep",
    "LoadSample",
    "LoadWriter",
    "RunMeta",
    "read_capacity",
    "read_load",
    "read_run_meta",
    "read_summary",
    "write_capacity",
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
CAPACITY_FILE = "capacity.json"  # CapacityResult (capacity-search runs only)
SUMMARY_FILE = "summary.json"  # written by reports
REPORT_FILE = "report.html"
JUNIT_FILE = "junit.xml"

#: run.json versions: 1 (first release). Readers accept every version up to this one.
RUN_SCHEMA_VERSION = 1
#: summary.json versions: 1 added ``schema`` (files without it are version 0, same fields).
SUMMARY_SCHEMA_VERSION = 1

# -- verdicts and exit codes ----------------------------------------------------------------
#: Exit code of a run whose SLOs held / broke / that itself failed (target unusable, too many
#: errors) / that did not run as planned (a worker lost, never finished: its figures are partial).
EXIT_CODES = {"passed": 0, "failed": 1, "run_failed": 3, "incomplete": 4}
EXIT_RUN_FAILED = EXIT_CODES["run_failed"]

#: A load generator above this CPU share measures its own queueing, not the server's latency.
CLIENT_BOUND_CPU_PCT = 90.0


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write ``doc`` as indented JSON via a temporary file, so a reader never sees half of it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str), encoding="utf-8")
    tmp.replace(path)


def _read_json(path: Path) -> dict[str, Any]:
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

    status: str = "running"  # running, failed, stopped, finished
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
    client_bound: list[str] = field(default_factory=list)
    gc: dict[str, Any] = field(default_factory=dict)
    #: A/B runs (--targets): [{"label": ..., "url": ...}] in the order given; empty: one target
    targets: list[dict[str, str]] = field(default_factory=list)
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
        if not doc["targets"]:
            del doc["targets"]  # a one-target run's run.json stays as 0.1 wrote it
        return {**extra, **doc}


def write_run_meta(run_dir: Path, meta: RunMeta) -> None:
    """Write ``run.json`` atomically."""
    write_json_atomic(run_dir / RUN_FILE, meta.to_dict())


def read_run_meta(run_dir: Path) -> RunMeta | None:
    """``run.json`` of ``run_dir``; ``None`` when there is none."""
    path = run_dir / RUN_FILE
    if not path.exists():
        return None
    known, extra = _split(RunMeta, _read_json(path))
    known.setdefault("status", "unknown")  # a hand-made run.json: not known to be still running
    version = int(known.get("schema", 1) or 1)
    if version > RUN_SCHEMA_VERSION:
        raise ValueError(f"{path}: schema {version} is newer than this tokenstorm reads ({RUN_SCHEMA_VERSION})")
    return RunMeta(**known, extra=extra)


# -- load.jsonl ----------------------------------------------------------------------------------
@dataclass(slots=True)
class LoadSample:
    """Offered load at one instant: users, and each load generator's CPU % (worker id -> %)."""

    epoch_s: float
    users: int
    cpu: dict[str, float] = field(default_factory=dict)


class LoadWriter:
    """Appends a :class:`LoadSample` per line to ``load.jsonl`` (flushed each line: one a second)."""

    def __init__(self, run_dir: Path) -> None:
        self._fh: IO[bytes] = (run_dir / LOAD_FILE).open("ab")

    def write(self, sample: LoadSample) -> None:
        """Append one sample."""
        if not self._fh.closed:
            self._fh.write(orjson.dumps({"epoch_s": sample.epoch_s, "users": sample.users, "cpu": sample.cpu}))
            self._fh.write(b"\n")
            self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        self._fh.close()


def read_load(run_dir: Path) -> list[LoadSample]:
    """The samples of ``load.jsonl`` (a line torn by a crash is skipped)."""
    path = run_dir / LOAD_FILE
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                d = json.loads(line)
                out.append(LoadSample(float(d["epoch_s"]), int(d.get("users") or 0),
                                      {str(k): float(v) for k, v in (d.get("cpu") or {}).items()}))  # fmt: skip
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    return out


# -- capacity.json ----------------------------------------------------------------------------------
@dataclass
class CapacityStep:
    """One capacity-search step: its users, the requests judged, and each SLO's measured value."""

    users: int
    requests: int
    held: bool
    measured: dict[str, float | None] = field(default_factory=dict)


@dataclass
class CapacityResult:
    """``capacity.json``: the highest load whose step held every per-request SLO."""

    highest_users_that_held: int | None
    broke_at_users: int | None
    steps: list[CapacityStep] = field(default_factory=list)
    schema: int = 1


def write_capacity(run_dir: Path, result: CapacityResult) -> None:
    """Write ``capacity.json`` atomically."""
    write_json_atomic(run_dir / CAPACITY_FILE, asdict(result))


def read_capacity(run_dir: Path) -> CapacityResult | None:
    """``capacity.json`` of ``run_dir``; ``None`` when the run was not a capacity search."""
    path = run_dir / CAPACITY_FILE
    if not path.exists():
        return None
    data = _read_json(path)
    steps = [CapacityStep(int(s["users"]), int(s.get("requests") or 0), bool(s["held"]), dict(s.get("measured") or {}))
             for s in data.get("steps") or []]  # fmt: skip
    return CapacityResult(data.get("highest_users_that_held"), data.get("broke_at_users"), steps,
                          int(data.get("schema", 1)))  # fmt: skip


# -- summary.json ----------------------------------------------------------------------------------
def write_summary(run_dir: Path, doc: dict[str, Any]) -> Path:
    """Write ``summary.json`` (built by ``reports``; vLLM benchmark field names) with its schema version."""
    path = run_dir / SUMMARY_FILE
    write_json_atomic(path, {**doc, "schema": SUMMARY_SCHEMA_VERSION})
    return path


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """``summary.json`` of ``run_dir`` (any version); ``None`` when the report was never built."""
    path = run_dir / SUMMARY_FILE
    if not path.exists():
        return None
    data = _read_json(path)
    version = int(data.get("schema", 0) or 0)
    if version > SUMMARY_SCHEMA_VERSION:
        raise ValueError(f"{path}: schema {version} is newer than this tokenstorm reads ({SUMMARY_SCHEMA_VERSION})")
    return data
