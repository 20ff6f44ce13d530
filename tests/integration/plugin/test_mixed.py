"""mixed.py: every traffic model in one run, each with its own stats rows and records."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_mixed_run_has_every_workload(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("mixed.py", "-u", "30", "-r", "10", "-t", "20s", "--chat-think-time", "0.2-1",
                        "--chat-thinking", "on", "--emulator-args", "--ttft-ms 100 --itl-ms 4")  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    records = [r for r in run.records() if r["error_category"] != "cancelled"]
    by_workload = {w: [r for r in records if r["workload"] == w] for w in ("contract", "code", "chat", "agent")}
    assert all(by_workload.values()), {w: len(v) for w, v in by_workload.items()}
    stats = run.locust_stats()
    for w, recs in by_workload.items():
        assert stats[("E2E", w)]["requests"] == len(recs)
        assert ("TTFT", w) in stats
    # Default weights contract=1, code=3, chat=2, agent=1 over 30 users: about 4, 13, 9 and 4 users.
    assert len(by_workload["code"]) > len(by_workload["contract"])
    # Requested (estimated) and server-reported prompt tokens are kept side by side.
    contract = by_workload["contract"]
    assert all(2000 <= r["requested_prompt_tokens"] <= 8100 for r in contract)
    assert all(r["prompt_tokens"] > 1000 for r in contract)
    # Code goes to both endpoints; chat with thinking on times the reasoning apart.
    assert {r["endpoint"] for r in by_workload["code"]} == {"/v1/completions", "/v1/chat/completions"}
    chat = by_workload["chat"]
    assert all(r["reasoning_events"] > 0 and r["ttft_answer_s"] > r["ttft_s"] for r in chat)
    # Agent steps are steps of sessions; most of them (tool_choice auto) call a tool.
    agent = by_workload["agent"]
    assert all(r["session_id"] and r["step"] is not None for r in agent)
    assert sum(r["tool_calls"] > 0 for r in agent) > len(agent) / 2, [r["tool_calls"] for r in agent]


def test_invalid_workload_file_is_rejected_before_traffic(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "mix.yaml"
    bad.write_text("workloads:\n  chat:\n    turns: many\n")
    run = locust_runner("mixed.py", "-u", "2", "-r", "2", "-t", "30s", "--workload-file", str(bad))
    assert run.returncode == 3
    assert f"tokenstorm: {bad}:3: chat.turns: turns must be a whole number >= 1" in run.output
    assert run.run_dir is None and "Traceback" not in run.output


@pytest.mark.parametrize(
    ("locustfile", "args", "line"),
    [
        ("chat.py", ["--max-tokens", "-5"], "tokenstorm: --max-tokens -5: must be >= 0"),
        ("open_loop.py", ["--arrival-rate", "-1"], "tokenstorm: --arrival-rate -1.0: must be > 0"),
        ("mixed.py", ["--wait-time", "abc"], "tokenstorm: --wait-time 'abc': expected a duration or LO-HI"),
        ("code_completion.py,locustfiles/shape_steps.py", ["--steps", "8x"],
         "tokenstorm: --steps '8x': expected USERSxDURATION"),
        ("mixed.py", ["--weights", "contract=0,code=0,chat=0,agent=0"], "tokenstorm: every workload's weight is 0"),
        ("open_loop.py", ["--weights", "contract=0,code=0,chat=0,agent=0"],
         "tokenstorm: every workload's weight is 0"),
    ],
)  # fmt: skip
def test_a_bad_option_stops_the_run_before_traffic_with_one_line(
    locust_runner, locustfile: str, args: list[str], line: str
) -> None:  # type: ignore[no-untyped-def]
    # These once ran: -5 max_tokens were sent and passed, a negative rate sent 10,000 requests
    # in 3 s and passed, "abc" printed a traceback per user, "8x" a traceback with exit 2.
    run = locust_runner(locustfile, "-u", "2", "-r", "2", "-t", "30s", *args)
    assert run.returncode == 3, run.output[-2000:]
    assert line in run.output
    assert run.run_dir is None and "Traceback" not in run.output


def test_a_host_that_is_not_http_is_one_line(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("chat.py", "-u", "4", "-r", "4", "-t", "20s", "--host", "ftp://x")
    assert run.returncode == 3, run.output[-2000:]
    # One line naming the option, before any traffic or run directory (it once came with four users' tracebacks).
    lines = [line for line in run.output.splitlines() if line.startswith("tokenstorm:")]
    assert len(lines) == 1 and "--host ftp://x: expected http(s)://HOST:PORT" in lines[0], run.output[-2000:]
    assert "Traceback" not in run.output and run.run_dir is None
