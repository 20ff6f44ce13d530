"""``probes.jsonl``: the consistency probes' answers — a fixed set of prompts sent at temperature 0 before the
load and again under it (``tokenstorm.workloads.plugin.quality``) — one :class:`ProbeLine` per line, and the comparison
of the two passes (:func:`consistency_counts`) that the console line, the report and the
``consistency_changed`` SLO all read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "BEFORE",
    "PROBES_FILE",
    "UNDER_LOAD",
    "Consistency",
    "ProbeLine",
    "compared",
    "consistency_counts",
    "probe_pairs",
    "read_probes",
]

#: the probes' answers, one JSON object (:class:`ProbeLine`) per line
PROBES_FILE = "probes.jsonl"
BEFORE, UNDER_LOAD = "before", "under_load"


@dataclass(frozen=True, slots=True)
class ProbeLine:
    """One probe's answer in one pass: a line of ``probes.jsonl``."""

    #: ``"before"`` (the load) or ``"under_load"``
    phase: str
    #: the probe's number in the pass, 0-based (the same prompt in both passes)
    probe: int
    #: the A/B target's label ("" for a run's one --host)
    target: str
    #: the answer's text (after any reasoning), secrets masked
    text: str
    ok: bool
    error: str | None
    #: when the probe was sent
    epoch_s: float
    #: users running when it was sent
    users: int

    def to_json(self) -> bytes:
        """The line, without its newline."""
        return orjson.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeLine:
        """A line decoded (fields a newer writer added are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def read_probes(run_dir: Path | str) -> tuple[list[ProbeLine], int] | None:
    """``run_dir``'s probe lines and how many could not be read (a torn last line, a line not a probe's);
    ``None`` when the run has no ``probes.jsonl`` (it sent no probes)."""
    path = Path(run_dir) / PROBES_FILE
    try:
        raw_lines = path.read_bytes().splitlines()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    except OSError:
        return [], 1
    out, bad = [], 0
    for raw in raw_lines:
        if not raw.strip():
            continue
        try:
            data = orjson.loads(raw)
            line = ProbeLine.from_dict(data)
        except (orjson.JSONDecodeError, TypeError, AttributeError):
            bad += 1
            continue
        if line.phase not in (BEFORE, UNDER_LOAD) or type(line.probe) is not int:
            bad += 1
            continue
        out.append(line)
    return out, bad


def probe_pairs(lines: Iterable[ProbeLine]) -> dict[tuple[str, int], tuple[ProbeLine | None, ProbeLine | None]]:
    """Each (target, probe)'s answer before the load and under it (``None``: that pass has none)."""
    passes: dict[tuple[str, int], dict[str, ProbeLine]] = {}
    for line in lines:
        passes.setdefault((line.target, line.probe), {})[line.phase] = line
    return {key: (p.get(BEFORE), p.get(UNDER_LOAD)) for key, p in passes.items()}


def compared(pair: tuple[ProbeLine | None, ProbeLine | None]) -> bool:
    """Whether a probe was answered in both passes (so its two answers are compared)."""
    a, b = pair
    return a is not None and b is not None and a.ok and b.ok


@dataclass(frozen=True, slots=True)
class Consistency:
    """One target's comparison: ``changed`` of ``compared`` probes answered differently under load;
    ``failed``: probes not compared (one of their passes failed or is missing)."""

    target: str
    changed: int
    compared: int
    failed: int

    def sentence(self) -> str:
        """What the console says."""
        where = f" ({self.target})" if self.target else ""
        if not self.compared:
            return f"consistency{where}: not measured — no probe was answered in both passes ({self.failed} failed)"
        failed = f"; {self.failed} probe(s) failed and were not compared" if self.failed else ""
        return f"consistency{where}: {self.changed} of {self.compared} probe answers changed under load{failed}"


def consistency_counts(lines: Iterable[ProbeLine]) -> list[Consistency]:
    """Per target (in the order first seen): how many probes' answers differ between the two passes."""
    by_target: dict[str, list[tuple[ProbeLine | None, ProbeLine | None]]] = {}
    for (target, _probe), pair in probe_pairs(lines).items():
        by_target.setdefault(target, []).append(pair)
    out = []
    for target, pairs in by_target.items():
        both = [p for p in pairs if compared(p)]
        changed = sum(a.text != b.text for a, b in both if a is not None and b is not None)
        out.append(Consistency(target, changed, len(both), len(pairs) - len(both)))
    return out
