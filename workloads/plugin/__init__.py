"""The Locust integration — the one layer that imports Locust.

* :mod:`.options` — every option, parsed and validated once into a frozen ``RunOptions``.
* :mod:`.lifecycle` — start-up checks, the emulator, run start/stop, outputs and exit code; :func:`install`.
* :mod:`.users` — ``LlmUser``, a user class per traffic model, and the one ``send`` path.
* :mod:`.context` — per-process run state (``RunContext``): records, live rates, ``run.json``.
* :mod:`.shipping` — workers' records and CPU to the master; liveness.
* :mod:`.monitoring` — the monitor process, ``load.jsonl``, lost workers, client-bound generators.
* :mod:`.shapes`, :mod:`.capacity` — step shape, open-loop arrivals, SLO capacity search.
* :mod:`.webui` — the web UI's tokenstorm tabs and live report.
* :mod:`.locust_compat` — the one place that touches Locust's internals.
"""

from ..rundir import EXIT_RUN_FAILED
from .capacity import CapacitySearchShape
from .context import RunContext, context
from .lifecycle import install
from .options import OptionError, RunOptions, parse_steps
from .shapes import OpenLoopUser, StepShape
from .users import (
    ChatUser,
    CodeUser,
    ContractUser,
    LlmRequestFailed,
    LlmUser,
    WorkloadUser,
    send,
    user_class,
    user_classes,
)

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
    "WorkloadUser",
    "context",
    "install",
    "parse_steps",
    "send",
    "user_class",
    "user_classes",
]
