"""One arrival schedule for the whole run: which load-generating process sends which arrival.

Open-loop arrivals (``--arrival-rate``) and trace replay (``--trace``) are one schedule for the run: arrival ``j``
at offset ``t_j`` from the run's zero (an instant on the master's clock, handed to the workers with the options).
Every process that sends (one :class:`~..shapes.steps.ScheduledSender` each) walks the whole schedule and sends
the arrivals ``j`` with ``j % count == rank`` under the share in effect at ``t_j``: the superposed arrivals are the
schedule itself — Poisson or fixed-rate at the asked rate — however many workers there are.

The master hands out the shares: rank by Locust's worker index among the senders that are up and still heard
from, at the start (once every expected worker's sender is up, or at the zero) and again whenever one joins or is
lost. A share takes effect :data:`LEAD_S` after the master sent it, so every worker switches at the same arrival;
a worker decides whether an arrival is its own :data:`DECIDE_S` before its time, when no later share can reach
it any more. Between a worker's loss and the master noticing (Locust's heartbeats, a few seconds) that worker's
arrivals go unsent; every arrival is sent once.
"""

from __future__ import annotations

import bisect
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
from locust.env import Environment
from locust.event import Events

from . import locust_compat

__all__ = [
    "DECIDE_S",
    "LEAD_S",
    "ZERO_OPTION",
    "Share",
    "Shares",
    "install",
    "on_senders_change",
    "schedule_zero",
    "sender_down",
    "sender_up",
    "shares",
]

log = logging.getLogger("tokenstorm")

#: the option (not a flag) by which a master hands its workers the schedule's zero (epoch seconds, its clock)
ZERO_OPTION = "trace_zero_epoch_s"
#: seconds from the master's decision to the share taking effect (its message reaches every worker first)
LEAD_S = 2.0
#: seconds before an arrival's time at which a worker decides whether it is its own (final by then: the master's
#: message has had LEAD_S - DECIDE_S to arrive), early enough to build a trace's long prompts ahead
DECIDE_S = 1.5
#: seconds from a distributed run's start to its schedule's zero: the workers' own start-up (their first
#: requests would be late otherwise)
ZERO_LEAD_S = 1.0
_SHARE_MESSAGE = "tokenstorm_share"
_SENDER_MESSAGE = "tokenstorm_sender"
_WATCH_S = 0.2


@dataclass(frozen=True)
class Share:
    """From ``from_epoch`` (the master's clock) this process sends arrivals ``j % count == rank``."""

    from_epoch: float
    rank: int
    count: int


class Shares:
    """A process's share table: one share of one on a local runner; a worker's from its master."""

    def __init__(self, rank: int = 0, count: int = 1) -> None:
        self._starts: list[float] = [float("-inf")]
        self._table: list[Share] = [Share(float("-inf"), rank, max(1, count))]

    def set(self, share: Share) -> None:
        """Take ``share`` from its start on (it replaces any share starting at or after it)."""
        keep = bisect.bisect_left(self._starts, share.from_epoch)
        self._starts[keep:] = [share.from_epoch]
        self._table[keep:] = [share]

    def at(self, epoch: float) -> Share:
        """The share in effect at ``epoch``."""
        return self._table[bisect.bisect_right(self._starts, epoch) - 1]

    def owns(self, j: int, epoch: float) -> bool:
        """Whether arrival ``j``, due at ``epoch``, is this process's to send."""
        share = self.at(epoch)
        return j % share.count == share.rank


_SHARES: weakref.WeakKeyDictionary[Environment, Shares] = weakref.WeakKeyDictionary()


def shares(environment: Environment) -> Shares:
    """This process's share table (a worker's starts as its index of the expected workers: the master's first
    shares say the same when every worker is up)."""
    table = _SHARES.get(environment)
    if table is None:
        runner = environment.runner
        expected = int(getattr(environment.parsed_options, "expect_workers", 1) or 1)
        if locust_compat.is_worker(runner):
            table = Shares(locust_compat.worker_index(runner) % expected, expected)
        else:
            table = Shares()
        _SHARES[environment] = table
    return table


def schedule_zero(environment: Environment) -> float:
    """The schedule's zero on this process's ``perf_counter``: the master's (a worker's), else now."""
    zero = getattr(environment.parsed_options, ZERO_OPTION, None)
    now = time.perf_counter()
    if locust_compat.is_worker(environment.runner) and isinstance(zero, float):
        return now + zero - time.time()  # the master's zero, the same instant for every worker
    return now


def zero_epoch(environment: Environment, zero_perf: float) -> float:
    """The schedule's zero as the master's epoch seconds (a local run's: its own)."""
    zero = getattr(environment.parsed_options, ZERO_OPTION, None)
    if locust_compat.is_worker(environment.runner) and isinstance(zero, float):
        return zero
    return time.time() - (time.perf_counter() - zero_perf)


def sender_up(environment: Environment) -> None:
    """A worker's sender started: its master counts it in the shares."""
    _tell(environment, up=True)


def sender_down(environment: Environment) -> None:
    """A worker's sender stopped: its master hands its share to the others."""
    _tell(environment, up=False)


def _tell(environment: Environment, up: bool) -> None:
    runner = environment.runner
    if locust_compat.is_worker(runner):
        try:
            runner.send_message(_SENDER_MESSAGE, {"up": up})  # type: ignore[union-attr]
        except Exception as exc:  # a master gone: it hands out no more shares anyway
            log.debug("tokenstorm: could not tell the master the sender is %s: %r", "up" if up else "down", exc)


class _Coordinator:
    """On a master: the senders that are up, and the shares handed out to them."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.senders: set[str] = set()
        self.active: list[str] = []
        self.listeners: list[Callable[[list[str]], None]] = []
        self._watch: gevent.Greenlet | None = None

    def on_sender(self, msg: Any, **_kw: Any) -> None:
        if self._watch is None:
            return  # the run is stopping: its senders stop, nothing to share out
        worker = str(msg.node_id)
        if (msg.data or {}).get("up"):
            self.senders.add(worker)
        else:
            self.senders.discard(worker)
        self.check()

    def start(self, **_kw: Any) -> None:
        """``test_start`` (before the spawn messages, which carry the options): the schedule's zero, ZERO_LEAD_S
        ahead (the workers' own start-up: their first arrivals would be late otherwise)."""
        setattr(self.environment.parsed_options, ZERO_OPTION, time.time() + ZERO_LEAD_S)
        self.senders.clear()
        self.active = []
        if self._watch is None or self._watch.dead:
            self._watch = gevent.spawn(self._watch_loop)

    def stop(self, **_kw: Any) -> None:
        if self._watch is not None:
            self._watch.kill(block=False)
            self._watch = None

    def _watch_loop(self) -> None:
        while True:
            gevent.sleep(_WATCH_S)
            self.check()

    def check(self) -> None:
        """Hand out new shares when the senders up and live have changed (the first once all are up, or at zero)."""
        runner = self.environment.runner
        live = locust_compat.live_workers(runner)
        indexes: dict[str, int] = getattr(runner, "worker_indexes", {})
        active = sorted((w for w in self.senders if w in live), key=lambda w: (indexes.get(w, 1 << 30), w))
        if active == self.active:
            return
        opts = self.environment.parsed_options
        expected = int(getattr(opts, "expect_workers", 1) or 1)
        zero = getattr(opts, ZERO_OPTION, None)
        if not self.active and len(active) < expected and isinstance(zero, float) and time.time() < zero:
            return  # the first shares once every expected sender is up (or the schedule has begun)
        if self.active:
            log.warning(
                "tokenstorm: %d worker(s) send the run's arrivals now (were %d): each sends 1/%d of them",
                len(active),
                len(self.active),
                max(1, len(active)),
            )
        self.active = active
        start = time.time() + LEAD_S
        for rank, worker in enumerate(active):
            share = {"from_epoch": start, "rank": rank, "count": len(active)}
            runner.send_message(_SHARE_MESSAGE, share, client_id=worker)  # type: ignore[union-attr]
        for listener in self.listeners:
            listener(active)


_COORDINATORS: weakref.WeakKeyDictionary[Environment, _Coordinator] = weakref.WeakKeyDictionary()


def _coordinator(environment: Environment) -> _Coordinator:
    coordinator = _COORDINATORS.get(environment)
    if coordinator is None:
        coordinator = _COORDINATORS[environment] = _Coordinator(environment)
    return coordinator


def on_senders_change(environment: Environment, listener: Callable[[list[str]], None]) -> None:
    """On a master: call ``listener`` with the senders (worker ids) each time the shares are handed out anew."""
    _coordinator(environment).listeners.append(listener)


def _one_per_process(environment: Environment) -> None:
    """On a master: one scheduled sender per expected worker (Locust's ``fixed_count`` is the run's total),
    all spawned within the schedule's lead."""
    opts = environment.parsed_options
    if opts is None:
        return
    workers = max(1, int(getattr(opts, "expect_workers", 1) or 1))
    senders = [u for u in environment.user_classes if getattr(u, "one_per_process", False)]
    for user_class in senders:
        user_class.fixed_count = workers
    if senders:
        opts.num_users = max(int(getattr(opts, "num_users", 0) or 0), workers * len(senders))
        opts.spawn_rate = max(float(getattr(opts, "spawn_rate", 1) or 1), float(workers * len(senders)))


def _on_init(environment: Environment, **_kw: Any) -> None:
    runner = environment.runner
    if locust_compat.is_worker(runner):
        environment.events.test_start.add_listener(lambda **_kw: _SHARES.pop(environment, None))  # a new run

        def on_share(msg: Any, **_kw: Any) -> None:
            data = msg.data or {}
            shares(environment).set(Share(float(data["from_epoch"]), int(data["rank"]), int(data["count"])))

        runner.register_message(_SHARE_MESSAGE, on_share)  # type: ignore[union-attr]
    elif locust_compat.is_master(runner):
        _one_per_process(environment)
        coordinator = _coordinator(environment)
        runner.register_message(_SENDER_MESSAGE, coordinator.on_sender)  # type: ignore[union-attr]
        environment.events.test_start.add_listener(coordinator.start)
        environment.events.test_stopping.add_listener(coordinator.stop)


_INSTALLED: weakref.WeakSet[Events] = weakref.WeakSet()


def install(event_hooks: Events) -> None:
    """Register the shares' messages on workers and the master's hand-out (idempotent)."""
    if event_hooks not in _INSTALLED:
        _INSTALLED.add(event_hooks)
        event_hooks.init.add_listener(_on_init)
