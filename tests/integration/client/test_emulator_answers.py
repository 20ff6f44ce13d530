"""The emulator's answers over HTTP, judged by tokenstorm's checks as a run judges them: a streamed contract
answer names the needle its prompt hides, each ``--wrong-*`` knob spoils its share of answers (and the truth
log says which), and a temperature-0 answer changes under load only with ``--wrong-consistency``."""

from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.request
from dataclasses import replace
from typing import Any

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client import LlmClient
from tokenstorm.workloads.traffic import MODELS, default_settings
from tokenstorm.workloads.traffic.checks import check_record
from tokenstorm.workloads.traffic.lengths import LengthDist
from tokenstorm.workloads.traffic.tokens import TokenCounter

FAST = ("--ttft-ms", "1", "--itl-ms", "0")


def _model(name: str, **settings: Any) -> Any:
    return MODELS[name](replace(default_settings()[name], **settings), TokenCounter(), seed=1)


def _truth(url: str) -> dict[str, dict[str, Any]]:
    return {t["request_id"]: t for t in json.load(urllib.request.urlopen(f"{url}/emulator/truth"))}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def _running(metrics: str) -> float:
    line = next(x for x in metrics.splitlines() if x.startswith("vllm:num_requests_running{"))
    return float(line.rsplit(" ", 1)[1])


def _post(url: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
    req = urllib.request.Request(f"{url}/v1/chat/completions", json.dumps({"model": "m", **body}).encode(),
                                 {"Content-Type": "application/json", "X-Request-Id": request_id})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(json.load(resp))


def test_a_streamed_contract_answer_names_the_needle_its_prompt_hides() -> None:
    model = _model("contract")
    reqs = [model.request(random.Random(i)) for i in range(8)]
    # events of 3 tokens, some of them empty (their text comes with the next): the answer is whole all the same
    with EmulatorProcess(*FAST, "--tokens-per-chunk", "3", "--empty-chunk-share", "0.3") as emu:
        client = LlmClient(emu.url)
        results = []
        for req in reqs:
            record = client.complete(req, "m")
            check_record(record, req, client.last_answer)
            results.append((record, client.last_answer.text))
        client.close()
        truth = _truth(emu.url)
    langs = set()
    for req, (record, text) in zip(reqs, results, strict=True):
        assert record.ok and record.check == "pass", (record.check_detail, text[:200])
        user = req.messages[1]["content"]
        value = text.split("\n", 1)[0].strip()
        assert value and value in user, value  # its first line: the value as the contract states it
        assert record.output_tokens == truth[record.request_id]["output_tokens"]
        assert truth[record.request_id]["wrong"] == []
        langs.add("zh" if user.startswith("第") else "en")
    assert langs == {"en", "zh"}  # both languages were drawn


def test_each_knob_spoils_its_share_of_answers_and_the_truth_log_says_which() -> None:
    rates = {"script": 0.3, "cut": 0.2, "repeat": 0.25, "tool_json": 0.4, "needle": 0.3, "cjk": 0.3, "syntax": 0.2}
    knobs = [a for kind, rate in rates.items() for a in (f"--wrong-{kind.replace('_', '-')}", str(rate))]
    chat, agent = _model("chat"), _model("agent", prompt_tokens=LengthDist.parse(800))  # short contexts: fast
    texts = [replace(chat.next(random.Random(i)), max_tokens=60) for i in range(300)]
    calls = [replace(agent.next(random.Random(i)), tool_choice="required", max_tokens=200) for i in range(200)]
    contract = _model("contract", prompt_tokens=LengthDist.parse(400))
    code = _model("code", skills=("unit_test",))
    contracts = [contract.request(random.Random(i)) for i in range(200)]
    tests = [code.request(random.Random(i)) for i in range(200)]
    with EmulatorProcess(*FAST, *knobs, "--seed", "19") as emu:  # the same draws each run
        client = LlmClient(emu.url)
        records = []
        for req in texts + calls + contracts + tests:
            record = client.complete(req, "m")
            check_record(record, req, client.last_answer)
            records.append(record)
        client.close()
        truth = _truth(emu.url)
    check_of = {"script": "script", "cut": "complete", "repeat": "repetition", "tool_json": "tool_args",
                "needle": "needle", "cjk": "code_language", "syntax": "python_parses"}  # fmt: skip
    for kind, rate in rates.items():
        check = check_of[kind]
        judged = [r for r in records if f"{check}:" in (r.check_results or "")]
        failed = {r.request_id for r in judged if f"{check}:fail" in (r.check_results or "")}
        spoiled = {r.request_id for r in judged if kind in truth[r.request_id]["wrong"]}
        assert len(judged) >= 200, (kind, len(judged))
        assert failed == spoiled, kind  # the check fails exactly on the answers the truth log says were spoiled
        bound = 4 * math.sqrt(rate * (1 - rate) / len(judged))  # four binomial standard deviations
        assert abs(len(failed) / len(judged) - rate) <= bound, (kind, len(failed), len(judged))
    assert all(r.ok for r in records)


def test_a_temperature_zero_answer_changes_only_beside_another_request_with_wrong_consistency() -> None:
    body = {"messages": [{"role": "user", "content": "What does a scheduler batch?"}], "max_tokens": 40,
            "temperature": 0}  # fmt: skip
    slow = {"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 400, "ignore_eos": True}
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "5", "--wrong-consistency", "1") as emu:
        alone = [_post(emu.url, body, f"alone{i}")["choices"][0]["message"]["content"] for i in range(2)]
        other = threading.Thread(target=_post, args=(emu.url, slow, "slow"))
        other.start()
        try:
            deadline = time.monotonic() + 10
            while "vllm:num_requests_running{" not in (m := _get(f"{emu.url}/metrics")) or _running(m) < 1:
                assert time.monotonic() < deadline, "the slow request never ran"
                time.sleep(0.01)
            beside = _post(emu.url, body, "beside")["choices"][0]["message"]["content"]
        finally:
            other.join()
        truth = _truth(emu.url)
    assert alone[0] == alone[1] and truth["alone0"]["wrong"] == truth["alone1"]["wrong"] == []
    assert beside != alone[0] and truth["beside"]["wrong"] == ["consistency"]
    assert truth["slow"]["wrong"] == []  # sampled (no temperature 0): nothing to keep consistent
