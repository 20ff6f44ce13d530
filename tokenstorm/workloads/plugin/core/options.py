"""tokenstorm's command-line / web-UI options, parsed and validated once into a frozen :class:`RunOptions`.

:func:`add_options` registers them with Locust's parser (the traffic models' own options come
from each model). :meth:`RunOptions.parse` turns Locust's namespace into typed values or raises
:class:`OptionError` naming the option and the reason — at start-up, before any traffic, and
again when a run is started from the web UI form.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...rundir import parse_confidence
from ...traffic.durations import DURATION_FORMS, parse_duration, parse_duration_range
from .errors import OptionError
from .flags import TOPICS, add_options, declared_defaults  # declared there (what Locust shows), parsed here
from .option_problems import users_problem, warmup_problem
from .targets import resolve_targets

__all__ = [
    "DURATION_OPTIONS",
    "OPTION_DESTS",
    "OptionError",
    "RunOptions",
    "add_options",
    "parse_duration_option",
    "parse_steps",
    "recorded_options",
    "users_problem",
    "warmup_problem",
]

#: tokenstorm's options that are one duration (``30``, ``30s``, ``5m``, ``1h30m``, as Locust's ``-t``)
DURATION_OPTIONS = tuple(flag.dest for topic in TOPICS for flag in topic.flags if flag.duration)
#: the defaults of Locust's own options that :class:`RunOptions` reads (Locust declares them; a namespace from
#: Locust always has them, so these serve ``RunOptions.parse(None)`` alone)
_LOCUST_DEFAULTS = {"headless": False, "locustfile": "run", "spawn_rate": 1.0}
DURATION_OPTIONS = (
    "warmup",
    "request_timeout",
    "stall_timeout",
    "capacity_step_time",
    "sweep_level_time",
    "monitor_interval",
    "report_every",
)


def parse_duration_option(flag: str, value: Any, *, strict: bool = False) -> float:
    """Seconds of duration option ``flag`` (``--warmup 5m`` -> 300.0); :class:`OptionError` in one line unless
    ``value`` is a duration (:data:`~tokenstorm.workloads.traffic.durations.DURATION_FORMS`), above 0 when
    ``strict``."""
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        if _negative(value):
            raise OptionError(f"{flag} {value!r}: must be {'>' if strict else '>='} 0") from None
        raise OptionError(f"{flag} {value!r}: {exc}") from None
    if strict and seconds == 0:
        raise OptionError(f"{flag} {value!r}: must be > 0")
    return seconds


def _negative(value: Any) -> bool:
    try:
        return float(value) < 0
    except (TypeError, ValueError):
        return False


def parse_steps(text: str) -> list[tuple[int, float]]:
    """``8x60,16x1m`` -> [(8, 60.0), (16, 60.0)]; raise :class:`OptionError` with the syntax."""
    steps = []
    for item in str(text).split(","):
        users, _, secs = item.strip().partition("x")
        try:
            step = (int(users), parse_duration(secs))
        except ValueError:
            raise OptionError(
                f"--steps {text!r}: expected USERSxDURATION,... e.g. 8x60,16x2m (a duration is {DURATION_FORMS})"
            ) from None
        if step[0] < 0 or not step[1] > 0:
            raise OptionError(f"--steps {text!r}: users >= 0 and durations > 0")
        steps.append(step)
    return steps


def recorded_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` (Locust's, as given) with each duration option in seconds, as ``run.json`` keeps them: a
    report reads ``--warmup 5m`` as 300 s. A value that is no duration is kept as given (the run refused it)."""
    out = dict(options)
    for name in DURATION_OPTIONS:
        if name in out and out[name] is not None:
            with contextlib.suppress(ValueError):  # no duration: kept as given (the run refused it)
                out[name] = parse_duration(out[name])
    return out


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
    try:
        return parse_duration_range(raw)
    except ValueError as exc:
        raise OptionError(f"{flag} {raw!r}: {exc}") from None


def _number(
    flag: str,
    value: Any,
    *,
    minimum: float,
    strict: bool = False,
    cast: Callable[[Any], Any] = float,
    maximum: float | None = None,
) -> Any:
    try:
        v = cast(value)
    except (TypeError, ValueError, OverflowError):
        raise OptionError(f"{flag} {value!r}: not a number") from None
    if not math.isfinite(v) or v < minimum or (strict and v == minimum):
        raise OptionError(f"{flag} {value!r}: must be {'>' if strict else '>='} {minimum:g}")
    if maximum is not None and v > maximum:
        raise OptionError(f"{flag} {value!r}: must be at most {maximum:,g}")
    return v


#: the largest max_tokens sent (a 32-bit count: far beyond any model's context, and what servers parse)
MAX_TOKENS_LIMIT = 2**31 - 1


def _extra_body(raw: str) -> dict[str, Any]:
    """``--extra-body``: a JSON object whose every number survives the trip to the server as written."""
    if not raw:
        return {}
    try:
        # The standard library keeps a 30-digit integer an integer (orjson would make it a float: 1e+29).
        extra = json.loads(
            raw,
            parse_constant=lambda c: _raise(f"--extra-body: {c} is not a JSON number"),
            parse_float=_finite_float,
        )
    except json.JSONDecodeError:
        raise OptionError(
            '--extra-body is not valid JSON (example: \'{"chat_template_kwargs": {"enable_thinking": false}}\')'
        ) from None
    if not isinstance(extra, dict):
        raise OptionError("--extra-body: expected a JSON object ({...})")
    try:
        orjson.dumps(extra)
    except TypeError as exc:  # an integer beyond 64 bits
        raise OptionError(f"--extra-body: {exc} (a number no server reads as written)") from None
    if "max_tokens" in extra:
        _number("--extra-body max_tokens", extra["max_tokens"], minimum=1, cast=_whole, maximum=MAX_TOKENS_LIMIT)
    return extra


#: the most consistency probes a pass sends (each is a request before the load and one under it)
MAX_CONSISTENCY_PROBES = 1000


def _probes(raw: str) -> int | None:
    """``--consistency-probes``: empty (not given) or a whole number 0..MAX_CONSISTENCY_PROBES."""
    if not raw:
        return None
    if not raw.isdigit():
        raise OptionError(f"--consistency-probes {raw!r}: expected a whole number of probes, e.g. 8 (0: off)")
    return int(_number("--consistency-probes", raw, minimum=0, cast=int, maximum=MAX_CONSISTENCY_PROBES))


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)
    return value


def _raise(message: str) -> Any:
    raise OptionError(message)


def _finite_float(text: str) -> float:
    """A JSON number of ``--extra-body`` as a float, refused when no double holds it (``1e400`` would be sent
    as ``null``)."""
    value = float(text)
    if not math.isfinite(value):
        raise OptionError(f"--extra-body: {text} is beyond a JSON number's range (it would be sent as null)")
    return value


def _emulator_args(raw: str) -> str:
    """``--emulator-args``, refused in one line naming the option when it cannot be split as a shell would."""
    try:
        shlex.split(raw)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise OptionError(
            f"--emulator-args: {str(exc).lower()}; quote the emulator's flags as one argument, "
            "e.g. --emulator-args '--ttft-ms 50 --itl-ms 5'"
        ) from None
    return raw


@dataclass(frozen=True)
class RunOptions:
    """Every option tokenstorm reads, typed and checked (:meth:`parse`; the defaults are the flags table's,
    :mod:`.flags`, declared there once). ``api_key`` never appears in ``repr``."""

    model: str
    api_key: str = field(repr=False)
    max_tokens: int
    ignore_eos: bool
    temperature: float | None
    #: the API requests speak (``--api``); a workload file's ``api:`` wins for its workload
    api: str
    request_timeout_s: float
    #: no byte for this long ends a request as a stall (0: off)
    stall_timeout_s: float
    extra_body: dict[str, Any]
    continuous_usage: bool
    think_tags: tuple[str, str] | None
    run_dir: str
    warmup_s: float
    slo: str
    run_fail_error_rate: float
    gpus: int
    metrics_port: int
    metrics_host: str
    #: OTLP/HTTP traces receiver (0: off) and its address
    otlp_port: int
    otlp_host: str
    #: what latency SLOs are judged on: ``client``, ``server`` or ``auto`` (``--timing-source``)
    timing_source: str
    #: confidence of the SLO intervals (``--confidence``; 0: point estimates)
    confidence: float
    #: keep the load on until every SLO is held or failed (``--until-conclusive``; ``-t``: the cap)
    until_conclusive: bool
    report_every_s: float
    records: str
    gpu_cost_per_hour: float
    gpu_monitor: str
    monitor_interval_s: float
    server_metrics: bool
    seed: int
    wait_time_s: tuple[float, float] | None
    steps: tuple[tuple[int, float], ...]
    arrival_rate: float
    poisson: bool
    capacity_start: int
    capacity_step: int
    capacity_step_time_s: float
    capacity_max: int
    sweep_levels: tuple[int, ...]
    sweep_level_time_s: float
    sweep_count: int
    sweep_max_users: int
    #: trace replay: the Mooncake JSONL file (empty: none), its time compression, tokens per hash-id block
    trace: str
    trace_speed: float
    trace_block_size: int
    emulator_args: str
    #: A/B targets as (label, url); empty: the one --host
    targets: tuple[tuple[str, str], ...]
    headless: bool
    locustfile: str
    spawn_rate: float
    #: answer-consistency probes per pass (``None``: not given — 8 when the SLO file sets consistency_changed)
    consistency_probes: int | None

    @classmethod
    def parse(cls, opts: Any) -> RunOptions:
        """Typed options from Locust's namespace (``None``: every default); :class:`OptionError` names the bad one."""

        defaults = {**declared_defaults(), **_LOCUST_DEFAULTS}

        def get(name: str) -> Any:
            value = getattr(opts, name, None) if opts is not None else None
            return defaults[name] if value is None else value

        def text(name: str) -> str:  # an empty text (the web form's blank field) is the default
            return str(get(name) or defaults[name])

        temperature_raw = str(get("temperature")).strip()
        temperature = None
        if temperature_raw:
            temperature = _number("--temperature", temperature_raw, minimum=0.0)
        extra = _extra_body(text("extra_body"))
        steps_raw = text("steps")
        return cls(
            model=str(get("model")),
            api_key=str(get("api_key")),
            max_tokens=_number("--max-tokens", get("max_tokens"), minimum=0, cast=int, maximum=MAX_TOKENS_LIMIT),
            ignore_eos=bool(get("ignore_eos")),
            api=text("api"),
            temperature=temperature,
            request_timeout_s=parse_duration_option("--request-timeout", get("request_timeout"), strict=True),
            stall_timeout_s=parse_duration_option("--stall-timeout", get("stall_timeout")),
            extra_body=extra,
            continuous_usage=not get("no_continuous_usage"),
            think_tags=_think_tags(str(get("think_tags"))),
            run_dir=text("run_dir"),
            warmup_s=parse_duration_option("--warmup", get("warmup")),
            slo=text("slo"),
            run_fail_error_rate=_number(
                "--run-fail-error-rate", get("run_fail_error_rate"), minimum=0, strict=True, maximum=1
            ),
            gpus=_number("--gpus", get("gpus"), minimum=0, cast=int),
            metrics_port=_number("--metrics-port", get("metrics_port"), minimum=0, cast=int, maximum=65535),
            metrics_host=text("metrics_host"),
            otlp_port=_number("--otlp-port", get("otlp_port"), minimum=0, cast=int, maximum=65535),
            otlp_host=text("otlp_host"),
            timing_source=_choice("--timing-source", text("timing_source"), ("client", "server", "auto")),
            confidence=parse_confidence(get("confidence"), OptionError),
            until_conclusive=bool(get("until_conclusive")),
            report_every_s=parse_duration_option("--report-every", get("report_every")),
            gpu_cost_per_hour=_number("--gpu-cost-per-hour", get("gpu_cost_per_hour"), minimum=0),
            records=_choice("--records", text("records"), ("parquet", "jsonl")),
            gpu_monitor=text("gpu_monitor"),
            monitor_interval_s=parse_duration_option("--monitor-interval", get("monitor_interval"), strict=True),
            server_metrics=not get("no_server_metrics"),
            seed=int(get("seed")),
            wait_time_s=_range("--wait-time", text("wait_time")),
            steps=tuple(parse_steps(steps_raw)) if steps_raw else (),
            arrival_rate=_number("--arrival-rate", get("arrival_rate"), minimum=0, strict=True),
            poisson=text("arrival") == "poisson",
            capacity_start=_number("--capacity-start", get("capacity_start"), minimum=1, cast=int),
            capacity_step=_number("--capacity-step", get("capacity_step"), minimum=1, cast=int),
            capacity_step_time_s=parse_duration_option("--capacity-step-time", get("capacity_step_time"), strict=True),
            capacity_max=_number("--capacity-max", get("capacity_max"), minimum=1, cast=int),
            sweep_levels=parse_sweep_levels(text("sweep_levels")),
            sweep_level_time_s=parse_duration_option("--sweep-level-time", get("sweep_level_time"), strict=True),
            sweep_count=_number("--sweep-count", get("sweep_count"), minimum=2, cast=int),
            sweep_max_users=_number("--sweep-max-users", get("sweep_max_users"), minimum=2, cast=int),
            trace=text("trace"),
            trace_speed=_number("--trace-speed", get("trace_speed"), minimum=0, strict=True),
            trace_block_size=_number("--trace-block-size", get("trace_block_size"), minimum=1, cast=int),
            emulator_args=_emulator_args(text("emulator_args")),
            targets=resolve_targets(text("targets"), text("workload_file")),
            headless=bool(get("headless")),
            locustfile=text("locustfile"),
            spawn_rate=float(get("spawn_rate") or defaults["spawn_rate"]),
            consistency_probes=_probes(str(get("consistency_probes")).strip()),
        )


#: the attribute names of tokenstorm's own options (not Locust's, which tokenstorm only gives a default)
OPTION_DESTS = frozenset(flag.dest for topic in TOPICS for flag in topic.flags if not flag.locust)
