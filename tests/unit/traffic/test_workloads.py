"""Request generators: determinism, sizes, length distributions, datasets and workload files."""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from tokenstorm.workloads.client import Answer
from tokenstorm.workloads.traffic.datasets import DatasetError, load_dataset
from tokenstorm.workloads.traffic.lengths import LengthDist
from tokenstorm.workloads.traffic.models.chat import Chat
from tokenstorm.workloads.traffic.models.code import Code
from tokenstorm.workloads.traffic.models.contract import Contract
from tokenstorm.workloads.traffic.settings import WorkloadFileError, settings_from_options
from tokenstorm.workloads.traffic.tokens import TokenCounter, estimate_tokens


def opts(**kw: object) -> SimpleNamespace:
    return SimpleNamespace(**kw)


def bodies(builder, seed: str, n: int = 5) -> list[str]:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    return [json.dumps([r.messages, r.prompt, r.max_tokens, r.endpoint]) for r in (builder.next(rng) for _ in range(n))]


def test_same_seed_same_requests_and_another_seed_differs() -> None:
    s = settings_from_options(opts())
    counter = TokenCounter()
    for builder in (Contract(s["contract"], counter, seed=1), Code(s["code"], counter)):
        assert bodies(builder, "a") == bodies(builder, "a")
        assert bodies(builder, "a") != bodies(builder, "b")
    # A second generator built with the same seed (another process) gives the same requests too.
    assert bodies(Contract(s["contract"], counter, seed=1), "x") == bodies(
        Contract(s["contract"], counter, seed=1), "x"
    )


@pytest.mark.parametrize("target", [2000, 8000, 32000])
def test_contract_prompts_hit_their_token_target_and_share_a_prefix(target: int) -> None:
    s = settings_from_options(opts(contract_prompt_tokens=str(target), contract_shared_prefix="0.5"))["contract"]
    counter = TokenCounter()
    builder = Contract(s, counter, seed=0)
    rng = random.Random(0)
    reqs = [builder.next(rng) for _ in range(4)]
    for r in reqs:
        assert r.requested_prompt_tokens is not None
        assert abs(r.requested_prompt_tokens - target) <= max(20, target * 0.01)
        assert r.messages[0]["role"] == "system"
    by_lang: dict[bool, list[str]] = {}
    for r in reqs:
        text = r.messages[1]["content"]
        by_lang.setdefault(text.startswith("Article"), []).append(text)
    for texts in by_lang.values():
        if len(texts) > 1:  # same language: the first half of the document is identical
            common = 0
            while common < min(map(len, texts)) and len({t[common] for t in texts}) == 1:
                common += 1
            assert counter.count(texts[0][:common]) >= target * 0.45
    assert {"违约责任" in r.messages[1]["content"] or "Liability" in r.messages[1]["content"] for r in reqs} == {True}


def test_code_prompts_are_real_python_with_skills_and_stops() -> None:
    s = settings_from_options(opts(code_endpoint="both"))["code"]
    builder = Code(s, TokenCounter())
    rng = random.Random(3)
    reqs = [builder.next(rng) for _ in range(60)]
    completions = [r for r in reqs if r.endpoint == "completions"]
    chats = [r for r in reqs if r.endpoint == "chat"]
    assert completions and chats
    assert all(r.stop and "\ndef " in r.stop for r in completions)
    assert all(("def " in r.prompt or "class " in r.prompt) for r in completions if r.prompt)
    skills = {r.messages[0]["content"].split(" ")[0] for r in chats if r.messages}
    assert {"Complete", "Write", "Find"} <= skills
    assert all(16 <= (r.max_tokens or 0) <= 128 for r in reqs)


def test_chat_sessions_grow_history_and_thinking_switch() -> None:
    s = replace(settings_from_options(opts())["chat"], thinking="on", turns=4)
    session = Chat(s, TokenCounter()).session(random.Random(1))
    r1 = next(session)
    r2 = session.send(Answer("answer one"))
    assert [m["role"] for m in r2.messages] == ["system", "user", "assistant", "user"]
    assert r2.messages[2]["content"] == "answer one"
    assert r2.requested_prompt_tokens > r1.requested_prompt_tokens
    assert r1.extra_body == {"chat_template_kwargs": {"enable_thinking": True}}
    assert r1.collect_text
    assert len([session.send(Answer("a")), session.send(Answer("b"))]) == 2  # four turns in all
    with pytest.raises(StopIteration):
        session.send(Answer("c"))
    with pytest.raises(StopIteration):  # a failed turn ends the session
        fresh = Chat(s, TokenCounter()).session(random.Random(2))
        next(fresh)
        fresh.send(None)


def test_a_dataset_entrys_max_tokens_is_what_its_requests_ask_for(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "short answer please", "max_tokens": 7}\n')
    s = settings_from_options(opts(dataset=str(data)))["chat"]
    model = Chat(s, TokenCounter())
    assert {model.next(random.Random(i)).max_tokens for i in range(20)} == {7}
    data.write_text('{"prompt": "no length given"}\n')
    sampled = {Chat(s, TokenCounter()).next(random.Random(i)).max_tokens for i in range(20)}
    assert len(sampled) > 1  # sampled from output_tokens (lognormal:250,0.8)


def test_each_traffic_model_accepts_only_its_own_settings(tmp_path: Path) -> None:
    mix = tmp_path / "mix.yaml"
    mix.write_text("workloads:\n  chat:\n    prompt_tokens: 3000\n")  # chat prompts are the conversations'
    with pytest.raises(WorkloadFileError, match=r"mix\.yaml:3: chat: unknown setting — did you mean output_tokens\?"):
        settings_from_options(opts(workload_file=str(mix)))
    mix.write_text("workloads:\n  contract:\n    turns: 3\n")
    with pytest.raises(WorkloadFileError, match=r"mix\.yaml:3: contract: unknown setting \(settings of contract: "):
        settings_from_options(opts(workload_file=str(mix)))
    mix.write_text("workloads:\n  code:\n    wait: 0.5-1\n")
    assert settings_from_options(opts(workload_file=str(mix)))["code"].wait_s == (0.5, 1.0)


@pytest.mark.parametrize(
    ("spec", "mean", "std"),
    [("fixed:512", 512, 0), ("uniform:100-300", 200, 200 / 12**0.5), ("normal:400,50", 400, 50),
     ("lognormal:250,0.8", 250, 250 * (2.718281828 ** (0.8**2) - 1) ** 0.5)],
)  # fmt: skip
def test_length_distributions_match_their_targets(spec: str, mean: float, std: float) -> None:
    dist = LengthDist.parse(spec)
    rng = random.Random(42)
    xs = [dist.sample(rng) for _ in range(20000)]
    assert statistics.fmean(xs) == pytest.approx(mean, rel=0.03)
    assert statistics.pstdev(xs) == pytest.approx(std, rel=0.06, abs=1)
    assert min(xs) >= 1


@pytest.mark.parametrize("bad", ["uniform:300-100", "normal:10", "gauss:5,1", "0", "lots"])
def test_bad_lengths_say_the_syntax(bad: str) -> None:
    with pytest.raises(ValueError, match=r"N, fixed:N, uniform:LO-HI|at least 1"):
        LengthDist.parse(bad)


def test_token_estimate_is_close_for_english_and_chinese() -> None:
    assert estimate_tokens("The supplier shall deliver the goods within thirty days.") == pytest.approx(14, abs=3)
    assert estimate_tokens("违约责任：任何一方违反本合同约定的，应当承担违约责任。") == pytest.approx(19, abs=4)


def test_datasets_sharegpt_and_jsonl(tmp_path: Path) -> None:
    sg = tmp_path / "sg.json"
    sg.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"},
                                                 {"from": "human", "value": "more"}]}]))  # fmt: skip
    assert load_dataset(sg)[0].turns == ("hi", "more")
    jl = tmp_path / "d.jsonl"
    jl.write_text('{"prompt": "one", "max_tokens": 7}\n\n{"messages": [{"role": "user", "content": "two"}]}\n')
    convs = load_dataset(jl)
    assert convs[0].turns == ("one",) and convs[0].max_tokens == 7 and convs[1].turns == ("two",)
    jl.write_text('{"prompt": "ok"}\n{"prompt": 5}\n')
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: expected 'prompt'"):
        load_dataset(jl)
    with pytest.raises(DatasetError, match="no such dataset"):
        load_dataset(tmp_path / "missing.json")
    # A pretty-printed ShareGPT object (one conversation, or id -> conversation) is not JSONL.
    conv = {"conversations": [{"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi"}]}
    one = tmp_path / "one.json"
    one.write_text(json.dumps(conv, indent=2))
    assert load_dataset(one)[0].turns == ("hello",)
    one.write_text(json.dumps({"a": conv, "b": conv}, indent=2))
    assert len(load_dataset(one)) == 2
    with pytest.raises(DatasetError, match=r"is a directory"):
        load_dataset(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(DatasetError, match=r"bad\.jsonl: not UTF-8 text"):
        load_dataset(bad)


def test_workload_file_overrides_and_validation(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hello"}\n')
    good = tmp_path / "mix.yaml"
    good.write_text(
        "workloads:\n  contract: {weight: 0}\n  code:\n    weight: 5\n    endpoint: completions\n"
        "  chat:\n    dataset: d.jsonl\n    thinking: on\n    output_tokens: uniform:10-20\n"
    )
    s = settings_from_options(opts(workload_file=str(good)))
    assert (s["contract"].weight, s["code"].weight, s["code"].endpoint) == (0, 5, "completions")
    assert s["chat"].thinking == "on" and s["chat"].dataset == str(data)
    assert str(s["chat"].output_tokens) == "uniform:10-20"
    cases = {
        "workloads:\n  chat:\n    output_tokens: lots\n": (3, "chat.output_tokens: bad length: use N"),
        "workloads:\n  video: {weight: 1}\n": (2, "unknown workload (known: contract, code, chat, agent)"),
        "workloads:\n  code:\n    endpont: chat\n": (3, "code: unknown setting — did you mean endpoint?"),
        "workloads:\n  chat:\n    dataset: nope.json\n": (3, "chat.dataset: no such file"),
        "mix:\n  chat: {}\n": (1, "expected the top-level keys 'workloads'"),
        "workloads:\n  code: {weight: -1}\n": (2, "weight must be"),
    }
    for text, (line, reason) in cases.items():
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(WorkloadFileError) as err:
            settings_from_options(opts(workload_file=str(bad)))
        assert str(err.value).startswith(f"{bad}:{line}: ") and reason in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "workloads:\n  hunter2: {weight: 1}\n",  # unknown workload
        "workloads:\n  chat:\n    hunter2: 1\n",  # unknown setting
        "workloads:\n  chat:\n    output_tokens: hunter2\n",  # bad length
        "workloads:\n  chat:\n    dataset: hunter2.json\n",  # no such file
        "workloads:\n  agent:\n    tool_choice: [hunter2]\n",
        "workloads:\n  agent:\n    tool_result_tokens: hunter2\n",
        "workloads:\n  agent:\n    tool_result_tokens: {hunter2: 10}\n",
    ],
)
def test_a_workload_files_error_never_repeats_its_text(tmp_path: Path, text: str) -> None:
    # The line reaches the console, logs and the web form (which names files under its folder).
    bad = tmp_path / "mix.yaml"
    bad.write_text(text)
    with pytest.raises(WorkloadFileError) as err:
        settings_from_options(opts(workload_file=str(bad)))
    assert str(err.value).startswith(f"{bad}:") and "hunter" not in str(err.value), str(err.value)


def test_weights_option_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_from_options(opts(weights="chat=7"))["chat"].weight == 7
    monkeypatch.setenv("TOKENSTORM_WEIGHTS", "code=0,contract=2")
    s = settings_from_options(opts())
    assert (s["code"].weight, s["contract"].weight) == (0, 2)
    with pytest.raises(WorkloadFileError, match="--weights"):
        settings_from_options(opts(weights="video=1"))


def test_sharegpt_output_lengths_follow_the_recorded_answers(tmp_path: Path) -> None:
    answers = ["word " * 40, "Sure. " * 7, "深度学习" * 30]
    data = tmp_path / "sg.json"
    data.write_text(json.dumps([{"conversations": [
        {"from": "human", "value": "Explain it"}, {"from": "gpt", "value": answers[0]},
        {"from": "human", "value": "Shorter"}, {"from": "gpt", "value": answers[1]},
        {"from": "human", "value": "In Chinese"}, {"from": "gpt", "value": answers[2]},
    ]}]))  # fmt: skip
    counter = TokenCounter()
    model = Chat(replace(settings_from_options(opts(dataset=str(data)))["chat"], turns=3), counter)
    session = model.session(random.Random(0))
    asked = [next(session).max_tokens]
    asked += [session.send(Answer("an answer")).max_tokens for _ in range(2)]
    assert asked == [counter.count(a) for a in answers] and len(set(asked)) == 3
    # A JSONL conversation's assistant messages count the same way; "max_tokens" still wins.
    jl = tmp_path / "c.jsonl"
    convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": answers[1]}]
    jl.write_text(json.dumps({"messages": convo}) + "\n" + json.dumps({"messages": convo, "max_tokens": 3}) + "\n")
    lengths = {Chat(settings_from_options(opts(dataset=str(jl)))["chat"], counter).next(random.Random(i)).max_tokens
               for i in range(20)}  # fmt: skip
    assert lengths == {counter.count(answers[1]), 3}
    # An output distribution the user chose wins over the recorded answers.
    chosen = settings_from_options(opts(dataset=str(data), chat_output_tokens="17"))["chat"]
    assert {Chat(chosen, counter).next(random.Random(i)).max_tokens for i in range(5)} == {17}


def test_recorded_answers_too_short_to_tell_or_too_long_for_a_context(tmp_path: Path) -> None:
    data = tmp_path / "sg.json"
    data.write_text(json.dumps([{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "Ok"}]},
                                {"conversations": [{"from": "human", "value": "q"},
                                                   {"from": "gpt", "value": "word " * 20_000}]}]))  # fmt: skip
    model = Chat(settings_from_options(opts(dataset=str(data)))["chat"], TokenCounter())
    lengths = {model.next(random.Random(i)).max_tokens for i in range(40)}
    assert 2048 in lengths  # the 20,000-word answer, clipped
    assert len(lengths - {2048}) > 1  # "Ok" (under 4 tokens): sampled instead
