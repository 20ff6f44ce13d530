"""``tokenstorm COMMAND ...``: one command for what a checkout runs as ``locust -f locustfiles/NAME.py``,
``python -m reports build|compare`` and ``python -m emulator``.

``tokenstorm run NAME_OR_PATH ARGS...`` is ``locust -f FILE ARGS...`` with ``FILE`` a bundled locustfile
(or the path given), run by Locust in this process: its exit codes (0/1/3/4/5), its Ctrl-C handling and
its argument errors (2) are Locust's and tokenstorm's plugin's, unchanged, and no child process gets the
command line. ``report``, ``compare`` and ``emulator`` call those tools' own entry points.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Sequence

from ._locustfiles import UnknownLocustfile, resolve, shadowed

__all__ = ["EXIT_USAGE", "locust_argv", "main"]

#: a command line tokenstorm cannot run (argparse's code, as Locust's own errors)
EXIT_USAGE = 2
_HELP = ("-h", "--help")
_LOCUSTFILE_FLAGS = ("-f", "--locustfile")


class UsageError(Exception):
    """A command line that cannot run; ``str()`` is the one line after ``tokenstorm ...: ``."""


def locust_argv(args: Sequence[str]) -> list[str]:
    """Locust's arguments for ``tokenstorm run ARGS``: ``-f FILE`` for the first, the rest unchanged.
    Raises :class:`UsageError` when there is no locustfile, or it is unknown, or ``-f`` is given too."""
    if not args or args[0].startswith("-"):
        raise UsageError("which locustfile? tokenstorm run NAME_OR_PATH [OPTIONS...], e.g. tokenstorm run mixed "
                         "(tokenstorm run --help lists the bundled ones)")  # fmt: skip
    rest = list(args[1:])
    if any(a in _LOCUSTFILE_FLAGS or a.startswith("--locustfile=") for a in rest):
        raise UsageError("the locustfile is the first argument, not -f: tokenstorm run mixed,shape_steps ...")
    try:
        locustfile = resolve(args[0])
    except UnknownLocustfile as exc:
        raise UsageError(str(exc)) from None
    return ["-f", locustfile, *rest]


def _run(args: list[str]) -> int:
    if any(a in _HELP for a in args):
        from ._help import run_help

        print(run_help(), end="")
        return 0
    argv = locust_argv(args)
    for name in shadowed(args[0]):
        print(f"tokenstorm run: running the bundled {name.removesuffix('.py')}.py; ./{name} for the file in this "
              "folder", file=sys.stderr)  # fmt: skip
    return _run_locust(argv)


def _run_locust(argv: list[str]) -> int:
    """Locust's ``main()`` on ``argv``, in this process; it ends it with Locust's exit code."""
    # Here, not at the top: importing Locust monkey-patches the process (gevent), which only a run may do.
    from locust.main import main as locust_main

    sys.argv = ["tokenstorm run", *argv]  # Locust reads sys.argv; its error messages name the command
    locust_main()
    return 0  # Locust's main() exits itself; a return means it finished without saying how


def _report(args: list[str]) -> int:
    from reports.__main__ import main as reports_main

    return reports_main(["build", *args])


def _compare(args: list[str]) -> int:
    from reports.__main__ import main as reports_main

    return reports_main(["compare", *args])


def _emulator(args: list[str]) -> int:
    from emulator.__main__ import main as emulator_main

    emulator_main(args)
    return 0


#: command -> what runs it (each loads its own tool only when chosen: a report needs no Locust)
COMMANDS: dict[str, Callable[[list[str]], int]] = {"run": _run, "report": _report, "compare": _compare,
                                                    "emulator": _emulator}  # fmt: skip


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"tokenstorm {version('tokenstorm')}"
    except PackageNotFoundError:  # a checkout that was never installed
        return "tokenstorm (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tokenstorm``: ``argv`` (default ``sys.argv[1:]``) routed to its command; returns
    the exit code (``tokenstorm run`` ends the process with Locust's)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in _HELP:
        from ._help import top_help

        print(top_help(), end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else EXIT_USAGE
    if args[0] in ("-V", "--version"):
        print(_version())
        return 0
    command = COMMANDS.get(args[0])
    try:
        if command is None:
            close = difflib.get_close_matches(args[0], COMMANDS, n=1)
            raise UsageError(f"no command {args[0]!r} (commands: {', '.join(COMMANDS)}; tokenstorm --help)"
                             + (f"; did you mean {close[0]}?" if close else ""))  # fmt: skip
        return command(args[1:])
    except UsageError as exc:
        where = "tokenstorm" if command is None else f"tokenstorm {args[0]}"
        print(f"{where}: {exc}", file=sys.stderr)
        return EXIT_USAGE
