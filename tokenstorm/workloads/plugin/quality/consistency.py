"""How many consistency probes a pass sends (:func:`probe_count`), without Locust; a probe's answer
(:class:`ProbeLine`, a line of ``RUN_DIR/probes.jsonl``) and the comparison of the two passes
(:func:`consistency_counts`) are the run directory's (``tokenstorm.workloads.rundir.probes``), re-exported here."""

from __future__ import annotations

from typing import Any

from ...rundir.probes import BEFORE, PROBES_FILE, UNDER_LOAD, Consistency, ProbeLine, consistency_counts
from ..core.options import RunOptions

__all__ = [
    "BEFORE",
    "PROBES_FILE",
    "PROBES_FOR_SLO",
    "SLO_METRIC",
    "UNDER_LOAD",
    "Consistency",
    "ProbeLine",
    "consistency_counts",
    "probe_count",
]

#: probes per pass when the SLO file sets ``consistency_changed`` and ``--consistency-probes`` is not given
PROBES_FOR_SLO = 8
#: the SLO metric the probes feed
SLO_METRIC = "consistency_changed"


def probe_count(options: RunOptions, slo_spec: Any) -> int:
    """Probes per pass: ``--consistency-probes``, else 8 when the SLO file has a ``consistency_changed`` target."""
    if options.consistency_probes is not None:
        return options.consistency_probes
    targets = getattr(slo_spec, "targets", None) or ()
    return PROBES_FOR_SLO if any(getattr(t, "metric", None) == SLO_METRIC for t in targets) else 0
