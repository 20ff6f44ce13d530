"""The one small protocol every traffic model follows, and the settings it is configured by.

A traffic model is a class with a ``name`` (its stats rows, SLO scope and Locust tag), its
``defaults`` (weight, lengths, its own settings), the ``settings`` keys a workload file may set
for it, settings of its own that no other model has (``own_settings``, kept in
``WorkloadSettings.extra``), its command-line ``options``, and :meth:`TrafficModel.session`: a
generator of the requests of one user session, sent each answer (text and tool calls) in turn.
Adding a traffic model means adding one module to :mod:`tokenstorm.workloads.traffic.models` (see that
package's docstring).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..client.client import Answer, CompletionRequest
from .lengths import LengthDist
from .tokens import TokenCounter

__all__ = ["Option", "OwnSetting", "Session", "TrafficModel", "WorkloadSettings"]


@dataclass(frozen=True)
class WorkloadSettings:
    """What one workload sends. A model reads only the fields it lists in ``settings``."""

    name: str
    weight: int
    output_tokens: LengthDist
    prompt_tokens: LengthDist | None = None  # None: the prompts' own length (chat conversations)
    shared_prefix: float = 0.0  # contract: share of the document identical across requests
    languages: tuple[str, ...] = ("en", "zh")  # contract
    endpoint: str = "chat"  # code: chat, completions or both
    skills: tuple[str, ...] = ("complete", "unit_test", "bug_find")  # code
    turns: int = 1  # chat
    think_time_s: tuple[float, float] = (0.0, 0.0)  # between the turns of a session
    thinking: str = ""  # chat: "", "on" or "off" (chat_template_kwargs.enable_thinking)
    dataset: str | None = None  # chat
    wait_s: tuple[float, float] = (1.0, 3.0)  # between a user's sessions (--wait-time overrides)
    api: str = ""  # the API this workload speaks (a workload file's api:); "": the run's --api
    #: one model's own settings (``TrafficModel.own_settings``), by name
    extra: dict[str, Any] = field(default_factory=dict)
    #: users' own checks of this workload's answers (a workload file's ``checks: [module:function]``, loaded)
    checks: tuple[Any, ...] = ()


@dataclass(frozen=True)
class OwnSetting:
    """A setting only one traffic model has, kept in ``WorkloadSettings.extra[name]``: set from its option
    (a string) or a workload file (YAML: a string, number, list or mapping) through ``parse``, which raises
    :class:`ValueError` with the reason (the caller adds the file and line, or the option)."""

    name: str
    parse: Callable[[Any], Any]


@dataclass(frozen=True)
class Option:
    """A command-line / web-UI option of a traffic model: ``--<model>-<flag>`` (or ``--<flag>``
    when ``prefixed`` is false) sets the ``setting`` field of its settings."""

    flag: str
    setting: str
    help: str
    prefixed: bool = True

    def dest(self, model: str) -> str:
        """The attribute name argparse gives the option."""
        return (f"{model}_{self.flag}" if self.prefixed else self.flag).replace("-", "_")


#: A session yields requests; the user sends back each answer (its text and tool calls; ``None``: the
#: request failed, which ends the session).
Session = Generator[CompletionRequest, "Answer | None", None]


class TrafficModel(ABC):
    """One kind of traffic. Subclasses set the class attributes and implement :meth:`session`."""

    name: ClassVar[str]
    description: ClassVar[str]
    defaults: ClassVar[WorkloadSettings]
    #: WorkloadSettings fields a workload file may set for this model (besides ``weight``)
    settings: ClassVar[frozenset[str]]
    #: settings of this model alone (in ``extra``; a workload file may set them too), their defaults in
    #: ``defaults.extra``
    own_settings: ClassVar[tuple[OwnSetting, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter, seed: int = 0) -> None:
        self.config = settings
        self.counter = counter
        self.seed = seed

    @abstractmethod
    def session(self, rng: random.Random) -> Session:
        """The requests of one session (one for single-shot models, one per turn for chat)."""

    def next(self, rng: random.Random) -> CompletionRequest:
        """The first request of a new session (what an open-loop arrival sends)."""
        return next(self.session(rng))

    @classmethod
    def setting_names(cls) -> frozenset[str]:
        """Every key a workload file may set for this model."""
        return frozenset({"weight", *cls.settings, *(s.name for s in cls.own_settings)})

    @classmethod
    def with_setting(cls, settings: WorkloadSettings, name: str, value: Any) -> WorkloadSettings | None:
        """``settings`` with this model's own setting ``name`` parsed from ``value``; ``None`` when ``name`` is
        not one of its own (a :class:`WorkloadSettings` field). :class:`ValueError` for a bad value."""
        own = next((s for s in cls.own_settings if s.name == name), None)
        if own is None:
            return None
        return replace(settings, extra={**settings.extra, name: own.parse(value)})
