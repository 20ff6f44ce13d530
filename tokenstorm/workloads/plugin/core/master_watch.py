"""No load without its master: a worker stops sending when the master it serves is gone.

Locust's workers keep their users running until 60 s without a heartbeat from the master pass
(``MASTER_HEARTBEAT_TIMEOUT``): a master killed outright (SIGKILL, OOM killer) left its workers
sending a minute's load to what may be a production server. Two guards:

* **Workers forked by ``--processes``** get a parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG)``):
  the kernel sends them SIGTERM the moment the master process dies, and Locust's SIGTERM path stops
  their users. The fork hook is armed from :func:`install_fork_hook` (at plugin import, before Locust
  forks) until the first ``init`` event (:func:`disarm_fork_hook`), so no other child is touched.
* **Every worker** watches the master's heartbeats (the master answers each worker's heartbeat, one a
  second): when none has come for :data:`LOST_MASTER_AFTER_S` while its users run, it says so in one
  line, stops its users and exits with code 4. Records are held back from the reports while the master
  is silent (a report sent to a dead master is lost) and, if it never answers again, written beside
  the runs (``<--run-dir>/unsent-<worker>.jsonl``).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment

from ...rundir import EXIT_CODES
from . import locust_compat
from .context import context

__all__ = [
    "LOST_MASTER_AFTER_S",
    "RECORDS_KEY",
    "disarm_fork_hook",
    "install_fork_hook",
    "records_held",
    "save_unsent_records",
    "watch_master",
]

log = logging.getLogger("tokenstorm")

#: the report's field that carries a worker's records (an Arrow IPC stream: ``tokenstorm.workloads.rundir.wire``)
RECORDS_KEY = "tokenstorm_batch"

#: A worker whose users run and that has heard nothing from its master for this long stops (Locust's
#: master answers every heartbeat, one a second, and marks a worker missing after ~4 s of silence). Not
#: less: a master stalled a few seconds (a starved CPU, a long GC) must not end a healthy run for good.
LOST_MASTER_AFTER_S = 8.0
#: a worker keeps its records (ships them with a later report) while its master is silent this long
HOLD_RECORDS_AFTER_S = 2.5
#: how often the watchdog looks
_CHECK_EVERY_S = 0.5
#: ``prctl`` option: the signal sent to this process when its parent dies (linux/prctl.h)
_PR_SET_PDEATHSIG = 1

#: the process that may fork Locust's ``--processes`` workers, while it may (None: not armed)
_forking_pid: int | None = None
#: in a worker forked by ``--processes``: its master's pid (None: not such a worker)
_parent_pid: int | None = None
_hook_registered = False
#: this worker's view of its master: when last heard from (monotonic s), and whether given up on
_heard_s = time.monotonic()
_lost = False


def install_fork_hook() -> None:
    """Arm the fork hook (idempotent): children forked from now until the first ``init`` event —
    Locust's ``--processes`` workers, forked before it — die with this process."""
    global _forking_pid, _hook_registered
    if not sys.platform.startswith("linux"):
        return
    _forking_pid = os.getpid()
    if not _hook_registered:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _hook_registered = True


def disarm_fork_hook(**_kw: Any) -> None:
    """``init`` listener (the first): Locust has forked its workers; later children are not workers."""
    global _forking_pid
    _forking_pid = None


def _after_fork_in_child() -> None:
    """In a child forked while armed: SIGTERM when the parent dies — or now, if it died already."""
    global _forking_pid, _parent_pid
    parent, _forking_pid = _forking_pid, None
    if parent is None:
        return
    _parent_pid = parent
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        return  # not allowed here (a sandbox): the heartbeat watchdog still stops this worker
    if os.getppid() != parent:  # the parent died between the fork and the prctl: no signal will come
        os.kill(os.getpid(), signal.SIGTERM)


def watch_master(environment: Environment, **_kw: Any) -> None:
    """``init`` listener: on a worker, start the watchdog that stops the load when the master is gone."""
    runner = environment.runner
    if not locust_compat.is_worker(runner):
        return
    _heard()
    environment.events.heartbeat_received.add_listener(_heard)
    # Locust fires these on a worker for the master's spawn, stop and quit messages
    for event in (environment.events.test_start, environment.events.test_stopping, environment.events.test_stop):
        event.add_listener(_heard)
    # Added after the runner's own (which tells the master this worker quits): "quitting" fires in reverse.
    environment.events.quitting.add_listener(_last_records)
    gevent.spawn(_watchdog, environment)


def _heard(**_kw: Any) -> None:
    global _heard_s
    if not _lost:
        _heard_s = time.monotonic()


def records_held() -> bool:
    """On a worker: keep the records for a later report — the master has been silent a while, or is lost."""
    return _lost or time.monotonic() - _heard_s > HOLD_RECORDS_AFTER_S


def _watchdog(environment: Environment) -> None:
    global _lost
    runner = environment.runner
    assert runner is not None  # a worker's runner, made before ``init``
    while True:
        gevent.sleep(_CHECK_EVERY_S)
        if not locust_compat.is_running(runner) and runner.user_count == 0:
            _heard()  # no load to stop: Locust's own 60 s timeout applies
            continue
        if time.monotonic() - _heard_s < LOST_MASTER_AFTER_S:
            continue
        gevent.sleep(_CHECK_EVERY_S)  # a reply waiting in the socket after a stall here is read first
        silent_s = time.monotonic() - _heard_s
        if silent_s < LOST_MASTER_AFTER_S:
            continue
        _lost = True
        host, port = locust_compat.master_address(runner)
        log.error("tokenstorm: lost the master at %s:%s for %.0f s: stopping the load", host, port, silent_s)
        environment.process_exit_code = EXIT_CODES["incomplete"]
        runner.quit()  # stops the users; Locust's main then shuts this worker down
        return


def _master_gone() -> bool:
    """The master is known gone: given up on, or (a ``--processes`` worker) its process has died."""
    return _lost or (_parent_pid is not None and os.getppid() != _parent_pid)


def _last_records(environment: Environment, **_kw: Any) -> None:
    """``quitting`` on a worker that quits on its own (a signal, Ctrl-C, a lost master): Locust stops its
    users after this and sends no last report. Stop them first, so their in-flight requests are recorded
    (``cancelled``), and ship every record to a master still there — or keep them on disk."""
    runner = environment.runner
    if runner is None:
        return
    if locust_compat.is_running(runner):
        runner.stop()
    if _master_gone():
        save_unsent_records(environment)
        return
    data: dict[str, Any] = {}
    environment.events.report_to_master.fire(client_id=locust_compat.worker_client_id(runner), data=data)
    if data.get(RECORDS_KEY):  # none left when the master's quit message took the last report
        try:
            runner.send_message("stats", data)
        except Exception as exc:  # RPCError: Locust's own retries failed; what was taken is lost
            log.error("tokenstorm: the last request records could not be sent to the master (%s)", exc)


def save_unsent_records(environment: Environment) -> None:
    """On a worker quitting: records the master never took (it is gone) are written to
    ``<--run-dir>/unsent-<worker>.jsonl`` (request-record lines, as ``requests.jsonl``), and said."""
    ctx = context(environment)
    if not ctx.is_worker:
        return
    lines = ctx.take_outbox()
    if not lines:
        return
    worker = locust_compat.worker_client_id(environment.runner)
    path = Path(ctx.options.run_dir or "runs") / f"unsent-{worker}.jsonl"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.writelines(line + "\n" for line in lines)
    except OSError as exc:
        log.error(
            "tokenstorm: %d request records the master never took could not be written to %s (%s)",
            len(lines),
            path,
            exc.strerror,
        )
        return
    log.warning("tokenstorm: %d request records the master never took are in %s", len(lines), path)
