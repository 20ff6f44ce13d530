"""Kept for locustfiles written against tokenstorm 0.1: the same names as :mod:`workloads.plugin`."""

from .plugin import CapacitySearchShape, OpenLoopUser, StepShape, parse_steps

__all__ = ["CapacitySearchShape", "OpenLoopUser", "StepShape", "parse_steps"]
