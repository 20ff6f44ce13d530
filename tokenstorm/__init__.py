"""The ``tokenstorm`` command: ``tokenstorm run mixed`` (a bundled locustfile, or your own, with Locust),
``tokenstorm report``, ``tokenstorm compare``, ``tokenstorm emulator`` — see :mod:`tokenstorm.cli`.

Importing this package loads nothing else: Locust (which monkey-patches the process), pandas and the
report code load only for the command that needs them.
"""

from __future__ import annotations

__all__ = ["main"]

from .cli import main
