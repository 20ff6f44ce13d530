"""Traffic models — what simulated users send — and what they are made of. No Locust here.

* :mod:`.base` — the :class:`TrafficModel` protocol and :class:`WorkloadSettings`.
* :mod:`.models` — one module per traffic model (contract, code, chat, agent), found automatically.
* :mod:`.settings` — settings from options and workload files, validated (``FILE:LINE: reason``).
* :mod:`.lengths`, :mod:`.tokens`, :mod:`.datasets` — length distributions, token counting, datasets.
"""

from .base import Option, Session, TrafficModel, WorkloadSettings
from .models import MODELS
from .settings import WorkloadFileError, default_settings, named_workloads, settings_from_options

__all__ = [
    "MODELS",
    "Option",
    "Session",
    "TrafficModel",
    "WorkloadFileError",
    "WorkloadSettings",
    "default_settings",
    "named_workloads",
    "settings_from_options",
]
