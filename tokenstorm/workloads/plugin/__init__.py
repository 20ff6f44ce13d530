"""The Locust integration — the one layer that imports Locust.

Grouped by concern:

* :mod:`.core` — the run itself: ``options`` (every option, validated once into a frozen ``RunOptions``),
  ``targets`` (A/B endpoints), ``lifecycle`` (start-up checks, the emulator, run start/stop, outputs, exit
  code; :func:`install`), ``context`` (per-process run state: records, live rates, ``run.json``),
  ``shipping`` (workers' records to the master), ``master_watch`` (no load without its master: workers stop
  when it dies), ``interrupts`` (a signal before the planned end makes the run incomplete), ``monitoring``
  (the monitor process, ``load.jsonl``, lost workers), ``otlp`` (the server's spans, ``--otlp-port``),
  ``rates``, ``gc``, and ``locust_compat`` (the one place that touches Locust's internals).
* :mod:`.users` — ``LlmUser``, a user class per traffic model, and the one ``send`` path.
* :mod:`.shapes` — step shape and open-loop arrivals (``steps``), SLO capacity search, load sweep, their
  per-level judging (``levels``), soak snapshots.
* :mod:`.web` — the web UI's tokenstorm tabs (``webui``), its live view and the live window behind it.
* :mod:`.export` — the live Prometheus export (``--metrics-port``).
"""

from __future__ import annotations

import importlib
from typing import Any

# Names are loaded on first use (PEP 562): importing Locust monkey-patches the process, so
# ``tokenstorm.workloads.plugin.core.options`` and friends stay importable without it (tests, tools).
_USERS = (
    "AgentUser",
    "ChatUser",
    "CodeUser",
    "ContractUser",
    "LlmRequestFailed",
    "LlmUser",
    "WorkloadUser",
    "send",
    "user_class",
    "user_classes",
)
_HOMES = {
    "EXIT_RUN_FAILED": "..rundir",
    "CapacitySearchShape": ".shapes.capacity",
    "RunContext": ".core.context",
    "context": ".core.context",
    "install": ".core.lifecycle",
    "OptionError": ".core.options",
    "RunOptions": ".core.options",
    "parse_steps": ".core.options",
    "OpenLoopUser": ".shapes.steps",
    "StepShape": ".shapes.steps",
    "SweepShape": ".shapes.sweep",
    **dict.fromkeys(_USERS, ".users.workload"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)


__all__ = [
    "EXIT_RUN_FAILED",
    "AgentUser",
    "CapacitySearchShape",
    "ChatUser",
    "CodeUser",
    "ContractUser",
    "LlmRequestFailed",
    "LlmUser",
    "OpenLoopUser",
    "OptionError",
    "RunContext",
    "RunOptions",
    "StepShape",
    "SweepShape",
    "WorkloadUser",
    "context",
    "install",
    "parse_steps",
    "send",
    "user_class",
    "user_classes",
]
