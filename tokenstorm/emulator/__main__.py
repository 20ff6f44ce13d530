"""``python -m tokenstorm.emulator``: run the emulated vLLM server (prints its URL when ready).

Arguments it cannot run with end it before it starts, with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading

from ._args import PROG, EmulatorArgsError, build_parser, config_from_args, parse_args
from ._config import EmulatorConfig
from ._server import EmulatorServer

__all__ = ["build_parser", "config_from_args", "main"]

#: bad arguments, as argparse exits for them
EXIT_BAD_ARGS = 2
#: it could not start (no such folder for the truth log, the port taken...)
EXIT_CANNOT_START = 1


class _CannotStart(Exception):
    """The server could not start; ``str()`` says why in one line."""


async def _main(args: argparse.Namespace, config: EmulatorConfig) -> None:
    try:
        server = EmulatorServer(config)
    except OSError as exc:
        raise _CannotStart(f"--truth-log {config.truth_log}: {exc.strerror}") from None
    try:
        port = await server.start(args.host, args.port)
    except OSError as exc:
        raise _CannotStart(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    # stderr, not stdout: the ready line below is what a parent waits for, and its format stays.
    print(
        f"tokenstorm emulator: seed {server.seed} (--seed {server.seed} draws the same faults, lengths, text and "
        "tool calls for the same requests in the same order)",
        file=sys.stderr,
        flush=True,
    )
    print(f"tokenstorm emulator (SIMULATED vLLM) listening on http://{args.host}:{port}", flush=True)
    if args.exit_with_stdin:
        # Only once it is running: a start that fails must not leave a thread blocked in stdin's
        # buffer while the interpreter shuts down ("Fatal Python error: _enter_buffered_busy").
        threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    await server.serve_forever()


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main(argv: list[str] | None = None, prog: str = PROG) -> None:
    """Entry point: ``argv`` (default ``sys.argv[1:]``) checked, then the server run until stopped; ``prog``:
    the command its help and errors name (``tokenstorm emulator`` when reached through it)."""
    try:
        args, config = parse_args(sys.argv[1:] if argv is None else argv, add_help=True, prog=prog)
    except EmulatorArgsError as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        sys.exit(EXIT_BAD_ARGS)
    try:
        asyncio.run(_main(args, config))
    except _CannotStart as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        sys.exit(EXIT_CANNOT_START)
    except KeyboardInterrupt:
        sys.stdout.flush()
        os._exit(0)  # not sys.exit: the stdin watcher may hold stdin's buffer (see _main)


if __name__ == "__main__":
    main()
