"""``python -m emulator``: run the emulated vLLM server (prints its URL when ready)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading

from ._config import FAULT_KINDS, REASONING_FORMATS, EmulatorConfig
from ._server import EmulatorServer


def _parse_faults(items: list[str]) -> dict[str, float]:
    faults: dict[str, float] = {}
    for item in items:
        kind, _, prob = item.partition("=")
        try:
            faults[kind] = float(prob) if prob else 1.0
        except ValueError:
            raise SystemExit(f"error: --fault {item!r}: probability must be a number, e.g. drop=0.05") from None
    return faults


def build_parser() -> argparse.ArgumentParser:
    """The emulator's command line."""
    d = EmulatorConfig()
    p = argparse.ArgumentParser(prog="python -m emulator", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    p.add_argument("--model", default=d.model)
    p.add_argument("--ttft-ms", type=float, default=d.ttft_s * 1000, help="base time to first token")
    p.add_argument("--prefill-us-per-token", type=float, default=d.prefill_s_per_token * 1e6)
    p.add_argument("--itl-ms", type=float, default=d.itl_s * 1000, help="inter-token latency")
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--tokens-per-chunk", type=int, default=d.tokens_per_chunk)
    p.add_argument("--max-num-seqs", type=int, default=d.max_num_seqs, help="concurrent sequences")
    p.add_argument("--max-model-len", type=int, default=d.max_model_len)
    p.add_argument(
        "--natural-output-tokens",
        type=int,
        default=d.natural_output_tokens,
        help="median output length when ignore_eos is not set",
    )
    p.add_argument(
        "--empty-chunk-share",
        type=float,
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
        "--reasoning-share", type=float, default=d.reasoning_share, help="share of the output that is reasoning"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[=PROB]",
        help=f"inject a fault with a probability; kinds: {', '.join(FAULT_KINDS)}",
    )
    p.add_argument("--stall-s", type=float, default=d.stall_s)
    p.add_argument("--truth-log", default=None, help="JSONL file of the timings really imposed")
    p.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on /v1/* (as vLLM does)")
    p.add_argument(
        "--exit-with-stdin",
        action="store_true",
        help="exit when stdin closes (how a parent process makes sure no emulator outlives it)",
    )
    return p


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
        max_model_len=args.max_model_len,
        natural_output_tokens=args.natural_output_tokens,
        empty_chunk_share=args.empty_chunk_share,
        reasoning_format=args.reasoning_format,
        reasoning_share=args.reasoning_share,
        seed=args.seed,
        faults=_parse_faults(args.fault),
        stall_s=args.stall_s,
        truth_log=args.truth_log,
        api_key=args.api_key,
    )


async def _main(args: argparse.Namespace) -> None:
    config = config_from_args(args)
    try:
        server = EmulatorServer(config)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    port = await server.start(args.host, args.port)
    print(f"tokenstorm emulator (SIMULATED vLLM) listening on http://{args.host}:{port}", flush=True)
    await server.serve_forever()


def _exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


def main() -> None:
    """Entry point."""
    args = build_parser().parse_args()
    if args.exit_with_stdin:
        threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    try:
        asyncio.run(_main(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
