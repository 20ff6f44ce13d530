"""Public load shapes: ``from workloads.shapes import StepShape, CapacitySearchShape, OpenLoopUser``."""

from ._shapes import CapacitySearchShape, OpenLoopUser, StepShape, parse_steps

__all__ = ["CapacitySearchShape", "OpenLoopUser", "StepShape", "parse_steps"]
