"""The one send path of every request — closed-loop users (:mod:`.workload`) and open-loop arrivals
(:mod:`..shapes`): the run's options applied, the request sent by the measuring client, the record kept
(:meth:`RunContext.emit`) and shown in Locust's live stats; and the clients, targets and model it is sent with."""

from __future__ import annotations

import logging

import gevent
import gevent.lock
from locust.env import Environment

from ...client import CompletionRequest, LlmClient, TargetError, in_api
from ...rundir import ErrorCategory, RequestRecord
from ...traffic.checks import NOT_JUDGED_STOPPED, check_record
from ..core import locust_compat
from ..core.context import context
from ..core.options import RunOptions

__all__ = ["LlmRequestFailed", "apply_run_options", "resolve_model", "run_client", "run_targets", "send"]

log = logging.getLogger("tokenstorm")


class LlmRequestFailed(Exception):
    """What Locust shows in its failures table for a failed LLM request."""


def run_client(environment: Environment, host: str, user_id: int = 0, target: str = "") -> LlmClient:
    """An :class:`LlmClient` set up from the run's options — the one way every kind of user gets one
    (``target``: the A/B target's label its records carry)."""
    ctx = context(environment)
    opts = ctx.options
    return LlmClient(
        host,
        authorization=ctx.authorization_for(host),
        secrets=ctx.secrets(),
        timeout_s=opts.request_timeout_s,
        stall_timeout_s=opts.stall_timeout_s or None,
        continuous_usage=opts.continuous_usage,
        think_tags=opts.think_tags,
        user_id=user_id,
        worker_id=locust_compat.worker_client_id(environment.runner),
        target=target,
    )


def run_targets(environment: Environment, host: str | None) -> tuple[tuple[str, str], ...]:
    """The endpoints every user drives, as (label, url): ``--targets``, else the one host (no label)."""
    return context(environment).options.targets or (("", host or ""),)


def apply_run_options(opts: RunOptions, req: CompletionRequest, default_max_tokens: int = 128) -> CompletionRequest:
    """The run's overrides (``--max-tokens``, ``--ignore-eos``, ``--temperature``, ``--extra-body``)
    applied to ``req`` — for closed-loop and open-loop users alike."""
    if opts.max_tokens:
        req.max_tokens = opts.max_tokens
    elif req.max_tokens is None:
        req.max_tokens = default_max_tokens
    if opts.ignore_eos:
        req.ignore_eos = True
    if opts.temperature is not None:
        req.temperature = opts.temperature
    if opts.extra_body:
        req.extra_body = {**opts.extra_body, **req.extra_body}
    return req


def send(
    environment: Environment,
    client: LlmClient,
    req: CompletionRequest,
    model: str,
    default_max_tokens: int = 128,
    scheduled: float | None = None,
) -> RequestRecord:
    """Send ``req`` with the run's options, keep its record, show it in the live stats. ``scheduled``: when an
    open-loop request was due (``perf_counter``); its ``send_lag_s`` runs from then to its clock's start (its
    bytes left, after any connect), so that its start less its lag is the time it was due."""
    ctx = context(environment)
    settings = ctx.workload_settings.get(req.workload)
    in_api(req, (settings.api if settings is not None else "") or ctx.options.api)
    record = client.complete(apply_run_options(ctx.options, req, default_max_tokens), model)
    if scheduled is not None:
        record.send_lag_s = max(0.0, client.last_sent - scheduled)
    checks = settings.checks if settings is not None else ()
    if record.ok and (req.checks or checks):
        # The answer's checks, after its last byte was read and its record timed, in the checks' own process:
        # this greenlet waits on its pipe while the event loop goes on reading every other stream.
        ctx.mark_warmup(record)
        failed = None if record.warmup else ctx.failed_answers  # warm-up failures are not judged: not sampled
        try:
            check_record(record, req, client.last_answer, checks, failed, ctx.secrets(), ctx.check_process.judge)
        except gevent.GreenletExit:
            # The run stopped this user while its answer was being checked: the request itself completed, and
            # its record is kept (its answer unjudged) before the user ends — it was lost before.
            record.check, record.check_results, record.check_detail = None, "", NOT_JUDGED_STOPPED
            ctx.emit(record)
            _fire_stats(environment, record)
            raise
    ctx.emit(record)
    if record.error_category != ErrorCategory.CANCELLED:  # stopped by the load test: not a result
        _fire_stats(environment, record)
    return record


def _fire_stats(environment: Environment, record: RequestRecord) -> None:
    """E2E row for every request (failures carry their category): the one Locust counts as a request.
    TTFT and TPOT rows when measured, beside it but outside Locust's total (one request, not three)."""
    fire = environment.events.request.fire
    if not record.ok:
        status = f" (HTTP {record.status_code})" if record.status_code else ""
        fire(
            request_type="E2E",
            name=record.workload,
            response_time=(record.e2e_s or 0.0) * 1000,
            response_length=0,
            exception=LlmRequestFailed(f"{record.error_category}{status}"),
            context={},
        )
        return
    fire(
        request_type="E2E",
        name=record.workload,
        response_time=(record.e2e_s or 0.0) * 1000,
        response_length=record.output_tokens or 0,
        exception=None,
        context={},
    )
    for request_type, seconds in (("TTFT", record.ttft_s), ("TPOT", record.tpot_s)):
        if seconds is not None:
            locust_compat.log_row_outside_total(environment, request_type, record.workload, seconds * 1000)


_MODEL_LOCK = gevent.lock.Semaphore()


def resolve_model(environment: Environment, client: LlmClient) -> str:
    """The model to ask for: ``--model``, else the first one the client's target lists (asked once
    per process and target: A/B targets may serve different models)."""
    ctx = context(environment)
    if ctx.options.model:
        ctx.model = ctx.model or ctx.options.model
        return ctx.options.model
    # One target: asked once per process (a host changed in the web UI mid-run keeps the model).
    key = client.base_url if ctx.options.targets else ""
    if key in ctx.models:
        return ctx.models[key]
    with _MODEL_LOCK:
        if key not in ctx.models:
            models = client.list_models()
            if not models:
                raise TargetError(f"{key} serves no models (GET /v1/models is empty)")
            ctx.models[key] = models[0]
            ctx.model = ctx.model or models[0]
        return ctx.models[key]
