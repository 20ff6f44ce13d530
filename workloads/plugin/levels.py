"""A load sweep's levels: which users an automatic sweep runs between its probes, and when a sweep
may stop early. Pure functions of what the levels measured (no Locust: unit-tested alone); the
shape that runs them is :mod:`.sweep`.
"""

from __future__ import annotations

import math

from ..rundir import SweepLevel

__all__ = ["RISING_SHARE", "auto_levels", "plateau_reason"]

#: achieved requests/s a level must add over the best level before it to count as still rising
RISING_SHARE = 0.05


def auto_levels(sync_rps: float, max_rps: float, count: int, max_users: int) -> list[int]:
    """The users of an automatic sweep's levels between its probes (1 user and ``max_users``).

    ``count`` − 2 request rates spread evenly over (``sync_rps``, ``max_rps``], each turned into the
    users that offer it at the synchronous per-user rate; rates that round to the same users (or to a
    probe's) leave their slots to levels spread geometrically from the last of them to ``max_users``."""
    wanted = max(0, count - 2)
    little: list[int] = []
    if sync_rps > 0 and max_rps > sync_rps:
        for k in range(1, wanted + 1):
            rate = sync_rps + (max_rps - sync_rps) * k / wanted
            users = math.floor(rate / sync_rps + 0.5)
            if 1 < users < max_users and users not in little:
                little.append(users)
    spare = wanted - len(little)
    low = little[-1] if little else 1
    beyond: list[int] = []
    for k in range(1, spare + 1):  # geometric between the last level and the saturating probe
        users = math.floor(low * (max_users / low) ** (k / (spare + 1)) + 0.5)
        if low < users < max_users and users not in beyond:
            beyond.append(users)
    return little + beyond


def plateau_reason(levels: list[SweepLevel]) -> str | None:
    """Why the sweep may stop now (``None``: go on): the last two levels (by users, the saturating probe
    left out) both broke an SLO and neither achieved :data:`RISING_SHARE` more requests/s than the best
    level below them."""
    ascending = [level for level in levels if level.kind != "throughput"]  # run in increasing users
    if len(ascending) < 3:
        return None
    best = max(level.requests_per_s for level in ascending[:-2])
    last = ascending[-2:]
    if all(not level.held and level.requests_per_s <= best * (1 + RISING_SHARE) for level in last):
        return (
            f"stopped after {last[1].users} users: {last[0].users} and {last[1].users} users broke an SLO "
            f"and achieved no more than {best:.3g} req/s (+{RISING_SHARE:.0%}); more users would only queue"
        )
    return None
