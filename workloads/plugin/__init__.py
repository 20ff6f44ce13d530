"""The Locust integration — the one layer that imports Locust.

* :mod:`.options` — every option, parsed and validated once into a frozen ``RunOptions``.
* :mod:`.lifecycle` — start-up checks, the emulator, run start/stop, outputs and exit code; :func:`install`.
* :mod:`.users` — ``LlmUser``, a user class per traffic model, and the one ``send`` path.
* :mod:`.context` — per-process run state (``RunContext``): records, live rates, ``run.json``.
* :mod:`.shipping` — workers' records and CPU to the master; liveness.
* :mod:`.monitoring` — the monitor process, ``load.jsonl``, lost workers, client-bound generators.
* :mod:`.shapes`, :mod:`.capacity`, :mod:`.sweep` — step shape, open-loop arrivals, SLO capacity search, load sweep.
* :mod:`.webui` — the web UI's tokenstorm tabs and live report.
* :mod:`.locust_compat` — the one place that touches Locust's internals.
"""

from __future__ import annotations

import importlib
from typing import Any

# Names are loaded on first use (PEP 562): importing Locust monkey-patches the process, so
# ``workloads.plugin.options`` and friends stay importable without it (tests, tools).
_USERS = ("ChatUser", "CodeUser", "ContractUser", "LlmRequestFailed", "LlmUser", "WorkloadUser", "send", "user_class",
          "user_classes")  # fmt: skip
_HOMES = {
    "EXIT_RUN_FAILED": "..rundir",
    "CapacitySearchShape": ".capacity",
    "RunContext": ".context",
    "context": ".context",
    "install": ".lifecycle",
    "OptionError": ".options",
    "RunOptions": ".options",
    "parse_steps": ".options",
    "OpenLoopUser": ".shapes",
    "StepShape": ".shapes",
    "SweepShape": ".sweep",
    **dict.fromkeys(_USERS, ".users"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)


__all__ = [
    "EXIT_RUN_FAILED",
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
