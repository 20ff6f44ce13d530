"""The one-line error every bad option (command line, web UI form, workload file) becomes."""

from __future__ import annotations

__all__ = ["OptionError"]


class OptionError(ValueError):
    """An option with an unusable value; ``str()`` is ``--option: reason``."""
