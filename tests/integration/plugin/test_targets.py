"""A/B targets in one run (``--targets``): two emulators, one decoding 6x slower than the other."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tokenstorm.emulator import EmulatorProcess


def _truth(path: Path) -> dict[str, str]:
    """request id (without the target suffix the client adds on the wire) -> prompt hash."""
    out = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out[row["request_id"].rsplit(".", 1)[0]] = row["prompt_sha"]
    return out


def test_two_targets_get_the_same_requests_and_are_judged_apart(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  code:\n    itl_ms: {p50: 15}\n    error_rate: {max: 5%}\n")
    fast_log, slow_log = tmp_path / "fast.jsonl", tmp_path / "slow.jsonl"
    with (
        EmulatorProcess("--ttft-ms", "20", "--itl-ms", "4", "--truth-log", str(fast_log)) as fast,
        EmulatorProcess("--ttft-ms", "20", "--itl-ms", "25", "--truth-log", str(slow_log)) as slow,
    ):
        run = locust_runner(
            "code_completion.py", "-u", "3", "-r", "3", "-t", "8s", "--slo", str(slo), "--max-tokens", "12",
            "--targets", f"fast={fast.url},slow={slow.url}", "--monitor-interval", "0.5",
        )  # fmt: skip
    # Only the slow target breaks the ITL SLO: the run fails (exit code 1), naming it.
    assert run.returncode == 1, run.output[-3000:]
    assert run.run_dir is not None
    summary = json.loads((run.run_dir / "summary.json").read_text())
    ab = summary["targets"]
    assert ab["slowest"] == "slow" and ab["fastest"] == "fast" and ab["baseline"] == "fast"
    assert ab["targets"]["fast"]["verdict"] == "passed" and ab["targets"]["slow"]["verdict"] == "failed"
    assert ab["targets"]["fast"]["url"] == fast.url and ab["targets"]["slow"]["url"] == slow.url
    # The figures are each target's own: ITL p50 near each emulator's imposed gap.
    assert 3 <= ab["targets"]["fast"]["median_itl_ms"] <= 10, ab["targets"]["fast"]["median_itl_ms"]
    assert 22 <= ab["targets"]["slow"]["median_itl_ms"] <= 35, ab["targets"]["slow"]["median_itl_ms"]
    assert ab["targets"]["slow"]["delta_pct_vs_baseline"]["median_itl_ms"] > 150
    assert "slow is slower" in summary["verdict_reason"]
    failed = [s for s in summary["slos"] if not s["passed"]]
    assert {(s["target"], s["metric"]) for s in failed} == {("slow", "itl_ms")}
    report = (run.run_dir / "report.html").read_text()
    assert 'id="targets"' in report and "slow is slower" in report and fast.url in report
    junit = ET.parse(run.run_dir / "junit.xml").getroot()
    cases = {c.get("classname"): c.find("failure") is not None for c in junit.iter("testcase")
             if "itl_ms" in (c.get("name") or "")}  # fmt: skip
    assert cases == {"tokenstorm.slo.fast.code": False, "tokenstorm.slo.slow.code": True}

    # The same request (same id) carried the same prompt to both endpoints.
    seen_fast, seen_slow = _truth(fast_log), _truth(slow_log)
    common = set(seen_fast) & set(seen_slow)
    assert len(common) >= 0.8 * len(seen_slow) and len(common) > 10, (len(common), len(seen_slow))
    assert all(seen_fast[i] == seen_slow[i] for i in common)
    # Same offered load: the same users on each; the fast one simply got through more of the sequence.
    records = run.records()
    by_target = {t: [r for r in records if r["target"] == t] for t in ("fast", "slow")}
    assert len(by_target["fast"]) + len(by_target["slow"]) == len(records)
    assert {r["user_id"] for r in by_target["fast"]} == {r["user_id"] for r in by_target["slow"]}
    assert len(by_target["fast"]) > len(by_target["slow"]) > 10
    meta = run.run_json()
    assert meta["targets"] == [{"label": "fast", "url": fast.url}, {"label": "slow", "url": slow.url}]
    # Each target's own /metrics was scraped.
    server = [json.loads(line) for line in (run.run_dir / "server.jsonl").read_text().splitlines()]
    assert {s.get("target") for s in server if not s.get("gap")} == {"fast", "slow"}


def test_open_loop_arrivals_reach_every_target_at_the_same_instant(locust_runner) -> None:  # type: ignore[no-untyped-def]
    with (
        EmulatorProcess("--ttft-ms", "10", "--itl-ms", "2") as a,
        EmulatorProcess("--ttft-ms", "10", "--itl-ms", "8") as b,
    ):
        run = locust_runner("open_loop.py", "-t", "5s", "--arrival-rate", "8", "--max-tokens", "8",
                            "--targets", f"a={a.url},b={b.url}", "--no-server-metrics")  # fmt: skip
    # Two emulators on the 2 cores at once, tokens 2 ms apart: one may send tokens in bursts, which
    # the client flags as possibly late (5: timing not trustworthy) — what is checked here is where
    # the arrivals went and when, not the verdict.
    assert run.returncode in (0, 5), run.output[-3000:]
    records = run.records()
    by_target: dict[str, dict[str, float]] = {"a": {}, "b": {}}
    for r in records:
        by_target[r["target"]][r["request_id"]] = r["start_epoch_s"]
    assert len(by_target["a"]) > 20
    assert by_target["a"].keys() == by_target["b"].keys()  # every arrival went to both
    skew = [abs(by_target["a"][i] - by_target["b"][i]) for i in by_target["a"]]
    assert max(skew) < 0.05, max(skew)  # sent together, not one after the other's answer


def _in_locust_process(code: str) -> str:
    """Run ``code`` in a fresh interpreter (the plugin imports Locust, which monkey-patches first)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_the_key_is_kept_off_targets_added_through_a_workload_file(tmp_path: Path) -> None:
    wf = tmp_path / "ab.yaml"
    wf.write_text("targets: [http://a:1, http://b:1]\n")
    code = f"""
from types import SimpleNamespace
from tokenstorm.workloads.plugin.core.context import RunContext
ctx = RunContext(is_worker=False)
opts = SimpleNamespace(api_key="sk-secret", host="http://a:1", targets="", workload_file={str(wf)!r})
ctx.take_secrets(opts, opts.host)
ctx.key_host, ctx.key_targets = "http://a:1", frozenset({{"http://a:1"}})
print(repr(opts.api_key), ctx.authorization_for("http://a:1"), ctx.authorization_for("http://b:1"))
"""
    # Locust's options (what workers are sent) lose the key; it goes to the host it was given for only.
    assert _in_locust_process(code) == "'' Bearer sk-secret None"


def test_twins_stay_aligned_when_one_session_ends_early() -> None:
    code = """
from tokenstorm.workloads.plugin.users.workload import Lane
a, b = Lane("a", None, None, "0/chat/0/0"), Lane("b", None, None, "0/chat/0/0")
rng_a, _ = a.next_session()
rng_b, _ = b.next_session()
[rng_a.random() for _ in range(5)]  # a's session went on for more turns than b's
rng_b.random()
print([a.next_session()[0].random() for _ in range(3)] == [b.next_session()[0].random() for _ in range(3)])
"""
    assert _in_locust_process(code) == "True"


def test_a_custom_user_class_is_refused_with_targets(tmp_path: Path) -> None:
    import subprocess
    import sys

    lf = tmp_path / "custom.py"
    lf.write_text("from locust import task\nfrom tokenstorm.workloads.plugin import LlmUser, install\ninstall()\n"
                  "class Mine(LlmUser):\n    @task\n    def t(self):\n        pass\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", str(lf), "--headless", "-t", "2s",
                           "--targets", "a=http://127.0.0.1:9,b=http://127.0.0.1:10"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 3
    assert "tokenstorm: --targets: user class(es) Mine drive only their host" in proc.stderr
