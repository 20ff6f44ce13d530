"""The emulator's tool calls and prefix cache as a client sees them: the raw SSE stream read here (no
tokenstorm client code), its times and sizes against ``/emulator/truth``, and ``/metrics``' prefix-cache
counters against the ``cached_tokens`` the responses reported; then tokenstorm's client on the same."""

from __future__ import annotations

import http.client
import itertools
import json
import statistics
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client import CompletionRequest, LlmClient

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the code base",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
        },
    },
}
READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
TOOLS = [SEARCH, READ_FILE]
REQUIRED = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in TOOLS}
SYSTEM = {"role": "system", "content": "You are a careful coding assistant. " * 100}  # 3,600 bytes: 900 tokens
USAGE = {"include_usage": True, "continuous_usage_stats": True}


class Stream:
    """One streamed response read event by event, each stamped as its line arrived."""

    def __init__(self, status: int, events: list[tuple[float, dict[str, Any]]], error: dict[str, Any] | None) -> None:
        self.status = status
        self.events = events
        self.error = error

    def choices(self) -> Iterator[tuple[float, dict[str, Any], dict[str, Any]]]:
        """(time, choice, whole event) of the events that carry a choice."""
        for t, event in self.events:
            for choice in event.get("choices") or []:
                yield t, choice, event

    def tool_events(self) -> list[tuple[float, dict[str, Any]]]:
        return [(t, c["delta"]) for t, c, _ in self.choices() if c["delta"].get("tool_calls")]

    @property
    def usage(self) -> dict[str, Any]:
        return self.events[-1][1]["usage"]

    @property
    def finish_reason(self) -> str | None:
        return next((c["finish_reason"] for _, c, _ in self.choices() if c["finish_reason"]), None)


def _stream(conn: http.client.HTTPConnection, body: dict[str, Any], request_id: str) -> Stream:
    """POST ``body`` streamed and read it line by line, timing each event from the moment it was sent."""
    payload = json.dumps({"model": "m", "stream": True, "stream_options": USAGE, **body}).encode()
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    conn.putrequest("POST", "/v1/chat/completions")
    for name, value in {**headers, "Content-Length": str(len(payload))}.items():
        conn.putheader(name, value)
    conn.endheaders()
    t0 = time.perf_counter()
    conn.send(payload)
    resp = conn.getresponse()
    if resp.status != 200:
        return Stream(resp.status, [], json.loads(resp.read()))
    events = []
    while line := resp.readline():
        t = time.perf_counter() - t0
        if line.startswith(b"data: ") and line.strip() != b"data: [DONE]":
            events.append((t, json.loads(line[6:])))
    return Stream(200, events, None)


def _truth(url: str) -> dict[str, dict[str, Any]]:
    return {t["request_id"]: t for t in json.load(urllib.request.urlopen(f"{url}/emulator/truth"))}


def _metrics(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(f"{url}/metrics").read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def _connect(url: str) -> http.client.HTTPConnection:
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    conn.connect()
    return conn


def _task(i: int) -> dict[str, str]:
    return {"role": "user", "content": f"task {i}: make the failing test pass"}


@pytest.mark.serial  # a read checked against the emulator's truth to the millisecond
def test_a_required_call_streams_as_vllm_does_and_the_truth_says_when_it_began_and_ended() -> None:
    with EmulatorProcess("--ttft-ms", "30", "--itl-ms", "5", "--seed", "7") as emu:
        conn = _connect(emu.url)
        _stream(conn, {"messages": [_task(-1)], "max_tokens": 2}, "warm")  # keep-alive from here on
        streams = {
            f"r{i}": _stream(
                conn,
                {"messages": [SYSTEM, _task(i)], "tools": TOOLS, "tool_choice": "required", "max_tokens": 200},
                f"r{i}",
            )
            for i in range(8)
        }
        conn.close()
        truth = _truth(emu.url)
    first_err, last_err = [], []
    for rid, s in streams.items():
        t = truth[rid]
        tool = s.tool_events()
        assert s.status == 200 and s.finish_reason == "tool_calls"
        head = tool[0][1]["tool_calls"][0]
        assert head["id"] == t["tool_call_ids"][0] and head["id"].startswith("chatcmpl-tool-")
        assert head["type"] == "function" and head["function"]["name"] in ("search", "read_file")
        assert all(d["content"] is None and d["tool_calls"][0]["index"] == 0 for _, d in tool)
        args = json.loads("".join(d["tool_calls"][0]["function"].get("arguments", "") for _, d in tool))
        assert set(args) >= set(REQUIRED[head["function"]["name"]])
        # the role event, then one token an event (continuous usage says so), every one a tool-call event
        counts = [e["usage"]["completion_tokens"] for _, e in s.events if e["choices"]]
        assert counts == list(range(len(tool) + 1))
        assert s.usage["completion_tokens"] == t["output_tokens"] == t["tool_call_tokens"] == len(tool)
        assert t["tool_calls"] == 1 and t["prompt_tokens"] == s.usage["prompt_tokens"]
        first_err.append(tool[0][0] - t["ttft_tool_s"])
        last_err.append(tool[-1][0] - t["tool_call_s"])
        # paced by the ITL schedule: the complete call is due (tokens - 1) x 5 ms after its first event's deadline
        due = t["queue_s"] + t["imposed_ttft_s"] + (len(tool) - 1) * 0.005
        assert due - 1e-6 <= t["tool_call_s"] < due + 0.02
    # Read here as each line arrives: our clock starts as the request leaves, the truth's when the emulator
    # has read it, and it stamps an event after write() returns (so a server preempted there stamps it after
    # we read it). The median is held to 1 ms; one read on a busy machine, to 2 ms early or 5 ms late.
    assert all(-0.002 < e < 0.005 for e in first_err + last_err), (first_err, last_err)
    assert abs(statistics.median(first_err)) < 0.001 and abs(statistics.median(last_err)) < 0.001, (first_err, last_err)


def test_named_auto_and_none_choose_as_vllm_and_bad_choices_are_its_400s() -> None:
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "0", "--seed", "11", "--tool-call-share", "0.5") as emu:
        conn = _connect(emu.url)
        named = [
            _stream(
                conn,
                {
                    "messages": [_task(i)],
                    "tools": TOOLS,
                    "max_tokens": 100,
                    "tool_choice": {"type": "function", "function": {"name": "read_file"}},
                },
                f"n{i}",
            )
            for i in range(5)
        ]
        auto = [_stream(conn, {"messages": [_task(i)], "tools": TOOLS, "max_tokens": 100}, f"a{i}") for i in range(200)]
        none = [
            _stream(conn, {"messages": [_task(i)], "tools": TOOLS, "tool_choice": "none", "max_tokens": 20}, f"x{i}")
            for i in range(20)
        ]
        bad = _stream(
            conn,
            {
                "messages": [_task(0)],
                "tools": TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "delete_repo"}},
            },
            "bad",
        )
        orphan = _stream(conn, {"messages": [_task(0)], "tool_choice": "required"}, "orphan")
        conn.close()
        truth = _truth(emu.url)
    for s in named:  # a named function: always that one; vLLM ends a named call with "stop"
        assert s.tool_events()[0][1]["tool_calls"][0]["function"]["name"] == "read_file" and s.finish_reason == "stop"
    called = [bool(s.tool_events()) for s in auto]
    assert 70 <= sum(called) <= 130  # --tool-call-share 0.5 of 200: 100 ± 4.2 standard deviations
    for i, (s, c) in enumerate(zip(auto, called, strict=True)):
        assert truth[f"a{i}"]["tool_calls"] == int(c)
        assert s.finish_reason in (("tool_calls",) if c else ("stop", "length"))
        if not c:  # a text answer: content tokens, no tool-call truth
            assert truth[f"a{i}"]["ttft_tool_s"] is None and truth[f"a{i}"]["tool_call_tokens"] is None
    assert not any(s.tool_events() for s in none)
    assert bad.status == 400 and bad.error == {
        "error": {
            "message": "The tool specified in `tool_choice` does not match any of the specified `tools` "
            "(parameter=tool_choice)",
            "type": "BadRequestError",
            "param": "tool_choice",
            "code": 400,
        }
    }
    assert (
        orphan.status == 400 and orphan.error is not None and "`tools` must be set" in orphan.error["error"]["message"]
    )
    assert "bad" not in truth and "orphan" not in truth  # refused before anything was generated


def test_a_tool_result_in_the_history_is_prompt_and_the_shared_prefix_is_a_cache_hit() -> None:
    # 100 us of prefill a token: 900 cached tokens of system prompt save 90 ms of TTFT
    args = ("--ttft-ms", "20", "--itl-ms", "2", "--prefill-us-per-token", "100", "--seed", "5")
    with EmulatorProcess(*args) as emu:
        before = _metrics(emu.url)
        conn = _connect(emu.url)
        body: dict[str, Any] = {
            "messages": [SYSTEM, _task(0)],
            "tools": TOOLS,
            "tool_choice": "required",
            "max_tokens": 100,
        }
        first = _stream(conn, body, "s0")
        head = first.tool_events()[0][1]["tool_calls"][0]
        arguments = "".join(d["tool_calls"][0]["function"].get("arguments", "") for _, d in first.tool_events())
        result = "x" * 8000  # a file read: 2,000 tokens
        history = [
            *body["messages"],
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": head["id"],
                        "type": "function",
                        "function": {"name": head["function"]["name"], "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": head["id"], "content": result},
        ]
        follow = _stream(conn, {**body, "messages": history}, "s1")
        other = _stream(conn, {**body, "messages": [SYSTEM, _task(1)]}, "s2")  # another session, same prefix
        conn.close()
        truth = _truth(emu.url)
        after = _metrics(emu.url)
    assert follow.status == 200 and follow.tool_events()
    grown = follow.usage["prompt_tokens"] - first.usage["prompt_tokens"]
    assert 2000 < grown < 2000 + len(arguments) // 4 + 40  # the tool result, the call and its JSON framing
    cached = {
        rid: s.usage["prompt_tokens_details"]["cached_tokens"]
        for rid, s in (("s0", first), ("s1", follow), ("s2", other))
    }
    assert cached["s0"] == 0
    # The follow-up repeats all of the first prompt: its full 16-token blocks are hits, then it differs.
    assert cached["s1"] == first.usage["prompt_tokens"] // 16 * 16
    # The other session shares the system prompt and the tool schemas (they follow it), not the task.
    shared = len(SYSTEM["content"]) + 1 + len(json.dumps(TOOLS)) + 1 + len("task ")
    assert cached["s2"] == shared // 64 * 16
    for rid, n in cached.items():
        assert truth[rid]["cached_tokens"] == n
        assert truth[rid]["imposed_ttft_s"] == pytest.approx(0.020 + 100e-6 * (truth[rid]["prompt_tokens"] - n))
    assert first.tool_events()[0][0] - other.tool_events()[0][0] == pytest.approx(100e-6 * cached["s2"], abs=0.01)
    # /metrics says the same, in vLLM's counters: queried prompt tokens and hit tokens
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    assert queries == sum(t["prompt_tokens"] for t in truth.values())
    assert hits == sum(cached.values())


def test_with_the_prefix_cache_off_nothing_is_cached_and_metrics_say_it_is_off() -> None:
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "0", "--prefix-cache-blocks", "0") as emu:
        conn = _connect(emu.url)
        streams = [_stream(conn, {"messages": [SYSTEM, _task(0)], "max_tokens": 3}, f"c{i}") for i in range(3)]
        conn.close()
        metrics = _metrics(emu.url)
        info = urllib.request.urlopen(f"{emu.url}/metrics").read().decode()
    assert [s.usage["prompt_tokens_details"]["cached_tokens"] for s in streams] == [0, 0, 0]
    assert metrics["vllm:prefix_cache_queries_total"] == metrics["vllm:prefix_cache_hits_total"] == 0
    assert 'enable_prefix_caching="False"' in info


def test_a_small_cache_forgets_the_least_recently_used_prefix() -> None:
    # 64 blocks of 16 tokens: room for one 900-token system prompt (56 blocks), not two
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "0", "--prefix-cache-blocks", "64") as emu:
        conn = _connect(emu.url)
        other = {"role": "system", "content": "You review contracts clause by clause. " * 90}
        order = [SYSTEM, SYSTEM, other, SYSTEM]
        streams = [_stream(conn, {"messages": [p, _task(0)], "max_tokens": 2}, f"e{i}") for i, p in enumerate(order)]
        conn.close()
    cached = [s.usage["prompt_tokens_details"]["cached_tokens"] for s in streams]
    assert cached[0] == 0 and cached[1] > 800 and cached[2] == 0
    # The other prompt's blocks evicted the first one's from its tail, as vLLM frees a request's blocks (last
    # first): only the head blocks it left room for are still there.
    other_blocks = streams[2].usage["prompt_tokens"] // 16
    assert cached[3] == (64 - other_blocks) * 16 < cached[1]


@pytest.mark.serial  # a read checked against the emulator's truth to the millisecond
def test_tokenstorms_client_records_what_the_emulator_streamed() -> None:
    with EmulatorProcess("--ttft-ms", "30", "--itl-ms", "5", "--seed", "3", "--tokens-per-chunk", "1") as emu:
        client = LlmClient(emu.url)
        client.complete(CompletionRequest("chat", messages=[], max_tokens=2), "m")  # connect first
        records, answers = [], []
        for i in range(10):
            req = CompletionRequest(
                "agent",
                messages=[SYSTEM, _task(i)],
                max_tokens=200,
                tools=TOOLS,
                tool_choice="required",
                collect_text=True,
            )
            records.append(client.complete(req, "m"))
            answers.append(client.last_answer)
        thinking = CompletionRequest(
            "agent",
            messages=[SYSTEM, _task(9)],
            max_tokens=200,
            tools=TOOLS,
            tool_choice="required",
            extra_body={"chat_template_kwargs": {"enable_thinking": True}},
        )
        reasoned = client.complete(thinking, "m")
        client.close()
        truth = _truth(emu.url)
    errors: list[float] = []
    for rec, answer in zip(records, answers, strict=True):
        assert rec.ok, rec.error_detail
        t = truth[rec.request_id]
        assert rec.tool_calls == t["tool_calls"] == 1 and rec.tool_call_tokens == t["tool_call_tokens"]
        assert rec.cached_tokens == t["cached_tokens"] and rec.output_tokens == t["output_tokens"]
        assert [c["id"] for c in answer.tool_calls] == t["tool_call_ids"]
        json.loads(answer.tool_calls[0]["function"]["arguments"])
        if not (rec.late_events or rec.ttft_late):  # a record read late says so and is not held to the truth
            assert rec.ttft_tool_s is not None and rec.tool_call_s is not None
            errors.extend((rec.ttft_tool_s - t["ttft_tool_s"], rec.tool_call_s - t["tool_call_s"]))
    # Within 1 ms of the truth (the median); any one within 5 ms, as the emulator preempted between a write and
    # its stamp on a busy machine stamps late.
    assert len(errors) >= 6 and abs(statistics.median(errors)) < 0.001, errors
    assert all(abs(e) < 0.005 for e in errors), errors
    assert records[0].cached_tokens == 0 and all(r.cached_tokens and r.cached_tokens >= 896 for r in records[1:])
    # reasoning first, then the call: the call's tokens are the output after the reasoning
    t = truth[reasoned.request_id]
    assert reasoned.ok and t["reasoning_tokens"] > 0 and reasoned.reasoning_tokens == t["reasoning_tokens"]
    assert reasoned.tool_call_tokens == t["tool_call_tokens"] == t["output_tokens"] - t["reasoning_tokens"]
    assert t["ttft_answer_s"] == t["ttft_tool_s"]


def test_a_non_streamed_call_answers_the_whole_call_and_the_cache() -> None:
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "0", "--seed", "2") as emu:
        bodies = [
            {"model": "m", "messages": [SYSTEM, _task(0)], "tools": TOOLS, "tool_choice": "required", "max_tokens": 200}
            for _ in range(2)
        ]
        answers = []
        for i, body in enumerate(bodies):
            req = urllib.request.Request(
                f"{emu.url}/v1/chat/completions",
                json.dumps(body).encode(),
                {"Content-Type": "application/json", "X-Request-Id": f"w{i}"},
            )
            answers.append(json.load(urllib.request.urlopen(req)))
        truth = _truth(emu.url)
    for i, answer in enumerate(answers):
        message, t = answer["choices"][0]["message"], truth[f"w{i}"]
        assert answer["choices"][0]["finish_reason"] == "tool_calls"
        assert [c["id"] for c in message["tool_calls"]] == t["tool_call_ids"]
        json.loads(message["tool_calls"][0]["function"]["arguments"])
        assert answer["usage"]["completion_tokens"] == t["tool_call_tokens"] == t["output_tokens"]
        assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == t["cached_tokens"]
    assert truth["w0"]["cached_tokens"] == 0 and truth["w1"]["cached_tokens"] > 0


def test_a_call_cut_by_max_tokens_ends_with_length_and_empty_tools_are_refused_as_vllm() -> None:
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "0", "--seed", "4") as emu:
        conn = _connect(emu.url)
        cut = _stream(
            conn, {"messages": [_task(0)], "tools": [SEARCH], "tool_choice": "required", "max_tokens": 3}, "cut"
        )
        empty = _stream(conn, {"messages": [_task(0)], "tools": []}, "empty")
        conn.close()
        truth = _truth(emu.url)
    assert cut.finish_reason == "length" and cut.usage["completion_tokens"] == 3 == truth["cut"]["tool_call_tokens"]
    assert len(cut.tool_events()) == 3 and truth["cut"]["tool_calls"] == 1
    assert empty.status == 400 and empty.error is not None and empty.error["error"]["param"] == "tools"


@pytest.mark.parametrize("fmt", ["field", "tags", "prefilled"])
def test_a_call_after_reasoning_starts_an_event_of_its_own_however_the_reasoning_streams(fmt: str) -> None:
    args = ("--ttft-ms", "1", "--itl-ms", "0", "--tokens-per-chunk", "3", "--reasoning-format", fmt, "--seed", "8")
    with EmulatorProcess(*args, "--reasoning-share", "0.5") as emu:
        conn = _connect(emu.url)
        body = {"messages": [_task(0)], "tools": TOOLS, "tool_choice": "required", "max_tokens": 300,
                "chat_template_kwargs": {"enable_thinking": True}}  # fmt: skip
        streams = [_stream(conn, body, f"k{i}") for i in range(5)]
        conn.close()
        truth = _truth(emu.url)
    for i, s in enumerate(streams):
        t = truth[f"k{i}"]
        deltas = [c["delta"] for _, c, _ in s.choices()][1:]  # after the role event
        counts = [e["usage"]["completion_tokens"] for _, e in s.events if e["choices"]]
        carried = [b - a for a, b in itertools.pairwise(counts)]
        split = next(j for j, d in enumerate(deltas) if d.get("tool_calls"))
        assert all(not d.get("tool_calls") for d in deltas[:split]) and all(d.get("tool_calls") for d in deltas[split:])
        assert all(d["content"] is None and "reasoning_content" not in d for d in deltas[split:])
        assert sum(carried[:split]) == t["reasoning_tokens"] > 0 and sum(carried[split:]) == t["tool_call_tokens"]
        assert max(carried) == 3 and s.finish_reason == "tool_calls"
        reasoning = "".join(d.get("content") or d.get("reasoning_content") or "" for d in deltas[:split])
        assert reasoning.endswith("</think>") == (fmt != "field") and reasoning.startswith("<think>") == (fmt == "tags")
        json.loads("".join(d["tool_calls"][0]["function"].get("arguments", "") for d in deltas[split:]))
