"""``probes.jsonl``: the consistency probes' answers — a fixed set of prompts sent at temperature 0 before the
load and again under it (``workloads.plugin.quality``) — one :class:`ProbeLine` per line, and the comparison
of the two passes (:func:`consistency_counts`) that the console line, the report and the
``consistency_changed`` SLO all read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import orjson

__all__ = ["BEFORE", "PROBES_FILE", "UNDER_LOAD", "Consistency", "ProbeLine", "consistency_counts", "read_probes"]

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


def read_probes(run_dir: Path | str) -> list[ProbeLine]:
    """Every probe line of ``run_dir`` (none: the run sent no probes); a torn last line is skipped."""
    path = Path(run_dir) / PROBES_FILE
    if not path.is_file():
        return []
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            out.append(ProbeLine.from_dict(orjson.loads(raw)))
        except (orjson.JSONDecodeError, TypeError):
            continue
    return out


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
    passes: dict[str, dict[int, dict[str, ProbeLine]]] = {}
    for line in lines:
        passes.setdefault(line.target, {}).setdefault(line.probe, {})[line.phase] = line
    out = []
    for target, probes in passes.items():
        pairs = [(p.get(BEFORE), p.get(UNDER_LOAD)) for p in probes.values()]
        both = [(a, b) for a, b in pairs if a is not None and b is not None and a.ok and b.ok]
        changed = sum(a.text != b.text for a, b in both)
        out.append(Consistency(target, changed, len(both), len(pairs) - len(both)))
    return out
