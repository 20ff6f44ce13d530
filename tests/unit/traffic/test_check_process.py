"""The checks' own process judges as the load generator would (built-in checks and a user's own, imported
from where the load generator imports it), and when it dies the answer is still judged, here."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from tokenstorm.workloads.client.client import Answer
from tokenstorm.workloads.rundir import RequestRecord
from tokenstorm.workloads.traffic import MODELS, default_settings
from tokenstorm.workloads.traffic.checks import FailedAnswers, Reply, check_record, judge, named
from tokenstorm.workloads.traffic.checks.worker import INLINE_CHARS, CheckProcess
from tokenstorm.workloads.traffic.tokens import TokenCounter
from tokenstorm.workloads.traffic.user_checks import load_user_check


@pytest.fixture
def checker():  # type: ignore[no-untyped-def]
    proc = CheckProcess()
    yield proc
    proc.close()


def test_the_process_judges_every_models_checks_as_they_are_judged_here(checker: CheckProcess) -> None:
    rng = random.Random(4)
    # longer than INLINE_CHARS: short answers are judged in the load generator itself
    pad = " " + "the cache holds keys " * (INLINE_CHARS // 20)
    fence = "```python\ndef test_a():\n    assert 1\n```"
    answers = ["The cache holds keys." + pad, "缓存保存键和值。" * 200, fence + pad, "结果 = 1" + pad,
               "I am not sure. " * 100, " " * (INLINE_CHARS + 1)]  # fmt: skip
    seen = 0
    for name in ("contract", "code", "chat", "agent"):
        model = MODELS[name](default_settings()[name], TokenCounter(), seed=1)
        req = next(model.session(rng))  # type: ignore[attr-defined]
        for text in answers:
            reply = Reply(text, [], rng.choice(("stop", "length")), 10, 12)
            assert checker.judge(req.checks, reply) == judge(req.checks, reply)
            seen += 1
    assert seen == 24 and checker._proc is not None and checker._proc.poll() is None  # one process did them all
    # in a session of its own: a terminal's Ctrl-C reaches the load generator, which ends it, not it mid-answer
    assert os.getsid(checker._proc.pid) != os.getsid(0)


def test_a_short_answer_is_judged_here() -> None:
    checker = CheckProcess()
    model = MODELS["chat"](default_settings()["chat"], TokenCounter(), seed=1)
    checks = next(model.session(random.Random(1))).checks  # type: ignore[attr-defined]
    reply = Reply("The cache holds keys and values.", [], "stop", 8, 64)
    assert checker.judge(checks, reply) == judge(checks, reply) and checker._proc is None  # no process started


def test_a_users_own_check_runs_in_the_process_with_its_request(tmp_path: Path, checker: CheckProcess) -> None:
    (tmp_path / "team_rules.py").write_text(
        "def cites_the_model(request, reply):\n    return request.workload in reply.text or 'no workload named'\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        check = load_user_check("team_rules:cites_the_model")
        from tokenstorm.workloads.client import CompletionRequest

        record = RequestRecord(workload="chat", endpoint="/v1/chat/completions", model="m", stream=True,
                               start_epoch_s=0.0, ok=True, finish_reason="stop", output_tokens=3)  # fmt: skip
        req = CompletionRequest("chat")
        check_record(record, req, Answer("a chat answer"), (check,), FailedAnswers(), (), checker.judge)
        assert record.check_results == "cites_the_model:pass"
        check_record(record, req, Answer("nothing"), (check,), FailedAnswers(), (), checker.judge)
        assert record.check == "cites_the_model" and record.check_detail == "no workload named"
    finally:
        sys.path.remove(str(tmp_path))


def test_a_dead_process_is_replaced_and_an_unpicklable_check_is_judged_here(
    checker: CheckProcess, caplog: pytest.LogCaptureFixture
) -> None:
    reply = Reply("x " * INLINE_CHARS, [], "stop", 30, 64)
    model = MODELS["chat"](default_settings()["chat"], TokenCounter(), seed=1)
    checks = next(model.session(random.Random(1))).checks  # type: ignore[attr-defined]
    assert checker.judge(checks, reply) == judge(checks, reply)
    first = checker._proc
    assert first is not None
    first.kill()
    first.wait()
    assert checker.judge(checks, reply) == judge(checks, reply)  # by a fresh process
    assert checker._proc is not None and checker._proc is not first
    local = named("local_rule", lambda r: "x" in r.text)  # a lambda cannot be pickled: judged here
    assert checker.judge((*checks, local), reply) == judge((*checks, local), reply)
    assert "answer checks run in the load generator from now on" in caplog.text


def test_a_user_stopped_mid_check_leaves_no_answer_for_the_next_one(
    tmp_path: Path, checker: CheckProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load test stopping a user kills its greenlet while it waits for its answer's verdict: that verdict
    must not be read by the next request as its own (a web-UI run started after a Stop would judge with it)."""
    import gevent
    import gevent.subprocess

    from tokenstorm.workloads.traffic.checks import worker

    monkeypatch.setattr(worker, "subprocess", gevent.subprocess)  # cooperative pipes, as under Locust's patching

    (tmp_path / "slow_rules.py").write_text(
        "import time\n"
        "def says_which(request, reply):\n"
        "    if reply.text.startswith('slow'):\n"
        "        time.sleep(1.0)\n"
        "        return 'the slow answer'\n"
        "    return True\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        from tokenstorm.workloads.client import CompletionRequest

        check = load_user_check("slow_rules:says_which")
        req = CompletionRequest("chat")  # a user's own check gets the request: judged in the process, always
        slow = gevent.spawn(checker.judge, (check,), Reply("slow", [], "stop", 1, 8, req))
        gevent.sleep(1.0)  # the process started (~0.3 s), and its answer is being judged there
        slow.kill()  # as Locust stops a user: GreenletExit where it waits
        assert isinstance(slow.value, gevent.GreenletExit)  # killed while it waited, not judged
        outcome = checker.judge((check,), Reply("fast", [], "stop", 1, 8, req))
        assert outcome.results == "says_which:pass" and outcome.detail is None, outcome
    finally:
        sys.path.remove(str(tmp_path))
