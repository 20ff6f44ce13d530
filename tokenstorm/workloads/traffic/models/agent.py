"""Agent sessions: a tool-calling loop as coding and legal agents run it. A session is a system prompt and
tool schemas (identical across every session of a profile: the cacheable prefix), a task message with the
session's own context, then steps: the model's streamed tool call, a synthetic tool result appended with
the call's ``tool_call_id``, the next request with the whole history. It ends at a step count drawn per
session (the last request says ``final_step``), or earlier at an answer without tool calls, or a failure.

Profiles (``data/agent_profiles.json``): ``coding`` (read_file, search_code, list_directory, edit_file,
run_command) and ``legal`` (search_case_law, read_document, find_clause, compare_versions, save_note), each
tool with the size distribution of its results (file reads large, searches small), overridable per tool.
Sizes in tokens: ``prompt_tokens`` is the context before the task (system prompt + tool schemas + the
session's own context), never shorter than its shared part, the first ``shared_prefix`` of its mean.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ...client.client import CompletionRequest
from ..base import Option, OwnSetting, Session, TrafficModel, WorkloadSettings
from ..checks.tools import tool_args, tool_exists
from ..lengths import LengthDist
from ..tokens import TokenCounter
from ._agent_results import fill_lines, result_lines

__all__ = ["PROFILES", "Agent", "AgentProfile", "AgentTool"]

#: how a tool's result reads (each made to its size from the profile's corpus)
RESULT_KINDS = ("code", "matches", "listing", "log", "ack", "document", "cases")
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class AgentTool:
    """One tool of a profile: its OpenAI schema, what its result looks like and how large it is."""

    name: str
    schema: dict[str, Any]
    result: str
    result_tokens: LengthDist


@dataclass(frozen=True)
class AgentProfile:
    """A kind of agent: its system prompt, tools, tasks and the corpus its context is made from."""

    name: str
    system: str
    tools: tuple[AgentTool, ...]
    tasks: tuple[str, ...]
    filler: str  # "code" (Python source) or "clauses" (contract clauses)

    def tool(self, name: str) -> AgentTool | None:
        """The tool called ``name`` (``None``: the model called one this profile does not have)."""
        return next((t for t in self.tools if t.name == name), None)


@cache
def _profiles() -> dict[str, AgentProfile]:
    text = resources.files("tokenstorm.workloads.traffic").joinpath("data/agent_profiles.json").read_text("utf-8")
    out = {}
    for name, p in json.loads(text).items():
        tools = tuple(
            AgentTool(
                t["function"]["name"],
                {"type": t["type"], "function": t["function"]},
                t["result"],
                LengthDist.parse(t["result_tokens"]),
            )
            for t in p["tools"]
        )
        assert all(t.result in RESULT_KINDS for t in tools), name  # the bundled file is ours
        out[name] = AgentProfile(name, p["system"], tools, tuple(p["tasks"]), p["filler"])
    return out


#: name -> profile, as bundled
PROFILES: dict[str, AgentProfile] = _profiles()
_ALL_TOOLS = {t.name: t for p in PROFILES.values() for t in p.tools}


def _tools_help() -> str:
    return "; ".join(f"{p.name}: {', '.join(t.name for t in p.tools)}" for p in PROFILES.values())


# -- the model's own settings -------------------------------------------------------------------
def _parse_steps(value: Any) -> LengthDist:
    return LengthDist.parse(value)


def _parse_tool_choice(value: Any) -> str:
    word = str(value).strip()
    if word in ("auto", "required") or word in _ALL_TOOLS:
        return word
    raise ValueError(f"tool_choice must be auto, required or a tool name ({_tools_help()}), not {word!r}")


def _parse_profiles(value: Any) -> tuple[str, ...]:
    raw = value if isinstance(value, list) else str(value).split(",")
    names = tuple(dict.fromkeys(str(x).strip() for x in raw if str(x).strip()))
    bad = [n for n in names if n not in PROFILES]
    if bad or not names:
        raise ValueError(f"profiles must be a list of {', '.join(PROFILES)}")
    return names


def _parse_result_tokens(value: Any) -> dict[str, LengthDist]:
    """``{TOOL: LENGTH}`` (a workload file's mapping) or ``TOOL=LENGTH,TOOL=LENGTH`` (an option; a length
    may hold a comma itself, as ``lognormal:1500,0.7``)."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    else:
        parts = [p for p in re.split(r",(?=\s*[A-Za-z_][\w-]*\s*=)", str(value)) if p.strip()]
        items = []
        for part in parts:
            name, eq, length = part.partition("=")
            if not eq:
                raise ValueError(f"expected TOOL=LENGTH,... e.g. read_file=lognormal:3000,0.5 (not {part.strip()!r})")
            items.append((name.strip(), length.strip()))
    out = {}
    for name, length in items:
        if name not in _ALL_TOOLS:
            raise ValueError(f"no tool {name!r} ({_tools_help()})")
        out[name] = LengthDist.parse(length)
    return out


class Agent(TrafficModel):
    """Tool-calling agent sessions: a long shared prefix, many steps, streamed tool calls, growing history."""

    name = "agent"
    description = "agent sessions: shared system prompt and tool schemas, streamed tool calls, tool results"
    defaults = WorkloadSettings(
        "agent",
        1,
        LengthDist.parse(512),
        LengthDist.parse("uniform:4000-8000"),
        shared_prefix=0.8,
        think_time_s=(0.1, 1.0),
        wait_s=(1.0, 5.0),
        extra={
            "steps": LengthDist.parse("uniform:2-10"),
            "tool_choice": "auto",
            "profiles": tuple(PROFILES),
            "tool_result_tokens": {},
        },
    )
    settings = frozenset({"prompt_tokens", "output_tokens", "shared_prefix", "think_time_s", "wait_s"})
    own_settings = (
        OwnSetting("steps", _parse_steps),
        OwnSetting("tool_choice", _parse_tool_choice),
        OwnSetting("profiles", _parse_profiles),
        OwnSetting("tool_result_tokens", _parse_result_tokens),
    )
    options = (
        Option(
            "prompt-tokens",
            "prompt_tokens",
            "Agent context before the task: system prompt, tool schemas and "
            "the session's own context (default uniform:4000-8000)",
        ),
        Option(
            "shared-prefix",
            "shared_prefix",
            "Share of the agent context identical across sessions of a "
            "profile, 0-1: system prompt and tool schemas first (default 0.8)",
        ),
        Option(
            "steps",
            "steps",
            "Requests per agent session at most, a length like uniform:2-10 (default); "
            "a session ends earlier when the model answers without a tool call",
        ),
        Option("tool-choice", "tool_choice", "auto (default), required, or a tool name: every step calls it"),
        Option("profiles", "profiles", "coding, legal or coding,legal (default): the agents' system prompts and tools"),
        Option(
            "tool-result-tokens",
            "tool_result_tokens",
            "Tool result sizes, TOOL=LENGTH,... e.g. "
            "read_file=lognormal:3000,0.5 (defaults: "
            + ", ".join(f"{t.name}={t.result_tokens}" for t in _ALL_TOOLS.values())
            + ")",
        ),
        Option("output-tokens", "output_tokens", "max_tokens of each agent step (default 512)"),
        Option("tool-time", "think_time_s", "A tool's run time between steps, a duration or LO-HI (default 0.1-1)"),
    )

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter, seed: int = 0) -> None:
        super().__init__(settings, counter, seed)
        extra = {**self.defaults.extra, **settings.extra}
        self.steps: LengthDist = extra["steps"]
        self.profiles = tuple(PROFILES[n] for n in extra["profiles"])
        choice: str = extra["tool_choice"]
        for p in self.profiles:
            if choice not in ("auto", "required") and p.tool(choice) is None:
                tools = ", ".join(t.name for t in p.tools)
                raise ValueError(
                    f"agent: tool_choice {choice!r} is not a tool of profile {p.name} ({tools}); "
                    "choose the profiles that have it"
                )
        self.tool_choice: str | dict[str, Any] = (
            choice if choice in ("auto", "required") else {"type": "function", "function": {"name": choice}}
        )
        defaults = {t.name: t.result_tokens for t in _ALL_TOOLS.values()}
        self.result_tokens: dict[str, LengthDist] = {**defaults, **extra["tool_result_tokens"]}
        assert settings.prompt_tokens is not None  # the agent always has a context length
        self.context_tokens = settings.prompt_tokens
        self._prefix = {p.name: self._shared_prefix(p) for p in self.profiles}
        # Each step's answer: the tools it calls were offered, their arguments meet the tools' schemas.
        self._checks = {
            p.name: (tool_exists(self._prefix[p.name][1]), tool_args(self._prefix[p.name][1])) for p in self.profiles
        }

    # -- the shared prefix ----------------------------------------------------------------------
    def _shared_prefix(self, profile: AgentProfile) -> tuple[str, list[dict[str, Any]], int]:
        """The system prompt and tool schemas every session of ``profile`` starts with (a fixed seed: the
        same in every process), and their tokens."""
        tools = [t.schema for t in profile.tools]
        base = self.counter.count(profile.system) + self._tools_tokens(tools)
        want = round(self.config.shared_prefix * self.context_tokens.mean)
        system = profile.system
        if want > base + 8:
            rng = random.Random(f"agent-shared/{self.seed}/{profile.name}")
            heading = "Project notes" if profile.filler == "code" else "Matter file"
            system += f"\n\n# {heading}\n" + self._filler(profile, rng, want - base - 8)
        return system, tools, self.counter.count(system) + self._tools_tokens(tools)

    def _tools_tokens(self, tools: list[dict[str, Any]]) -> int:
        return self.counter.count(json.dumps(tools, ensure_ascii=False))

    # -- a session ------------------------------------------------------------------------------
    def session(self, rng: random.Random) -> Session:
        """One agent task: a request per step, each tool call answered by a tool result."""
        profile = rng.choice(self.profiles)
        system, tools, shared_tokens = self._prefix[profile.name]
        if self.config.shared_prefix == 0:  # nothing in common: not even the system prompt's first token
            system = f"Session {rng.getrandbits(48):012x}.\n{system}"
        task = rng.choice(profile.tasks)
        rest = self.context_tokens.sample(rng) - shared_tokens - self.counter.count(task) - 16
        context = f"<context>\n{self._filler(profile, rng, rest)}\n</context>\n\n" if rest > 0 else ""
        history: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": context + task},
        ]
        tokens = self.counter.count(system) + self._tools_tokens(tools) + self.counter.count(context + task)
        steps = self.steps.sample(rng)
        for step in range(steps):
            answer = yield self.request(
                rng, history, tools, tokens, final=step == steps - 1, checks=self._checks[profile.name]
            )
            if answer is None or not answer.tool_calls or step == steps - 1:
                return  # failed, answered without a tool, or the task's last step
            raw = [_call(c, f"call_{step}_{i}") for i, c in enumerate(answer.tool_calls)]
            calls = [_sendable(c) for c in raw]
            history.append({"role": "assistant", "content": answer.text or None, "tool_calls": calls})
            tokens += self.counter.count(answer.text) + sum(
                self.counter.count(c["function"]["name"] + c["function"]["arguments"]) for c in calls
            )
            for c in raw:  # a result for what the model sent (an error for arguments that are not JSON)
                result = self.tool_result(rng, profile, c["function"]["name"], c["function"]["arguments"])
                history.append({"role": "tool", "tool_call_id": c["id"], "content": result})
                tokens += self.counter.count(result)

    def request(
        self,
        rng: random.Random,
        history: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        prompt_tokens: int,
        final: bool = False,
        checks: tuple[Any, ...] = (),
    ) -> CompletionRequest:
        """The request of the next step, given the history so far."""
        return CompletionRequest(
            workload=self.config.name,
            endpoint="chat",
            messages=list(history),
            max_tokens=self.config.output_tokens.sample(rng),
            tools=list(tools),
            tool_choice=self.tool_choice,
            collect_text=True,
            final_step=final,
            requested_prompt_tokens=prompt_tokens,
            checks=checks,
        )

    def tool_result(self, rng: random.Random, profile: AgentProfile, name: str, arguments: str) -> str:
        """What the tool ``name`` returns: a text of the size drawn from that tool's distribution, or the error
        a real agent gets back for a tool it does not have or arguments that are not JSON."""
        tool = profile.tool(name)
        if tool is None:
            return f"Error: no tool named {name!r}. Available tools: {', '.join(t.name for t in profile.tools)}."
        try:
            json.loads(arguments or "{}")
        except ValueError:
            return f"Error: the arguments of {name} are not valid JSON: {arguments[:80]!r}"
        tokens = self.result_tokens[name].sample(rng)
        return fill_lines(self.counter, result_lines(tool.result, rng), tokens)

    def _filler(self, profile: AgentProfile, rng: random.Random, tokens: int) -> str:
        """About ``tokens`` tokens of the profile's corpus (context, not a tool result)."""
        kind = "code" if profile.filler == "code" else "document"
        return fill_lines(self.counter, result_lines(kind, rng), tokens)


def _call(call: dict[str, Any], fallback_id: str) -> dict[str, Any]:
    """A streamed tool call as the history carries it back (an id made up only when the server sent none)."""
    fn = call.get("function") or {}
    return {
        "id": call.get("id") or fallback_id,
        "type": "function",
        "function": {"name": str(fn.get("name") or ""), "arguments": str(fn.get("arguments") or "")},
    }


def _sendable(call: dict[str, Any]) -> dict[str, Any]:
    """``call`` as the history can send it back: arguments that are not JSON (a call cut by ``max_tokens``)
    become ``{}`` — vLLM parses the arguments of every call in a history and refuses the request otherwise."""
    try:
        json.loads(call["function"]["arguments"] or "{}")
    except ValueError:
        return {**call, "function": {**call["function"], "arguments": "{}"}}
    return call


MODEL = Agent
