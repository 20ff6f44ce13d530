"""tokenstorm's command-line / web-UI options, parsed and validated once into a frozen :class:`RunOptions`.

:func:`add_options` registers them with Locust's parser (the traffic models' own options come
from each model). :meth:`RunOptions.parse` turns Locust's namespace into typed values or raises
:class:`OptionError` naming the option and the reason — at start-up, before any traffic, and
again when a run is started from the web UI form.
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..traffic.models import MODELS
from .errors import OptionError
from .targets import resolve_targets

__all__ = ["OPTION_DESTS", "OptionError", "RunOptions", "add_options", "parse_steps"]


def add_options(parser: Any, **_kw: Any) -> None:
    """Add tokenstorm's options to Locust's parser (``init_command_line_parser`` listener)."""
    p = parser  # Locust only honours is_secret/include_in_web_ui on the top-level parser
    # The web UI has no login by default: it listens on loopback unless --web-host says otherwise.
    p.set_defaults(web_host="127.0.0.1")
    p.add_argument("--model", default="", help="Model name; discovered from /v1/models when empty")
    p.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY", ""),
        include_in_web_ui=False,  # Locust would render its value into the page
        help="Bearer token (default: $OPENAI_API_KEY), sent only to the --host it was given with; "
        "never shown in the web UI, logged or stored",
    )
    p.add_argument("--max-tokens", type=int, default=0, help="Override each workload's max_tokens (0: keep)")
    p.add_argument(
        "--ignore-eos",
        action="store_true",
        default=False,
        help="Ask the server to ignore EOS so every request generates max_tokens",
    )
    p.add_argument("--temperature", type=str, default="", help="Sampling temperature (empty: server default)")
    p.add_argument("--request-timeout", type=float, default=600.0, help="Seconds before a request is abandoned")
    p.add_argument(
        "--extra-body",
        default="",
        help='JSON merged into every request body, e.g. \'{"chat_template_kwargs": {"enable_thinking": false}}\'',
    )
    p.add_argument(
        "--think-tags",
        default="<think>,</think>",
        help="OPEN,CLOSE markers of reasoning inside the answer text, for servers without a reasoning parser "
        "(a stream may start inside a template's pre-filled OPEN); 'off' to read content as answer only",
    )
    p.add_argument(
        "--no-continuous-usage",
        action="store_true",
        default=False,
        help="Do not ask for stream_options.continuous_usage_stats (non-vLLM servers)",
    )
    p.add_argument(
        "--targets",
        default="",
        help="A/B in one run: [LABEL=]URL,... e.g. fp8=http://a:8000,awq=http://b:8000 — every user gets a twin "
        "per target with the same seed (same requests, same offered load); each target judged on its own "
        "(also a workload file's targets:)",
    )
    p.add_argument("--run-dir", default="runs", help="Folder under which each run's directory is made")
    p.add_argument("--warmup", type=float, default=0.0, help="Seconds at the start marked as warm-up")
    p.add_argument(
        "--slo",
        default="",
        help="SLO file (YAML); checked before any traffic. Exit code: 0 held, 1 an SLO failed, 3 run failed",
    )
    p.add_argument(
        "--run-fail-error-rate",
        type=float,
        default=0.5,
        help="Share of failed requests above which the run itself counts as failed (exit 3)",
    )
    p.add_argument(
        "--gpu-cost-per-hour",
        type=float,
        default=0.0,
        help="Price of one GPU-hour (any currency): the report gives the cost per 1M output and total tokens "
        "at the measured throughput (GPUs: from the GPU samples, the SLO file's gpus, or --gpus)",
    )
    p.add_argument(
        "--records",
        choices=("parquet", "jsonl"),
        default="parquet",
        help="How request records are stored: 'parquet' (compact Arrow/Parquet segments under RUN_DIR/requests/, "
        "~10x smaller, for long runs) or 'jsonl' (RUN_DIR/requests.jsonl, one JSON object per line). "
        "`python -m reports export RUN_DIR --jsonl` turns the first into the second",
    )
    p.add_argument(
        "--report-every",
        type=float,
        default=3600.0,
        help="Seconds between report.html snapshots during a run, built in a child process (0: only at the end)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        help="Serve client-side TTFT/ITL/TPOT/E2E histograms and counters for Prometheus at "
        "http://HOST:PORT/metrics (master / local runner; 0: off)",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="Address --metrics-port listens on (0.0.0.0 for a Prometheus on another machine)",
    )
    p.add_argument(
        "--allow-lost-workers",
        action="store_true",
        default=False,
        help="A worker lost mid-run does not make the run incomplete (exit code 4)",
    )
    p.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="GPUs behind the target, for per-GPU throughput when no GPU samples say (0: from the SLO file, else 1)",
    )
    p.add_argument(
        "--gpu-monitor",
        default="",
        help="GPU samples: a sidecar URL (python -m monitors gpu on the GPU host), 'local', or empty for none",
    )
    p.add_argument("--monitor-interval", type=float, default=1.0, help="Seconds between GPU/server samples")
    p.add_argument(
        "--no-server-metrics", action="store_true", default=False, help="Do not scrape the target's /metrics"
    )
    p.add_argument("--seed", type=int, default=0, help="Seed of the request generators (same seed, same requests)")
    p.add_argument(
        "--weights",
        default="",
        help=f"Workload weights, e.g. {','.join(f'{n}={m.defaults.weight}' for n, m in MODELS.items())} "
        "(also $TOKENSTORM_WEIGHTS)",
    )
    p.add_argument("--workload-file", default="", help="YAML defining the mix, corpora and lengths")
    p.add_argument(
        "--tokenizer",
        default="",
        help="tokenizer.json (or its folder) of the target model, to size prompts exactly; "
        "default: a calibrated estimate",
    )
    for name, model in MODELS.items():
        for option in model.options:
            flag = f"--{name}-{option.flag}" if option.prefixed else f"--{option.flag}"
            p.add_argument(flag, default="", help=option.help)
    p.add_argument(
        "--wait-time",
        default="",
        help="Seconds between a user's sessions, N or LO-HI (0: closed loop at full speed); "
        "default: each workload's own",
    )
    p.add_argument("--steps", default="", help="Step shape: USERSxSECONDS,... e.g. 8x60,16x60,32x120")
    p.add_argument(
        "--arrival-rate",
        type=float,
        default=1.0,
        help="Open loop: requests per second (per worker process in distributed runs)",
    )
    p.add_argument("--arrival", default="poisson", choices=["poisson", "constant"], help="Open-loop arrivals")
    p.add_argument("--capacity-start", type=int, default=4, help="Capacity search: first step's users")
    p.add_argument("--capacity-step", type=int, default=4, help="Capacity search: users added per step")
    p.add_argument("--capacity-step-time", type=float, default=30.0, help="Capacity search: seconds per step")
    p.add_argument("--capacity-max", type=int, default=1024, help="Capacity search: stop at this many users")
    p.add_argument("--sweep-levels", default="", help="Sweep (shape_sweep.py): users per level, increasing, e.g. "
                   "1,2,4,8,16; empty: found by a 1-user and a --sweep-max-users probe")  # fmt: skip
    p.add_argument("--sweep-level-time", type=float, default=30.0, help="Sweep: seconds per level (second half judged)")
    p.add_argument("--sweep-count", type=int, default=8, help="Sweep: levels of an automatic sweep, probes included")
    p.add_argument("--sweep-max-users", type=int, default=256, help="Sweep: users of the saturating probe")
    p.add_argument(
        "--emulator-args",
        default="",
        include_in_web_ui=False,
        help="Flags for the built-in emulator used when no --host is given, e.g. '--ttft-ms 300'",
    )


def parse_steps(text: str) -> list[tuple[int, float]]:
    """``8x60,16x60`` -> [(8, 60.0), (16, 60.0)]; raise :class:`OptionError` with the syntax."""
    steps = []
    for item in str(text).split(","):
        users, _, secs = item.strip().partition("x")
        try:
            step = (int(users), float(secs))
        except ValueError:
            raise OptionError(f"--steps {text!r}: expected USERSxSECONDS,... e.g. 8x60,16x60") from None
        if step[0] < 0 or not step[1] > 0 or not math.isfinite(step[1]):
            raise OptionError(f"--steps {text!r}: users >= 0 and seconds > 0")
        steps.append(step)
    return steps


def _think_tags(raw: str) -> tuple[str, str] | None:
    if raw.strip().lower() in ("", "off", "none"):
        return None
    parts = raw.split(",")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise OptionError(f"--think-tags {raw}: expected OPEN,CLOSE like <think>,</think> (or off)")
    return parts[0].strip(), parts[1].strip()


def parse_sweep_levels(text: str) -> tuple[int, ...]:
    """``1,2,4`` -> (1, 2, 4); raise :class:`OptionError` unless whole numbers >= 1, increasing."""
    try:
        levels = tuple(int(u) for u in text.split(",")) if text.strip() else ()
    except ValueError:
        levels = (0,)
    if any(u < 1 for u in levels) or any(b <= a for a, b in itertools.pairwise(levels)):
        raise OptionError(f"--sweep-levels {text!r}: expected users >= 1, increasing, e.g. 1,2,4,8,16")
    return levels


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise OptionError(f"{flag} {value}: expected one of {', '.join(allowed)}")
    return value


def _range(flag: str, raw: str) -> tuple[float, float] | None:
    if not raw:
        return None
    lo, _, hi = raw.partition("-")
    try:
        low, high = float(lo), float(hi or lo)
    except ValueError:
        raise OptionError(f"{flag} {raw!r}: expected SECONDS or LO-HI, e.g. 0 or 1-3") from None
    if not (0 <= low <= high) or not math.isfinite(high):
        raise OptionError(f"{flag} {raw!r}: seconds >= 0, LO <= HI")
    return (low, high)


def _number(flag: str, value: Any, *, minimum: float, strict: bool = False, cast: type = float) -> Any:
    try:
        v = cast(value)
    except (TypeError, ValueError):
        raise OptionError(f"{flag} {value!r}: not a number") from None
    if not math.isfinite(v) or v < minimum or (strict and v == minimum):
        raise OptionError(f"{flag} {value!r}: must be {'>' if strict else '>='} {minimum:g}")
    return v


@dataclass(frozen=True)
class RunOptions:
    """Every option tokenstorm reads, typed and checked. ``api_key`` never appears in ``repr``."""

    model: str = ""
    api_key: str = field(default="", repr=False)
    max_tokens: int = 0
    ignore_eos: bool = False
    temperature: float | None = None
    request_timeout_s: float = 600.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    continuous_usage: bool = True
    think_tags: tuple[str, str] | None = ("<think>", "</think>")
    run_dir: str = "runs"
    warmup_s: float = 0.0
    slo: str = ""
    run_fail_error_rate: float = 0.5
    gpus: int = 0
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    report_every_s: float = 3600.0
    records: str = "parquet"
    gpu_cost_per_hour: float = 0.0
    gpu_monitor: str = ""
    monitor_interval_s: float = 1.0
    server_metrics: bool = True
    seed: int = 0
    wait_time_s: tuple[float, float] | None = None
    steps: tuple[tuple[int, float], ...] = ()
    arrival_rate: float = 1.0
    poisson: bool = True
    capacity_start: int = 4
    capacity_step: int = 4
    capacity_step_time_s: float = 30.0
    capacity_max: int = 1024
    sweep_levels: tuple[int, ...] = ()
    sweep_level_time_s: float = 30.0
    sweep_count: int = 8
    sweep_max_users: int = 256
    emulator_args: str = ""
    #: A/B targets as (label, url); empty: the one --host
    targets: tuple[tuple[str, str], ...] = ()
    headless: bool = False
    locustfile: str = "run"
    spawn_rate: float = 1.0

    @classmethod
    def parse(cls, opts: Any) -> RunOptions:
        """Typed options from Locust's namespace (``None``: every default); :class:`OptionError` names the bad one."""

        def get(name: str, default: Any) -> Any:
            value = getattr(opts, name, default) if opts is not None else default
            return default if value is None else value

        temperature_raw = str(get("temperature", "")).strip()
        temperature = None
        if temperature_raw:
            temperature = _number("--temperature", temperature_raw, minimum=0.0)
        extra_raw = str(get("extra_body", "") or "")
        extra: Any = {}
        if extra_raw:
            try:
                extra = orjson.loads(extra_raw)
            except orjson.JSONDecodeError:
                raise OptionError('--extra-body is not valid JSON (example: \'{"chat_template_kwargs": '
                                  '{"enable_thinking": false}}\')') from None  # fmt: skip
            if not isinstance(extra, dict):
                raise OptionError("--extra-body: expected a JSON object ({...})")
        steps_raw = str(get("steps", "") or "")
        return cls(
            model=str(get("model", "")),
            api_key=str(get("api_key", "")),
            max_tokens=_number("--max-tokens", get("max_tokens", 0), minimum=0, cast=int),
            ignore_eos=bool(get("ignore_eos", False)),
            temperature=temperature,
            request_timeout_s=_number("--request-timeout", get("request_timeout", 600.0), minimum=0, strict=True),
            extra_body=extra,
            continuous_usage=not get("no_continuous_usage", False),
            think_tags=_think_tags(str(get("think_tags", "<think>,</think>"))),
            run_dir=str(get("run_dir", "runs") or "runs"),
            warmup_s=_number("--warmup", get("warmup", 0.0), minimum=0),
            slo=str(get("slo", "") or ""),
            run_fail_error_rate=_number(
                "--run-fail-error-rate", get("run_fail_error_rate", 0.5), minimum=0, strict=True
            ),
            gpus=_number("--gpus", get("gpus", 0), minimum=0, cast=int),
            metrics_port=_number("--metrics-port", get("metrics_port", 0), minimum=0, cast=int),
            metrics_host=str(get("metrics_host", "127.0.0.1") or "127.0.0.1"),
            report_every_s=_number("--report-every", get("report_every", 3600.0), minimum=0),
            gpu_cost_per_hour=_number("--gpu-cost-per-hour", get("gpu_cost_per_hour", 0.0), minimum=0),
            records=_choice("--records", str(get("records", "parquet") or "parquet"), ("parquet", "jsonl")),
            gpu_monitor=str(get("gpu_monitor", "") or ""),
            monitor_interval_s=_number("--monitor-interval", get("monitor_interval", 1.0), minimum=0, strict=True),
            server_metrics=not get("no_server_metrics", False),
            seed=int(get("seed", 0)),
            wait_time_s=_range("--wait-time", str(get("wait_time", "") or "")),
            steps=tuple(parse_steps(steps_raw)) if steps_raw else (),
            arrival_rate=_number("--arrival-rate", get("arrival_rate", 1.0), minimum=0, strict=True),
            poisson=str(get("arrival", "poisson") or "poisson") == "poisson",
            capacity_start=_number("--capacity-start", get("capacity_start", 4), minimum=1, cast=int),
            capacity_step=_number("--capacity-step", get("capacity_step", 4), minimum=1, cast=int),
            capacity_step_time_s=_number(
                "--capacity-step-time", get("capacity_step_time", 30.0), minimum=0, strict=True
            ),
            capacity_max=_number("--capacity-max", get("capacity_max", 1024), minimum=1, cast=int),
            sweep_levels=parse_sweep_levels(str(get("sweep_levels", "") or "")),
            sweep_level_time_s=_number("--sweep-level-time", get("sweep_level_time", 30.0), minimum=0, strict=True),
            sweep_count=_number("--sweep-count", get("sweep_count", 8), minimum=2, cast=int),
            sweep_max_users=_number("--sweep-max-users", get("sweep_max_users", 256), minimum=2, cast=int),
            emulator_args=str(get("emulator_args", "") or ""),
            targets=resolve_targets(str(get("targets", "") or ""), str(get("workload_file", "") or "")),
            headless=bool(get("headless", False)),
            locustfile=str(get("locustfile", "run") or "run"),
            spawn_rate=float(get("spawn_rate", 1.0) or 1.0),
        )


class _Dests:
    """Records the destinations :func:`add_options` adds (for telling tokenstorm's options apart)."""

    def __init__(self) -> None:
        self.dests: set[str] = set()

    def add_argument(self, *flags: str, **kw: Any) -> None:
        self.dests.add(kw.get("dest") or flags[0].lstrip("-").replace("-", "_"))

    def set_defaults(self, **kw: Any) -> None:
        pass


def _option_dests() -> frozenset[str]:
    parser = _Dests()
    add_options(parser)
    return frozenset(parser.dests)


#: the attribute names of tokenstorm's own options
OPTION_DESTS = _option_dests()
