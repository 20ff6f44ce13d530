"""The consistency probes: do temperature-0 answers stay the same under load?

Engines are not batch-invariant by default: the same prompt at temperature 0 may be answered differently
when it shares a batch with others. With ``--consistency-probes N`` (8 when the SLO file sets a
``consistency_changed`` target) the master / local process sends N fixed short prompts
(:data:`~.prompts.PROBE_PROMPTS`, English and Chinese; temperature 0, ``max_tokens`` 32, streamed) to every
target twice: once before the load (after the start-up checks, before any user starts and before the run's
clock does), and once under it (after spawning has completed and the warm-up has passed). A run that ends
before the second pass finishes has its consistency *not measured* (said on the console).

Each answer is a line of ``RUN_DIR/probes.jsonl`` (:class:`ProbeLine`, secrets masked). The probes are
never request records, never in Locust's statistics. After the second pass the console says how many of
the answers changed; :func:`consistency_counts` is that comparison.
"""

from __future__ import annotations

import logging
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment

from ...client import CompletionRequest, TargetError, in_api
from ...client.probes import PROBE_ID_PREFIX
from ...rundir import ErrorCategory
from ...rundir.secrets import redact
from ..core.context import RunContext, context
from ..core.options import RunOptions
from ..users.workload import resolve_model, run_client, run_targets
from .consistency import BEFORE, PROBES_FILE, UNDER_LOAD, ProbeLine, consistency_counts, probe_count
from .prompts import PROBE_PROMPTS

__all__ = ["install", "probe_request", "probes_before_load", "probes_kept", "stop_probes"]

log = logging.getLogger("tokenstorm")

#: the longest the pass under load waits for the users spawning said were there to be reported running
USERS_WAIT_S = 30.0
#: what one probe asks for: short, and the same every time
PROBE_MAX_TOKENS = 32
PROBE_TEMPERATURE = 0.0


def probe_request(number: int, options: RunOptions) -> CompletionRequest:
    """Probe ``number``'s request (the bundled prompts in turn); the run's ``--extra-body`` goes with it (what a
    server may need, e.g. thinking off), its other overrides do not."""
    prompt = PROBE_PROMPTS[number % len(PROBE_PROMPTS)]
    return CompletionRequest(
        workload="consistency_probe",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=PROBE_MAX_TOKENS,
        temperature=PROBE_TEMPERATURE,
        stream=True,
        collect_text=True,
        extra_body=dict(options.extra_body),
        request_id=f"{PROBE_ID_PREFIX}consistency-{number}-{uuid.uuid4().hex[:12]}",
    )


@dataclass
class _Probes:
    """One run's probes (master / local process)."""

    count: int
    lines: list[ProbeLine] = field(default_factory=list)
    run_dir: Path | None = None
    under_load: gevent.Greenlet | None = None
    #: the under-load pass has started (the warm-up is over), has been written
    probing: bool = False
    measured: bool = False
    stopping: bool = False


#: each environment's current run's probes, and the environments listened to
_RUNS: weakref.WeakKeyDictionary[Environment, _Probes] = weakref.WeakKeyDictionary()
_LISTENING: weakref.WeakSet[Environment] = weakref.WeakSet()


def _users(environment: Environment) -> int:
    runner = environment.runner
    return int(runner.user_count) if runner is not None else 0


def _send_pass(environment: Environment, ctx: RunContext, probes: _Probes, phase: str) -> list[ProbeLine] | None:
    """Every probe to every target, one after another (a probe beside another would be load of its own);
    ``None`` when the run stopped it."""
    out: list[ProbeLine] = []
    secrets = ctx.secrets()
    for label, url in run_targets(environment, environment.host):
        client = run_client(environment, url, target=label)
        try:
            try:
                model: str | None = resolve_model(environment, client)
                problem = None
            except TargetError as exc:
                model, problem = None, redact(str(exc), secrets)
            for number in range(probes.count):
                if probes.stopping:
                    return None
                epoch_s, users = time.time(), _users(environment)
                if model is None:
                    out.append(ProbeLine(phase, number, label, "", False, problem, epoch_s, users))
                    continue
                record = client.complete(in_api(probe_request(number, ctx.options), ctx.options.api), model)
                if record.error_category == ErrorCategory.CANCELLED or probes.stopping:
                    return None
                error = None if record.ok else (record.error_detail or record.error_category or "failed")
                text = redact(client.last_answer.text, secrets) if record.ok else ""
                out.append(ProbeLine(phase, number, label, text, record.ok, error, record.start_epoch_s, users))
        finally:
            client.close()
    return out


def _write(probes: _Probes, lines: list[ProbeLine]) -> None:
    if probes.run_dir is None or not lines:
        return
    with (probes.run_dir / PROBES_FILE).open("ab") as fh:
        fh.write(b"".join(line.to_json() + b"\n" for line in lines))


def probes_before_load(environment: Environment, ctx: RunContext) -> None:
    """``test_start`` (master / local, the start-up checks passed, before the run's clock starts): the
    first pass, kept until :func:`probes_kept` names the run directory."""
    stop_probes(environment, quiet=True)  # a run before this one (web UI) that is still probing
    count = probe_count(ctx.options, ctx.slo_spec)
    if ctx.is_worker or count <= 0:
        _RUNS.pop(environment, None)
        return
    probes = _Probes(count)
    _RUNS[environment] = probes
    log.info("tokenstorm: consistency: %d probe(s) per target before the load", count)
    probes.lines = _send_pass(environment, ctx, probes, BEFORE) or []


def probes_kept(environment: Environment, run_dir: Path) -> None:
    """The run directory is open: the first pass's answers go into its ``probes.jsonl``."""
    probes = _RUNS.get(environment)
    if probes is not None:
        probes.run_dir = run_dir
        _write(probes, probes.lines)


def _on_spawning_complete(environment: Environment, user_count: int) -> None:
    """Spawning reached its target: the second pass, once the warm-up is over (the first time users run)."""
    probes = _RUNS.get(environment)
    if probes is None or probes.under_load is not None or probes.stopping or user_count <= 0:
        return
    probes.under_load = gevent.spawn(_probe_under_load, environment, probes, user_count)


def _probe_under_load(environment: Environment, probes: _Probes, user_count: int) -> None:
    ctx = context(environment)
    warm_until = (ctx.started_epoch_s or time.time()) + ctx.warmup_s
    gevent.sleep(max(0.0, warm_until - time.time()))
    # A master says spawning is complete once it has sent the spawn messages and waited a moment for the
    # workers to report their users (on a busy machine, not long enough): wait for the users themselves.
    deadline = time.monotonic() + USERS_WAIT_S
    while _users(environment) < user_count and time.monotonic() < deadline and not probes.stopping:
        gevent.sleep(0.1)
    if probes.stopping:
        return
    probes.probing = True
    lines = _send_pass(environment, ctx, probes, UNDER_LOAD)
    if lines is None:
        return
    _write(probes, lines)
    probes.lines.extend(lines)
    probes.measured = True
    for result in consistency_counts(probes.lines):
        log.info("tokenstorm: %s", result.sentence())


def stop_probes(environment: Environment, quiet: bool = False) -> None:
    """``test_stopping``: a second pass not finished is stopped (nothing of it kept) and said: not measured."""
    probes = _RUNS.get(environment)
    if probes is None or probes.stopping:
        return
    probes.stopping = True
    if probes.under_load is not None and not probes.under_load.dead:
        probes.under_load.kill(block=True, timeout=5)
    if not probes.measured and not quiet:
        why = (
            "the probes under load were answered"
            if probes.probing
            else "its warm-up was over"
            if probes.under_load is not None
            else "its users were spawned"
        )
        log.warning("tokenstorm: consistency: not measured under load — the run ended before %s", why)


def install(environment: Environment) -> None:
    """Listen for spawning to complete on ``environment`` (master / local process; idempotent)."""
    if environment in _LISTENING:
        return
    _LISTENING.add(environment)
    ref = weakref.ref(environment)

    def spawning_complete(user_count: int = 0, **_kw: Any) -> None:
        env = ref()
        if env is not None:
            _on_spawning_complete(env, user_count)

    environment.events.spawning_complete.add_listener(spawning_complete)
