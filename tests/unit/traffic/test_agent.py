"""The agent traffic model: tool-calling sessions, their history, sizes, step limit and shared prefix."""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tokenstorm.workloads.client import Answer, CompletionRequest
from tokenstorm.workloads.traffic.models.agent import PROFILES, Agent
from tokenstorm.workloads.traffic.settings import WorkloadFileError, settings_from_options
from tokenstorm.workloads.traffic.tokens import TokenCounter

COUNTER = TokenCounter()


def agent(**options: object) -> Agent:
    return Agent(settings_from_options(SimpleNamespace(**options))["agent"], COUNTER, seed=0)


def call(i: int, name: str = "read_file", arguments: str = '{"path": "src/app.py"}') -> dict[str, Any]:
    return {"id": f"chatcmpl-tool-{i}", "type": "function", "function": {"name": name, "arguments": arguments}}


class ScriptedServer:
    """Answers every step with tool calls chosen from the offered tools (a stand-in for the model)."""

    def __init__(self, calls_per_step: int = 1) -> None:
        self.n = 0
        self.calls_per_step = calls_per_step

    def answer(self, req: CompletionRequest) -> Answer:
        assert req.tools
        names = [t["function"]["name"] for t in req.tools]
        calls = []
        for _ in range(self.calls_per_step):
            self.n += 1
            calls.append(call(self.n, names[self.n % len(names)], json.dumps({"arg": self.n})))
        return Answer("", calls)


def drive(model: Agent, seed: int | str, server: ScriptedServer | None = None) -> list[CompletionRequest]:
    """Every request of one session, each answered by ``server``."""
    server = server or ScriptedServer()
    session = model.session(random.Random(seed))
    reqs = [next(session)]
    while True:
        try:
            reqs.append(session.send(server.answer(reqs[-1])))
        except StopIteration:
            return reqs


def wire(reqs: list[CompletionRequest]) -> str:
    return json.dumps([[r.messages, r.tools, r.tool_choice, r.max_tokens, r.final_step] for r in reqs])


def test_same_seed_same_session_and_another_seed_differs() -> None:
    model = agent(agent_steps="fixed:5")
    assert wire(drive(model, 1)) == wire(drive(model, 1))
    assert wire(drive(agent(agent_steps="fixed:5"), 1)) == wire(drive(model, 1))  # another process, same seed
    assert wire(drive(model, 1)) != wire(drive(model, 2))
    assert len(drive(model, 3)) == 5


def test_each_step_carries_the_tool_call_then_a_tool_message_with_its_id() -> None:
    model = agent(agent_steps="fixed:3")
    session = model.session(random.Random(0))
    first = next(session)
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.collect_text and first.endpoint == "chat" and first.tool_choice == "auto"
    assert [t["function"]["name"] for t in first.tools or []] in [[t.name for t in p.tools] for p in PROFILES.values()]
    name = first.tools[0]["function"]["name"]  # type: ignore[index]
    two = [call(1, name, '{"path": "a"}'), call(2, name, '{"path": "b"}')]  # parallel calls
    second = session.send(Answer("Let me look.", two))
    assert second.messages[:2] == first.messages  # the history only grows
    assistant, tool_a, tool_b = second.messages[2:]
    assert assistant == {"role": "assistant", "content": "Let me look.", "tool_calls": two}
    assert tool_a["role"] == tool_b["role"] == "tool"
    assert (tool_a["tool_call_id"], tool_b["tool_call_id"]) == ("chatcmpl-tool-1", "chatcmpl-tool-2")
    assert tool_a["content"] and tool_b["content"] and tool_a["content"] != tool_b["content"]
    assert second.requested_prompt_tokens > first.requested_prompt_tokens + COUNTER.count(tool_a["content"])
    third = session.send(Answer("", [call(3, name)]))
    assert third.messages[:5] == second.messages
    assert third.messages[5]["content"] is None  # no text beside the call, as vLLM sends it
    assert third.messages[6]["tool_call_id"] == "chatcmpl-tool-3"


def test_a_tool_the_profile_lacks_or_arguments_not_json_get_an_error_result() -> None:
    session = agent(agent_profiles="coding").session(random.Random(0))
    next(session)
    req = session.send(Answer("", [call(1, "launch_rockets"), call(2, "read_file", '{"path": ')]))
    assert req.messages[-2]["tool_call_id"] == "chatcmpl-tool-1" and "no tool named 'launch_rockets'" in \
        req.messages[-2]["content"]  # fmt: skip
    assert req.messages[-1]["tool_call_id"] == "chatcmpl-tool-2" and "not valid JSON" in req.messages[-1]["content"]
    # vLLM parses the arguments of every call in a history: a call cut by max_tokens goes back as {} (else HTTP 400).
    sent = [json.loads(c["function"]["arguments"]) for c in req.messages[-3]["tool_calls"]]
    assert sent == [{"path": "src/app.py"}, {}]


def tool_results(model: Agent, sessions: int) -> dict[str, list[int]]:
    """Tokens of every tool result, by tool, over ``sessions`` sessions."""
    sizes: dict[str, list[int]] = {}
    for seed in range(sessions):
        last = drive(model, seed)[-1]
        names = {c["id"]: c["function"]["name"] for m in last.messages for c in m.get("tool_calls", [])}
        for m in last.messages:
            if m["role"] == "tool":
                sizes.setdefault(names[m["tool_call_id"]], []).append(COUNTER.count(m["content"]))
    return sizes


def test_tool_results_are_sized_by_their_tools_distribution() -> None:
    fixed = agent(agent_steps="fixed:6", agent_profiles="coding",
                  agent_tool_result_tokens="read_file=fixed:1234,search_code=77")  # fmt: skip
    sizes = tool_results(fixed, 10)
    assert set(sizes) == {t.name for t in PROFILES["coding"].tools}
    assert all(1232 <= n <= 1234 for n in sizes["read_file"]), sizes["read_file"]
    assert all(75 <= n <= 77 for n in sizes["search_code"]), sizes["search_code"]
    # The defaults: file reads large, searches small — each near its distribution's mean.
    sizes = tool_results(agent(agent_steps="fixed:10", agent_profiles="coding"), 60)
    assert 1500 * 0.9 <= statistics.mean(sizes["read_file"]) <= 1500 * 1.1, statistics.mean(sizes["read_file"])
    assert 250 * 0.85 <= statistics.mean(sizes["search_code"]) <= 250 * 1.15, statistics.mean(sizes["search_code"])
    assert all(40 <= n <= 200 for n in sizes["list_directory"])
    legal = tool_results(agent(agent_steps="fixed:10", agent_profiles="legal"), 40)
    assert statistics.mean(legal["read_document"]) > 5 * statistics.mean(legal["search_case_law"])


def test_the_step_limit_ends_the_session_with_final_step_on_its_last_request() -> None:
    reqs = drive(agent(agent_steps="fixed:4"), 0)
    assert [r.final_step for r in reqs] == [False, False, False, True]
    lengths = {len(drive(agent(agent_steps="uniform:2-6"), seed)) for seed in range(40)}
    assert lengths == {2, 3, 4, 5, 6}
    # An answer without a tool call ends the task early; so does a failed request.
    session = agent(agent_steps="fixed:4").session(random.Random(0))
    next(session)
    with pytest.raises(StopIteration):
        session.send(Answer("All done: the test passes now.", []))
    session = agent(agent_steps="fixed:4").session(random.Random(0))
    next(session)
    with pytest.raises(StopIteration):
        session.send(None)


def test_the_shared_prefix_is_identical_across_sessions_of_a_profile() -> None:
    model = agent(agent_prompt_tokens="uniform:6000-10000", agent_shared_prefix="0.75")
    firsts = [drive(model, seed)[0] for seed in range(12)]
    by_profile: dict[str, list[CompletionRequest]] = {}
    for r in firsts:
        by_profile.setdefault(r.tools[0]["function"]["name"], []).append(r)  # type: ignore[index]
    assert len(by_profile) == 2 and all(len(v) > 1 for v in by_profile.values())
    for reqs in by_profile.values():
        assert len({json.dumps([r.messages[0], r.tools]) for r in reqs}) == 1  # system prompt and tools
        assert len({r.messages[1]["content"] for r in reqs}) == len(reqs)  # each task's own context
        shared = COUNTER.count(reqs[0].messages[0]["content"]) + COUNTER.count(json.dumps(reqs[0].tools))
        assert abs(shared - 0.75 * 8000) <= 30, shared
        # The context before the task follows the distribution: 6000-10000 tokens (never under the shared part).
        assert all(6000 - 50 <= (r.requested_prompt_tokens or 0) <= 10000 + 50 for r in reqs)
    # Shared with another process of the same run (same seed); not with another seed's.
    other = Agent(settings_from_options(SimpleNamespace(agent_shared_prefix="0.75"))["agent"], COUNTER, seed=0)
    assert drive(other, 0)[0].messages[0] == drive(agent(agent_shared_prefix="0.75"), 0)[0].messages[0]
    # Nothing shared: every session's system prompt differs from its first characters on.
    none = agent(agent_shared_prefix="0")
    systems = [drive(none, seed)[0].messages[0]["content"] for seed in range(6)]
    assert len({s[:20] for s in systems}) == 6


def test_tool_choice_required_or_a_named_tool() -> None:
    assert drive(agent(agent_tool_choice="required"), 0)[0].tool_choice == "required"
    named = drive(agent(agent_tool_choice="read_document", agent_profiles="legal"), 0)[0]
    assert named.tool_choice == {"type": "function", "function": {"name": "read_document"}}
    with pytest.raises(ValueError, match="tool_choice 'read_document' is not a tool of profile coding"):
        agent(agent_tool_choice="read_document", agent_profiles="legal,coding")
    with pytest.raises(WorkloadFileError, match=r"^--agent-tool-choice: tool_choice must be auto, required or a "
                                                 r"tool name \(coding: read_file"):  # fmt: skip
        agent(agent_tool_choice="sometimes")


def test_workload_file_sets_the_agents_own_settings(tmp_path: Path) -> None:
    mix = tmp_path / "mix.yaml"
    mix.write_text("workloads:\n  agent:\n    weight: 4\n    steps: uniform:3-5\n    tool_choice: required\n"
                   "    profiles: [legal]\n    tool_result_tokens: {read_document: 'lognormal:3000,0.5', "
                   "save_note: 12}\n    think_time: 0.5-2\n    shared_prefix: 0.9\n")  # fmt: skip
    s = settings_from_options(SimpleNamespace(workload_file=str(mix), agent_steps="fixed:9"))["agent"]
    assert s.weight == 4 and s.think_time_s == (0.5, 2.0) and s.shared_prefix == 0.9
    assert str(s.extra["steps"]) == "uniform:3-5"  # the file wins over the option
    model = Agent(s, COUNTER)
    assert model.tool_choice == "required" and [p.name for p in model.profiles] == ["legal"]
    assert str(model.result_tokens["read_document"]) == "lognormal:3000,0.5"
    assert str(model.result_tokens["save_note"]) == "fixed:12"
    assert str(model.result_tokens["search_case_law"]) == "uniform:150-500"  # the profile's default
    # The defaults, untouched by another model's settings.
    assert settings_from_options(SimpleNamespace())["agent"].extra["tool_choice"] == "auto"
    for body, line, reason in [
        ("    steps: many\n", 3, "agent.steps: bad length: use N"),
        ("    profiles: [coding, medical]\n", 3, "agent.profiles: profiles must be a list of coding, legal"),
        ("    tool_result_tokens: {grep: 10}\n", 3, "agent.tool_result_tokens: no tool"),
        ("    weight: 1\n    turns: 3\n", 4, "agent: unknown setting \\("),
    ]:
        mix.write_text("workloads:\n  agent:\n" + body)
        with pytest.raises(WorkloadFileError, match=f"^{mix}:{line}: {reason}"):
            settings_from_options(SimpleNamespace(workload_file=str(mix)))


def test_tool_result_sizes_from_an_option_keep_the_commas_of_a_length() -> None:
    s = settings_from_options(SimpleNamespace(agent_tool_result_tokens="read_file=lognormal:3000,0.5, run_command=40"))
    assert {k: str(v) for k, v in s["agent"].extra["tool_result_tokens"].items()} == {
        "read_file": "lognormal:3000,0.5", "run_command": "fixed:40"}  # fmt: skip
    with pytest.raises(WorkloadFileError, match=r"^--agent-tool-result-tokens: expected TOOL=LENGTH"):
        settings_from_options(SimpleNamespace(agent_tool_result_tokens="lognormal:3000"))


def test_an_answer_without_an_id_gets_one_that_its_tool_message_repeats() -> None:
    session = agent().session(random.Random(0))
    first = next(session)
    name = first.tools[0]["function"]["name"]  # type: ignore[index]
    req = session.send(Answer("", [{"type": "function", "function": {"name": name, "arguments": "{}"}}]))
    assert req.messages[-2]["tool_calls"][0]["id"] == req.messages[-1]["tool_call_id"] != ""


def test_the_output_cap_per_step_follows_output_tokens() -> None:
    s = replace(settings_from_options(SimpleNamespace(agent_output_tokens="uniform:100-200"))["agent"])
    reqs = [r for seed in range(10) for r in drive(Agent(s, COUNTER), seed)]
    assert all(100 <= (r.max_tokens or 0) <= 200 for r in reqs) and len({r.max_tokens for r in reqs}) > 5
