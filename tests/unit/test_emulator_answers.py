"""The emulator's answers judged by tokenstorm's own checks, on the requests the traffic models really build:
with every ``--wrong-*`` knob off each check passes on every answer, with one knob at 1 its check fails
(and only that one), temperature 0 answers the same prompt alike, and the knobs are options like the others."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from tokenstorm.emulator import EmulatorConfig, check_args
from tokenstorm.emulator._answers import Answered, answer_for, token_text
from tokenstorm.emulator._args import parse_args
from tokenstorm.emulator._payloads import Plan, prompt_text, prompt_tokens_of
from tokenstorm.emulator._tools import tool_mode
from tokenstorm.emulator._wrong import draw_wrong
from tokenstorm.workloads.client import CompletionRequest
from tokenstorm.workloads.client.client import Answer
from tokenstorm.workloads.traffic import MODELS, default_settings
from tokenstorm.workloads.traffic.checks import CHECK_NAMES, Reply, judge
from tokenstorm.workloads.traffic.checks.code import fenced_python
from tokenstorm.workloads.traffic.checks.text import complete, repetition, script_of
from tokenstorm.workloads.traffic.tokens import TokenCounter

#: sessions of each traffic model answered per test (chat and agent sessions are several requests each)
SESSIONS = {"contract": 24, "code": 60, "chat": 12, "agent": 8}
#: each knob and the check it makes fail
KNOB_CHECK = {"needle": "needle", "cjk": "code_language", "syntax": "python_parses", "script": "script",
              "repeat": "repetition", "cut": "complete", "tool_json": "tool_args"}  # fmt: skip


def _body(req: CompletionRequest) -> dict[str, Any]:
    """The JSON tokenstorm's client sends for ``req`` (as ``LlmClient.build_body``)."""
    body: dict[str, Any] = {"model": "m", "stream": True, "max_tokens": req.max_tokens}
    if req.endpoint == "chat":
        body["messages"] = req.messages
    else:
        body["prompt"] = req.prompt
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.tools:
        body["tools"] = req.tools
    if req.tool_choice is not None:
        body["tool_choice"] = req.tool_choice
    if req.ignore_eos:
        body["ignore_eos"] = True
    return {**body, **req.extra_body}


def _answer(cfg: EmulatorConfig, req: CompletionRequest, running: int = 0, seed: int = 0) -> tuple[Reply, Answered]:
    """What the emulator answers ``req`` (``running``: requests served beside it), as the client reads it."""
    body = _body(req)
    chat = req.endpoint == "chat"
    tool_choice, functions = tool_mode(body) if chat else ("none", [])
    text = prompt_text(body, chat)
    prompt = text.encode()
    tokens = prompt_tokens_of(prompt)
    got = answer_for(cfg, body, chat, text, prompt, tokens, tool_choice, functions, random.Random(seed),
                     random.Random(seed + 1), running)  # fmt: skip
    plan = Plan(chat, "m", tokens, got.output_tokens, got.finish, got.reasoning_tokens, True, False,
                pieces=got.pieces, thinking=got.thinking, more=got.more)  # fmt: skip
    r = got.reasoning_tokens
    if got.call is None:
        texts = [token_text(plan, j, None) for j in range(r, got.output_tokens)]
        assert all(texts), "every token streams some text"
        return Reply("".join(texts), [], got.finish, got.output_tokens, req.max_tokens, req), got
    assert got.call.tokens >= got.output_tokens - r  # the call's tokens are the output after the reasoning
    call = got.call.history_entry(got.output_tokens - r)
    return Reply("", [call], got.finish, got.output_tokens, req.max_tokens, req), got


def _answered(cfg: EmulatorConfig, name: str) -> list[tuple[CompletionRequest, Reply, Answered]]:
    """Every request of ``SESSIONS[name]`` sessions of the traffic model ``name``, each answer sent back."""
    model = MODELS[name](default_settings()[name], TokenCounter(), seed=1)
    out: list[tuple[CompletionRequest, Reply, Answered]] = []
    for s in range(SESSIONS[name]):
        session = model.session(random.Random(s))
        try:
            req = next(session)
            while True:
                reply, got = _answer(cfg, req, seed=len(out))
                out.append((req, reply, got))
                req = session.send(Answer(reply.text, reply.tool_calls))
        except StopIteration:
            pass
    return out


@pytest.fixture(scope="module")
def right() -> dict[str, list[tuple[CompletionRequest, Reply, Answered]]]:
    return {name: _answered(EmulatorConfig(), name) for name in SESSIONS}


def test_with_every_knob_off_every_check_passes_on_every_traffic_models_answers(right: Any) -> None:
    applied: Counter[str] = Counter()
    for name, answered in right.items():
        for req, reply, got in answered:
            outcome = judge(req.checks, reply)
            assert outcome.check in (None, "pass"), (name, outcome, reply.text[:300])
            applied.update(r.split(":")[0] for r in outcome.results.split(",") if r)
            assert got.wrong == set()
    # every built-in check met answers to judge, and passed them all
    assert set(applied) == set(CHECK_NAMES), applied
    assert all(applied[c] >= 5 for c in CHECK_NAMES), applied


def test_needle_answers_start_with_the_value_the_contract_states(right: Any) -> None:
    langs: Counter[bool] = Counter()
    for req, reply, _ in right["contract"]:
        user = req.messages[1]["content"]
        first = reply.text.split("\n", 1)[0].replace(" ", "")
        assert first and first in user.replace(" ", ""), first  # the value, as the prompt writes it
        langs[req.messages[1]["content"][:1].isascii()] += 1
    assert len(langs) == 2  # English and Chinese contracts


def test_pytest_prompts_get_a_closed_python_block_within_max_tokens(right: Any) -> None:
    asked = [(req, reply) for req, reply, _ in right["code"] if "Write pytest unit tests" in str(req.messages)]
    assert len(asked) >= 10
    for req, reply in asked:
        assert reply.output_tokens is not None and reply.output_tokens <= req.max_tokens
        assert reply.finish_reason == "stop" and fenced_python(reply.text), reply.text


def test_chinese_turns_are_answered_in_chinese_and_english_ones_in_english(right: Any) -> None:
    scripts = Counter(script_of(req.messages[-1]["content"]) for req, _, _ in right["chat"])
    assert scripts["zh"] >= 2 and scripts["en"] >= 2, scripts  # both met (and passed: the test above)


@pytest.mark.parametrize("knob", list(KNOB_CHECK))
def test_each_knob_at_one_fails_its_check_and_only_its_check(knob: str) -> None:
    cfg = EmulatorConfig(wrong={knob: 1.0})
    check = KNOB_CHECK[knob]
    failed = judged = 0
    for name in SESSIONS:
        for req, reply, got in _answered(cfg, name):
            outcome = judge(req.checks, reply)
            results = dict(r.split(":") for r in outcome.results.split(",") if r)
            assert all(v == "pass" for c, v in results.items() if c != check), (knob, results)
            if check in results:
                judged += 1
                failed += results[check] == "fail"
                assert results[check] == "fail" or (knob == "cut" and req.max_tokens == 1), (reply.text[:200], got)
                assert knob in got.wrong  # the truth log says which wrong answer it was
    assert judged >= 5 and failed >= judged - 1, (knob, judged, failed)


def _greedy_chat(text: str) -> CompletionRequest:
    return CompletionRequest("chat", messages=[{"role": "user", "content": text}], max_tokens=64, temperature=0)


@pytest.mark.parametrize("prompt", ["What does a scheduler batch?", "请解释一下调度器如何批处理请求。"])
def test_temperature_zero_answers_a_prompt_alike_unless_consistency_is_spoiled_under_load(prompt: str) -> None:
    req = _greedy_chat(prompt)
    right = [_answer(EmulatorConfig(), req, running=n, seed=n)[0] for n in range(3)]
    assert len({(r.text, r.output_tokens) for r in right}) == 1  # whatever the server drew before
    spoiled = EmulatorConfig(wrong={"consistency": 1.0})
    alone, _ = _answer(spoiled, req, running=0, seed=5)
    beside, got = _answer(spoiled, req, running=1, seed=5)
    assert alone.text == right[0].text and beside.text != right[0].text and got.wrong == {"consistency"}
    assert judge(req.checks or (), beside).check in (None, "pass")
    hot = [_answer(EmulatorConfig(), replace(req, temperature=None), seed=n)[0].text for n in range(3)]
    assert len(set(hot)) == 3  # sampled: each answer its own


def test_reasoning_comes_first_and_the_answer_after_it_is_still_right() -> None:
    model = MODELS["chat"](replace(default_settings()["chat"], thinking="on"), TokenCounter(), seed=1)
    req = model.next(random.Random(2))
    reply, got = _answer(EmulatorConfig(reasoning_format="tags"), req)
    assert got.reasoning_tokens > 0 and judge(req.checks, reply).check == "pass"
    plan = Plan(True, "m", 1, got.output_tokens, got.finish, got.reasoning_tokens, True, False, pieces=got.pieces,
                thinking=got.thinking)  # fmt: skip
    streamed = "".join(token_text(plan, j, "tags") for j in range(got.output_tokens))
    assert streamed.startswith("<think>") and streamed.split("</think>", 1)[1].strip() == reply.text.strip()


def test_wrong_rise_scales_every_rate_with_the_requests_running() -> None:
    rng = random.Random(0)
    for running, share in ((1, 0.25), (2, 0.5), (4, 1.0), (9, 1.0)):
        hits = sum("cut" in draw_wrong(rng, {"cut": 1.0}, ("cut",), running, 4) for _ in range(4000))
        assert abs(hits / 4000 - share) < 0.03, (running, hits)
    assert draw_wrong(rng, {"cut": 1.0}, ("script",), 1, 0) == set()  # a knob only where it applies


def test_the_knobs_are_options_checked_in_one_line() -> None:
    _, cfg = parse_args(["--wrong-needle", "0.1", "--wrong-tool-json", "1", "--wrong-cut", "0", "--wrong-rise", "8"])
    assert cfg.wrong == {"needle": 0.1, "tool_json": 1.0} and cfg.wrong_rise == 8
    assert check_args(["--wrong-script", "1.5"]) == "--wrong-script 1.5: must be in [0, 1]"
    assert check_args(["--wrong-repeat", "x"]) == "--wrong-repeat 'x': expected a number"
    assert check_args(["--wrong-rise", "-1"]) == "--wrong-rise -1: must be >= 0"
    assert check_args(["--wrong-neddle", "0.1"]) == "--wrong-neddle: unknown option (did you mean --wrong-needle?)"
    with pytest.raises(ValueError, match="unknown wrong answer 'typo'"):
        EmulatorConfig(wrong={"typo": 0.5}).validate()


def test_a_long_answer_streams_every_token_and_stays_right_past_what_is_planned_at_once() -> None:
    req = MODELS["contract"](default_settings()["contract"], TokenCounter(), seed=1).next(random.Random(4))
    long = replace(req, max_tokens=6000, ignore_eos=True, checks=(*req.checks, repetition(), complete()))
    reply, got = _answer(EmulatorConfig(), long)
    assert got.output_tokens == 6000 and len(got.pieces) < 6000 and got.finish == "length"
    assert judge(long.checks, reply).check == "pass"
