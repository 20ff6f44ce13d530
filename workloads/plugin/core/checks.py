"""Start-up checks, before any traffic: the options' files and folders, the workloads, the SLO file, the
targets answering; each problem is one line naming what to fix (exit 3)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from locust.env import Environment

from ...client import LlmClient, TargetError
from ...client.probes import tool_calling_problem
from ...rundir import EXIT_RUN_FAILED
from ...traffic import WorkloadFileError, settings_from_options
from ...traffic.tokens import TokenCounter
from ..users.workload import resolve_model, run_targets
from . import locust_compat
from .context import RunContext
from .options import OptionError

__all__ = ["check_run_root", "load_slo_spec_or_exit", "load_workloads", "load_workloads_or_exit", "preflight",
           "say_worker_port"]  # fmt: skip

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
    log.warning("tokenstorm: the worker port %s:%s sends every worker that connects the run's options (never the "
                "API key or URL credentials: give each worker its own --api-key or $OPENAI_API_KEY); keep it "
                "private: --master-bind-host an internal address, or a firewall",
                host, getattr(opts, "master_bind_port", 5557))  # fmt: skip


def load_slo_spec_or_exit(environment: Environment, ctx: RunContext) -> None:
    """Reject a bad SLO file before any traffic: one line with the file, line and reason."""
    from reports import SloSpecError, load_slo_spec

    path = ctx.options.slo
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
    ctx.slo_spec_text = Path(path).read_text(encoding="utf-8-sig") if path else None


def load_workloads(environment: Environment, ctx: RunContext) -> None:
    opts = environment.parsed_options
    settings = settings_from_options(opts)
    ctx.token_counter = TokenCounter(getattr(opts, "tokenizer", "") or None)
    ctx.seed = ctx.options.seed
    ctx.workload_settings = settings
    ctx.reset_builders()
    used = {str(getattr(u, "workload", "")) for u in environment.user_classes} & set(settings)
    if any(getattr(u, "open_loop", False) for u in environment.user_classes):
        used = set(settings)  # open-loop arrivals are drawn from every workload by weight
    if used and all(settings[name].weight == 0 for name in used):
        raise WorkloadFileError(f"every workload's weight is 0 ({', '.join(sorted(used))}): nothing would be sent "
                                "(--weights, $TOKENSTORM_WEIGHTS or the workload file)")  # fmt: skip
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
    tools when the run has agent sessions."""
    agent = _agent_probe(environment, ctx)
    for label, url in run_targets(environment, environment.host):
        try:
            client = LlmClient(url, authorization=ctx.authorization_for(url), secrets=ctx.secrets())
            try:
                model = resolve_model(environment, client)
                if agent is not None and (why := tool_calling_problem(client, model, *agent)):
                    return f"target {label}: {why}" if label else why
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


def _agent_probe(environment: Environment, ctx: RunContext) -> tuple[list[dict[str, Any]], Any] | None:
    """The tools and ``tool_choice`` agent sessions of this run will send (``None``: it has none)."""
    settings = ctx.workload_settings.get("agent")
    if settings is None or settings.weight <= 0:
        return None
    if not any(getattr(u, "workload", None) == "agent" or getattr(u, "open_loop", False)
               for u in environment.user_classes):  # fmt: skip
        return None
    model: Any = ctx.builder("agent")  # workloads.traffic.models.agent.Agent
    return [t.schema for t in model.profiles[0].tools], model.tool_choice
