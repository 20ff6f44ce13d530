"""tokenstorm's load generator, in four layers (each imports only the ones below it):

* :mod:`tokenstorm.workloads.plugin` — the Locust integration: options, users, run lifecycle, shapes, web UI.
* :mod:`tokenstorm.workloads.traffic` — the traffic models (contract, code, chat) and what they are made of.
* :mod:`tokenstorm.workloads.client` — the measuring HTTP/SSE client; where TTFT, ITL, TPOT and E2E are defined.
* :mod:`tokenstorm.workloads.rundir` — the run directory's typed files, their writers and readers.

Importing this package imports none of them (``reports`` loads only ``rundir``).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Names tokenstorm 0.1 exported here, loaded from their new homes on first use.
_MOVED = {
    **dict.fromkeys(
        ("CompletionRequest", "LlmClient", "TargetError", "SseParser", "StreamError", "StreamTimer"),
        "tokenstorm.workloads.client",
    ),
    **dict.fromkeys(
        ("RECORD_SCHEMA_VERSION", "ErrorCategory", "RecordWriter", "RequestRecord", "read_records"),
        "tokenstorm.workloads.rundir",
    ),
}


def __getattr__(name: str) -> Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
