"""Locust integration: the LLM user base class, tokenstorm's options and event listeners.

Call :func:`install` once from a locustfile. It adds the command-line / web-UI options,
starts the built-in emulator when no host is given (everything then says SIMULATED), opens
the run directory at test start, routes records (workers → master), and shows TTFT, TPOT
and E2E as their own rows per workload plus live output tokens/s.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import time
import weakref
from pathlib import Path
from typing import Any, ClassVar

import gevent
import gevent.lock
from locust import User, events
from locust.env import Environment
from locust.event import Events
from locust.exception import StopUser
from locust.runners import STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

from ._client import CompletionRequest, LlmClient, TargetError
from ._records import ErrorCategory, RequestRecord
from ._run import RunContext

__all__ = ["EXIT_RUN_FAILED", "LlmRequestFailed", "LlmUser", "context", "install"]

log = logging.getLogger("tokenstorm")

#: Process exit code when the run itself failed (target unreachable, no model).
EXIT_RUN_FAILED = 3

_CONTEXT_ATTR = "_tokenstorm"


class LlmRequestFailed(Exception):
    """What Locust shows in its failures table for a failed LLM request."""


def context(environment: Environment) -> RunContext:
    """The :class:`RunContext` tokenstorm keeps on ``environment``."""
    ctx = getattr(environment, _CONTEXT_ATTR, None)
    if ctx is None:
        ctx = RunContext(is_worker=isinstance(environment.runner, WorkerRunner))
        setattr(environment, _CONTEXT_ATTR, ctx)
    return ctx


class LlmUser(User):
    """Base class for simulated users of an OpenAI-compatible LLM endpoint.

    Subclasses set ``workload`` (the stats and SLO name) and call :meth:`send` from tasks.
    Command-line options (``--max-tokens``, ``--ignore-eos``, ``--temperature``,
    ``--extra-body``) override what a request asks for, so one locustfile serves many sweeps.
    """

    abstract = True
    workload: ClassVar[str] = "llm"
    default_max_tokens: ClassVar[int] = 128
    _model_lock: ClassVar[gevent.lock.Semaphore] = gevent.lock.Semaphore()

    def on_start(self) -> None:
        """Open this user's connection and make sure the model is known."""
        ctx = context(self.environment)
        self.llm = run_client(self.environment, self.host or "", user_id=id(self) & 0xFFFFFFFF)
        ctx.worker_id = self.llm.worker_id
        self.model: str | None = None
        if ctx.problem:
            return  # already reported once; send() stops this user quietly
        try:
            self.model = _resolve_model(self.environment, self.llm)
        except TargetError as exc:
            if not ctx.problem:
                ctx.problem = str(exc)
                log.error("tokenstorm: %s", exc)

    def on_stop(self) -> None:
        """Close the connection."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.close()

    def apply_options(self, req: CompletionRequest) -> CompletionRequest:
        """Apply the run's command-line overrides to ``req``."""
        return apply_run_options(self.environment.parsed_options, req, self.default_max_tokens)

    def send(self, req: CompletionRequest) -> RequestRecord:
        """Send one request, record it, and report it to Locust's live stats."""
        if self.model is None:
            raise StopUser()  # the target is unusable (reported once in the log)
        record = self.llm.complete(self.apply_options(req), self.model)
        context(self.environment).emit(record)
        if record.error_category == ErrorCategory.CANCELLED:
            raise gevent.GreenletExit()  # finish stopping; Locust does not count it either
        _fire_stats(self.environment, record)
        return record


def run_client(environment: Environment, host: str, user_id: int = 0) -> LlmClient:
    """An :class:`LlmClient` set up from the run's options — the one way every kind of user gets one."""
    opts = environment.parsed_options
    runner = environment.runner
    return LlmClient(
        host,
        api_key=getattr(opts, "api_key", None) or None,
        timeout_s=float(getattr(opts, "request_timeout", 600.0)),
        continuous_usage=not getattr(opts, "no_continuous_usage", False),
        user_id=user_id,
        worker_id=str(runner.client_id) if isinstance(runner, WorkerRunner) else "local",
    )


def apply_run_options(opts: Any, req: CompletionRequest, default_max_tokens: int = 128) -> CompletionRequest:
    """The run's command-line overrides (``--max-tokens``, ``--ignore-eos``, ``--temperature``,
    ``--extra-body``) applied to ``req`` — for closed-loop and open-loop users alike."""
    max_tokens = getattr(opts, "max_tokens", None)
    if max_tokens:
        req.max_tokens = int(max_tokens)
    elif req.max_tokens is None:
        req.max_tokens = default_max_tokens
    if getattr(opts, "ignore_eos", False):
        req.ignore_eos = True
    temperature = getattr(opts, "temperature", None)
    if temperature is not None and temperature != "":
        req.temperature = float(temperature)
    extra = _extra_body(opts)
    if extra:
        req.extra_body = {**extra, **req.extra_body}
    return req


def _fire_stats(environment: Environment, record: RequestRecord) -> None:
    """E2E row for every request (failures carry their category); TTFT and TPOT rows when measured."""
    fire = environment.events.request.fire
    if not record.ok:
        status = f" (HTTP {record.status_code})" if record.status_code else ""
        rows: list[tuple[str, float | None, int, Exception | None]] = [
            ("E2E", record.e2e_s or 0.0, 0, LlmRequestFailed(f"{record.error_category}{status}"))
        ]
    else:
        rows = [
            ("E2E", record.e2e_s or 0.0, record.output_tokens or 0, None),
            ("TTFT", record.ttft_s, 0, None),
            ("TPOT", record.tpot_s, 0, None),
        ]
    for request_type, seconds, length, exc in rows:
        if seconds is not None:
            fire(request_type=request_type, name=record.workload, response_time=seconds * 1000,
                 response_length=length, exception=exc, context={})  # fmt: skip


def _extra_body(opts: Any) -> dict[str, Any]:
    raw = getattr(opts, "extra_body", "") or ""
    if not raw:
        return {}
    data = json.loads(raw)  # validated at test start
    return data if isinstance(data, dict) else {}


def _resolve_model(environment: Environment, client: LlmClient) -> str:
    ctx = context(environment)
    if ctx.model:
        return ctx.model
    with LlmUser._model_lock:
        if ctx.model:
            return ctx.model
        given = getattr(environment.parsed_options, "model", "") or ""
        if given:
            ctx.model = given
        else:
            models = client.list_models()
            if not models:
                raise TargetError("the target serves no models (GET /v1/models is empty)")
            ctx.model = models[0]
        return ctx.model


# -- options and listeners ----------------------------------------------------------------
def _add_options(parser: Any, **_kw: Any) -> None:
    group = parser  # Locust only honours is_secret/include_in_web_ui on the top-level parser
    group.add_argument("--model", default="", help="Model name; discovered from /v1/models when empty")
    group.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY", ""),
        is_secret=True,
        help="Bearer token (default: $OPENAI_API_KEY); never logged or stored",
    )
    group.add_argument("--max-tokens", type=int, default=0, help="Override each workload's max_tokens (0: keep)")
    group.add_argument(
        "--ignore-eos",
        action="store_true",
        default=False,
        help="Ask the server to ignore EOS so every request generates max_tokens",
    )
    group.add_argument("--temperature", type=str, default="", help="Sampling temperature (empty: server default)")
    group.add_argument("--request-timeout", type=float, default=600.0, help="Seconds before a request is abandoned")
    group.add_argument(
        "--extra-body",
        default="",
        help='JSON merged into every request body, e.g. \'{"chat_template_kwargs": {"enable_thinking": false}}\'',
    )
    group.add_argument(
        "--no-continuous-usage",
        action="store_true",
        default=False,
        help="Do not ask for stream_options.continuous_usage_stats (non-vLLM servers)",
    )
    group.add_argument("--run-dir", default="runs", help="Folder under which each run's directory is made")
    group.add_argument("--warmup", type=float, default=0.0, help="Seconds at the start marked as warm-up")
    group.add_argument(
        "--slo",
        default="",
        help="SLO file (YAML); checked before any traffic. Exit code: 0 held, 1 an SLO failed, 3 run failed",
    )
    group.add_argument(
        "--run-fail-error-rate",
        type=float,
        default=0.5,
        help="Share of failed requests above which the run itself counts as failed (exit 3)",
    )
    group.add_argument(
        "--gpu-monitor",
        default="",
        help="GPU samples: a sidecar URL (python -m monitors gpu on the GPU host), 'local', or empty for none",
    )
    group.add_argument("--monitor-interval", type=float, default=1.0, help="Seconds between GPU/server samples")
    group.add_argument(
        "--no-server-metrics", action="store_true", default=False, help="Do not scrape the target's /metrics"
    )
    group.add_argument("--seed", type=int, default=0, help="Seed of the request generators (same seed, same requests)")
    group.add_argument(
        "--weights", default="", help="Workload weights, e.g. contract=1,code=3,chat=2 (also $TOKENSTORM_WEIGHTS)"
    )
    group.add_argument("--workload-file", default="", help="YAML defining the mix, corpora and lengths")
    group.add_argument(
        "--tokenizer",
        default="",
        help="tokenizer.json (or its folder) of the target model, "
        "to size prompts exactly; default: a calibrated estimate",
    )
    group.add_argument("--dataset", default="", help="Chat prompts: ShareGPT JSON or JSONL ({'prompt'} / {'messages'})")
    group.add_argument(
        "--contract-prompt-tokens",
        default="",
        help="Contract prompt length, e.g. uniform:2000-8000, 32000 (default uniform:2000-8000)",
    )
    group.add_argument("--contract-output-tokens", default="", help="Contract output length (default 512)")
    group.add_argument(
        "--contract-shared-prefix",
        default="",
        help="Share of each contract identical across requests, 0-1, to exercise prefix caching (default 0.5)",
    )
    group.add_argument("--contract-languages", default="", help="en, zh or en,zh (default en,zh)")
    group.add_argument("--code-prompt-tokens", default="", help="Code prefix length (default uniform:100-600)")
    group.add_argument("--code-output-tokens", default="", help="Code output length (default uniform:16-128)")
    group.add_argument("--code-endpoint", default="", help="chat, completions or both (default both)")
    group.add_argument("--chat-output-tokens", default="", help="Chat answer length (default lognormal:250,0.8)")
    group.add_argument("--chat-turns", type=int, default=0, help="Turns per chat session (default 3)")
    group.add_argument("--chat-think-time", default="", help="Seconds between turns, N or LO-HI (default 1-5)")
    group.add_argument(
        "--chat-thinking", default="", help="on/off: chat_template_kwargs.enable_thinking; empty: not sent"
    )
    group.add_argument(
        "--wait-time",
        default="",
        help="Seconds between a user's tasks, N or LO-HI (0: closed loop at full speed); default: each workload's own",
    )
    group.add_argument("--steps", default="", help="Step shape: USERSxSECONDS,... e.g. 8x60,16x60,32x120")
    group.add_argument(
        "--arrival-rate",
        type=float,
        default=1.0,
        help="Open loop: requests per second (per worker process in distributed runs)",
    )
    group.add_argument("--arrival", default="poisson", choices=["poisson", "constant"], help="Open-loop arrivals")
    group.add_argument("--capacity-start", type=int, default=4, help="Capacity search: first step's users")
    group.add_argument("--capacity-step", type=int, default=4, help="Capacity search: users added per step")
    group.add_argument("--capacity-step-time", type=float, default=30.0, help="Capacity search: seconds per step")
    group.add_argument("--capacity-max", type=int, default=1024, help="Capacity search: stop at this many users")
    group.add_argument(
        "--emulator-args",
        default="",
        include_in_web_ui=False,
        help="Flags for the built-in emulator used when no --host is given, e.g. '--ttft-ms 300'",
    )


def _on_init(environment: Environment, **_kw: Any) -> None:
    from emulator import EmulatorProcess  # the emulator package is only needed here

    ctx = context(environment)
    opts = environment.parsed_options
    if opts is None:
        return
    _load_workloads_or_exit(environment, ctx)
    if ctx.is_worker:
        return
    _load_slo_spec_or_exit(environment, ctx)
    if not environment.host and not any(getattr(u, "host", None) for u in environment.user_classes):
        emu = EmulatorProcess(*shlex.split(getattr(opts, "emulator_args", "") or ""))
        ctx.emulator_url = emu.url
        environment.host = emu.url
        ctx.emulator = emu
        log.warning("tokenstorm: SIMULATED — no --host given, targeting the built-in emulator at %s", emu.url)
    if environment.web_ui is not None:
        _extend_web_ui(environment)


def _load_slo_spec_or_exit(environment: Environment, ctx: RunContext) -> None:
    """Reject a bad SLO file before any traffic: one line with the file, line and reason."""
    from reports import SloSpecError, load_slo_spec

    opts = environment.parsed_options
    path = str(getattr(opts, "slo", "") or "")
    try:
        spec = load_slo_spec(path or None)
        known = {str(getattr(u, "workload", u.__name__)) for u in environment.user_classes}
        unknown = spec.workloads_named() - known - {"run", "*"}
        if unknown:
            first = min((t for t in spec.targets if t.scope in unknown), key=lambda t: t.scope_line)
            raise SloSpecError(
                f"{spec.source}:{first.scope_line}: no workload named {first.scope!r} in this locustfile "
                f"(known: {', '.join(sorted(known))}, or 'run' / '*')"
            )
    except SloSpecError as exc:
        sys.stderr.write(f"tokenstorm: invalid SLO file: {exc}\n")
        raise SystemExit(EXIT_RUN_FAILED) from None
    ctx.slo_spec = spec
    ctx.slo_spec_text = Path(path).read_text(encoding="utf-8") if path else None


def _load_workloads(environment: Environment, ctx: RunContext) -> None:
    from ._settings import settings_from_options
    from ._tokens import TokenCounter

    opts = environment.parsed_options
    settings = settings_from_options(opts)
    ctx.token_counter = TokenCounter(getattr(opts, "tokenizer", "") or None)
    ctx.seed = int(getattr(opts, "seed", 0) or 0)
    ctx.workload_settings = settings
    ctx._builders.clear()
    for user_class in environment.user_classes:
        name = getattr(user_class, "workload", None)
        if name in settings:
            user_class.weight = settings[name].weight
            ctx.builder(name)  # load datasets and corpora now: errors before traffic


def _load_workloads_or_exit(environment: Environment, ctx: RunContext) -> None:
    """Validate workload options, the workload file and datasets before any traffic."""
    try:
        _load_workloads(environment, ctx)
    except ValueError as exc:  # WorkloadFileError, DatasetError, bad lengths, bad tokenizer
        sys.stderr.write(f"tokenstorm: {exc}\n")
        raise SystemExit(EXIT_RUN_FAILED) from None


def _on_test_start(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    opts = environment.parsed_options
    ctx.gc_watch.start()  # every process that reads streams: workers too
    if ctx.is_worker or opts is None:
        return
    ctx.simulated = bool(ctx.emulator_url) and environment.host == ctx.emulator_url
    ctx.warmup_s = float(getattr(opts, "warmup", 0.0) or 0.0)
    ctx.model = getattr(opts, "model", "") or None
    ctx.problem = None
    try:
        _load_workloads(environment, ctx)  # options may have changed in the web UI form
        problem = _preflight(environment, ctx)
    except ValueError as exc:
        problem = str(exc)
    label = Path(str(getattr(opts, "locustfile", "run") or "run")).stem
    run_dir = ctx.start(
        Path(getattr(opts, "run_dir", "runs") or "runs"), label + ("_SIMULATED" if ctx.simulated else "")
    )
    ctx.problem = problem
    ctx.report_built = False
    ctx.write_run_json(vars(opts), environment.host, _run_extra(ctx, "running" if not problem else "failed"))
    log.info("tokenstorm: run directory %s%s", run_dir, " (SIMULATED)" if ctx.simulated else "")
    if problem:
        log.error("tokenstorm: %s", problem)
        environment.process_exit_code = EXIT_RUN_FAILED
        runner = environment.runner
        if runner is not None:
            gevent.spawn_later(0.1, runner.quit if opts.headless else runner.stop)
        return
    gevent.spawn(_flush_loop, environment, ctx)
    _start_monitor(environment, ctx, run_dir)


def _preflight(environment: Environment, ctx: RunContext) -> str | None:
    opts = environment.parsed_options
    try:
        _extra_body(opts)
    except ValueError:
        return '--extra-body is not valid JSON (example: \'{"chat_template_kwargs": {"enable_thinking": false}}\')'
    try:
        client = LlmClient(environment.host or "", api_key=getattr(opts, "api_key", None) or None)
        try:
            _resolve_model(environment, client) if not ctx.model else None
            if not ctx.simulated and not client.models_owned_by:
                client.list_models()
            if "tokenstorm" in client.models_owned_by.values() and not ctx.simulated:
                ctx.simulated = True  # a standalone emulator (docker compose profile "emulator")
                log.warning("tokenstorm: SIMULATED — %s is tokenstorm's emulator, not a real server", environment.host)
        finally:
            client.close()
    except TargetError as exc:
        return str(exc)
    return None


def _flush_loop(environment: Environment, ctx: RunContext) -> None:
    last_log = 0.0
    writer = ctx.writer
    while ctx.writer is writer and writer is not None:
        gevent.sleep(2.0)
        ctx.flush()
        last_log += 2.0
        if last_log >= 10.0 and environment.parsed_options and environment.parsed_options.headless:
            last_log = 0.0
            log.info(
                "tokenstorm: %.0f output tok/s (last %g s), %d requests recorded%s",
                ctx.token_rate.rate(),
                ctx.token_rate.window_s,
                writer.count,
                " — SIMULATED" if ctx.simulated else "",
            )


def _run_extra(ctx: RunContext, status: str, **more: Any) -> dict[str, Any]:
    spec = ctx.slo_spec
    return {
        "status": status,
        "problem": ctx.problem,
        "slo_spec_text": ctx.slo_spec_text,
        "slo_spec_source": spec.source if spec is not None else None,
        "workers_lost": ctx.workers_lost,
        "client_bound": sorted(ctx.client_bound),
        "gc": ctx.gc_watch.as_dict(),
        **more,
    }


def _build_outputs(environment: Environment, ctx: RunContext) -> None:
    """Write report.html, junit.xml, summary.json and set the process exit code."""
    from reports import build_report

    if ctx.run_dir is None or ctx.report_built:
        return
    ctx.report_built = True
    ctx.flush()
    try:
        result = build_report(ctx.run_dir, ctx.slo_spec)
    except Exception:  # a bug in the report must not hide the records; say where they are
        log.exception("tokenstorm: building the report failed; the records are in %s", ctx.run_dir)
        environment.process_exit_code = EXIT_RUN_FAILED
        return
    if environment.process_exit_code != EXIT_RUN_FAILED:
        environment.process_exit_code = result.exit_code
    level = logging.INFO if result.exit_code == 0 else logging.ERROR
    log.log(
        level,
        "tokenstorm: %s — %s (exit code %d)",
        result.summary.verdict.upper(),
        result.summary.reason,
        result.exit_code,
    )
    log.info("tokenstorm: report %s", result.report)


def _start_monitor(environment: Environment, ctx: RunContext, run_dir: Path) -> None:
    from monitors import MonitorProcess

    opts = environment.parsed_options
    interval = max(0.1, float(getattr(opts, "monitor_interval", 1.0) or 1.0))
    scrape = None if getattr(opts, "no_server_metrics", False) else environment.host
    gpu = str(getattr(opts, "gpu_monitor", "") or "")
    for name in ("gpu.jsonl", "server.jsonl"):  # every run directory has both, empty when off
        (run_dir / name).touch()
    if scrape or gpu:
        # GPU sampling and /metrics parsing run in their own process: in this one they would
        # stall the event loop that reads the streams (measured in monitors/_process.py).
        ctx.monitor = MonitorProcess(
            run_dir,
            target_url=scrape,
            gpu_monitor=gpu or None,
            interval_s=interval,
            api_key=getattr(opts, "api_key", None) or None,
        )
    load_fh = (run_dir / "load.jsonl").open("a", encoding="utf-8")

    def loop() -> None:
        next_t = time.monotonic()
        while True:
            runner = environment.runner
            users = runner.user_count if runner is not None else 0
            cpu = _track_workers(runner, ctx)
            load_fh.write(json.dumps({"epoch_s": time.time(), "users": users, "cpu": cpu}) + "\n")
            load_fh.flush()
            next_t += interval
            gevent.sleep(max(0.0, next_t - time.monotonic()))

    ctx.monitor_greenlet = gevent.spawn(loop)
    ctx.monitor_greenlet.link(lambda _g: load_fh.close())


#: A load generator above this CPU share measures its own queueing, not the server's latency.
CLIENT_BOUND_CPU_PCT = 90.0


def _track_workers(runner: Any, ctx: RunContext) -> dict[str, float]:
    """Per-worker CPU now; notes workers that went missing and generators that are CPU-bound."""
    now = time.time()
    cpu: dict[str, float] = {}
    if isinstance(runner, MasterRunner):
        for client in list(runner.clients.values()):
            cpu[str(client.id)] = float(client.cpu_usage)
            if client.state == "missing" and str(client.id) not in ctx.workers_lost:
                last = ctx.last_heard.get(str(client.id))
                ctx.workers_lost[str(client.id)] = {"detected_epoch_s": now, "last_heard_epoch_s": last}
                log.error("tokenstorm: worker %s vanished (last report %s s ago); its records until then are kept",
                          client.id, f"{now - last:.0f}" if last else "?")  # fmt: skip
    elif runner is not None:
        cpu["local"] = float(runner.current_cpu_usage)
    for worker, pct in cpu.items():
        if pct > CLIENT_BOUND_CPU_PCT and worker not in ctx.client_bound:
            ctx.client_bound.add(worker)
            log.warning("tokenstorm: load generator %s at %.0f%% CPU — the run is client-bound: latencies include "
                        "the client's own queueing; add workers (--processes / --worker)", worker, pct)  # fmt: skip
    return cpu


def _stop_monitor(ctx: RunContext) -> None:
    monitor, ctx.monitor = ctx.monitor, None
    if ctx.monitor_greenlet is not None:
        ctx.monitor_greenlet.kill(block=True)
        ctx.monitor_greenlet = None
    if monitor is not None:
        monitor.stop()  # it takes one last sample first


def _on_test_stopping(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    ctx.stopping = True
    ctx.flushed_workers.clear()


def _wait_for_workers_final_records(environment: Environment, ctx: RunContext, timeout_s: float = 15.0) -> None:
    """On a master: wait until every live worker has sent the report made after its users stopped."""
    runner = environment.runner
    if not isinstance(runner, MasterRunner):
        return
    deadline = time.monotonic() + timeout_s
    live: set[str] = set()
    while time.monotonic() < deadline:
        live = {str(c.id) for c in runner.clients.values() if c.state != "missing"}
        if live <= ctx.flushed_workers:
            return
        gevent.sleep(0.1)
    missing = sorted(live - ctx.flushed_workers)
    log.warning("tokenstorm: workers %s sent no final records within %g s; the report has what arrived",
                ", ".join(missing), timeout_s)  # fmt: skip


def _on_test_stop(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    opts = environment.parsed_options
    if ctx.is_worker or opts is None or ctx.run_dir is None:
        return
    runner = environment.runner
    if isinstance(runner, MasterRunner) and runner.user_count > 0:
        # Locust's quit path: workers are told to quit only after this event, and their last
        # records arrive with their final reports; the outputs are built at "quitting".
        ctx.defer_build = True
        return
    _wait_for_workers_final_records(environment, ctx)
    ctx.stopping = False
    _stop_monitor(ctx)
    ctx.gc_watch.stop()
    ctx.flush()
    ctx.write_run_json(vars(opts), environment.host, _run_extra(ctx, "stopped", stopped_epoch_s=time.time()))
    _build_outputs(environment, ctx)


def _on_quitting(environment: Environment, **_kw: Any) -> None:
    ctx = context(environment)
    runner = environment.runner
    if not ctx.is_worker and runner is not None and runner.state in (STATE_SPAWNING, STATE_RUNNING):
        # Locust fires "quitting" before it stops the users (Ctrl-C, SIGTERM, web UI quit):
        # stop them first so their in-flight requests are recorded and the report is final.
        runner.stop()
    if not ctx.is_worker and ctx.run_dir is not None and environment.parsed_options is not None:
        if ctx.defer_build:
            _wait_for_workers_final_records(environment, ctx, timeout_s=10.0)
        if not ctx.report_built:
            _stop_monitor(ctx)
            ctx.write_run_json(
                vars(environment.parsed_options),
                environment.host,
                _run_extra(ctx, "finished", stopped_epoch_s=time.time()),
            )
            _build_outputs(environment, ctx)
        log.info(
            "tokenstorm: %d request records in %s",
            ctx.writer.count if ctx.writer else 0,
            ctx.run_dir / "requests.jsonl",
        )
    _stop_monitor(ctx)
    ctx.close()
    emu = ctx.emulator
    if emu is not None:
        emu.stop()


def _on_report_to_master(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    env = _ENVIRONMENTS.get("worker")
    if env is not None:
        data["tokenstorm_records"] = context(env).take_outbox()
        runner = env.runner
        # 0 once the worker's users are all stopped: this report then carries its last records.
        data["tokenstorm_users"] = runner.user_count if runner is not None else 0


def _on_worker_report(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    env = _ENVIRONMENTS.get("master")
    if env is not None:
        ctx = context(env)
        ctx.last_heard[str(client_id)] = time.time()
        if data.get("tokenstorm_users") == 0 and ctx.stopping:
            ctx.flushed_workers.add(str(client_id))
    lines = data.get("tokenstorm_records")
    if env is not None and lines:
        context(env).receive(lines)


_ENVIRONMENTS: dict[str, Environment] = {}


def _remember_env(environment: Environment, **_kw: Any) -> None:
    runner = environment.runner
    role = "worker" if isinstance(runner, WorkerRunner) else "master" if isinstance(runner, MasterRunner) else "local"
    _ENVIRONMENTS[role] = environment


_GPU_COLUMNS = (
    ("gpu", "GPU"),
    ("name", "Name"),
    ("util_gpu_pct", "Util %"),
    ("mem_used_mib", "Memory used MiB"),
    ("mem_total_mib", "Memory total MiB"),
    ("power_w", "Power W"),
    ("temp_c", "Temp °C"),
    ("sm_clock_mhz", "SM MHz"),
)
_SERVER_COLUMNS = (
    ("running", "Running"),
    ("waiting", "Waiting"),
    ("kv_cache_usage", "KV cache usage"),
    ("preemptions", "Preemptions"),
    ("prefix_cache_hits", "Prefix-cache hits"),
    ("generation_tokens", "Generated tokens"),
)


def _fmt(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def _extend_web_ui(environment: Environment) -> None:
    from flask import request

    web_ui = environment.web_ui
    assert web_ui is not None
    web_ui.template_args["extended_tabs"] = [
        {"title": "LLM", "key": "tokenstorm"},
        {"title": "GPU", "key": "tokenstorm-gpu"},
        {"title": "vLLM server", "key": "tokenstorm-server"},
    ]
    web_ui.template_args["extended_tables"] = [
        {
            "key": "tokenstorm",
            "structure": [
                {"key": "workload", "title": "Workload"},
                {"key": "requests", "title": "Requests recorded"},
                {"key": "tokens_per_s", "title": "Output tok/s (10 s)"},
                {"key": "tokens", "title": "Output tokens"},
                {"key": "target", "title": "Target"},
            ],
        },
        {"key": "tokenstorm-gpu", "structure": [{"key": k, "title": t} for k, t in _GPU_COLUMNS]},
        {"key": "tokenstorm-server", "structure": [{"key": k, "title": t} for k, t in _SERVER_COLUMNS]},
    ]

    app = web_ui.app
    assert app is not None
    web_ui.template_args["extended_csv_files"] = [
        {"href": "./tokenstorm/report", "title": "tokenstorm SLO report (live during a run, final after it)"}
    ]

    @app.route("/tokenstorm/report")
    def _report() -> Any:
        from flask import Response

        from reports import build_report

        ctx = context(environment)
        if ctx.run_dir is None:
            return Response("No run yet: start one, then open this page again.", mimetype="text/plain")
        ctx.flush()
        report = ctx.run_dir / "report.html"
        if not ctx.report_built:  # during a run: rebuild from what is on disk now
            build_report(ctx.run_dir, ctx.slo_spec)
        return Response(report.read_text(encoding="utf-8"), mimetype="text/html")

    @app.after_request
    def _add_llm_stats(response: Any) -> Any:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        ctx = context(environment)
        target = "SIMULATED (built-in emulator)" if ctx.simulated else (environment.host or "")
        rows = [
            {
                "workload": w,
                "requests": ctx.requests_by_workload.get(w, 0),
                "tokens_per_s": round(r.rate(), 1),
                "tokens": r.total_tokens,
                "target": target,
            }
            for w, r in sorted(ctx.token_rate_by_workload.items())
        ]
        rows.append(
            {
                "workload": "Total" + (" — CLIENT-BOUND (load generator CPU > 90%)" if ctx.client_bound else ""),
                "requests": sum(ctx.requests_by_workload.values()),
                "tokens_per_s": round(ctx.token_rate.rate(), 1),
                "tokens": ctx.token_rate.total_tokens,
                "target": target,
            }
        )
        payload = response.get_json()
        monitor = ctx.monitor
        latest_gpu, server = monitor.latest() if monitor is not None else ([], {})
        gpu_rows = [{k: _fmt(g.get(k)) for k, _ in _GPU_COLUMNS} for g in latest_gpu]
        server_rows = [{k: _fmt(server.get(k)) for k, _ in _SERVER_COLUMNS}] if server else []
        payload["extended_stats"] = [
            {"key": "tokenstorm", "data": rows},
            {"key": "tokenstorm-gpu", "data": gpu_rows},
            {"key": "tokenstorm-server", "data": server_rows},
        ]
        response.set_data(json.dumps(payload))
        return response


_INSTALLED: weakref.WeakSet[Events] = weakref.WeakSet()


def install(event_hooks: Events | None = None) -> None:
    """Register tokenstorm's options and listeners (idempotent)."""
    ev = event_hooks or events
    if ev in _INSTALLED:
        return
    _INSTALLED.add(ev)
    ev.init_command_line_parser.add_listener(_add_options)
    ev.init.add_listener(_remember_env)
    ev.init.add_listener(_on_init)
    ev.test_start.add_listener(_on_test_start)
    ev.test_stopping.add_listener(_on_test_stopping)
    ev.test_stop.add_listener(_on_test_stop)
    ev.quitting.add_listener(_on_quitting)
    ev.report_to_master.add_listener(_on_report_to_master)
    ev.worker_report.add_listener(_on_worker_report)
