"""The traffic models, one module each. Every module here that defines ``MODEL`` (a
:class:`~tokenstorm.workloads.traffic.base.TrafficModel` subclass) is registered in :data:`MODELS` under its
``name`` — its options, workload-file settings, Locust user class (``tokenstorm.workloads.plugin``) and
stats/SLO scope follow. Adding a traffic model means adding one module here.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..base import TrafficModel

__all__ = ["MODELS"]


def _discover() -> dict[str, type[TrafficModel]]:
    found: dict[str, type[TrafficModel]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        model = getattr(module, "MODEL", None)
        if model is not None:
            found[model.name] = model
    order = ("contract", "code", "chat")  # the built-in three first, in the order the docs use
    return {n: found[n] for n in sorted(found, key=lambda n: (order.index(n) if n in order else len(order), n))}


#: name -> traffic model class, for every model in this package.
MODELS: dict[str, type[TrafficModel]] = _discover()
