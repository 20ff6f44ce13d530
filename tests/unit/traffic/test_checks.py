"""The answer checks as a user meets them: each passes a right answer and fails a wrong one, on the requests
the traffic models really build (the contract's needle is in its prompt and its question asks for it)."""

from __future__ import annotations

import json
import random

import pytest

from tokenstorm.workloads.client import CompletionRequest
from tokenstorm.workloads.client.client import Answer
from tokenstorm.workloads.rundir import RequestRecord
from tokenstorm.workloads.traffic import MODELS, default_settings
from tokenstorm.workloads.traffic.checks import FailedAnswers, Reply, check_record, judge
from tokenstorm.workloads.traffic.checks.code import code_language, python_parses
from tokenstorm.workloads.traffic.checks.needle import make_needle, needle
from tokenstorm.workloads.traffic.checks.text import (
    cjk_share,
    complete,
    repeated_ratio,
    repetition,
    script,
    script_of,
    units,
)
from tokenstorm.workloads.traffic.checks.tools import tool_args, tool_exists
from tokenstorm.workloads.traffic.tokens import TokenCounter


def _model(name: str) -> object:
    return MODELS[name](default_settings()[name], TokenCounter(), seed=1)


def _names(req: CompletionRequest) -> list[str]:
    return [c.check_name for c in req.checks]  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(12))
def test_a_contract_hides_its_needle_at_the_recorded_depth_and_asks_for_it(seed: int) -> None:
    req = _model("contract").request(random.Random(seed))  # type: ignore[attr-defined]
    user = req.messages[1]["content"]
    paras = user.split("\n\n")
    fact_at = [i for i, p in enumerate(paras) if p.startswith(("The ", "托管", "和解", "生效", "担保"))]
    assert len(fact_at) == 1, paras[:3]
    assert req.needle_depth == pytest.approx(fact_at[0] / (len(paras) - 2))  # the question is the last paragraph
    (check,) = req.checks
    value = paras[fact_at[0]].rstrip(".。").split(" is ", 1)[-1].split("为", 1)[-1]
    assert check(Reply(f"The answer is {value}.\nParties: ...")) is True
    assert isinstance(check(Reply("Parties: Northwind Systems Ltd and Acme Cloud Services Inc.")), str)
    assert ("what is the" in paras[-1]) or ("是什么" in paras[-1])


def test_needle_depth_and_off_are_settings() -> None:
    settings = default_settings()["contract"]
    model = MODELS["contract"]
    deep = model(model.with_setting(settings, "needle_depth", "0.9-1") or settings, TokenCounter(), seed=1)
    depths = [deep.request(random.Random(i)).needle_depth for i in range(20)]  # type: ignore[attr-defined]
    assert all(d is not None and d >= 0.85 for d in depths)
    off = model(model.with_setting(settings, "needle", "off") or settings, TokenCounter(), seed=1)
    req = off.request(random.Random(0))  # type: ignore[attr-defined]
    assert req.checks == () and req.needle_depth is None and "what is the" not in req.messages[1]["content"]
    with pytest.raises(ValueError, match="between 0 and 1"):
        model.with_setting(settings, "needle_depth", "0.5-2")


def test_the_needle_survives_spaces_commas_and_case_but_not_another_value() -> None:
    n = make_needle("en", random.Random(3))
    check = needle(n)
    assert check(Reply(n.value.upper().replace(",", ""))) is True
    other = make_needle("en", random.Random(4))
    assert other.value != n.value and check(Reply(other.value)) != True  # noqa: E712


def test_script_follows_the_prompt() -> None:
    assert script_of("请用中文再解释一遍。") == "zh" and script_of("Give me a concrete example.") == "en"
    assert script("en")(Reply("The cache holds keys and values for every sequence.")) is True
    assert "CJK" in str(script("en")(Reply("缓存为每个序列保存键和值 the cache")))
    assert script("zh")(Reply("缓存为每个序列保存键和值，即 KV cache。")) is True
    assert "Chinese" in str(script("zh")(Reply("The cache holds keys and values.")))
    assert script("en")(Reply("", tool_calls=[{"function": {"name": "x"}}])) is None


def test_repetition_catches_a_loop_not_prose() -> None:
    prose = ("The scheduler batches requests while the cache holds keys and values for every sequence in "
             "flight, and the model returns tokens at a steady pace until each answer ends.")  # fmt: skip
    assert repetition()(Reply(prose)) is True
    loop = "I am not sure. " * 12
    assert repeated_ratio(loop) > 0.8 and "repeats" in str(repetition()(Reply(loop)))
    assert repetition()(Reply("too short to judge")) is None


def test_complete_knows_max_tokens_from_a_cut() -> None:
    assert complete()(Reply("done.", finish_reason="stop")) is True
    assert complete()(Reply("x " * 64, finish_reason="length", output_tokens=64, max_tokens=64)) is True
    assert "cut at 10 of 64" in str(complete()(Reply("x " * 10, finish_reason="length", output_tokens=10,
                                                     max_tokens=64)))  # fmt: skip
    assert "abort" in str(complete()(Reply("partial", finish_reason="abort")))
    assert "empty" in str(complete()(Reply("  ", finish_reason="stop")))


def test_code_language_and_parsing() -> None:
    good = '```python\ndef test_add():\n    # concatenates\n    assert add("中文", "") == "中文"\n```'  # strings may be
    assert code_language()(Reply(good)) is True and python_parses()(Reply(good)) is True
    cjk = "```python\ndef test_add():\n    结果 = add(1, 2)\n    assert 结果 == 3\n```"
    assert "结果" in str(code_language()(Reply(cjk)))
    assert code_language()(Reply('x = "合同"  # ok\n')) is True
    assert "SyntaxError" in str(python_parses()(Reply("```python\ndef test_add(:\n    pass\n```")))
    assert python_parses()(Reply("```python\ndef test_add():\n    assert")) is None  # cut before the fence closed


def test_code_requests_check_what_their_skill_asked_for() -> None:
    model = _model("code")
    seen = {tuple(_names(model.request(random.Random(i)))) for i in range(60)}  # type: ignore[attr-defined]
    assert seen == {("code_language",), ("code_language", "python_parses")}


def test_chat_turns_check_script_repetition_and_cut() -> None:
    session = _model("chat").session(random.Random(2))  # type: ignore[attr-defined]
    req = next(session)
    assert _names(req) == ["script", "repetition", "complete"]


def test_tool_calls_must_name_an_offered_tool_with_arguments_its_schema_takes() -> None:
    session = _model("agent").session(random.Random(5))  # type: ignore[attr-defined]
    req = next(session)
    assert _names(req) == ["tool_exists", "tool_args"]
    fn = req.tools[0]["function"]
    required = fn["parameters"].get("required", [])
    props = fn["parameters"]["properties"]
    args = {k: ("x" if props[k].get("type") == "string" else 1) for k in required}
    call = {"id": "c1", "type": "function", "function": {"name": fn["name"], "arguments": json.dumps(args)}}
    assert judge(req.checks, Reply("", [call])).check == "pass"
    bad_json = {**call, "function": {"name": fn["name"], "arguments": '{"path": "a'}}
    outcome = judge(req.checks, Reply("", [bad_json]))
    assert outcome.check == "tool_args" and "not JSON" in str(outcome.detail)
    unknown = {**call, "function": {"name": "rm_rf", "arguments": "{}"}}
    assert judge(req.checks, Reply("", [unknown])).check == "tool_exists"
    if required:
        missing = {**call, "function": {"name": fn["name"], "arguments": "{}"}}
        assert "lacks required" in str(judge(req.checks, Reply("", [missing])).detail)
    assert tool_exists(req.tools)(Reply("no calls")) is None and tool_args(req.tools)(Reply("no calls")) is None
    # a call cut at max_tokens is the budget's doing: not judged
    assert tool_args(req.tools)(Reply("", [bad_json], finish_reason="length")) is None


def _record(ok: bool = True) -> RequestRecord:
    return RequestRecord(workload="chat", endpoint="/v1/chat/completions", model="m", stream=True,
                         start_epoch_s=0.0, ok=ok, finish_reason="stop", output_tokens=5)  # fmt: skip


def test_a_record_carries_the_outcome_and_a_bounded_sample_of_failed_answers_with_secrets_masked() -> None:
    req = CompletionRequest("chat", checks=(script("zh"), complete()))
    kept = FailedAnswers(per_check=2)
    records = [_record() for _ in range(3)]
    for r in records:
        check_record(r, req, Answer("The key sk-secret-123 is here."), failed=kept, secrets=("sk-secret-123",))
    assert [r.check for r in records] == ["script"] * 3
    assert records[0].check_results == "script:fail,complete:pass"
    assert "Chinese" in str(records[0].check_detail)
    assert [r.answer_sample is not None for r in records] == [True, True, False]
    assert "sk-secret-123" not in str(records[0].answer_sample) and "is here" in str(records[0].answer_sample)
    passing = _record()
    check_record(passing, req, Answer("缓存为每个序列保存键和值。"), failed=kept)
    assert passing.check == "pass" and passing.answer_sample is None and passing.check_detail is None
    failed = _record(ok=False)
    check_record(failed, req, Answer(""), failed=kept)
    assert failed.check is None and failed.check_results == ""  # a failed request is an error, not a wrong answer


def test_a_check_that_raises_is_that_checks_failure() -> None:
    def broken(reply: Reply) -> bool:
        raise KeyError("oops")

    outcome = judge((broken,), Reply("x"))
    assert outcome.check == "broken" and "KeyError" in str(outcome.detail)


def test_a_near_miss_is_not_the_needle() -> None:
    from tokenstorm.workloads.traffic.checks.needle import Needle

    date = needle(Needle("en", "effective date", "5 March 2030"))
    assert date(Reply("It takes effect on 5 March 2030.")) is True
    assert date(Reply("It takes effect on 15 March 2030.")) is not True
    amount = needle(Needle("en", "settlement amount", "USD 1,234,567"))
    assert amount(Reply("USD 1234567, payable at once")) is True and amount(Reply("usd1,234,567")) is True
    assert amount(Reply("USD 1,234,567,000")) is not True
    code = needle(Needle("en", "escrow account number", "EA-12345-K"))
    assert code(Reply("EA-12345-K\nParties: ...")) is True and code(Reply("EA-12345-KX")) is not True


def test_a_secret_across_the_cut_is_masked_whole() -> None:
    secret = "sk-live-ABCDEFGHIJKLMNOP"
    text = "x" * 1990 + secret  # the sample is cut at 2,000 characters: inside the secret
    req = CompletionRequest("chat", checks=(script("zh"),))
    record = _record()

    def says_the_secret(reply: Reply) -> str:
        return "y" * 190 + reply.text[-len(secret) :]

    check_record(record, req, Answer(text), more=(says_the_secret,), failed=FailedAnswers(), secrets=(secret,))
    assert record.answer_sample is not None and record.check_detail is not None
    for stored in (record.answer_sample, record.check_detail):
        assert "sk-live-AB" not in stored and "ABCDEFGH" not in stored


def test_a_refusal_is_no_code_and_a_translation_is_not_judged_on_script() -> None:
    assert "no ```python block" in str(python_parses()(Reply("Sorry, I cannot help.", finish_reason="stop")))
    assert python_parses()(Reply("def test_a():\n    assert", finish_reason="length")) is None
    assert script_of("Translate 'the meeting moved' into French and Japanese.") is None
    assert script_of("请用中文再解释一遍。") == "zh" and script_of("Answer in English: 什么是缓存？") == "en"
    assert script_of("这个 function 的 return value 是 what type?") is None  # mixed: not judged
    assert script(None)(Reply("任何文字")) is None


def test_ascii_answers_count_the_same_units_as_any_other() -> None:
    """An all-ASCII answer (the quick path) splits into the words the general rule finds: letters only, case-folded,
    no digits or underscores; one CJK character makes it the general path, and its share counts."""
    assert units("Don't STOP_me 42x, ok?") == ["don", "t", "stop", "me", "x", "ok"]
    assert units("Don't STOP_me 42x, ok? 好") == ["don", "t", "stop", "me", "x", "ok", "好"]
    assert cjk_share("plain words") == 0.0 and cjk_share("42 _") is None and cjk_share("ab 好") == 0.5
