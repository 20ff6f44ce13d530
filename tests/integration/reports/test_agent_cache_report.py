"""An agent run against the emulator, as a user runs one: the report's prefix-cache hit rate against the
emulator's truth log and its own /metrics, the session and tool-call figures against numpy on the records, and
the session / tool-call SLOs judged in summary.json and JUnit."""

from __future__ import annotations

import json
import urllib.request
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.monitors._vllm_metrics import parse_vllm_metrics

_EMULATOR = ("--ttft-ms", "30", "--itl-ms", "3", "--prefill-us-per-token", "2", "--seed", "11")
_AGENT = ("--agent-tool-choice", "required", "--agent-steps", "fixed:3", "--agent-prompt-tokens", "uniform:800-1500",
          "--agent-tool-time", "0-0.05", "--wait-time", "0-0.2")  # fmt: skip


def test_agent_runs_cache_hit_rate_is_the_emulators_and_its_sessions_are_judged(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  agent:\n    tool_call_ms: {p95: 60000}\n    session_ms: {p95: 600000, max: 1}\n")
    log = tmp_path / "truth.jsonl"
    with EmulatorProcess(*_EMULATOR, "--truth-log", str(log)) as emu:
        run = locust_runner("agent.py", "-u", "3", "-r", "3", "-t", "8s", *_AGENT, "--host", emu.url,
                            "--slo", str(slo), "--monitor-interval", "0.5")  # fmt: skip
        with urllib.request.urlopen(f"{emu.url}/metrics", timeout=5) as resp:
            final = parse_vllm_metrics(resp.read().decode())
    assert run.returncode in (1, 5), run.output[-3000:]  # session_ms max <= 1 ms breaks (5: timing not trusted)
    assert run.run_dir is not None
    summary = json.loads((run.run_dir / "summary.json").read_text())
    truth = {row["request_id"]: row for row in map(json.loads, log.read_text().splitlines())}
    records = run.records()
    judged = [r for r in records if r["ok"] and r["error_category"] != "cancelled" and not r["warmup"]]
    assert len(judged) >= 10
    # The records' hit rate: each record's cached tokens are the emulator's, and the rate is theirs.
    assert all(r["cached_tokens"] == truth[r["request_id"]]["cached_tokens"] for r in judged)
    cached = sum(truth[r["request_id"]]["cached_tokens"] for r in judged)
    prompt = sum(truth[r["request_id"]]["prompt_tokens"] for r in judged)
    assert cached > 0 and summary["prefix_cache_hit_rate"] == pytest.approx(cached / prompt, rel=1e-12)
    assert summary["prefix_cache_hit_rate_source"] == "records"
    # /metrics: the emulator counts every request it served (its truth) and started from 0, so the report's
    # increase plus the run's first sample is the emulator's total — hits and queries alike.
    first = json.loads((run.run_dir / "server.jsonl").read_text().splitlines()[0])
    assert final.prefix_cache_hits == sum(t["cached_tokens"] for t in truth.values())
    assert final.prefix_cache_queries == sum(t["prompt_tokens"] for t in truth.values())
    assert summary["prefix_cache_hits"] + first["prefix_cache_hits"] == final.prefix_cache_hits
    assert summary["prefix_cache_queries"] + first["prefix_cache_queries"] == final.prefix_cache_queries
    assert summary["prefix_cache_hit_rate_server"] == pytest.approx(
        summary["prefix_cache_hits"] / summary["prefix_cache_queries"], rel=1e-12
    )
    # Sessions: three steps each (tool_choice required), latency first send to last token, as numpy says.
    by: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by[r["session_id"]].append(r)
    done = [s for s in by.values() if any(r["session_end"] for r in s) and all(r["ok"] and not r["warmup"] for r in s)]
    assert len(done) >= 2 and all(len(s) == 3 for s in done)
    latency = np.array([max(r["start_epoch_s"] + r["e2e_s"] for r in s) - min(r["start_epoch_s"] for r in s)
                        for s in done]) * 1000  # fmt: skip
    assert summary["completed_sessions"] == len(done) and summary["median_steps_per_session"] == 3
    assert summary["p95_session_ms"] == pytest.approx(np.percentile(latency, 95), rel=1e-9)
    calls = np.array([r["tool_call_s"] for r in judged]) * 1000
    assert summary["p95_tool_call_ms"] == pytest.approx(np.percentile(calls, 95), rel=1e-9)
    slos = {(s["metric"], s["stat"]): s for s in summary["slos"]}
    assert slos[("session_ms", "max")]["passed"] is False and slos[("session_ms", "p95")]["passed"] is True
    assert slos[("tool_call_ms", "p95")]["measured"] == pytest.approx(summary["p95_tool_call_ms"])
    cases = {c.get("name") for c in ET.fromstring((run.run_dir / "junit.xml").read_text()).iter("testcase")}
    assert {"agent session_ms max <= 1", "agent tool_call_ms p95 <= 60000"} <= cases
    html = (run.run_dir / "report.html").read_text()
    assert 'id="agent"' in html and 'id="prefix-cache"' in html and f"{cached / prompt:.2%}" in html
