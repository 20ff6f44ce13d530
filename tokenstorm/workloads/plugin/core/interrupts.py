"""An interrupted run is incomplete: SIGTERM or SIGINT (Ctrl-C) before the run's planned end.

A CI job killed by its runner's timeout must not read as passed. A run with a planned end (``-t``, or a
load shape, which ends itself) that gets SIGTERM or SIGINT while its users still run is noted here; the
lifecycle writes ``run.json`` with status ``interrupted`` and the reports make the run incomplete (exit
code 4), judged on what completed. A run with no planned end (no ``-t``, no shape) runs until it is
stopped: a signal is its end, not an interruption. The web UI's Stop button is the user's own end.

Locust's SIGTERM handler is a gevent signal watcher installed after the ``init`` event; the one
installed here, at ``init``, is an older watcher of the same signal and is called before it (libev
calls a signal's pending watchers newest last), so the note is taken before Locust's shutdown.
SIGINT has no gevent watcher: a Python handler notes it, then hands ``KeyboardInterrupt`` to the main
greenlet as gevent does with the default handler's — on workers too (a terminal's Ctrl-C reaches them all).
"""

from __future__ import annotations

import functools
import signal
import time
import weakref
from types import FrameType
from typing import Any

import gevent
from locust.env import Environment

from . import locust_compat
from .context import RunContext, context

__all__ = ["interruption", "watch_signals", "write_end"]

#: per environment: how its current run was interrupted ("SIGTERM 3 s into its planned 30 s"); absent: not
_INTERRUPTED: weakref.WeakKeyDictionary[Environment, str] = weakref.WeakKeyDictionary()
#: the gevent signal watchers, kept alive for the process's life
_WATCHERS: list[Any] = []


def interruption(environment: Environment) -> str | None:
    """How the current run was interrupted before its planned end, or None (it ran to its end, or has none)."""
    return _INTERRUPTED.get(environment)


def watch_signals(environment: Environment, **_kw: Any) -> None:
    """``init`` listener: on a master or local runner, note SIGTERM and SIGINT that arrive mid-run; on every
    runner, worker too, take a Ctrl-C in the main greenlet, not in a user's."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored (nohup, a CI shell's &)
        signal.signal(signal.SIGINT, functools.partial(_on_sigint, environment))
    if locust_compat.is_worker(environment.runner):
        return
    environment.events.test_start.add_listener(lambda **_kw: _INTERRUPTED.pop(environment, None))
    _WATCHERS.append(gevent.signal_handler(signal.SIGTERM, _note, environment, "SIGTERM"))


def _on_sigint(environment: Environment, signum: int, frame: FrameType | None) -> None:
    """SIGINT (a terminal's Ctrl-C reaches the master and every ``--processes`` worker). Python raises
    ``KeyboardInterrupt`` in whichever greenlet was running: mid-run, a user's, which then died without
    its record (a request the server had answered, lost from a worker's last records). Mid-run it is
    handed to the main greenlet instead, as gevent's hub passes one on: Locust's main catches it there and
    stops the users, each in-flight request recorded as cancelled."""
    if not locust_compat.is_running(environment.runner):
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt here, as before
    if not locust_compat.is_worker(environment.runner):
        _note(environment, "SIGINT")
    hub = gevent.get_hub()
    hub.loop.run_callback(hub.parent.throw, KeyboardInterrupt)


def _note(environment: Environment, name: str) -> None:
    """``name`` arrived: an interruption if the run has a planned end and its users still run."""
    if environment in _INTERRUPTED or not locust_compat.is_running(environment.runner):
        return
    started_epoch_s = context(environment).started_epoch_s
    if started_epoch_s is None:
        return
    opts = environment.parsed_options
    run_time_s = getattr(opts, "run_time", None) if opts is not None else None
    started_by_form = not (getattr(opts, "headless", False) or getattr(opts, "autostart", False))
    if started_by_form and environment.web_ui is not None and not locust_compat.planned_end_pending(environment):
        run_time_s = None  # the form left its run time empty this time (an earlier run's stays in the options)
    elapsed_s = time.time() - started_epoch_s
    if run_time_s:
        _INTERRUPTED[environment] = f"{name} {elapsed_s:.0f} s into its planned {run_time_s:g} s"
    elif environment.shape_class is not None:
        shape = type(environment.shape_class).__name__
        _INTERRUPTED[environment] = f"{name} {elapsed_s:.0f} s into the {shape} before its end"


def write_end(environment: Environment, ctx: RunContext) -> None:
    """``run.json`` as the run ended: ``finished``, or ``interrupted`` by a signal before its planned end."""
    how = interruption(environment)
    more: dict[str, Any] = {"interrupted": how} if how else {}
    opts = vars(environment.parsed_options)
    ctx.write_run_json(
        opts, environment.host, "interrupted" if how else "finished", stopped_epoch_s=time.time(), **more
    )
