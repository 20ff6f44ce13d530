"""The emulator's command line: its parser, and the check that turns bad arguments into one line.

``python -m tokenstorm.emulator`` and :class:`~tokenstorm.emulator.EmulatorProcess` both go through :func:`parse_args`,
so a typo, a word where a number belongs or an unknown fault is reported the same way by each —
``--itl-mss: unknown option (did you mean --itl-ms?)`` — before anything starts, instead of a
traceback or a usage dump cut short.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ._config import ENDPOINTS, FAULT_KINDS, REASONING_FORMATS, WRONG_KINDS, EmulatorConfig

__all__ = ["EmulatorArgsError", "build_parser", "check_args", "config_from_args", "parse_args"]

_HELP_FLAGS = ("-h", "--help")


class EmulatorArgsError(ValueError):
    """Arguments the emulator cannot run with; ``str()`` is the one line that says why."""


class _BadValue(Exception):  # not a ValueError: argparse catches those and rewords them
    """A value a type converter rejects, with the whole line; argparse lets it through unchanged."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises instead of printing usage and exiting, and knows its flags."""

    def __init__(self, **kwargs: Any) -> None:
        self.flags: list[str] = []  # before super().__init__, which adds --help through add_argument
        super().__init__(**kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.flags.extend(action.option_strings)
        return action

    def error(self, message: str) -> NoReturn:
        raise EmulatorArgsError(message)


def _number(flag: str, minimum: float | None = 0.0) -> Callable[[str], float]:
    """A float argument of ``flag`` (``minimum``: the least it may be; None: any)."""

    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _BadValue(f"{flag} {text!r}: expected a number") from None
        if not math.isfinite(value):
            raise _BadValue(f"{flag} {text!r}: expected a finite number")
        if minimum is not None and value < minimum:
            raise _BadValue(f"{flag} {text}: must be >= {minimum:g}")
        return value

    return convert


def _whole(flag: str, minimum: int | None = 1, maximum: int | None = None) -> Callable[[str], int]:
    """An int argument of ``flag`` (``minimum``, ``maximum``: the least and most it may be; None: any)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise _BadValue(f"{flag} {text!r}: expected a whole number") from None
        if minimum is not None and value < minimum:
            raise _BadValue(f"{flag} {text}: must be >= {minimum}")
        if maximum is not None and value > maximum:
            raise _BadValue(f"{flag} {text}: must be <= {maximum}")
        return value

    return convert


def _share(flag: str) -> Callable[[str], float]:
    """A share in [0, 1] given to ``flag``."""
    number = _number(flag)

    def convert(text: str) -> float:
        value = number(text)
        if value > 1:
            raise _BadValue(f"{flag} {text}: must be in [0, 1]")
        return value

    return convert


def _fault(text: str) -> tuple[str, float]:
    """``KIND[=PROB]`` of ``--fault``: a known kind and a probability in [0, 1] (1 when left out)."""
    kind, sep, prob = text.partition("=")
    if kind not in FAULT_KINDS:
        close = difflib.get_close_matches(kind, FAULT_KINDS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f"; known: {', '.join(FAULT_KINDS)}"
        raise _BadValue(f"--fault {text}: unknown fault {kind!r}{hint}")
    if not sep:
        return kind, 1.0
    try:
        value = float(prob)
    except ValueError:
        raise _BadValue(f"--fault {text}: probability must be a number, e.g. {kind}=0.05") from None
    if not 0.0 <= value <= 1.0:  # also false for nan
        raise _BadValue(f"--fault {text}: probability must be in [0, 1]")
    return kind, value


def _endpoints(text: str) -> tuple[str, ...]:
    """``--endpoints``' comma-separated list: known names only, at least one."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        if name not in ENDPOINTS:
            close = difflib.get_close_matches(name, ENDPOINTS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else f"; known: {','.join(ENDPOINTS)}"
            raise _BadValue(f"--endpoints {text}: unknown endpoint {name!r}{hint}")
    if not names:
        raise _BadValue(f"--endpoints {text!r}: name at least one of {','.join(ENDPOINTS)}")
    return names


#: what each --wrong-* knob does to an answer it applies to
_WRONG_HELP = {
    "needle": "a contract's needle question answered with another value",
    "cjk": "a code answer with a CJK identifier",
    "syntax": "a pytest answer whose Python block does not parse",
    "script": "a text answer in the other script (Chinese for English, English for Chinese)",
    "repeat": "a text answer that loops",
    "cut": "a text answer ended with finish_reason length before max_tokens",
    "tool_json": "a tool call whose arguments are not JSON",
    "consistency": "a temperature-0 answer other than its deterministic one, while another request is served",
}
assert tuple(_WRONG_HELP) == WRONG_KINDS


#: the command its help and errors name by default (``tokenstorm emulator`` when reached through it)
PROG = "python -m tokenstorm.emulator"


def build_parser(add_help: bool = True, prog: str = PROG) -> argparse.ArgumentParser:
    """The emulator's command line (abbreviations off: ``--itl`` is not taken for ``--itl-ms``)."""
    return _parser(add_help, prog)


def _parser(add_help: bool, prog: str = PROG) -> _Parser:
    d = EmulatorConfig()
    p = _Parser(
        prog=prog,
        description="Run the emulated vLLM server (prints its URL when ready).",
        allow_abbrev=False,
        exit_on_error=False,
        add_help=add_help,
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_whole("--port", 0, 65535), default=0, help="0 picks a free port (default)")
    p.add_argument("--model", default=d.model)
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on /v1/* (as vLLM does)")
    p.add_argument(
        "--endpoints",
        type=_endpoints,
        default=ENDPOINTS,
        metavar="LIST",
        help=f"the APIs served, comma-separated (default: all, {','.join(ENDPOINTS)}: /v1/chat/completions, "
        "/v1/completions, /v1/messages, /v1/responses); the others answer 404 as a server without them does",
    )
    p.add_argument(
        "--exit-with-stdin",
        action="store_true",
        help="exit when stdin closes (how a parent process makes sure no emulator outlives it)",
    )
    _pacing_args(p, d)
    _model_args(p, d)
    _fault_args(p, d)
    p.add_argument(
        "--truth-log",
        default=None,
        help="JSONL file of the timings really imposed, every request (/emulator/truth: the newest 20,000)",
    )
    return p


def _pacing_args(p: _Parser, d: EmulatorConfig) -> None:
    """How fast it answers: first token, tokens, concurrency, the front end, per-request timing."""
    p.add_argument("--ttft-ms", type=_number("--ttft-ms"), default=d.ttft_s * 1000, help="base time to first token")
    p.add_argument(
        "--prefill-us-per-token", type=_number("--prefill-us-per-token"), default=d.prefill_s_per_token * 1e6
    )
    p.add_argument("--itl-ms", type=_number("--itl-ms"), default=d.itl_s * 1000, help="inter-token latency")
    p.add_argument("--jitter-ms", type=_number("--jitter-ms"), default=0.0)
    p.add_argument("--tokens-per-chunk", type=_whole("--tokens-per-chunk"), default=d.tokens_per_chunk)
    p.add_argument("--max-num-seqs", type=_whole("--max-num-seqs"), default=d.max_num_seqs, help="concurrent sequences")
    p.add_argument(
        "--frontend-ms",
        type=_number("--frontend-ms"),
        default=d.frontend_s * 1000,
        help="time from a request's arrival to its joining the queue (vLLM's front end: HTTP, chat template, "
        "tokenisation); counted in vllm:time_to_first_token_seconds, not in the per-request metrics (default 0)",
    )
    p.add_argument(
        "--enable-per-request-metrics",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="as vLLM's flag (tokenstorm's built-in emulator starts with it): the final usage chunk (and a whole "
        "answer) carries the request's own timing, "
        "metrics: {queue_time_ms (queued -> a --max-num-seqs slot), time_to_first_token_ms (slot -> first token), "
        "generation_time_ms (first -> last token), mean_itl_ms, tokens_per_second}",
    )


def _model_args(p: _Parser, d: EmulatorConfig) -> None:
    """What the model it plays is like: context, KV blocks and prefix cache, tool calls, answer lengths and
    reasoning."""
    p.add_argument("--max-model-len", type=_whole("--max-model-len"), default=d.max_model_len)
    p.add_argument(
        "--block-size",
        type=_whole("--block-size"),
        default=d.block_size,
        help="KV-cache block size: the prefix cache's unit (said in vllm:cache_config_info)",
    )
    p.add_argument(
        "--prefix-cache-blocks",
        type=_whole("--prefix-cache-blocks", 0),
        default=d.prefix_cache_blocks,
        help="blocks of --block-size tokens the prefix cache holds, least recently used evicted first: a prompt "
        "prefix it holds is not prefilled again (usage.prompt_tokens_details.cached_tokens); 0 turns it off",
    )
    p.add_argument(
        "--tool-call-share",
        type=_share("--tool-call-share"),
        default=d.tool_call_share,
        help="share of chat requests with tools and tool_choice 'auto' answered with a streamed tool call "
        "('required' or a named function: always one; 'none': never)",
    )
    p.add_argument(
        "--no-tool-calls",
        action="store_true",
        help="refuse tool calls as a vLLM started without --enable-auto-tool-choice --tool-call-parser does: HTTP 400 "
        "for tools with tool_choice 'auto' (or none given), 'required' or a named function",
    )
    p.add_argument(
        "--natural-output-tokens",
        type=_whole("--natural-output-tokens"),
        default=d.natural_output_tokens,
        help="median output length when ignore_eos is not set",
    )
    p.add_argument(
        "--empty-chunk-share",
        type=_share("--empty-chunk-share"),
        default=0.0,
        help="share of token chunks with empty text (as vLLM sends for partial UTF-8)",
    )
    p.add_argument(
        "--reasoning-format",
        choices=REASONING_FORMATS,
        default=d.reasoning_format,
        help="how a request with chat_template_kwargs.enable_thinking streams its reasoning: 'field' "
        "(delta.reasoning_content, vLLM with a reasoning parser), 'tags' (<think>...</think> in content, "
        "no parser), 'prefilled' (content starts inside a <think> the template pre-filled: only </think>)",
    )
    p.add_argument(
        "--reasoning-share",
        type=_share("--reasoning-share"),
        default=d.reasoning_share,
        help="share of the output that is reasoning",
    )


def _fault_args(p: _Parser, d: EmulatorConfig) -> None:
    """What goes wrong, and how often: the seed of every draw, faults, stalls and wrong answers."""
    p.add_argument(
        "--seed",
        type=_whole("--seed", None),
        default=None,
        help="seed of every random draw (faults, output lengths, text, jitter); default: a fresh one each start, "
        "printed to stderr so the run can be replayed",
    )
    p.add_argument(
        "--fault",
        action="append",
        type=_fault,
        default=[],
        metavar="KIND[=PROB]",
        help=f"inject a fault with a probability; kinds: {', '.join(FAULT_KINDS)}",
    )
    p.add_argument("--stall-s", type=_number("--stall-s"), default=d.stall_s)
    for kind, says in _WRONG_HELP.items():
        flag = "--wrong-" + kind.replace("_", "-")
        says = f"probability (0-1) that a request it applies to is answered wrong: {says} (default 0)"
        p.add_argument(flag, type=_share(flag), default=0.0, metavar="P", help=says)
    rise = "every --wrong-* rate scales with load: rate x min(1, running requests / N); 0: flat (default)"
    p.add_argument("--wrong-rise", type=_whole("--wrong-rise", 0), default=d.wrong_rise, metavar="N", help=rise)


def config_from_args(args: argparse.Namespace) -> EmulatorConfig:
    """Turn parsed arguments into an :class:`EmulatorConfig`."""
    return EmulatorConfig(
        model=args.model,
        ttft_s=args.ttft_ms / 1000,
        prefill_s_per_token=args.prefill_us_per_token / 1e6,
        itl_s=args.itl_ms / 1000,
        jitter_s=args.jitter_ms / 1000,
        tokens_per_chunk=args.tokens_per_chunk,
        max_num_seqs=args.max_num_seqs,
        frontend_s=args.frontend_ms / 1000,
        per_request_metrics=args.enable_per_request_metrics,
        max_model_len=args.max_model_len,
        block_size=args.block_size,
        prefix_cache_blocks=args.prefix_cache_blocks,
        tool_call_share=args.tool_call_share,
        tool_calls=not args.no_tool_calls,
        natural_output_tokens=args.natural_output_tokens,
        empty_chunk_share=args.empty_chunk_share,
        reasoning_format=args.reasoning_format,
        reasoning_share=args.reasoning_share,
        seed=args.seed,
        faults=dict(args.fault),
        stall_s=args.stall_s,
        truth_log=args.truth_log,
        api_key=args.api_key,
        wrong={kind: getattr(args, "wrong_" + kind) for kind in WRONG_KINDS if getattr(args, "wrong_" + kind) > 0},
        wrong_rise=args.wrong_rise,
        endpoints=args.endpoints,
    )


def _unknown(parser: _Parser, token: str) -> str:
    flag = token.split("=", 1)[0]
    if flag in _HELP_FLAGS:
        return f"{flag}: not a setting here (see {parser.prog} --help)"
    if not flag.startswith("-"):
        return f"{token!r}: unexpected argument (every setting is a --flag VALUE)"
    close = difflib.get_close_matches(flag, parser.flags, n=1)
    return f"{flag}: unknown option" + (f" (did you mean {close[0]}?)" if close else "")


def parse_args(
    args: Sequence[str], add_help: bool = False, prog: str = PROG
) -> tuple[argparse.Namespace, EmulatorConfig]:
    """Parse and validate ``args`` into the namespace and the config they describe (``prog``: the
    command its help names).

    Raises :class:`EmulatorArgsError` with one line; never prints usage or exits, except that
    with ``add_help`` ``--help`` prints the help and exits as usual.
    """
    parser = _parser(add_help, prog)
    try:
        namespace, extras = parser.parse_known_args(list(args))
    except argparse.ArgumentError as exc:
        raise EmulatorArgsError(f"{exc.argument_name}: {exc.message}" if exc.argument_name else exc.message) from None
    except _BadValue as exc:
        raise EmulatorArgsError(str(exc)) from None
    if extras:
        raise EmulatorArgsError(_unknown(parser, extras[0]))
    if namespace.truth_log:
        folder = os.path.dirname(namespace.truth_log) or "."
        if not os.path.isdir(folder):
            raise EmulatorArgsError(f"--truth-log {namespace.truth_log}: no folder {folder!r} to write it in")
    config = config_from_args(namespace)
    try:
        config.validate()
    except ValueError as exc:
        raise EmulatorArgsError(str(exc)) from None
    return namespace, config


def check_args(args: Sequence[str]) -> str | None:
    """What is wrong with emulator arguments ``args``, in one line, or ``None`` when they are fine.

    The emulator's own parser and config check, without starting anything: unknown options (with
    the closest known one), values that are not numbers or out of range, unknown fault kinds and
    probabilities outside [0, 1]. Nothing is printed and nothing exits.
    """
    try:
        parse_args(args)
    except EmulatorArgsError as exc:
        return str(exc)
    return None
