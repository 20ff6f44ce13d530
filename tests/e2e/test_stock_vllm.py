"""The default mix against a stock ``vllm serve`` (no tool calling): chat, code and contract run, agent
sessions are left out, and the run says so in one line naming the flags that would add them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_the_default_mix_runs_on_a_stock_vllm_without_agent_sessions(stock_vllm: str, locust_runner) -> None:  # type: ignore[no-untyped-def]
    # The mission's command; prompt sizes that fit the tiny model's 4,096 tokens (they name no workload's traffic).
    run = locust_runner("mixed.py", "-u", "4", "-r", "4", "-t", "20s", "--host", stock_vllm,
                        "--contract-prompt-tokens", "uniform:500-1500", "--max-tokens", "16")  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]  # not 3: the run was not refused for the mix it chose
    said = [line for line in run.output.splitlines() if "agent sessions left out" in line]
    assert len(said) == 1, said
    assert "the server does not call tools" in said[0] and "--enable-auto-tool-choice --tool-call-parser" in said[0]
    records = [r for r in run.records() if r["error_category"] != "cancelled"]
    assert {r["workload"] for r in records} == {"chat", "code", "contract"}, {r["workload"] for r in records}
    assert all(r["ok"] for r in records), [r["error_detail"] for r in records if not r["ok"]][:3]
    assert run.run_json()["left_out"]["agent"] in said[0]  # run.json (and the report) say it too
