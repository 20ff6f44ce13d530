"""Open-loop arrival times: the run's one schedule, the same on every worker for a seed."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

__all__ = ["arrival_offsets"]


def arrival_offsets(rate: float, poisson: bool, seed: object) -> Iterator[float]:
    """The run's arrival times, seconds from its zero: Poisson (exponential gaps drawn from ``seed``) or fixed-rate,
    at ``rate`` per second."""
    if not poisson:
        yield from (j / rate for j in itertools.count(1))
    rng = random.Random(f"{seed}/arrivals")
    offset = 0.0
    while True:
        offset += rng.expovariate(rate)
        yield offset
