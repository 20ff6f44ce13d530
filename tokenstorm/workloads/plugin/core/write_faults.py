"""A failed write is a run-level fault: the run stops, says in one line what could not be written
and where, keeps what is on disk, marks ``run.json`` failed and exits 3.

A full disk (or quota, or a file system gone read-only) used to cost a traceback per request and a
run that went on recording nothing, or hung. Now the first write that fails — request records,
``load.jsonl`` samples, ``run.json``, the report — ends the run as a lost worker does: the users are
stopped at once, no report is built (its verdict would judge partial data) and the exit code is 3.

``run.json`` needs room to say so: each run keeps a small reserve file (``.reserve``, 32 KiB) in its
directory from its start, deleted just before a failed run's ``run.json`` is written (which then
fits) and at every run's end.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment

from ...rundir import EXIT_RUN_FAILED
from ...rundir.faults import WriteFailed
from . import locust_compat
from .context import RunContext
from .progress_display import console_logger

__all__ = ["RESERVE_FILE", "WriteFailed", "end_run", "fail_run", "failure", "start_run"]

log = logging.getLogger("tokenstorm")

#: the reserve's name in the run directory, and its size
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 32 * 1024

#: per environment: the current run's first failed write
_FAILURES: weakref.WeakKeyDictionary[Environment, WriteFailed] = weakref.WeakKeyDictionary()
#: the environments whose failed run has been ended (run.json written)
_ENDED: weakref.WeakSet[Environment] = weakref.WeakSet()


def start_run(environment: Environment, ctx: RunContext, status: str) -> bool:
    """At a run's start (its directory and record writer just made): a failed record write will stop
    the run; the reserve is laid down and ``run.json`` written with ``status``. False: it could not
    be (the run stops, said in one line)."""
    _FAILURES.pop(environment, None)
    _ENDED.discard(environment)
    if ctx.writer is not None:
        ctx.writer.on_failure = lambda failed: fail_run(environment, ctx, failed)
    if ctx.run_dir is not None:
        _make_reserve(ctx.run_dir / RESERVE_FILE)
    try:
        ctx.write_run_json(_options(environment), environment.host, status)
    except WriteFailed as exc:
        fail_run(environment, ctx, exc)
        return False
    return True


def _options(environment: Environment) -> dict[str, Any]:
    opts = environment.parsed_options
    return vars(opts) if opts is not None else {}


def _make_reserve(path: Path) -> None:
    """``RESERVE_BYTES`` of disk held for ``run.json`` (none when even that does not fit)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        return
    try:
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError:  # a file system without fallocate: real bytes
            os.write(fd, bytes(RESERVE_BYTES))
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
    finally:
        os.close(fd)


def _release_reserve(run_dir: Path | None) -> None:
    """Give the reserve's room back (a failed write, or the run's end)."""
    if run_dir is not None:
        with contextlib.suppress(OSError):
            (run_dir / RESERVE_FILE).unlink()


def failure(environment: Environment) -> WriteFailed | None:
    """The current run's first failed write, or None."""
    return _FAILURES.get(environment)


def fail_run(environment: Environment, ctx: RunContext, failed: WriteFailed) -> None:
    """The first failed write of the run: say it in one line, stop the users, exit 3 at the end.
    Later failures (everything else on the same full disk) are not said again."""
    if environment in _FAILURES:
        return
    _FAILURES[environment] = failed
    ctx.problem = str(failed)
    environment.process_exit_code = EXIT_RUN_FAILED
    runner = environment.runner
    running = runner is not None and locust_compat.is_running(runner)
    then = "the run stops, what was written before it is kept" if running else "the records are kept"
    console_logger().error("RUN_FAILED — %s; %s (exit code %d)", failed, then, EXIT_RUN_FAILED)
    if runner is not None and running:
        opts = environment.parsed_options
        gevent.spawn(runner.quit if getattr(opts, "headless", True) else runner.stop)


def end_run(environment: Environment, ctx: RunContext, *steps: Callable[[Environment, RunContext], None]) -> None:
    """At the run's end: the reserve given back, then ``steps`` (``run.json`` as it ended, the outputs)
    — or, once a write failed (in them too), ``run.json`` marked failed and nothing else."""
    _release_reserve(ctx.run_dir)
    if environment not in _FAILURES:
        try:
            for step in steps:
                step(environment, ctx)
        except WriteFailed as exc:
            fail_run(environment, ctx, exc)
    _end_failed_run(environment, ctx)


def _end_failed_run(environment: Environment, ctx: RunContext) -> bool:
    """At the run's end: when a write failed, mark ``run.json`` ``failed`` (its ``problem`` says the
    line), when there is room, and build no report; True then. False: no write failed."""
    if environment not in _FAILURES:
        return False
    if environment in _ENDED:
        return True
    _ENDED.add(environment)
    try:
        ctx.write_run_json(_options(environment), environment.host, "failed", stopped_epoch_s=time.time())
    except WriteFailed:
        log.info("tokenstorm: no room to mark run.json failed either; the exit code says it (%d)", EXIT_RUN_FAILED)
    return True
