"""A run that lost workers or never finished says so: verdict, summary, JUnit, exit code."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report

LOST = {"workers_seen": ["w1", "w2"], "workers_lost": {"w2": {"detected_epoch_s": 1005.0}}, "status": "finished"}


def _run(tmp_path: Path, **meta: object) -> Path:
    return make_run_dir(tmp_path / "run", [request(i, 100) for i in range(50)], meta)


def test_a_lost_worker_makes_the_run_incomplete_with_exit_code_4(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, **LOST))
    assert (result.summary.verdict, result.exit_code) == ("incomplete", 4)
    assert "1 of 2 workers were lost" in result.summary.reason
    assert "(on what was recorded: default check held: error rate 0.00% ≤ 1%" in result.summary.reason
    summary = json.loads(result.summary_json.read_text())
    assert summary["complete"] is False and summary["incomplete_reasons"]
    junit = result.junit.read_text()
    assert 'failures="1"' in junit and "run incomplete" in junit
    assert "Run incomplete" in result.report.read_text()


def test_allow_lost_workers_accepts_them(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, **LOST, options={"allow_lost_workers": True}))
    assert (result.summary.verdict, result.exit_code) == ("passed", 0)


def test_a_run_killed_mid_way_is_incomplete_unless_viewed_live(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, status="running")
    result = build_report(run_dir)
    assert result.exit_code == 4 and "never finished" in result.summary.reason
    assert build_report(run_dir, live=True).exit_code == 0  # the web UI's view of a run still going
    assert build_report(_run(tmp_path / "b", status="finished")).exit_code == 0


def test_a_run_every_request_of_which_got_401_names_the_key_to_check(tmp_path: Path) -> None:
    refused = [request(i, 0, ok=False, error_category="http_4xx", status_code=401, error_detail="HTTP 401: no")
               for i in range(20)]  # fmt: skip
    summary = build_report(make_run_dir(tmp_path / "401", refused), None).summary
    assert summary.verdict == "run_failed" and "HTTP 401" in summary.reason and "--api-key" in summary.reason
    mixed = [*refused[:10], *(request(i, 0, ok=False) for i in range(10, 20))]  # half 401, half 500: no one cause
    assert build_report(make_run_dir(tmp_path / "mixed", mixed), None).summary.reason == "no request succeeded"


def test_agent_requests_a_server_without_tool_calling_refused_are_named_with_the_flags_to_start_it(
    tmp_path: Path,
) -> None:
    # vLLM 0.32's answer to tool_choice "auto" when started without a tool-call parser.
    detail = ('HTTP 400: {"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
              '--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}')  # fmt: skip
    refused = [request(i, 0, workload="agent", ok=False, error_category="http_4xx", status_code=400,
                       error_detail=detail) for i in range(10)]  # fmt: skip
    runs = [request(i, 100) for i in range(10, 60)]
    summary = build_report(make_run_dir(tmp_path / "tools", [*runs, *refused]), None).summary
    assert summary.verdict in ("failed", "run_failed")
    assert "10 agent requests were refused because the server does not call tools" in summary.reason
    assert "--enable-auto-tool-choice --tool-call-parser" in summary.reason
    other = [request(i, 0, ok=False, error_category="http_4xx", status_code=400, error_detail="HTTP 400: too long")
             for i in range(10)]  # fmt: skip
    assert "tools" not in build_report(make_run_dir(tmp_path / "other", [*runs, *other]), None).summary.reason
