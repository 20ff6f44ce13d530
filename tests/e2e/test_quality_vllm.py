"""Answer checks on a real vLLM server's answers: the tiny model's random weights write garbage, so the checks
must say so — a contract answer never holds the needle the request hid, a code answer with CJK characters
fails ``code_language`` — each judged here again from what vLLM streamed (read by a recording proxy in front
of it, with plain string tests, not the client's parser or the checks' code). The consistency probe's
changed share is measured on the same server and reported as the probes' answers say, and a ``quality``
SLO that garbage cannot meet fails the run (exit 1)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.proxy import RecordingProxy

pytestmark = pytest.mark.e2e

#: kana, CJK ideographs (extension A, unified, compatibility), Hangul syllables
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_FACT = re.compile(
    r"^(?:The (?P<en_subject>.+?) is (?P<en>.+)\.|(?P<zh_subject>托管账户编号|和解金额|生效日期|担保人)为(?P<zh>.+)。)$"
)
SLO = "slos:\n  contract:\n    quality: {min: 50%}\n  run:\n    consistency_changed: {max: 100%}\n"


def _streamed_text(events: list[dict[str, Any]]) -> str:
    return "".join(ch.get("delta", {}).get("content") or ch.get("text") or "" for e in events
                   for ch in e.get("choices") or ())  # fmt: skip


def _outside_strings(code: str) -> str:
    """``code`` without its string literals, scanned quote by quote: a triple-quoted string to its closing
    triple, a one-line string to its closing quote (a backslash escapes the next character), and a quote with
    no closing one on its line stays as code. (The check's own reading is a regular expression.)"""
    out, i = [], 0
    while i < len(code):
        q = code[i]
        if q not in "'\"":
            out.append(q)
            i += 1
            continue
        if code.startswith(q * 3, i) and (end := code.find(q * 3, i + 3)) >= 0:
            i = end + 3
            continue
        j = i + 1
        while j < len(code) and code[j] not in (q, "\n"):
            j += 2 if code[j] == "\\" else 1
        if j < len(code) and code[j] == q:
            i = j + 1  # a closed one-line string: left out
        else:
            out.append(q)
            i += 1
    return "".join(out)


def _normal(text: str) -> str:
    return re.sub(r"[\s,，]+", "", text).casefold()


def test_checks_fail_a_random_models_answers_as_what_it_streamed_says(vllm_server: str, locust_runner: Any,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    slo = tmp_path / "quality.yaml"
    slo.write_text(SLO)
    proxy = RecordingProxy(vllm_server)
    try:
        run = locust_runner(
            "mixed.py", "--host", proxy.url, "--model", "tiny", "--weights", "contract=2,code=2,chat=1,agent=0",
            "-u", "6", "-r", "6", "-t", "6s", "--max-tokens", "24", "--wait-time", "0",  # 15 s: 330 contract, 499 code
            "--contract-prompt-tokens", "uniform:400-900", "--code-prompt-tokens", "uniform:50-150",
            "--chat-think-time", "0", "--consistency-probes", "4", "--warmup", "2", "--slo", str(slo),
        )  # fmt: skip
    finally:
        proxy.close()
    records = [r for r in run.records() if r["ok"]]
    contract = [r for r in records if r["workload"] == "contract"]
    code = [r for r in records if r["workload"] == "code"]
    chat = [r for r in records if r["workload"] == "chat"]
    assert len(contract) >= 5 and len(code) >= 5 and chat, (len(contract), len(code), len(chat))

    # The needle: found in the prompt vLLM was sent, looked for in the text it streamed back.
    for r in contract:
        user = proxy.bodies[r["request_id"]]["messages"][1]["content"]
        facts = [m for p in user.split("\n\n") if (m := _FACT.match(p))]
        assert len(facts) == 1, r["request_id"]
        value = facts[0]["en"] or facts[0]["zh"]
        held = _normal(value) in _normal(_streamed_text(proxy.events(r["request_id"])))
        assert r["check_results"] == f"needle:{'pass' if held else 'fail'}", (r["check_results"], value)
        assert r["check"] == ("pass" if held else "needle") and 0 <= r["needle_depth"] <= 1
    assert sum(r["check"] == "needle" for r in contract) == len(contract)  # random text holds no needle

    # Code: a CJK character outside a string literal in what vLLM streamed (its byte-level vocabulary has
    # them, and quotes) fails the language check; inside one ('...约...') it is a string's content and passes.
    judged = 0
    for r in code:
        text = _streamed_text(proxy.events(r["request_id"]))
        results = dict(item.split(":") for item in r["check_results"].split(",") if item)
        if text.strip() and "```" not in text:  # a fenced block would be judged alone; random text rarely has one
            judged += 1
            wrong = bool(_CJK.search(_outside_strings(text)))
            assert results["code_language"] == ("fail" if wrong else "pass"), (text, results)
    assert judged >= 5, judged
    assert any(r["check"] == "code_language" for r in code)
    # Chat: every turn was judged on its script, repetition and cut.
    # Chat: every turn was judged on its script, repetition and cut; cut short means an empty answer here (the
    # random model may end at once) — it stops at its end-of-sequence or at max_tokens, never earlier.
    for r in chat:
        events = proxy.events(r["request_id"])
        finish = [ch["finish_reason"] for e in events for ch in e.get("choices") or () if ch.get("finish_reason")]
        whole = bool(_streamed_text(events).strip()) and finish[-1] in ("stop", "length")
        assert {k.split(":")[0] for k in r["check_results"].split(",")} <= {"script", "repetition", "complete"}
        assert f"complete:{'pass' if whole else 'fail'}" in r["check_results"], (r["check_results"], finish)

    # The verdict: contract quality is 0% < 50%, and the run says so with exit 1.
    assert run.returncode == 1, run.output[-3000:]
    summary = json.loads((run.run_dir / "summary.json").read_text())
    quality = summary["quality"]["workloads"]["contract"]
    assert quality["checked"] == sum(1 for r in contract if not r["warmup"]) and quality["pass_rate"] == 0
    assert "quality" in run.output

    # Consistency: both passes of 4 probes, the changed share as the answers in probes.jsonl say.
    lines = [json.loads(line) for line in (run.run_dir / "probes.jsonl").read_text().splitlines()]
    before = {p["probe"]: p["text"] for p in lines if p["phase"] == "before" and p["ok"]}
    under = {p["probe"]: p["text"] for p in lines if p["phase"] == "under_load" and p["ok"]}
    assert len(before) == len(under) == 4
    changed = sum(before[i] != under[i] for i in before)
    consistency = summary["consistency"]
    assert consistency["compared"] == 4 and consistency["changed"] == changed
    assert f"{changed} of 4 probe answers changed under load" in run.output
