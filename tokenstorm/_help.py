"""``tokenstorm --help`` and ``tokenstorm run --help``: every tokenstorm option by topic, with its help and
default, from the one table that declares them (``tokenstorm.workloads.plugin.core.flags.TOPICS``).

``locust -f locustfiles/mixed.py --help`` cannot show them: Locust prints its help before it loads the
locustfile that adds them. ``run --help`` prints Locust's own options after tokenstorm's, with the
defaults tokenstorm changes (``--web-host`` on loopback...) stated as they are.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from typing import Any

from tokenstorm.workloads.plugin.core.flags import TOPICS, Flag

from ._locustfiles import bundled, describe

__all__ = ["options_help", "run_help", "top_help"]

_COMMANDS = """\
commands:
  run NAME_OR_PATH [OPTIONS...]  a load test with Locust: a bundled locustfile or your own; every option after it
                                 goes to Locust (tokenstorm run --help lists Locust's and tokenstorm's)
  report [RUN_DIR] [OPTIONS...]  rebuild a run's report.html, junit.xml and summary.json
                                 (python -m tokenstorm.reports build); no RUN_DIR: the newest run under ./runs/
  compare RUN [RUN...]           compare runs side by side: run directories, vllm bench serve or GuideLLM
                                 result files (python -m tokenstorm.reports compare)
  emulator [OPTIONS...]          the built-in SIMULATED vLLM server (python -m tokenstorm.emulator)
  examples DIR [--force]         copy the example SLO files and trace sample into DIR, each with a command using it
"""

_EXAMPLES = """\
examples:
  tokenstorm run mixed                      web UI on http://127.0.0.1:8089; no --host: the built-in emulator
  tokenstorm run mixed --headless -u 30 -r 10 -t 60s --host http://gpu:8000 --slo slo.yaml
  tokenstorm run mixed,shape_steps --headless --steps 8x60,16x60 --host http://gpu:8000
  tokenstorm run ./my_locustfile.py --headless -u 4 -t 1m
  tokenstorm report                         rebuild the newest run's report, then open runs/<run>/report.html
  tokenstorm examples ex                    then: tokenstorm run mixed --headless -u 8 -t 1m --slo ex/slo.yaml
  tokenstorm compare runs/<baseline> runs/<candidate>
"""

_EXIT_CODES = (
    "exit code: 0 the SLOs held, 1 an SLO failed, 2 a command-line error, 3 the run failed (or an option "
    "value was refused), 4 incomplete (stopped by a signal before its -t, or a worker lost), 5 the load "
    "generator's timing was not trustworthy"
)


def _width() -> int:
    return max(shutil.get_terminal_size().columns - 2, 60)  # as argparse's own (honours $COLUMNS)


def _wrap(text: str) -> str:
    return textwrap.fill(text, _width(), break_on_hyphens=False) + "\n"


class _Formatter(argparse.HelpFormatter):
    """argparse's layout, without breaking lines inside ``--flag-names``."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=34, width=_width())

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _metavar(flag: Flag) -> str:
    """Locust's style: ``<int>``, ``<float>``, ``<duration>``, ``<text>``, or the choices."""
    if flag.choices:
        return "{" + ",".join(flag.choices) + "}"
    if flag.duration:
        return "<duration>"
    return "<int>" if flag.type is int else "<float>" if flag.type is float else "<text>"


def options_help() -> str:
    """tokenstorm's options, one section per topic: flag, help, default."""
    parser = argparse.ArgumentParser(
        prog="tokenstorm run", usage=argparse.SUPPRESS, add_help=False, formatter_class=_Formatter
    )
    for topic in TOPICS:
        group = parser.add_argument_group(topic.title)
        for flag in topic.flags:
            default = flag.default_text()
            text = flag.help + (f" (default: {default})" if default else "")
            kw: dict[str, Any] = {"help": text.replace("%", "%%")}  # argparse formats help with %
            if flag.switch:
                kw["action"] = "store_true"
            else:
                kw["metavar"] = _metavar(flag)
            group.add_argument(flag.flag, **kw)
    return parser.format_help()


def _bundled_help() -> str:
    files = bundled()
    width = max(len(n) for n in files) + 2
    lines = [f"  {name:<{width}} {describe(path)}" for name, path in files.items()]
    return "bundled locustfiles (NAME; comma-separate to combine, e.g. mixed,shape_steps):\n" + "\n".join(lines) + "\n"


def top_help() -> str:
    """``tokenstorm --help``: the commands, examples, and every tokenstorm option by topic."""
    return "\n".join(
        (
            "usage: tokenstorm COMMAND [ARGS...]\n",
            _wrap("Load tests of LLM serving endpoints that speak vLLM's OpenAI-compatible API, on Locust."),
            _COMMANDS,
            _bundled_help(),
            _EXAMPLES,
            _wrap(
                "tokenstorm's options, for tokenstorm run (Locust's own, -u -r -t --host --headless..., are in "
                "tokenstorm run --help):"
            ),
            options_help(),
        )
    )


def _locust_help() -> str:
    """Locust's own options as its ``--help`` lists them, with the help of those tokenstorm gives another
    default (and of ``-f``, which ``tokenstorm run`` takes as its first argument) saying so."""
    # Here, not at the top: importing Locust monkey-patches the process (gevent), which only this help needs.
    from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments

    parser = get_empty_argument_parser(add_help=True, default_config_files=[])
    parser.description = None  # Locust's "Usage: locust ..." and its examples: tokenstorm run's are above
    parser.epilog = None
    setup_parser_arguments(parser)
    overrides = {f.dest: f"{f.help} (default: {f.default_text()})" for t in TOPICS for f in t.flags if f.locust}
    overrides["locustfile"] = "Not with tokenstorm run: its first argument, NAME_OR_PATH, is the locustfile"
    # argparse keeps a parser's actions in _actions (no public accessor); only their help text is changed.
    for action in parser._actions:  # noqa: SLF001
        if action.dest in overrides:
            action.help = overrides[action.dest].replace("%", "%%")
    return str(parser.format_help())


def run_help() -> str:
    """``tokenstorm run --help``: usage, the bundled locustfiles, tokenstorm's options by topic, then Locust's."""
    changed = ", ".join(f.flag for t in TOPICS for f in t.flags if f.locust)
    return "\n".join(
        (
            "usage: tokenstorm run NAME_OR_PATH [OPTIONS...] [UserClass ...]\n",
            _wrap(
                "Runs Locust with tokenstorm on the locustfile NAME_OR_PATH: a bundled name below, or the path of "
                "your own (a bare bundled name means the bundled file; ./NAME.py for one in this folder). Every "
                "option after it goes to Locust as given: tokenstorm run mixed ARGS is locust -f .../mixed.py ARGS."
            ),
            _bundled_help(),
            _EXAMPLES,
            _wrap(_EXIT_CODES),
            "tokenstorm's options:\n",
            options_help(),
            _wrap(f"Locust's options (tokenstorm changes the defaults of {changed}; see above):"),
            _locust_help(),
        )
    )
