"""``sweep.json``: a load sweep's levels — offered load, achieved throughput, latency percentiles and
SLO verdicts per level — and its goodput knee, the highest level whose achieved load met every SLO.

Written by the sweep shape after every level (so a run stopped half-way keeps what it measured) and
read by ``reports``. Readers accept every earlier ``schema`` and ignore keys a newer writer added.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .meta import read_versioned, write_json_atomic

__all__ = [
    "SWEEP_FILE",
    "SWEEP_METRICS",
    "SWEEP_MIN_REQUESTS",
    "SWEEP_PERCENTILES",
    "SWEEP_SCHEMA_VERSION",
    "SweepLevel",
    "SweepResult",
    "SweepVerdict",
    "knee_span",
    "level_outcome",
    "read_sweep",
    "sweep_knee",
    "write_sweep",
]

SWEEP_FILE = "sweep.json"  # SweepResult (sweep runs only)
#: sweep.json versions: 1 (first release)
SWEEP_SCHEMA_VERSION = 1
#: the latency metrics and percentiles a level reports per workload
SWEEP_METRICS = ("ttft", "itl", "e2e")
SWEEP_PERCENTILES = (50, 95, 99)
#: a level's percentile from fewer requests than this is flagged "low sample": below 1 / (1 - p)
#: requests none lies beyond it (p95 of 19 is the slowest request's neighbourhood, not a tail)
SWEEP_MIN_REQUESTS = {95: 20, 99: 100}

#: a level's (or capacity step's) outcome: every SLO held; one failed (or no request, or timing not
#: trustworthy); none failed but one is inconclusive (its interval straddles the target: noise, not a break)
HELD, BROKEN, INCONCLUSIVE = "held", "broken", "inconclusive"


def level_outcome(slo_results: list[str], requests: int, timing_trustworthy: bool = True) -> str:
    """A level's outcome from its SLOs' results (``held`` / ``failed`` / ``inconclusive``; ``""``: not
    judged, as held): broken when one failed, when it had no judged request or its timing was not
    trustworthy; else inconclusive when one is; else held."""
    if not requests or not timing_trustworthy or "failed" in slo_results:
        return BROKEN
    return INCONCLUSIVE if INCONCLUSIVE in slo_results else HELD


def knee_span(outcomes: list[tuple[int, str]]) -> tuple[int | None, list[int], int | None]:
    """``(knee, uncertain, broke)`` of levels given as ``(users, outcome)``: the knee is the most users that
    held below the first broken level (an inconclusive level below it does not stop it: noise is no break);
    ``uncertain`` the inconclusive levels above the knee and below the first broken — the knee may be as high
    as the highest of them; ``broke`` the first broken level's users (``None``: none broke)."""
    knee: int | None = None
    uncertain: list[int] = []
    for users, outcome in sorted(outcomes):
        if outcome == BROKEN:
            return knee, uncertain, users
        if outcome == HELD:
            knee, uncertain = users, []
        else:
            uncertain.append(users)
    return knee, uncertain, None


@dataclass
class SweepVerdict:
    """One per-request SLO target judged on one level, e.g. ``code ttft_ms p95 <= 300``."""

    target: str
    measured: float | None
    passed: bool
    #: ``held`` / ``failed`` / ``inconclusive`` (its interval straddles the target); "" in older files and
    #: for an SLO not judged: read :meth:`outcome`
    result: str = ""
    #: inconclusive: the judged requests in all a conclusive answer needs at the spread observed
    needed_requests: int | None = None

    def outcome(self) -> str:
        """``held`` / ``failed`` / ``inconclusive`` (older files: from ``passed``)."""
        return self.result or ("held" if self.passed else "failed")


@dataclass
class SweepLevel:
    """One level of a sweep, judged on its second half (the first half is the queue settling).

    ``requests_per_s`` / ``output_tokens_per_s``: successful requests (their output tokens) that
    *ended* in the judged half, per second — what the server achieved, whatever was offered.
    ``latency_ms``: workload → ``ttft``/``itl``/``e2e`` → ``p50``/``p95``/``p99`` of the requests
    that *started* in the judged half.
    """

    users: int  # the offered load: closed-loop concurrency
    kind: str  # "synchronous" / "throughput" (the probes of an automatic sweep) or "level"
    started_epoch_s: float
    judged_from_epoch_s: float
    judged_to_epoch_s: float
    requests: int  # judged: started in the judged half, not cancelled by the load test
    requests_per_s: float
    output_tokens_per_s: float
    held: bool  # judged requests exist, every per-request SLO held and the timing was trustworthy
    latency_ms: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    slos: list[SweepVerdict] = field(default_factory=list)
    #: the load generator read the judged requests' streams on time (``tokenstorm.reports.evaluate_fidelity``);
    #: False: the level is not held whatever its SLOs said, and the sweep stopped there
    timing_trustworthy: bool = True
    timing_reason: str = ""  # the fidelity verdict's one line ("" in files written before it)
    #: workload → the successful judged requests its percentiles come from (empty in older files)
    latency_requests: dict[str, int] = field(default_factory=dict)
    #: of the requests ``requests_per_s`` counts, those that met every per-request latency target,
    #: per second (``None`` in older files)
    goodput_requests_per_s: float | None = None
    #: ``held`` / ``broken`` / ``inconclusive`` (:func:`level_outcome`); "" in older files: read :meth:`outcome`
    result: str = ""

    def outcome(self) -> str:
        """``held``, ``broken`` or ``inconclusive`` (older files, which had no intervals: held or broken)."""
        return self.result or (HELD if self.held else BROKEN)

    def low_sample(self) -> dict[str, list[int]]:
        """Workload → the percentiles of :data:`SWEEP_MIN_REQUESTS` that came from fewer requests
        than their bound (older files: the level's judged requests, an upper bound, stand in)."""
        out: dict[str, list[int]] = {}
        for workload in self.latency_ms:
            n = self.latency_requests.get(workload, self.requests)
            low = [p for p, least in SWEEP_MIN_REQUESTS.items() if n < least]
            if low:
                out[workload] = low
        return out


@dataclass
class SweepResult:
    """``sweep.json``: every level run so far, in the order run, and the knee among them."""

    level_time_s: float
    levels: list[SweepLevel] = field(default_factory=list)
    #: the knee's users, achieved requests/s and output tokens/s (``None``: no level held)
    knee_users: int | None = None
    knee_requests_per_s: float | None = None
    knee_output_tokens_per_s: float | None = None
    #: the inconclusive levels above the knee and below the first broken one: the knee may be as high
    knee_inconclusive_users: list[int] = field(default_factory=list)
    complete: bool = False  # every planned level ran (or the sweep stopped early, saying why)
    stopped_early: str | None = None
    schema: int = SWEEP_SCHEMA_VERSION

    def with_knee(self) -> SweepResult:
        """This result with its knee fields set from :func:`sweep_knee`."""
        knee = sweep_knee(self.levels)
        self.knee_users = knee.users if knee else None
        self.knee_requests_per_s = knee.requests_per_s if knee else None
        self.knee_output_tokens_per_s = knee.output_tokens_per_s if knee else None
        self.knee_inconclusive_users = knee_span([(level.users, level.outcome()) for level in self.levels])[1]
        return self


def sweep_knee(levels: list[SweepLevel]) -> SweepLevel | None:
    """The goodput knee: the level with the most users that met every per-request SLO with no level with
    fewer users broken (a level that held above one that broke is noise, not capacity; an inconclusive one
    below is noise too). A level whose timing was not trustworthy is broken: nothing at or above it was
    measured. The inconclusive levels between the knee and the first broken: :func:`knee_span`."""
    knee, _uncertain, _broke = knee_span([(level.users, level.outcome()) for level in levels])
    return next((level for level in levels if level.users == knee), None)


def write_sweep(run_dir: Path, result: SweepResult) -> None:
    """Write ``sweep.json`` atomically (with the knee of the levels so far)."""
    write_json_atomic(run_dir / SWEEP_FILE, asdict(result.with_knee()))


def _level(data: dict[str, Any]) -> SweepLevel:
    slos = [
        SweepVerdict(
            str(v["target"]), v.get("measured"), bool(v["passed"]), str(v.get("result") or ""), v.get("needed_requests")
        )
        for v in data.get("slos") or []
    ]
    return SweepLevel(
        users=int(data["users"]),
        kind=str(data.get("kind") or "level"),
        started_epoch_s=float(data.get("started_epoch_s") or 0.0),
        judged_from_epoch_s=float(data.get("judged_from_epoch_s") or 0.0),
        judged_to_epoch_s=float(data.get("judged_to_epoch_s") or 0.0),
        requests=int(data.get("requests") or 0),
        requests_per_s=float(data.get("requests_per_s") or 0.0),
        output_tokens_per_s=float(data.get("output_tokens_per_s") or 0.0),
        held=bool(data.get("held")),
        latency_ms=dict(data.get("latency_ms") or {}),
        slos=slos,
        timing_trustworthy=bool(data.get("timing_trustworthy", True)),  # files before the check: not judged
        timing_reason=str(data.get("timing_reason") or ""),
        latency_requests={str(k): int(v) for k, v in (data.get("latency_requests") or {}).items()},
        goodput_requests_per_s=_optional_float(data.get("goodput_requests_per_s")),
        result=str(data.get("result") or ""),
    )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def read_sweep(run_dir: Path | str) -> SweepResult | None:
    """``sweep.json`` of ``run_dir``; ``None`` when the run was not a sweep."""
    read = read_versioned(run_dir, SWEEP_FILE, SWEEP_SCHEMA_VERSION)
    if read is None:
        return None
    data, version = read
    return SweepResult(
        level_time_s=float(data.get("level_time_s") or 0.0),
        levels=[_level(level) for level in data.get("levels") or []],
        knee_users=data.get("knee_users"),
        knee_requests_per_s=data.get("knee_requests_per_s"),
        knee_output_tokens_per_s=data.get("knee_output_tokens_per_s"),
        knee_inconclusive_users=[int(u) for u in data.get("knee_inconclusive_users") or []],
        complete=bool(data.get("complete")),
        stopped_early=data.get("stopped_early"),
        schema=version,
    )
