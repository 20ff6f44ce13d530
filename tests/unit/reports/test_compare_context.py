"""``reports compare`` says what the runs were before what they measured: each run's context, a
warning when the load differed, what differs in the deployment, A/B targets compared per target,
and an HTML page styled like the report with the answer first — figures checked against numpy on
the records."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import compare_runs

CACHE = {"block_size": "16", "enable_prefix_caching": "True", "cache_dtype": "auto", "gpu_memory_utilization": "0.9"}


def _deployment(block_size: str = "16", version: str = "0.32.0") -> dict[str, Any]:
    return {"": {"url": "http://gpu:8000", "server_version": version,
                 "engine": {"cache_config": {**CACHE, "block_size": block_size}},
                 "model": {"id": "m", "max_model_len": 4096}, "problems": []}}  # fmt: skip


def _run(path: Path, users: int, ttft_ms: list[float], options: dict[str, Any] | None = None,
         meta: dict[str, Any] | None = None) -> Path:  # fmt: skip
    records = [request(i, t) for i, t in enumerate(ttft_ms)]
    opts = {"num_users": users, "locustfile": "locustfiles/chat.py", "max_tokens": 64, "spawn_rate": 8.0,
            **(options or {})}  # fmt: skip
    run_dir = make_run_dir(path, records, {"status": "finished", "options": opts, **(meta or {})})
    # the users the run really had, a second apart (the peak is what counts, not -u)
    with (run_dir / "load.jsonl").open("w") as fh:
        for i, u in enumerate([1, users // 2, users, users]):
            fh.write(json.dumps({"epoch_s": 1000.0 + i, "users": u}) + "\n")
    return run_dir


def _row(c: Any, key: str, scope: str = "all") -> dict[str, Any]:
    return next(r for r in c.rows if r["scope"] == scope and r["key"] == key)


def test_a_regression_under_a_different_load_says_the_load_differed(tmp_path: Path) -> None:
    # The case: 30 users vs 20 users printed "REGRESSION: 17 metric(s)" and nothing else.
    rng = np.random.default_rng(1)
    base_ttft = [float(x) for x in rng.uniform(80, 120, 200)]
    busy_ttft = [float(x) for x in rng.uniform(120, 180, 200)]
    base = _run(tmp_path / "u20", 20, base_ttft)
    busy = _run(tmp_path / "u30", 30, busy_ttft)
    c = compare_runs([base, busy])
    assert c.regressions
    assert c.load_diffs and c.load_diffs[0].startswith("users / concurrency (peak): 20 (A) vs 30 (B)")
    text = c.to_text()
    verdict = text.split("\n\n")[-1]
    assert verdict.startswith("REGRESSION") and "LOAD DIFFERED" in verdict
    assert "LOAD DIFFERS" in text.split("whole run")[0]  # before the figures, not after
    # the figures are the records' own (numpy on the TTFTs written)
    assert _row(c, "p99_ttft_ms")["values"] == pytest.approx([np.percentile(base_ttft, 99),
                                                             np.percentile(busy_ttft, 99)])  # fmt: skip
    assert _row(c, "median_ttft_ms")["deltas"][1] == pytest.approx(
        (np.median(busy_ttft) / np.median(base_ttft) - 1) * 100)  # fmt: skip
    # the same load: no warning, and the verdict says nothing of it
    again = compare_runs([base, _run(tmp_path / "u20b", 20, busy_ttft)])
    assert again.regressions and again.load_diffs == [] and "LOAD" not in again.to_text()


@pytest.mark.parametrize(("options", "expected"), [
    ({"max_tokens": 256}, "max tokens: 64 (A) vs 256 (B)"),
    ({"steps": "8x60,16x60"}, "load shape: closed loop (A) vs steps 8x60,16x60 (users x seconds) (B)"),
    ({"locustfile": "locustfiles/open_loop.py", "arrival_rate": 5.0}, "load shape: closed loop (A) vs open loop"),
])  # fmt: skip
def test_each_aspect_of_the_load_is_compared(tmp_path: Path, options: dict[str, Any], expected: str) -> None:
    a = _run(tmp_path / "a", 8, [100.0] * 20)
    b = _run(tmp_path / "b", 8, [100.0] * 20, options)
    c = compare_runs([a, b])
    assert any(line.startswith(expected) for line in c.load_diffs), c.load_diffs


def test_a_different_workload_mix_is_a_different_load(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", 8, [100.0] * 20)
    records = [request(i, 100.0, workload="chat" if i % 2 else "code") for i in range(20)]
    b = make_run_dir(tmp_path / "b", records, {"status": "finished", "options": {"num_users": 8}})
    c = compare_runs([a, b])
    assert any(line.startswith("workload mix: chat 100% (A) vs chat 50%, code 50% (B)") for line in c.load_diffs)


def test_run_context_names_users_shape_target_model_simulated_verdict_and_fidelity(tmp_path: Path) -> None:
    real = _run(tmp_path / "real", 16, [100.0] * 20, meta={"deployment": _deployment()})
    sim = _run(tmp_path / "sim", 16, [100.0] * 20, meta={"simulated": True, "target": "http://u:secret@emu:1"})
    c = compare_runs([real, sim])
    ctx = dict(c.context_rows())
    assert ctx["users / concurrency (peak)"] == ["16", "16"]  # load.jsonl's peak
    assert ctx["load shape"][0] == "closed loop, 16 users, +8 users/s"
    assert ctx["target"] == ["http://gpu:8000", "http://emu:1"]  # no credentials, ever
    assert ctx["model"] == ["m", "m"]
    assert ctx["simulated"] == ["no (a real server)", "SIMULATED (built-in emulator)"]
    assert all(v.startswith("SLOs held") for v in ctx["verdict"])
    assert all(v.startswith("timing not measured") for v in ctx["timing fidelity"])
    last_end_s = max(1000.0 + i / 10 + 0.1 + 0.5 for i in range(20))  # request(): start, TTFT 0.1 s, +0.5 s
    assert ctx["duration s"][0] == f"{last_end_s - 1000.0:.1f}"
    text = c.to_text()
    assert "secret" not in text and "secret" not in c.to_html()
    assert "SIMULATED" in text.split("whole run")[0]


def test_what_differs_names_the_option_and_the_block_size(tmp_path: Path) -> None:
    gpus = [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771.0, "driver": "570.86"}]
    a = _run(tmp_path / "bs16", 8, [100.0] * 20, {"temperature": 0.0},
             {"deployment": _deployment("16"), "gpus": gpus})  # fmt: skip
    b = _run(tmp_path / "bs32", 8, [100.0] * 20, {"temperature": 0.7},
             {"deployment": _deployment("32"), "gpus": gpus})  # fmt: skip
    c = compare_runs([a, b])
    diffs = dict(c.deployment_diffs)
    assert diffs == {"cache_config block_size": ["16", "32"], "option temperature": ["0", "0.7"]}
    assert c.deployment_alike > 5  # server version, model, max_model_len, other cache_config labels, GPU...
    text = c.to_text()
    assert re.search(r"cache_config block_size\s+16\s+32", text)
    assert re.search(r"option temperature\s+0\s+0\.7", text)
    html = c.to_html()
    deployment = html.split('id="deployment"')[1].split("</section>")[0]
    assert "cache_config block_size" in deployment and "option temperature" in deployment
    assert "server version" not in deployment  # alike: not a difference
    # a different server version and GPU are named too
    other_gpu = [{**gpus[0], "name": "NVIDIA H100 80GB HBM3"}]
    d = compare_runs([a, _run(tmp_path / "v", 8, [100.0] * 20, {"temperature": 0.0},
                              {"deployment": _deployment("16", "0.33.0"), "gpus": other_gpu})])  # fmt: skip
    assert dict(d.deployment_diffs) == {"server version": ["0.32.0", "0.33.0"],
                                        "GPU": ["1× NVIDIA H200", "1× NVIDIA H100 80GB HBM3"]}  # fmt: skip


def test_runs_without_deployment_say_it_was_not_captured(tmp_path: Path) -> None:
    c = compare_runs([_run(tmp_path / "a", 8, [100.0] * 20), _run(tmp_path / "b", 8, [100.0] * 20)])
    assert c.deployment_diffs == []
    assert "Deployment: not captured in these runs" in c.to_text()


def _ab(path: Path, fast_ms: float, slow_ms: float) -> Path:
    records = [{**request(i, fast_ms), "target": "fast"} for i in range(30)]
    records += [{**request(i, slow_ms), "target": "slow"} for i in range(30)]
    targets = [{"label": "fast", "url": "http://fast:1"}, {"label": "slow", "url": "http://slow:1"}]
    deployment = {"fast": {**_deployment("16")[""], "url": "http://fast:1"},
                  "slow": {**_deployment("32")[""], "url": "http://slow:1"}}  # fmt: skip
    return make_run_dir(path, records, {"status": "finished", "targets": targets, "deployment": deployment,
                                        "options": {"num_users": 4}})  # fmt: skip


def test_ab_runs_are_compared_per_target_not_pooled(tmp_path: Path) -> None:
    one = _ab(tmp_path / "ab", 100.0, 300.0)
    c = compare_runs([one])  # an A/B run alone: its targets side by side
    assert c.runs == ["ab[fast]", "ab[slow]"]
    p50 = _row(c, "median_ttft_ms")
    assert p50["values"] == [100.0, 300.0] and p50["deltas"][1] == pytest.approx(200.0)  # not a pooled 200 ms
    assert dict(c.context_rows())["target"] == ["fast: http://fast:1", "slow: http://slow:1"]
    assert dict(c.deployment_diffs)["cache_config block_size"] == ["16", "32"]
    # two A/B runs: each target against the baseline run's same target
    later = _ab(tmp_path / "ab2", 110.0, 600.0)
    c2 = compare_runs([one, later])
    assert c2.runs == ["ab[fast]", "ab[slow]", "ab2[fast]", "ab2[slow]"]
    deltas = _row(c2, "median_ttft_ms")["deltas"]
    assert deltas[2] == pytest.approx(10.0) and deltas[3] == pytest.approx(100.0)  # 110 vs 100, 600 vs 300
    assert "D against B" in c2.to_text(details=True)  # ab2[slow] against ab[slow]


def test_html_is_styled_answer_first_baseline_named_sections_grouped_and_escaped(tmp_path: Path) -> None:
    xss = "<script>alert(1)</script>"
    a = _run(tmp_path / "a", 20, [100.0] * 20, meta={"model": xss, "deployment": _deployment()})
    b = _run(tmp_path / "b", 30, [150.0] * 20, {"extra_body": xss}, {"deployment": _deployment("32")})
    html = compare_runs([a, b]).to_html()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<title>tokenstorm comparison" in html and "font: 14px/1.45 system-ui" in html
    order = [html.index(f'id="{s}"') for s in ("baseline", "verdict", "load-differs", "context", "deployment",
                                               "latency", "throughput", "errors")]  # fmt: skip
    assert order == sorted(order)  # answer first, then context, deployment, figures by section
    assert "Baseline: <b>A · a</b>" in html
    verdict = html.split('id="verdict"')[1].split("</section>")[0]
    assert "REGRESSION" in verdict and "LOAD DIFFERED" in verdict


def test_cli_keeps_its_exit_codes_and_writes_the_html(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", 8, [100.0] * 20)
    b = _run(tmp_path / "b", 8, [130.0] * 20)
    out = tmp_path / "cmp.html"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tokenstorm.reports", "compare", *args], capture_output=True,
            text=True,
                              timeout=120)  # fmt: skip

    slower = cli(str(a), str(b), "--html", str(out))
    assert slower.returncode == 1 and "REGRESSION" in slower.stdout and 'id="latency"' in out.read_text()
    assert cli(str(a), str(b), "--threshold", "50").returncode == 0
    assert cli(str(a), str(a)).returncode == 0
    lone = cli(str(a))
    assert lone.returncode == 2 and "at least two runs" in lone.stderr
    missing = cli(str(a), str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such run directory or result file" in missing.stderr


def test_a_deployment_read_in_part_says_what_could_not_be_read(tmp_path: Path) -> None:
    partial = _deployment()
    partial[""].update(server_version=None, engine={}, problems=["/metrics: HTTP 404"])
    a = _run(tmp_path / "a", 8, [100.0] * 20, meta={"deployment": _deployment()})
    b = _run(tmp_path / "b", 8, [100.0] * 20, meta={"deployment": partial})
    c = compare_runs([a, b])
    assert "b: deployment only partly captured: /metrics: HTTP 404" in c.to_text()
    assert "cache_config block_size" not in dict(c.deployment_diffs)  # unknown on b: not said to differ
