"""``tokenstorm COMMAND ...``: one command for what a checkout runs as ``locust -f locustfiles/NAME.py``,
``python -m tokenstorm.reports build|compare`` and ``python -m tokenstorm.emulator``, and for the example files it
ships.

``tokenstorm run NAME_OR_PATH ARGS...`` is ``locust -f FILE ARGS...`` with ``FILE`` a bundled locustfile
(or the path given), run by Locust in this process: its exit codes (0/1/3/4/5/6), its Ctrl-C handling and
its argument errors (2) are Locust's and tokenstorm's plugin's, unchanged, and no child process gets the
command line. ``report``, ``compare`` and ``emulator`` call those tools' own entry points, whose help and
errors then name ``tokenstorm report`` (...), not ``python -m ...``; ``report`` with no run directory
rebuilds the newest under ``./runs/``. ``examples DIR`` copies the example SLO files and trace sample.
"""

from __future__ import annotations

import difflib
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ._locustfiles import UnknownLocustfile, resolve, shadowed

__all__ = ["EXIT_USAGE", "RUNS_DIR", "locust_argv", "main", "newest_run"]

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
        raise UsageError(
            "which locustfile? tokenstorm run NAME_OR_PATH [OPTIONS...], e.g. tokenstorm run mixed "
            "(tokenstorm run --help lists the bundled ones)"
        )
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
        print(
            f"tokenstorm run: running the bundled {name.removesuffix('.py')}.py; ./{name} for the file in this folder",
            file=sys.stderr,
        )
    return _run_locust(argv)


def _run_locust(argv: list[str]) -> int:
    """Locust's ``main()`` on ``argv``, in this process; it ends it with Locust's exit code."""
    # Here, not at the top: importing Locust monkey-patches the process (gevent), which only a run may do.
    from locust.main import main as locust_main

    sys.argv = ["tokenstorm run", *argv]  # Locust reads sys.argv; its error messages name the command
    locust_main()
    return 0  # Locust's main() exits itself; a return means it finished without saying how


#: where ``tokenstorm run`` writes its run directories by default (``--run-dir``), relative to where it runs
RUNS_DIR = Path("runs")
#: ``python -m tokenstorm.reports``' subcommands as tokenstorm names them (its help and errors say these)
_REPORTS_NAMES = {"build": "report", "compare": "compare"}
#: ``reports build``'s options that take a value (the run directory is the one argument that is none of them)
_BUILD_VALUE_OPTIONS = ("--slo", "--gpu-cost-per-hour")


def newest_run(root: Path = RUNS_DIR) -> Path:
    """The run directory under ``root`` that started last (run.json's start, else the folder's time).
    Raises :class:`UsageError` when there is none."""
    from tokenstorm.workloads.rundir import RUN_FILE, read_run_meta

    runs = [p for p in root.iterdir() if (p / RUN_FILE).is_file()] if root.is_dir() else []
    if not runs:
        raise UsageError(
            f"no run under ./{root}/ to rebuild (tokenstorm run mixed makes one); or name one: "
            "tokenstorm report RUN_DIR"
        )

    def started(run: Path) -> tuple[float, str]:
        meta = read_run_meta(run)
        stamp = meta.started_epoch_s if meta is not None and meta.started_epoch_s else run.stat().st_mtime
        return float(stamp), run.name

    return max(runs, key=started)


def _names_a_run(args: list[str]) -> bool:
    """``args`` (``reports build``'s, without ``build``) give the run directory."""
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            return next(rest, None) is not None
        if arg in _BUILD_VALUE_OPTIONS:
            next(rest, None)
        elif not arg.startswith("-"):
            return True
    return False


def _reports(command: str, args: list[str]) -> int:
    from tokenstorm.reports.__main__ import main as reports_main

    return reports_main([command, *args], prog="tokenstorm", names=_REPORTS_NAMES)


def _report(args: list[str]) -> int:
    if not any(a in _HELP for a in args) and not _names_a_run(args):
        run = newest_run()
        print(f"tokenstorm report: rebuilding the newest run, {run}", file=sys.stderr)
        args = [str(run), *args]
    return _reports("build", args)


def _compare(args: list[str]) -> int:
    return _reports("compare", args)


def _emulator(args: list[str]) -> int:
    from tokenstorm.emulator.__main__ import main as emulator_main

    emulator_main(args, prog="tokenstorm emulator")
    return 0


def _examples(args: list[str]) -> int:
    from ._examples import ExistingFiles, copy_examples

    if any(a in _HELP for a in args):
        print(
            "usage: tokenstorm examples DIR [--force]\n\nCopies the example SLO files and trace sample into DIR "
            "(made if missing), one line each with a command that uses it; --force replaces files already there."
        )
        return 0
    force = "--force" in args
    rest = [a for a in args if a != "--force"]
    unknown = [a for a in rest if a.startswith("-")]
    if unknown or len(rest) != 1:
        what = f"no option {unknown[0]}" if unknown else "which folder?"
        raise UsageError(f"{what}: tokenstorm examples DIR [--force], e.g. tokenstorm examples ex")
    target = Path(rest[0])
    try:
        written = copy_examples(target, force=force)
    except (ExistingFiles, NotADirectoryError) as exc:
        raise UsageError(str(exc)) from None
    print(f"tokenstorm examples: wrote {len(written)} files in {target}/ (edit them; each line: a command using it)")
    width = max(len(str(path)) for path, _ in written)
    for path, example in written:
        print(f"  {path!s:<{width}}  {example.what} — try: {example.use.format(path=shlex.quote(str(path)))}")
    return 0


#: command -> what runs it (each loads its own tool only when chosen: a report needs no Locust)
COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "run": _run,
    "report": _report,
    "compare": _compare,
    "emulator": _emulator,
    "examples": _examples,
}


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
            raise UsageError(
                f"no command {args[0]!r} (commands: {', '.join(COMMANDS)}; tokenstorm --help)"
                + (f"; did you mean {close[0]}?" if close else "")
            )
        return command(args[1:])
    except UsageError as exc:
        where = "tokenstorm" if command is None else f"tokenstorm {args[0]}"
        print(f"{where}: {exc}", file=sys.stderr)
        return EXIT_USAGE
