"""Distributed runs: workers ship their records (as Arrow batches) and how well they kept time to the master
with each stats report; the master stores them and, at the end, waits for every live worker's last batch.

Locust's ``report_to_master`` / ``worker_report`` events carry the data; its
``heartbeat_sent`` event (the master answering a worker's heartbeat) says when each worker
was last heard from.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from locust.env import Environment

from ...client.clock import MIN_INTERVAL_S, ClockProbe
from ...rundir.wire import RecordsRefused, decode_records, encode_records
from . import ingest, locust_compat, master_watch
from .context import RunContext, context

__all__ = [
    "on_heartbeat_sent",
    "on_report_to_master",
    "on_worker_report",
    "remember_environment",
    "wait_for_workers_final_records",
]

log = logging.getLogger("tokenstorm")

#: The environment of each role in this process (Locust fires report events without one).
_ENVIRONMENTS: dict[str, Environment] = {}
#: workers whose records were refused (said once each)
_REFUSED: set[str] = set()
#: A worker's clock probe, started at each of its test starts (its first report covers the run only).
_PROBES: dict[str, ClockProbe] = {}


def remember_environment(environment: Environment, **_kw: Any) -> None:
    """``init`` listener: remember which environment is the worker's / master's."""
    role = locust_compat.process_role(environment)
    _ENVIRONMENTS[role] = environment
    if role == "worker":
        old = _PROBES.pop("worker", None)
        if old is not None:
            old.stop()
        _PROBES["worker"] = ClockProbe()
        environment.events.test_start.add_listener(_start_probe)


def _start_probe(**_kw: Any) -> None:
    """``test_start`` listener on a worker: its next report covers the run from here, no idle time before."""
    probe = _PROBES.get("worker")
    if probe is not None:
        probe.start()


def on_report_to_master(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    """On a worker: attach the records made since the last report (held while the master is silent), the
    users left and this process's timekeeping since the last report (once a run has started)."""
    env = _ENVIRONMENTS.get("worker")
    if env is None:
        return
    # A master silent for a while may be gone, and a report sent to it lost: its records wait for the next.
    held = master_watch.records_held()
    data[master_watch.RECORDS_KEY] = b"" if held else encode_records(context(env).take_outbox_batches())
    runner = env.runner
    # 0 once the worker's users are all stopped: this report then carries its last records. A report whose
    # records are held says no count: the master waits for the one that carries them.
    if not held:
        data["tokenstorm_users"] = runner.user_count if runner is not None else 0
    probe = _PROBES.get("worker")
    if probe is not None and probe.running:
        sample = probe.sample()
        if sample.interval_s >= MIN_INTERVAL_S:  # a report just after the start: its time goes in the next
            data["tokenstorm_clock"] = sample.as_dict()


def on_worker_report(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    """On the master: store a worker's records and timekeeping; note its final report after a stop."""
    env = _ENVIRONMENTS.get("master")
    if env is None:
        return
    ctx = context(env)
    worker = str(client_id)
    ctx.last_heard[worker] = time.time()
    clock = data.get("tokenstorm_clock")
    if isinstance(clock, dict):
        ctx.clock_by_worker[worker] = {
            str(k): float(v) if isinstance(v, (int, float)) else None for k, v in clock.items()
        }
    if data.get("tokenstorm_users") == 0 and ctx.stopping:
        ctx.flushed_workers.add(worker)
    payload = data.get(master_watch.RECORDS_KEY)
    if payload:
        try:
            batch = decode_records(payload)
        except RecordsRefused as exc:
            if worker not in _REFUSED:
                _REFUSED.add(worker)
                log.error("tokenstorm: worker %s: %s; its records are not stored", worker, exc)
            return
        ingest.receive_batch(ctx, batch)
    lines = data.get("tokenstorm_records")  # a worker of an older tokenstorm: JSON lines
    if lines:
        ingest.receive_lines(ctx, lines)


def on_heartbeat_sent(client_id: str, timestamp: float, **_kw: Any) -> None:
    """On the master: Locust answered worker ``client_id``'s heartbeat — it was alive then."""
    env = _ENVIRONMENTS.get("master")
    if env is not None:
        context(env).last_heard[str(client_id)] = float(timestamp)


def wait_for_workers_final_records(environment: Environment, ctx: RunContext, timeout_s: float = 15.0) -> None:
    """On a master: wait until every live worker has sent the report made after its users stopped."""
    runner = environment.runner
    if not locust_compat.is_master(runner):
        return
    deadline = time.monotonic() + timeout_s
    live: set[str] = set()
    while time.monotonic() < deadline:
        live = locust_compat.live_workers(runner)
        if live <= ctx.flushed_workers:
            return
        gevent.sleep(0.1)
    missing = sorted(live - ctx.flushed_workers)
    log.warning(
        "tokenstorm: workers %s sent no final records within %g s; the report has what arrived",
        ", ".join(missing),
        timeout_s,
    )
