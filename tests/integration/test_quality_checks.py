"""Answer checks under load against the emulator, both ways: with its ``--wrong-*`` knobs each check's failure
rate is the rate the emulator answered wrong — record by record against its truth log, and within 2 points of
the knob (or 4 standard errors of a draw of that size, when larger) over >= 500 judged answers — and a
``quality`` SLO below its minimum fails the run (exit 1, a failing JUnit case); with the knobs off every
applied check passes and the same SLOs hold."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import run_locust
from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client.probes import PROBE_ID_PREFIX
from tokenstorm.workloads.traffic.checks import NOT_JUDGED_STOPPED

#: knob -> the check it must fail, and its rate in the run
KNOBS = {"needle": ("needle", 0.2), "cjk": ("code_language", 0.1), "syntax": ("python_parses", 0.25),
         "script": ("script", 0.15), "repeat": ("repetition", 0.1), "cut": ("complete", 0.05),
         "tool_json": ("tool_args", 0.2)}  # fmt: skip
SLO = """slos:
  contract:
    quality: {min: 99%}
  code:
    quality_code_language: {min: 95%}
"""
RESULTS = "read_file=60,search_code=30,list_directory=30,edit_file=10,run_command=30"
#: small and fast: thousands of answers in a minute
TRAFFIC = ("--weights", "contract=2,code=6,chat=2,agent=2", "--wait-time", "0", "--max-tokens", "32",
           "--contract-prompt-tokens", "uniform:300-600", "--code-prompt-tokens", "uniform:50-150",
           "--chat-think-time", "0", "--agent-profiles", "coding", "--agent-tool-choice", "required",
           "--agent-prompt-tokens", "uniform:400-800", "--agent-steps", "3", "--agent-tool-time", "0",
           "--agent-tool-result-tokens", RESULTS)  # fmt: skip
EMU = ("--ttft-ms", "2", "--itl-ms", "0.3", "--prefill-us-per-token", "0")


def _truth(log: Path) -> dict[str, list[str]]:
    """What the emulator spoiled, per request, from its truth log: every request it answered (its
    ``/emulator/truth`` keeps only the newest 20,000, fewer than a fast run of this size can send)."""
    rows = (json.loads(line) for line in log.read_text().splitlines())
    return {t["request_id"]: t["wrong"] for t in rows if not t["request_id"].startswith(PROBE_ID_PREFIX)}


def _results(record: dict) -> dict[str, str]:
    return dict(item.split(":") for item in record["check_results"].split(",")) if record["check_results"] else {}


def _failed_junit_cases(run_dir: Path) -> list[str]:
    root = ET.parse(run_dir / "junit.xml").getroot()
    return [c.get("name", "") for c in root.iter("testcase") if c.find("failure") is not None]


def test_each_check_fails_at_the_rate_the_emulator_answered_wrong(tmp_path: Path) -> None:
    knobs = [arg for kind, (_check, rate) in KNOBS.items() for arg in (f"--wrong-{kind.replace('_', '-')}", str(rate))]
    (tmp_path / "slo.yaml").write_text(SLO)
    log = tmp_path / "truth.jsonl"
    with EmulatorProcess(*EMU, *knobs, "--truth-log", str(log)) as emu:
        # 12 s: 1,760–2,570 judged per check in 8 s alone here, where 500 are asked; a third of 12 s's beside -n's
        # workers still holds
        run = run_locust(tmp_path, "mixed.py", "--host", emu.url, "-u", "24", "-r", "24", "-t", "12s",
                         "--slo", str(tmp_path / "slo.yaml"), *TRAFFIC, timeout_s=240)  # fmt: skip
    truth = _truth(log)
    records = [r for r in run.records() if r["ok"]]
    for kind, (check, rate) in KNOBS.items():
        judged = [r for r in records if check in _results(r)]
        failed = [r for r in judged if _results(r)[check] == "fail"]
        # Record by record: the check failed exactly where the emulator answered wrong in its way.
        wrong = [r for r in judged if kind in truth[r["request_id"]]]
        assert {r["request_id"] for r in failed} == {r["request_id"] for r in wrong}, check
        assert len(judged) >= 500, (check, len(judged))
        measured = len(failed) / len(judged)
        bound = max(0.02, 4 * math.sqrt(rate * (1 - rate) / len(judged)))
        assert abs(measured - rate) <= bound, (check, measured, rate, len(judged))
    # A failed answer names its check first and says why; a bounded sample of them keeps the text.
    needle_failed = [r for r in records if r["check"] == "needle"]
    assert needle_failed and all("not in the answer" in r["check_detail"] for r in needle_failed)
    samples = [r for r in records if r["answer_sample"]]
    assert 0 < len(samples) <= 20 * len(KNOBS) * 4 and all(r["check"] not in (None, "pass") for r in samples)
    # The verdict: contract quality ~80% < 99%, code language ~90% < 95% — exit 1, each a failing JUnit case.
    assert run.returncode == 1, run.output[-3000:]
    failing = _failed_junit_cases(run.run_dir)
    assert any("contract" in c and "quality" in c for c in failing), failing
    assert any("code" in c and "quality_code_language" in c for c in failing), failing


def test_with_the_knobs_off_every_check_passes_and_the_quality_slos_hold(tmp_path: Path) -> None:
    (tmp_path / "slo.yaml").write_text(SLO)
    with EmulatorProcess(*EMU) as emu:
        # 4 s: 5,081 answers judged alone here (19,310 in 15 s), where 200 are asked
        run = run_locust(tmp_path, "mixed.py", "--host", emu.url, "-u", "16", "-r", "16", "-t", "4s",
                         "--slo", str(tmp_path / "slo.yaml"), *TRAFFIC, timeout_s=180)  # fmt: skip
    records = [r for r in run.records() if r["ok"]]
    judged = [r for r in records if r["check"] is not None]
    assert len(judged) >= 200 and {r["workload"] for r in judged} == {"contract", "code", "chat", "agent"}
    assert [r for r in judged if r["check"] != "pass"] == []
    seen = {check for r in judged for check in _results(r)}
    assert seen == {"needle", "code_language", "python_parses", "script", "repetition", "complete", "tool_exists",
                    "tool_args"}  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    assert _failed_junit_cases(run.run_dir) == []


def test_long_answers_are_judged_in_the_checks_own_process_as_the_emulator_answered(tmp_path: Path) -> None:
    import threading

    import psutil

    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:  # the checks' process, a child of the load generator, while the run goes
        while not stop.is_set():
            for p in psutil.process_iter(["cmdline"]):
                if "tokenstorm.workloads.traffic.checks.worker" in " ".join(p.info["cmdline"] or ()):
                    seen.add(str(p.pid))
            stop.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        log = tmp_path / "truth.jsonl"
        with EmulatorProcess(*EMU, "--wrong-needle", "0.3", "--truth-log", str(log)) as emu:
            # 5 s: 553 long answers alone here (1,142 in 10 s), where 50 are asked
            run = run_locust(tmp_path, "contract.py", "--host", emu.url, "-u", "8", "-r", "8", "-t", "5s",
                             "--max-tokens", "400", "--wait-time", "0",
                             "--contract-prompt-tokens", "uniform:300-600")  # fmt: skip
        truth = _truth(log)
    finally:
        stop.set()
        watcher.join()
    # (a user the run's end stopped while its answer was being checked has a record without a verdict, said so)
    records = [r for r in run.records() if r["ok"] and r["check_detail"] != NOT_JUDGED_STOPPED]
    assert len(records) >= 50 and seen, (len(records), seen)  # answers of ~2 KB: over INLINE_CHARS
    for r in records:
        assert r["check"] == ("needle" if "needle" in truth[r["request_id"]] else "pass"), r["request_id"]
    assert 0 < sum(r["check"] == "needle" for r in records) < len(records)
