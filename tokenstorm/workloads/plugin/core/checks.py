"""Start-up checks, before any traffic: the options' files and folders, the workloads, the SLO file, the
targets answering; each problem is one line naming what to fix (exit 3)."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from locust.env import Environment

from ...client import LlmClient, TargetError
from ...client.probes import api_problem, tool_calling_problem
from ...rundir import EXIT_RUN_FAILED
from ...traffic import WorkloadFileError, named_workloads, settings_from_options
from ...traffic.tokens import TokenCounter
from ..users.workload import resolve_model, run_targets
from . import locust_compat
from .context import LEFT_OUT_OPTION, RunContext
from .options import OptionError

__all__ = [
    "agent_left_out_line",
    "check_run_root",
    "load_slo_spec_or_exit",
    "load_workloads",
    "load_workloads_or_exit",
    "preflight",
    "say_worker_port",
    "slo_spec_for",
]

log = logging.getLogger("tokenstorm")


def check_run_root(root: str) -> None:
    """``--run-dir`` can hold run directories: a folder (or one that can be made) this process may write."""
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise OptionError(f"--run-dir {root}: is a file, not a folder; name a folder (made if missing)")
    existing = next((p for p in (path, *path.absolute().parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise OptionError(f"--run-dir {root}: {existing} is a file, so no folder can be made under it")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise OptionError(f"--run-dir {root}: {existing} is not writable by this user")


def say_worker_port(environment: Environment) -> None:
    """A distributed master says who may connect to its worker port, and what they are sent."""
    opts = environment.parsed_options
    if not locust_compat.is_master(environment.runner) or getattr(opts, "processes", None):
        return  # --processes: the port is on loopback, for its own children
    host = getattr(opts, "master_bind_host", "*")
    log.warning(
        "tokenstorm: the worker port %s:%s sends every worker that connects the run's options (never the "
        "API key or URL credentials: give each worker its own --api-key or $OPENAI_API_KEY); keep it "
        "private: --master-bind-host an internal address, or a firewall",
        host,
        getattr(opts, "master_bind_port", 5557),
    )


def slo_spec_for(environment: Environment, path: str) -> tuple[Any, str | None]:
    """The run's SLO spec from file ``path`` (empty: the default check) and the file's text, checked against
    this locustfile's workloads; :class:`OptionError` in one line (``invalid SLO file: FILE:LINE: reason``,
    never the file's text) when it is bad. At start-up and again at each run's start (the web UI form)."""
    import difflib

    from tokenstorm.reports import SloSpecError, load_slo_spec

    try:
        spec = load_slo_spec(path or None)
        known = {str(getattr(u, "workload", u.__name__)) for u in environment.user_classes}
        unknown = spec.workloads_named() - known - {"run", "*"}
        if unknown:
            first = min((t for t in spec.targets if t.scope in unknown), key=lambda t: t.scope_line)
            near = difflib.get_close_matches(first.scope, sorted(known), n=1)
            raise SloSpecError(
                f"{spec.source}:{first.scope_line}: no workload of that name in this locustfile"
                + (f" — did you mean {near[0]}?" if near else "")
                + f" (known: {', '.join(sorted(known))}, or 'run' / '*')"
            )
        text = Path(path).read_text(encoding="utf-8-sig") if path else None
    except SloSpecError as exc:
        raise OptionError(f"invalid SLO file: {exc}") from None
    return spec, text


def load_slo_spec_or_exit(environment: Environment, ctx: RunContext) -> None:
    """Reject a bad SLO file before any traffic: one line with the file, line and reason."""
    try:
        ctx.slo_spec, ctx.slo_spec_text = slo_spec_for(environment, ctx.options.slo)
    except OptionError as exc:
        sys.stderr.write(f"tokenstorm: {exc}\n")
        raise SystemExit(EXIT_RUN_FAILED) from None


def load_workloads(environment: Environment, ctx: RunContext) -> None:
    """The run's workload settings (options, weights, the workload file) on its user classes, datasets loaded."""
    opts = environment.parsed_options
    settings = settings_from_options(opts)
    ctx.token_counter = TokenCounter(getattr(opts, "tokenizer", "") or None)
    ctx.seed = ctx.options.seed
    ctx.workload_settings = settings
    ctx.reset_builders()
    if ctx.is_worker:  # what the master left out (a server that cannot serve it): no traffic here either
        left = {n for n in str(getattr(opts, LEFT_OUT_OPTION, "") or "").split(",") if n in settings}
        settings.update({n: replace(settings[n], weight=0) for n in left})
    used = {str(getattr(u, "workload", "")) for u in environment.user_classes} & set(settings)
    if any(getattr(u, "open_loop", False) for u in environment.user_classes):
        used = set(settings)  # open-loop arrivals are drawn from every workload by weight
    if used and all(settings[name].weight == 0 for name in used):
        raise WorkloadFileError(
            f"every workload's weight is 0 ({', '.join(sorted(used))}): nothing would be sent "
            "(--weights, $TOKENSTORM_WEIGHTS or the workload file)"
        )
    agent = settings.get("agent")
    if agent is not None and agent.weight > 0 and "agent" in used and (agent.api or ctx.options.api) == "completions":
        raise WorkloadFileError(
            "agent sessions call tools, which /v1/completions cannot offer: give agent another "
            "api (api: chat, messages or responses in a workload file), or --weights agent=0"
        )
    for user_class in environment.user_classes:
        name = getattr(user_class, "workload", None)
        if name in settings:
            user_class.weight = settings[name].weight
            ctx.builder(name)  # load datasets and corpora now: errors before traffic
    if used == set(settings):
        for name in settings:
            ctx.builder(name)


def load_workloads_or_exit(environment: Environment, ctx: RunContext) -> None:
    """Validate workload options, the workload file and datasets before any traffic."""
    try:
        load_workloads(environment, ctx)
    except ValueError as exc:  # WorkloadFileError, DatasetError, bad lengths, bad tokenizer
        sys.stderr.write(f"tokenstorm: {exc}\n")
        raise SystemExit(EXIT_RUN_FAILED) from None


def preflight(environment: Environment, ctx: RunContext) -> str | None:
    """Every target answers /v1/models (and the model to ask for is known) before any traffic, and calls
    tools when the run has agent sessions: when one does not, agent sessions are left out of a mix that did
    not ask for them by name (said in one line, and in run.json), and the run fails when it did."""
    agent = _agent_probe(environment, ctx)
    ctx.left_out = {}
    setattr(environment.parsed_options, LEFT_OUT_OPTION, "")  # what the workers leave out: nothing yet
    for label, url in run_targets(environment, environment.host):
        try:
            client = LlmClient(url, authorization=ctx.authorization_for(url), secrets=ctx.secrets())
            try:
                model = resolve_model(environment, client)
                for api in sorted(apis_in_use(environment, ctx) - {"chat"}):
                    if why := api_problem(client, model, api):
                        return f"target {label}: {why}" if label else why
                if agent is not None and (why := tool_calling_problem(client, model, *agent)):
                    asked = _agent_asked_for(environment, ctx)
                    if asked is not None:
                        return f"target {label}: {why}{asked}" if label else f"{why}{asked}"
                    _leave_out(environment, ctx, "agent", agent_left_out_line(label))
                    agent = None  # the other targets need not call tools either
                if not client.models_owned_by:
                    client.list_models()
                if "tokenstorm" in client.models_owned_by.values() and not ctx.simulated:
                    ctx.simulated = True  # a standalone emulator (docker compose profile "emulator")
                    log.warning("tokenstorm: SIMULATED — %s is tokenstorm's emulator, not a real server", url)
            finally:
                client.close()
        except TargetError as exc:
            return f"target {label}: {exc}" if label else str(exc)
    return None


def agent_left_out_line(label: str = "") -> str:
    """The one line a run says when it leaves agent sessions out because a server does not call tools."""
    server = f"target {label} does not call tools" if label else "the server does not call tools"
    return (
        f"agent sessions left out: {server} (start vLLM with --enable-auto-tool-choice --tool-call-parser "
        "NAME — hermes for Qwen, llama3_json for Llama 3 — to include them; --weights agent=1 makes this an "
        "error instead)"
    )


def _agent_asked_for(environment: Environment, ctx: RunContext) -> str | None:
    """How this run asks for agent sessions by name, as the end of the line refusing it (``None``: it does not,
    and they may be left out): ``--weights``, the workload file, an ``--agent-*`` option, the SLO file, agent
    users chosen (agent.py, user classes named, the class picker) rather than the whole mix — or nothing else
    would be sent without them."""
    opts = environment.parsed_options
    open_loop = any(getattr(u, "open_loop", False) for u in environment.user_classes)
    chosen = {str(getattr(u, "workload", "")) for u in environment.user_classes} & set(ctx.workload_settings)
    others = (set(ctx.workload_settings) if open_loop else chosen) - {"agent"}
    tip = " — or leave them out with --weights agent=0"
    if not any(ctx.workload_settings[name].weight > 0 for name in others):
        return ""  # agent users alone (agent.py): nothing to leave them out of
    if where := named_workloads(opts).get("agent"):
        return f" (asked for by {where}){tip}"
    if ctx.slo_spec is not None and "agent" in ctx.slo_spec.workloads_named():
        return f" (the SLO file {ctx.slo_spec.source} judges them){tip}"
    if not open_loop and chosen != set(ctx.workload_settings):
        return f" (agent users chosen: {', '.join(sorted(chosen))}){tip}"
    return None


def _leave_out(environment: Environment, ctx: RunContext, workload: str, why: str) -> None:
    """Send no ``workload`` traffic in this run: its weight 0 here and on every worker (their options say so),
    ``why`` said once and kept for run.json."""
    _zero_weights(environment, ctx, {workload})
    ctx.left_out[workload] = why
    setattr(environment.parsed_options, LEFT_OUT_OPTION, ",".join(sorted(ctx.left_out)))
    log.warning("tokenstorm: %s", why)


def _zero_weights(environment: Environment, ctx: RunContext, workloads: set[str]) -> None:
    for name in workloads & set(ctx.workload_settings):
        ctx.workload_settings[name] = replace(ctx.workload_settings[name], weight=0)
    for user_class in environment.user_classes:
        if getattr(user_class, "workload", None) in workloads:
            user_class.weight = 0


def apis_in_use(environment: Environment, ctx: RunContext) -> set[str]:
    """The APIs this run's workloads speak (``--api``, each workload file's ``api:``), of those it sends."""
    open_loop = any(getattr(u, "open_loop", False) for u in environment.user_classes)
    used = (
        set(ctx.workload_settings) if open_loop else {str(getattr(u, "workload", "")) for u in environment.user_classes}
    )
    return {s.api or ctx.options.api for n, s in ctx.workload_settings.items() if n in used and s.weight > 0}


def _agent_probe(environment: Environment, ctx: RunContext) -> tuple[list[dict[str, Any]], Any, str] | None:
    """The tools and ``tool_choice`` agent sessions of this run will send (``None``: it has none)."""
    settings = ctx.workload_settings.get("agent")
    if settings is None or settings.weight <= 0:
        return None
    if not any(
        getattr(u, "workload", None) == "agent" or getattr(u, "open_loop", False) for u in environment.user_classes
    ):
        return None
    model: Any = ctx.builder("agent")  # tokenstorm.workloads.traffic.models.agent.Agent
    return [t.schema for t in model.profiles[0].tools], model.tool_choice, settings.api or ctx.options.api
