"""``capacity.json``: a capacity search's steps and the highest load that held (typed, versioned)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from .meta import CAPACITY_FILE, CAPACITY_SCHEMA_VERSION, read_versioned, write_json_atomic

__all__ = ["CapacityResult", "CapacityStep", "read_capacity", "write_capacity"]


@dataclass
class CapacityStep:
    """One capacity-search step: its users, the requests judged, and each SLO's measured value.
    ``held``: every per-request SLO held *and* the load generator's timing was trustworthy."""

    users: int
    requests: int
    held: bool
    measured: dict[str, float | None] = field(default_factory=dict)
    #: the load generator read this step's streams on time (``tokenstorm.reports.evaluate_fidelity``); False:
    #: the step's figures say nothing of the server, and the search stopped there
    timing_trustworthy: bool = True
    timing_reason: str = ""  # the fidelity verdict's one line ("" in files written before it)
    #: ``held`` / ``broken`` / ``inconclusive`` (none failed, one's interval straddles its target); "" in older
    #: files (held or broken, from ``held``)
    result: str = ""
    #: each SLO of ``measured``: ``held`` / ``failed`` / ``inconclusive`` (empty in older files)
    results: dict[str, str] = field(default_factory=dict)
    #: the step was held a second ``--capacity-step-time`` because it was inconclusive after the first
    extended: bool = False

    def outcome(self) -> str:
        """``held``, ``broken`` or ``inconclusive`` (older files: held or broken)."""
        return self.result or ("held" if self.held else "broken")


@dataclass
class CapacityResult:
    """``capacity.json``: the highest load whose step held every per-request SLO, with every
    step below it held too; the search stops at the first step that broke an SLO
    (``broke_at_users``) or whose timing was not trustworthy (``untrustworthy_at_users``)."""

    highest_users_that_held: int | None
    broke_at_users: int | None
    steps: list[CapacityStep] = field(default_factory=list)
    schema: int = CAPACITY_SCHEMA_VERSION
    untrustworthy_at_users: int | None = None
    #: the inconclusive steps above the highest that held (and below the one that broke): the capacity
    #: may be as high as the highest of them
    inconclusive_users: list[int] = field(default_factory=list)
    #: why the search stopped when no step broke (two inconclusive steps in a row); None otherwise
    stopped: str | None = None


def write_capacity(run_dir: Path, result: CapacityResult) -> None:
    """Write ``capacity.json`` atomically."""
    write_json_atomic(run_dir / CAPACITY_FILE, asdict(result))


def read_capacity(run_dir: Path | str) -> CapacityResult | None:
    """``capacity.json`` of ``run_dir``; ``None`` when the run was not a capacity search."""
    read = read_versioned(run_dir, CAPACITY_FILE, CAPACITY_SCHEMA_VERSION)
    if read is None:
        return None
    data, version = read
    steps = [
        CapacityStep(
            int(s["users"]),
            int(s.get("requests") or 0),
            bool(s["held"]),
            dict(s.get("measured") or {}),
            bool(s.get("timing_trustworthy", True)),
            str(s.get("timing_reason") or ""),
            str(s.get("result") or ""),
            {str(k): str(v) for k, v in (s.get("results") or {}).items()},
            bool(s.get("extended")),
        )
        for s in data.get("steps") or []
    ]
    return CapacityResult(
        data.get("highest_users_that_held"),
        data.get("broke_at_users"),
        steps,
        version,
        data.get("untrustworthy_at_users"),
        [int(u) for u in data.get("inconclusive_users") or []],
        data.get("stopped"),
    )
