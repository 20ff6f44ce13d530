"""Other tools' result files as compared runs: recorded from the real tools (tests/fixtures/foreign/
README.md says how), each figure checked against the file's own fields read here with json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import compare_runs
from tokenstorm.reports.compare.runs import CompareInputError

FOREIGN = Path(__file__).resolve().parents[2] / "fixtures" / "foreign"
VLLM = FOREIGN / "vllm-bench-serve-0.32.0.json"  # --metric-percentiles 50,90,95,99, all four metrics
VLLM_DEFAULTS = FOREIGN / "vllm-bench-serve-0.32.0-defaults.json"  # its defaults: p99 only, no E2E
GUIDELLM = FOREIGN / "guidellm-0.8.1-concurrent4.json"


def _row(comparison, key: str, scope: str = "all") -> dict:  # type: ignore[no-untyped-def]
    return next(r for r in comparison.rows if r["scope"] == scope and r["key"] == key)


def _tokenstorm(tmp_path: Path) -> Path:
    return make_run_dir(tmp_path / "ts", [request(i, 100 + i) for i in range(40)],
                        {"status": "finished", "options": {"num_users": 4, "max_tokens": 32}})  # fmt: skip


def test_vllm_bench_serve_figures_are_its_own_in_ms(tmp_path: Path) -> None:
    doc = json.loads(VLLM.read_text())
    c = compare_runs([_tokenstorm(tmp_path), VLLM])
    col = c.runs.index(VLLM.name)
    for key in ("mean_ttft_ms", "median_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "p99_itl_ms",
                "median_tpot_ms", "mean_e2el_ms", "p99_e2el_ms", "request_throughput", "output_throughput",
                "total_token_throughput", "completed", "failed"):  # fmt: skip
        assert _row(c, key)["values"][col] == pytest.approx(doc[key]), key
    column = c.columns[col]
    assert column.tool.startswith("vllm bench serve") and column.model == doc["model_id"]
    assert column.users_peak == doc["max_concurrency"] and column.duration_s == pytest.approx(doc["duration"])
    assert column.prompt_tokens_mean == pytest.approx(doc["total_input_tokens"] / doc["completed"])
    assert column.simulated is None and column.verdict is None  # the file cannot say: shown "—", not "no"
    text = c.to_text(details=True)
    assert "vllm bench serve" in text and "— (no SLOs judged)" in text
    assert "vllm bench serve (openai-chat); no SLOs judged" in c.to_text()  # its status in the legend


def test_figures_a_tool_does_not_give_are_a_dash_never_zero(tmp_path: Path) -> None:
    doc = json.loads(VLLM_DEFAULTS.read_text())
    assert "p95_ttft_ms" not in doc and "mean_e2el_ms" not in doc  # what the fixture is for
    c = compare_runs([_tokenstorm(tmp_path), VLLM_DEFAULTS])
    col = c.runs.index(VLLM_DEFAULTS.name)
    for key in ("p95_ttft_ms", "mean_e2el_ms", "p99_e2el_ms", "output_throughput_per_gpu", "request_goodput"):
        row = _row(c, key)
        assert row["values"][col] is None and row["deltas"][col] is None and not row["regressed"][col], key
    assert _row(c, "p99_ttft_ms")["values"][col] == pytest.approx(doc["p99_ttft_ms"])
    p95 = next(line for line in c.to_text().splitlines() if line.startswith("TTFT p95 ms"))
    assert p95.rstrip().endswith("—") and " 0 " not in p95
    assert any("no E2EL figures" in n for n in c.columns[col].notes)
    assert c.columns[col].load_shape.startswith("open loop: poisson 8 req/s")  # --request-rate 8


def _dist(doc: dict, name: str) -> dict:
    return doc["benchmarks"][0]["metrics"][name]["successful"]


def test_guidellm_distributions_map_onto_the_same_rows(tmp_path: Path) -> None:
    doc = json.loads(GUIDELLM.read_text())
    c = compare_runs([_tokenstorm(tmp_path), GUIDELLM])
    col = c.runs.index(GUIDELLM.name)
    ttft, itl = (_dist(doc, n) for n in ("time_to_first_token_ms", "inter_token_latency_ms"))
    e2e_s = _dist(doc, "request_latency")
    assert _row(c, "mean_ttft_ms")["values"][col] == pytest.approx(ttft["mean"])
    assert _row(c, "median_ttft_ms")["values"][col] == pytest.approx(ttft["median"])
    assert _row(c, "p99_ttft_ms")["values"][col] == pytest.approx(ttft["percentiles"]["p99"])
    # GuideLLM's per-request inter_token_latency is vLLM's TPOT: (last - first token) / (tokens - 1), checked on
    # the requests it kept against their own TTFT and latency; its time_per_output_token (TTFT included) is not.
    # Per kept request: TPOT x tokens == TTFT + ITL x (tokens - 1), the time of the last token. So its ITL is the
    # mean decode gap, (last - first token) / (tokens - 1), and its TPOT has the TTFT inside.
    for req in doc["benchmarks"][0]["requests"]["successful"]:
        n = req["output_tokens"]
        last_token_ms = req["time_to_first_token_ms"] + req["inter_token_latency_ms"] * (n - 1)
        assert req["time_per_output_token_ms"] * n == pytest.approx(last_token_ms, rel=1e-3)
        assert last_token_ms <= req["request_latency"] * 1000
    assert _row(c, "median_tpot_ms")["values"][col] == pytest.approx(itl["median"])
    assert _row(c, "p99_tpot_ms")["values"][col] == pytest.approx(itl["percentiles"]["p99"])
    assert _row(c, "mean_itl_ms")["values"][col] == pytest.approx(itl["mean"])
    assert _row(c, "p95_itl_ms")["values"][col] is None  # not of gaps: "—", never a number that means otherwise
    # request_latency is in seconds in GuideLLM's file: shown in ms like every other latency
    assert _row(c, "p99_e2el_ms")["values"][col] == pytest.approx(e2e_s["percentiles"]["p99"] * 1000)
    assert _row(c, "request_throughput")["values"][col] == pytest.approx(_dist(doc, "requests_per_second")["mean"])
    assert _row(c, "output_throughput")["values"][col] == pytest.approx(_dist(doc, "output_tokens_per_second")["mean"])
    assert _row(c, "total_token_throughput")["values"][col] == pytest.approx(_dist(doc, "tokens_per_second")["mean"])
    totals = doc["benchmarks"][0]["metrics"]["request_totals"]
    assert _row(c, "completed")["values"][col] == totals["successful"]
    assert _row(c, "failed")["values"][col] == totals["errored"]
    column = c.columns[col]
    backend = doc["benchmarks"][0]["config"]["backend"]
    assert column.tool == f"GuideLLM {doc['metadata']['guidellm_version']}"
    assert column.target_url == backend["target"] and column.model == backend["model"]
    assert column.users_peak == doc["benchmarks"][0]["config"]["strategy"]["streams"]
    warned = [w["code"] for w in doc["benchmarks"][0]["warnings"]]
    assert all(code in (column.fidelity or "") for code in warned) and column.fidelity_ok is (not warned)
    assert any("TPOT is its inter_token_latency" in n and "includes TTFT" in n for n in column.notes)


def test_three_tools_side_by_side_and_the_tool_is_named_as_a_load_difference(tmp_path: Path) -> None:
    c = compare_runs([_tokenstorm(tmp_path), VLLM, GUIDELLM])
    assert [col.tool.split()[0] for col in c.columns] == ["tokenstorm", "vllm", "GuideLLM"]
    assert any(line.startswith("measured by:") for line in c.load_diffs)
    # vllm bench's 4-at-a-time and GuideLLM's 4 streams are the same closed loop as 4 tokenstorm users
    assert not any(line.startswith(("users", "load shape")) for line in c.load_diffs), c.load_diffs


def test_detected_by_content_not_by_name(tmp_path: Path) -> None:
    renamed = tmp_path / "results.txt"
    shutil.copy(GUIDELLM, renamed)
    other = tmp_path / "guidellm.json"  # a vllm file named like a GuideLLM one
    shutil.copy(VLLM, other)
    c = compare_runs([renamed, other])
    assert c.columns[0].tool.startswith("GuideLLM") and c.columns[1].tool.startswith("vllm bench serve")


def test_appended_vllm_results_are_one_run_each(tmp_path: Path) -> None:
    appended = tmp_path / "appended.json"  # what `vllm bench serve --append-result` leaves: a JSON object a line
    appended.write_text(json.dumps(json.loads(VLLM.read_text())) + "\n" +
                        json.dumps(json.loads(VLLM_DEFAULTS.read_text())) + "\n")  # fmt: skip
    c = compare_runs([appended])
    assert c.runs == ["appended.json#1", "appended.json#2"]
    assert _row(c, "p99_ttft_ms")["values"][1] == pytest.approx(json.loads(VLLM_DEFAULTS.read_text())["p99_ttft_ms"])


@pytest.mark.parametrize(("content", "says"), [
    ('{"completed": 3, "duration": ', "not JSON (line 1"),
    ('{"hello": "world"}', "neither a `vllm bench serve --save-result` file"),
    ("[1, 2]", "expected a JSON object"),
    ('{"benchmarks": [{"metrics": {}}]}', "has no metrics.time_to_first_token_ms"),
])  # fmt: skip
def test_a_malformed_file_is_one_line_and_exit_code_2(tmp_path: Path, content: str, says: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(CompareInputError, match=r"bad\.json"):
        compare_runs([bad, VLLM])
    proc = subprocess.run([sys.executable, "-m", "tokenstorm.reports", "compare", str(VLLM), str(bad)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and says in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""
