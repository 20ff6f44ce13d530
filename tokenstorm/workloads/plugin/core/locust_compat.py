"""The one place tokenstorm touches Locust beyond its documented extension API.

Locust's runners keep per-worker state (``runner.clients``, ``WorkerNode.state``, the state
constants) and worker indexes as undocumented attributes; everything tokenstorm needs from
them goes through these functions, so a Locust upgrade that moves them breaks here and only
here. (ruff's ``SLF001`` is on everywhere: nothing in tokenstorm reads another object's
private members; when this adapter ever must, it is the one place allowed to.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from locust.env import Environment
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

__all__ = [
    "after_template_args",
    "is_master",
    "is_running",
    "is_worker",
    "live_workers",
    "loopback_for_local_workers",
    "master_address",
    "missing_workers",
    "process_role",
    "worker_client_id",
    "worker_index",
]

#: Locust's own default for --master-bind-host (every interface)
_ALL_INTERFACES = "*"


def loopback_for_local_workers(parser: Any, **_kw: Any) -> None:
    """``init_command_line_parser`` listener: ``--locust-stats`` brings Locust's periodic and closing tables
    back (without it they are off: tokenstorm's closing block has the report's exact figures); the
    master of a ``--processes`` run binds its worker port
    to loopback (its workers are its own forked children), a ``--master`` run binds where Locust does,
    unless --master-bind-host says otherwise. Locust reads the value right after parsing, with no event
    in between, so the parser's ``parse_args`` of this one parser is wrapped to settle it."""
    parse = getattr(parser, "parse_args", None)
    if parse is None or getattr(parse, "tokenstorm_wrapped", False):
        return

    def parse_args(*args: Any, **kw: Any) -> Any:
        options = parse(*args, **kw)
        if getattr(options, "master_bind_host", _ALL_INTERFACES) is None:
            options.master_bind_host = "127.0.0.1" if getattr(options, "processes", None) else _ALL_INTERFACES
        if getattr(options, "locust_stats", False):
            options.only_summary = False  # tokenstorm's default is True (flags.py): the periodic tables back
        else:
            _quiet_closing_tables()
        return options

    parse_args.tokenstorm_wrapped = True  # type: ignore[attr-defined]
    parser.parse_args = parse_args


def _quiet_closing_tables() -> None:
    """Locust's ``shutdown()`` prints its request and percentile tables after tokenstorm's closing block
    and verdict (~30 lines of percentiles rounded to two digits that disagree with the report), with no
    option or event to stop it: its two printers become no-ops for this process. Its error report (only
    printed when there were errors) stays; ``--locust-stats`` keeps all of them."""
    import locust.stats

    def quiet(*_a: Any, **_kw: Any) -> None:
        return None

    locust.stats.print_stats = quiet
    locust.stats.print_percentile_stats = quiet


def is_master(runner: Any) -> bool:
    """A master of distributed workers."""
    return isinstance(runner, MasterRunner)


def is_worker(runner: Any) -> bool:
    """A worker process (its records go to the master)."""
    return isinstance(runner, WorkerRunner)


def process_role(environment: Environment) -> str:
    """``"master"``, ``"worker"`` or ``"local"``."""
    runner = environment.runner
    return "worker" if is_worker(runner) else "master" if is_master(runner) else "local"


def is_running(runner: Any) -> bool:
    """Users are spawning or running."""
    return runner is not None and runner.state in (STATE_SPAWNING, STATE_RUNNING)


def worker_index(runner: Any) -> int:
    """This worker's index among the workers (0 on a local runner)."""
    return int(runner.worker_index) if is_worker(runner) else 0


def worker_client_id(runner: Any) -> str:
    """This process's id in records: the worker's client id, or ``"local"``."""
    return str(runner.client_id) if is_worker(runner) else "local"


def master_address(runner: Any) -> tuple[str, int]:
    """The master a worker connects to (host, port)."""
    return str(runner.master_host), int(runner.master_port)


def live_workers(runner: Any) -> set[str]:
    """Ids of the workers a master still hears from."""
    if not is_master(runner):
        return set()
    return {str(c.id) for c in list(runner.clients.values()) if c.state != STATE_MISSING}


def missing_workers(runner: Any) -> set[str]:
    """Ids of the workers Locust marked missing (heartbeats stopped)."""
    if not is_master(runner):
        return set()
    return {str(c.id) for c in list(runner.clients.values()) if c.state == STATE_MISSING}


def log_row_outside_total(environment: Environment, method: str, name: str, response_time_ms: float) -> None:
    """A row of Locust's table that is a measurement of a request, not a request (TTFT, TPOT): kept
    out of the Aggregated total, so requests/s in the header, the charts and the summary count
    requests, not rows. (Workers ship entries and the total apart; the master merges both.)"""
    environment.stats.get(name, method).log(response_time_ms, 0)  # type: ignore[arg-type]  # floats, as fire()


def planned_end_pending(environment: Environment) -> bool:
    """Whether the run started from the web UI has a planned end still to come (its form's run time: Locust keeps
    an earlier run's value in ``parsed_options`` when the form leaves it empty, but times only this run's)."""
    timer = getattr(environment.web_ui, "_run_time_greenlet", None)
    return timer is not None and not timer.dead


def after_template_args(web_ui: Any, edit: Callable[[dict[str, Any]], None]) -> None:
    """Run ``edit`` on the web UI's template arguments each time Locust builds them (its
    ``update_template_args``, undocumented, called at each start form render and run), and now if a runner
    exists already (Locust built them then too)."""
    build = web_ui.update_template_args

    def update_template_args() -> None:
        build()
        edit(web_ui.template_args)

    web_ui.update_template_args = update_template_args
    if web_ui.environment.runner is not None:
        update_template_args()
