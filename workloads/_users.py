"""The three traffic models as Locust users: contract analysis, code completion, chat.

Each has its own workload name (its rows in the stats, its SLO name), Locust tag, default
weight and options (see ``--help``: ``--contract-*``, ``--code-*``, ``--chat-*``). Requests are
generated from a per-user ``random.Random`` seeded by ``--seed``, the workload, the worker
and the user's index: the same seed gives the same requests.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, ClassVar

import gevent
from locust import between, tag, task
from locust.runners import WorkerRunner

from ._locust import LlmUser, context
from ._prompts import ChatSessions, CodePrompts, ContractPrompts
from ._settings import WorkloadSettings

__all__ = ["ChatUser", "CodeUser", "ContractUser", "WorkloadUser"]


class WorkloadUser(LlmUser):
    """A user of one of tokenstorm's traffic models (settings from options/workload file)."""

    abstract = True
    _index: ClassVar[itertools.count[int]]
    default_wait: Any = between(1, 3)

    def wait_time(self) -> float:
        """Seconds between tasks: ``--wait-time`` (N or LO-HI) if given, else the workload's default."""
        raw = str(getattr(self.environment.parsed_options, "wait_time", "") or "")
        if raw:
            lo, _, hi = raw.partition("-")
            return random.uniform(float(lo), float(hi or lo))
        return float(type(self).default_wait(self))

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._index = itertools.count()

    def on_start(self) -> None:
        """Seed this user's generator and pick up the run's workload settings."""
        super().on_start()
        ctx = context(self.environment)
        runner = self.environment.runner
        worker = runner.worker_index if isinstance(runner, WorkerRunner) else 0
        seed = getattr(self.environment.parsed_options, "seed", 0)
        self.rng = random.Random(f"{seed}/{self.workload}/{worker}/{next(type(self)._index)}")
        self.settings: WorkloadSettings = ctx.workload_settings[self.workload]
        self.builder = ctx.builder(self.workload)


class ContractUser(WorkloadUser):
    """Long contract documents for review: long context, ~512 output tokens."""

    workload = "contract"
    weight = 1
    default_max_tokens = 512
    default_wait = between(1, 5)

    @tag("contract")
    @task
    def review(self) -> None:
        """Send one contract for review."""
        self.send(self.builder.next(self.rng))


class CodeUser(WorkloadUser):
    """Code completion and code skills: short prompts, 16-128 output tokens, latency-critical."""

    workload = "code"
    weight = 3
    default_max_tokens = 64
    default_wait = between(0.2, 1.5)

    @tag("code")
    @task
    def complete(self) -> None:
        """Send one code request."""
        self.send(self.builder.next(self.rng))


class ChatUser(WorkloadUser):
    """Multi-turn chat: history grows each turn, with think time between turns."""

    workload = "chat"
    weight = 2
    default_max_tokens = 256
    default_wait = between(1, 3)

    @tag("chat")
    @task
    def conversation(self) -> None:
        """One session of several turns."""
        sessions: ChatSessions = self.builder
        history: list[dict[str, str]] = [{"role": "system", "content": "You are a helpful assistant."}]
        lo, hi = self.settings.think_time_s
        for i, turn in enumerate(sessions.session(self.rng)):
            if i:
                gevent.sleep(self.rng.uniform(lo, hi))  # the user reads, then types the next turn
            history.append({"role": "user", "content": turn})
            record = self.send(sessions.request(self.rng, history))
            if not record.ok:
                return  # a real user would start over
            history.append({"role": "assistant", "content": self.llm.last_text})


def builder_for(settings: WorkloadSettings, counter: Any, seed: int) -> Any:
    """The request generator of a workload."""
    if settings.name == "contract":
        return ContractPrompts(settings, counter, seed)
    if settings.name == "code":
        return CodePrompts(settings, counter)
    return ChatSessions(settings, counter)
