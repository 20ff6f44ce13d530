"""Options by their whole names only: argparse takes ``--api messages`` as ``--api-key messages`` (a prefix
of one option is that option), so a mistyped or future option could become a secret sent to the server.
Locust's parser (its options and tokenstorm's) takes whole names; an unknown one is a line that says so,
with the nearest known name, and exit code 2 (argparse's, as Locust's other argument errors)::

    tokenstorm: --api: unknown option (did you mean --api-key?)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, NoReturn

__all__ = ["EXIT_USAGE", "unknown_option_line", "whole_option_names"]

#: argparse's exit code for a command line it cannot parse
EXIT_USAGE = 2


def unknown_option_line(token: str, known: Iterable[str]) -> str:
    """The line for ``token`` (``--api`` or ``--api=x``) that no option is: its name (never its value, which
    may be a secret) and the nearest of ``known``."""
    name = token.split("=", 1)[0]
    if not name.startswith("-"):
        return f"unexpected argument {name[:40]!r} (every option is --name VALUE; user classes come last)"
    near = difflib.get_close_matches(name, list(known), n=1)
    return f"{name[:60]}: unknown option" + (f" (did you mean {near[0]}?)" if near else "")


def whole_option_names(parser: Any, **_kw: Any) -> None:
    """``init_command_line_parser`` listener: ``parser`` takes whole option names only, and says an unknown
    one in one line (Locust's own error: two lines, the second a suggestion that may be an abbreviation's)."""
    if getattr(parser.error, "tokenstorm_wrapped", False):
        return
    parser.allow_abbrev = False  # argparse reads it at each parse: every option added later is whole-name too
    error = parser.error

    def one_line_error(message: str) -> NoReturn:
        _, sep, rest = message.partition("unrecognized arguments:")
        if sep and rest.split():
            # argparse keeps a parser's actions in _actions (no public accessor); only their names are read.
            known = [name for action in parser._actions for name in action.option_strings]  # noqa: SLF001
            parser.exit(EXIT_USAGE, f"tokenstorm: {unknown_option_line(rest.split()[0], known)}\n")
        error(message)
        raise SystemExit(EXIT_USAGE)  # error() exits; this line is for the type checker

    one_line_error.tokenstorm_wrapped = True  # type: ignore[attr-defined]
    parser.error = one_line_error
