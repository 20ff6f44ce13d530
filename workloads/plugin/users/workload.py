"""Locust users: the LLM user base class, one user class per traffic model, and the one send path.

Every request — closed-loop users here, open-loop arrivals in :mod:`.shapes` — goes through
:func:`send`: the run's options applied, the request sent by the measuring client, the record
kept (:meth:`RunContext.emit`) and shown in Locust's live stats. Each traffic model of
:data:`workloads.traffic.MODELS` gets a user class (``ContractUser``, ``CodeUser``,
``ChatUser``, ``AgentUser``, ... from :func:`user_class`) with its workload name, Locust tag, weight and wait.
Requests come from a per-user ``random.Random`` seeded by ``--seed``, the workload, the worker
and the user's index: the same seed gives the same requests.
"""

from __future__ import annotations

import itertools
import logging
import random
import uuid
from typing import Any, ClassVar

import gevent
import gevent.lock
from locust import User, tag, task
from locust.env import Environment
from locust.exception import StopUser
from locust.user.task import LOCUST_STATE_WAITING

from ...client import CompletionRequest, LlmClient, TargetError, in_api
from ...client.backoff import CAP_S, FIRST_S, Backoff
from ...rundir import ErrorCategory, RequestRecord
from ...traffic import MODELS, TrafficModel, WorkloadSettings
from ...traffic.checks import NOT_JUDGED_STOPPED, check_record
from ..core import locust_compat
from ..core.context import context
from ..core.options import RunOptions

__all__ = ["AgentUser", "ChatUser", "CodeUser", "ContractUser", "Lane", "LlmRequestFailed", "LlmUser", "WorkloadUser",
           "apply_run_options", "resolve_model", "run_client", "run_targets", "send", "user_class",
           "user_classes"]  # fmt: skip

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


def send(environment: Environment, client: LlmClient, req: CompletionRequest, model: str,
         default_max_tokens: int = 128, scheduled: float | None = None) -> RequestRecord:  # fmt: skip
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
        fire(request_type="E2E", name=record.workload, response_time=(record.e2e_s or 0.0) * 1000,
             response_length=0, exception=LlmRequestFailed(f"{record.error_category}{status}"), context={})  # fmt: skip
        return
    fire(request_type="E2E", name=record.workload, response_time=(record.e2e_s or 0.0) * 1000,
         response_length=record.output_tokens or 0, exception=None, context={})  # fmt: skip
    for request_type, seconds in (("TTFT", record.ttft_s), ("TPOT", record.tpot_s)):
        if seconds is not None:
            locust_compat.log_row_outside_total(environment, request_type, record.workload, seconds * 1000)


_MODEL_LOCK = gevent.lock.Semaphore()
#: the targets whose connection errors made a user of this process back off (said once each)
_BACKING_OFF: set[str] = set()


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


class LlmUser(User):
    """Base class for simulated users of an OpenAI-compatible LLM endpoint.

    Subclasses set ``workload`` (the stats and SLO name) and call :meth:`send` from tasks.
    Command-line options (``--max-tokens``, ``--ignore-eos``, ``--temperature``,
    ``--extra-body``) override what a request asks for, so one locustfile serves many sweeps.
    """

    abstract = True
    workload: ClassVar[str] = "llm"
    default_max_tokens: ClassVar[int] = 128

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: each connection's back-off after connection errors (one per target: an A/B twin has its own)
        self._backoffs: dict[LlmClient, Backoff] = {}
        #: Locust chose to kill this user (stopped while it waited, or forced): it sends nothing more
        self._killed = False

    def stop(self, force: bool = False) -> bool:
        """Locust's stop, less its race: a user stopped while it waits between sessions is killed on a later
        turn of the event loop, and one whose wait ended in the same turn (a busy client) began a session
        first and had its first request cancelled, even under ``--stop-timeout``. Once the kill is chosen,
        :meth:`send_with` sends nothing: the user ends without a record."""
        if force or self._state in (None, LOCUST_STATE_WAITING):
            self._killed = True
        return bool(super().stop(force))

    def on_start(self) -> None:
        """Open this user's connection and make sure the model is known."""
        self.llm, self.model = self.connect(self.host or "")

    def connect(self, url: str, target: str = "") -> tuple[LlmClient | None, str | None]:
        """A client for ``url`` and the model to ask it for (``None``: the target is unusable,
        said once in the log)."""
        ctx = context(self.environment)
        llm: LlmClient | None = None
        if ctx.problem:
            return llm, None  # already reported once; send() stops this user quietly
        try:
            llm = run_client(self.environment, url, user_id=id(self) & 0xFFFFFFFF, target=target)
            ctx.worker_id = llm.worker_id
            return llm, resolve_model(self.environment, llm)
        except TargetError as exc:
            if not ctx.problem:
                ctx.problem = str(exc)
                log.error("tokenstorm: %s", exc)
            return llm, None

    def on_stop(self) -> None:
        """Close the connection."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            llm.close()

    def send(self, req: CompletionRequest) -> RequestRecord:
        """Send one request, record it, and report it to Locust's live stats."""
        return self.send_with(self.llm, self.model, req)

    def send_with(self, llm: LlmClient | None, model: str | None, req: CompletionRequest) -> RequestRecord:
        """:meth:`send` on ``llm`` for ``model`` (an A/B twin's own connection and model)."""
        if model is None or llm is None:
            raise StopUser()  # the target is unusable (reported once in the log)
        if self._killed:
            raise gevent.GreenletExit()  # Locust's kill is on its way (see stop): no request is begun
        backoff = self._backoffs.get(llm)
        if backoff is None:
            backoff = self._backoffs[llm] = Backoff()
        backoff.wait()  # after connection errors in a row: not a request, nothing recorded
        record = send(self.environment, llm, req, model, self.default_max_tokens)
        backoff.note(record)
        if backoff.errors == 2 and llm.base_url not in _BACKING_OFF:
            _BACKING_OFF.add(llm.base_url)
            log.warning(
                "tokenstorm: connection errors from %s: each user waits before its next attempt "
                "(%g s doubling to %g s, until an answer comes); every attempt is recorded",
                llm.base_url,
                FIRST_S,
                CAP_S,
            )
        if record.error_category == ErrorCategory.CANCELLED:
            raise gevent.GreenletExit()  # finish stopping; Locust does not count it either
        return record


class Lane:
    """One target's side of a user: its connection, model and generators. A/B twins are lanes of
    one user seeded alike, so every target gets the same sessions, waits and request ids."""

    def __init__(self, target: str, llm: LlmClient | None, model: str | None, seed: str) -> None:
        self.target, self.llm, self.model = target, llm, model
        self.rng = random.Random(seed)
        self.wait_rng = random.Random(f"{seed}/wait")  # apart: a session's draws do not shift the waits
        self._sessions = itertools.count()

    def next_session(self) -> tuple[random.Random, int]:
        """A session's own generator and number. One draw from the lane's generator per session, so a
        session that ended early (a failed turn) on one twin does not shift the next on the other."""
        return random.Random(self.rng.getrandbits(64)), next(self._sessions)


class WorkloadUser(LlmUser):
    """A user of one of tokenstorm's traffic models: runs its sessions one after another — on every
    ``--targets`` endpoint at once, one twin lane each (the first in this greenlet)."""

    abstract = True
    traffic: ClassVar[type[TrafficModel]]
    #: numbers this class's users in this process (part of each user's seed)
    user_numbers: ClassVar[itertools.count[int]]

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.user_numbers = itertools.count()

    def wait_time(self) -> float:
        """Seconds between sessions: ``--wait-time`` (N or LO-HI) if given, else the workload's own."""
        return self._wait(self.lanes[0])

    def _wait(self, lane: Lane) -> float:
        lo, hi = context(self.environment).options.wait_time_s or self.settings.wait_s
        return lane.wait_rng.uniform(lo, hi)

    def on_start(self) -> None:
        """Seed this user's lanes (one per target) and pick up the run's workload settings."""
        ctx = context(self.environment)
        worker = locust_compat.worker_index(self.environment.runner)
        number = next(type(self).user_numbers)
        seed = f"{ctx.options.seed}/{self.workload}/{worker}/{number}"
        self.settings: WorkloadSettings = ctx.workload_settings[self.workload]
        self.builder = ctx.builder(self.workload)
        targets = run_targets(self.environment, self.host)
        self.lanes = [Lane(label, *self.connect(url, label), seed) for label, url in targets]
        self.llm, self.model = self.lanes[0].llm, self.lanes[0].model
        self.rng = self.lanes[0].rng
        # This user's sessions are f"{nonce}-{number}": unique in the run, and the same on every A/B twin.
        self._nonce = uuid.uuid4().hex[:12]
        self._twinned = len(targets) > 1
        self._twins = [gevent.spawn(self._run_twin, lane) for lane in self.lanes[1:]]

    def on_stop(self) -> None:
        """Stop the twins (their requests in flight are recorded as cancelled), close every connection."""
        gevent.killall(getattr(self, "_twins", []), block=True, timeout=10)
        for lane in getattr(self, "lanes", [])[1:]:
            if lane.llm is not None:
                lane.llm.close()
        super().on_stop()

    def _run_twin(self, lane: Lane) -> None:
        """A twin lane's loop: what Locust runs for the first lane (sessions, waits between them)."""
        while True:
            try:
                self.run_session(lane)
            except StopUser:
                return
            except Exception as exc:  # as Locust does for a task: say it, go on
                log.error("tokenstorm: %s twin of a %s user: %r", lane.target, self.workload, exc)
                self.environment.events.user_error.fire(user_instance=self, exception=exc, tb=exc.__traceback__)
            gevent.sleep(self._wait(lane))

    def run_session(self, lane: Lane | None = None) -> None:
        """One session of the traffic model: each request sent as a step of the session (its id and step
        number on the record), each answer (text and tool calls) handed back to it."""
        lane = lane or self.lanes[0]
        lo, hi = self.settings.think_time_s
        rng, number = lane.next_session()
        session_id = f"{self._nonce}-{number:x}"
        session = self.builder.session(rng)
        req = next(session, None)
        for step in itertools.count():
            if req is None:
                return
            req.session_id, req.step = session_id, step
            if self._twinned:  # A/B: the twins' shared id of this session's step
                req.request_id = f"{session_id}-{step}"
            record = self.send_with(lane.llm, lane.model, req)
            try:
                req = session.send(lane.llm.last_answer if record.ok and lane.llm is not None else None)
            except StopIteration:
                return
            gevent.sleep(rng.uniform(lo, hi))  # the user reads and types (or the agent's tool runs)


def user_class(name: str) -> type[WorkloadUser]:
    """The Locust user class of traffic model ``name`` (tagged ``name``, its default weight)."""
    model = MODELS[name]

    def run(self: WorkloadUser) -> None:
        self.run_session()

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"One {name} session."
    cls_name = f"{model.__name__}User"
    attrs = {"__module__": __name__, "__qualname__": cls_name, "__doc__": model.__doc__, "workload": name,
             "traffic": model, "weight": model.defaults.weight, name: tag(name)(task(run))}  # fmt: skip
    return type(cls_name, (WorkloadUser,), attrs)


def user_classes() -> dict[str, type[WorkloadUser]]:
    """A user class for every registered traffic model, by class name (for a locustfile's globals)."""
    return {cls.__name__: cls for cls in (_USER_CLASSES.get(n) or user_class(n) for n in MODELS)}


ContractUser = user_class("contract")
CodeUser = user_class("code")
ChatUser = user_class("chat")
AgentUser = user_class("agent")
_USER_CLASSES = {"contract": ContractUser, "code": CodeUser, "chat": ChatUser, "agent": AgentUser}
