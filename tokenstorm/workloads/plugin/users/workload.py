"""Locust users: the LLM user base class and one user class per traffic model.

Every request — closed-loop users here, open-loop arrivals in :mod:`.shapes` — goes through
:func:`.sending.send`: the run's options applied, the request sent by the measuring client, the record
kept (:meth:`RunContext.emit`) and shown in Locust's live stats. Each traffic model of
:data:`tokenstorm.workloads.traffic.MODELS` gets a user class (``ContractUser``, ``CodeUser``,
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
from locust.exception import StopUser
from locust.user.task import LOCUST_STATE_WAITING

from ...client import CompletionRequest, LlmClient, TargetError
from ...client.backoff import CAP_S, FIRST_S, Backoff
from ...rundir import ErrorCategory, RequestRecord
from ...traffic import MODELS, TrafficModel, WorkloadSettings
from ..core import locust_compat
from ..core.context import context
from .sending import LlmRequestFailed, apply_run_options, resolve_model, run_client, run_targets, send

__all__ = [
    "AgentUser",
    "ChatUser",
    "CodeUser",
    "ContractUser",
    "Lane",
    "LlmRequestFailed",
    "LlmUser",
    "WorkloadUser",
    "apply_run_options",
    "resolve_model",
    "run_client",
    "run_targets",
    "send",
    "user_class",
    "user_classes",
]

log = logging.getLogger("tokenstorm")

#: the targets whose connection errors made a user of this process back off (said once each)
_BACKING_OFF: set[str] = set()


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
    attrs = {
        "__module__": __name__,
        "__qualname__": cls_name,
        "__doc__": model.__doc__,
        "workload": name,
        "traffic": model,
        "weight": model.defaults.weight,
        name: tag(name)(task(run)),
    }
    return type(cls_name, (WorkloadUser,), attrs)


def user_classes() -> dict[str, type[WorkloadUser]]:
    """A user class for every registered traffic model, by class name (for a locustfile's globals)."""
    return {cls.__name__: cls for cls in (_USER_CLASSES.get(n) or user_class(n) for n in MODELS)}


ContractUser = user_class("contract")
CodeUser = user_class("code")
ChatUser = user_class("chat")
AgentUser = user_class("agent")
_USER_CLASSES = {"contract": ContractUser, "code": CodeUser, "chat": ChatUser, "agent": AgentUser}
