"""Environment for tokenstorm's child processes (compactor, report snapshots, monitor)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["child_env"]

_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding the tokenstorm package


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this environment) with this checkout first on ``PYTHONPATH``, so a child
    started with ``python -m ...`` finds tokenstorm whether it is installed or run from a checkout."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
