"""The report's first screen on constructed runs: the headline row and per-workload rows (counts that
add up to the records, rates, achieved concurrency, latency p50/p99, prompt and output lengths) checked
against numpy on the raw records, in summary.json, the HTML and the console alike; A/B runs per target."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, console_block, load_slo_spec
from tokenstorm.workloads.plugin.core.flags import TOPICS
from tokenstorm.workloads.plugin.core.options import recorded_options


class _Figures(HTMLParser):
    """``data-figure`` values per ``data-scope`` row of a table, and the ids in page order."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id, self.inside, self.scope = table_id, False, ""
        self.rows: dict[str, dict[str, str]] = {}
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "table":
            self.inside = a.get("id") == self.table_id
        if self.inside and tag == "tr" and a.get("data-scope"):
            self.scope = str(a["data-scope"])
            self.rows[self.scope] = {}
        if self.inside and a.get("data-figure"):
            self.rows[self.scope][str(a["data-figure"])] = str(a.get("data-value"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False


def figures(html: str, table_id: str = "headline-table") -> _Figures:
    parser = _Figures(table_id)
    parser.feed(html)
    return parser


def _mixed_records() -> list[dict]:
    """Two workloads with known latencies and lengths, 2 failures, 3 cancelled at the end, 4 warm-up."""
    rng = np.random.default_rng(7)
    records = []
    for i in range(60):
        workload = "chat" if i % 3 else "code"
        records.append(request(i, float(rng.uniform(50, 400)), workload=workload,
                               prompt_tokens=int(rng.integers(20, 2000)), output_tokens=int(rng.integers(5, 300)),
                               e2e_s=float(rng.uniform(0.5, 3.0)), tpot_s=float(rng.uniform(0.005, 0.05)),
                               itl_gaps_s=rng.uniform(0.004, 0.06, size=8).round(6).tolist()))  # fmt: skip
    records += [request(60 + i, 0, ok=False, workload="chat", e2e_s=0.2 + i) for i in range(2)]  # failed after a while
    records += [request(70 + i, 0, ok=False, error_category="cancelled", error_detail="stopped") for i in range(3)]
    records += [request(80 + i, 100.0, warmup=True) for i in range(4)]
    return records


def headline_reference(records: list[dict], workload: str | None = None) -> dict[str, float]:
    """The headline figures straight from the records (as ``RequestRecord.as_row()`` gives them), with numpy."""
    rows = [r for r in records if workload is None or r["workload"] == workload]
    judged = [r for r in rows if r.get("error_category") != "cancelled" and not r.get("warmup")]
    ok = [r for r in judged if r["ok"]]
    start = np.array([r["start_epoch_s"] for r in judged])
    end = start + np.array([r.get("e2e_s") or 0.0 for r in judged])
    window = end.max() - start.min()
    tokens_in = sum(r.get("prompt_tokens") or 0 for r in ok)
    tokens_out = sum(r.get("output_tokens") or 0 for r in ok)
    ref = {
        "records": len(rows), "completed": len(ok), "failed": len(judged) - len(ok),
        "cancelled": sum(r.get("error_category") == "cancelled" for r in rows),
        "warmup_requests": sum(bool(r.get("warmup")) for r in rows),
        "request_throughput": len(ok) / window, "output_throughput": tokens_out / window,
        "total_token_throughput": (tokens_in + tokens_out) / window,
        "total_input_tokens": tokens_in, "total_output_tokens": tokens_out,
        "achieved_concurrency": sum(r.get("e2e_s") or 0.0 for r in judged) / window,
    }  # fmt: skip
    for name, col in (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2el", "e2e_s")):
        values = np.array([r[col] for r in ok if r.get(col) is not None]) * 1000
        ref[f"median_{name}_ms"], ref[f"p99_{name}_ms"] = np.percentile(values, [50, 99])
    gaps = np.concatenate([np.asarray(r.get("itl_gaps_s") or [], dtype=float) for r in ok]) * 1000
    ref["median_itl_ms"], ref["p99_itl_ms"] = np.percentile(gaps, [50, 99])
    for col in ("prompt_tokens", "output_tokens"):
        values = np.array([r[col] for r in ok if r.get(col) is not None])
        for p in (50, 90, 99):
            ref[f"p{p}_{col}"] = float(np.percentile(values, p))
        ref[f"max_{col}"] = float(values.max())
    return ref


def test_headline_and_workload_rows_match_numpy_on_the_raw_records(tmp_path: Path) -> None:
    records = _mixed_records()
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished", "stopped_epoch_s": 1008.0})
    build_report(run_dir, load_slo_spec())
    summary = json.loads((run_dir / "summary.json").read_text())
    html = (run_dir / "report.html").read_text()
    shown = figures(html).rows
    lengths = figures(html, "lengths-table").rows
    for scope, workload in (("all", None), ("workload:chat", "chat"), ("workload:code", "code")):
        ref = headline_reference(records, workload)
        block = summary if workload is None else summary["workloads"][workload]
        for key, want in ref.items():
            where = lengths[scope] if key.endswith(("prompt_tokens", "output_tokens")) and "total" not in key \
                else shown[scope]  # fmt: skip
            assert block[key] == pytest.approx(want, rel=1e-6), (scope, key)
            assert float(where[key]) == pytest.approx(want, rel=1e-6), (scope, key)
        # Every record is accounted for, once.
        assert ref["completed"] + ref["failed"] + ref["cancelled"] + ref["warmup_requests"] == ref["records"]
    assert summary["records"] == len(records) == sum(b["records"] for b in summary["workloads"].values())
    # The accounting is said in words, the cancelled named; the Run table gives the same sentence.
    ref = headline_reference(records)
    note = (f"{len(records)} records = {ref['completed']} completed + {ref['failed']} failed + {ref['cancelled']} "
            "cancelled (still in flight when the load test stopped them, the run ended at")  # fmt: skip
    assert html.count(note) == 2
    assert "4 in the warm-up" in html
    # The throughput table counts the same records (it no longer says 'Requests' for the judged ones).
    assert '<th title="every record of the scope">Records</th>' in html


def test_the_first_screen_comes_in_order_and_says_what_its_rates_cover(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "run", _mixed_records(), {"status": "finished"})
    build_report(run_dir, load_slo_spec())
    html = (run_dir / "report.html").read_text()
    ids = figures(html).ids
    order = [i for i in ids if i in ("verdict", "fidelity", "headline", "lengths", "slos", "latency", "throughput")]
    assert order == ["verdict", "fidelity", "headline", "lengths", "slos", "latency", "throughput"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert f"the whole run: {summary['duration']:,.1f} s" in html
    assert "The console's progress lines (every 5 s) give rates over only the 10 s before each" in html
    assert "Achieved concurrency: the mean number of requests in flight" in html


def test_console_block_names_the_cancelled_and_the_window_as_the_report(tmp_path: Path) -> None:
    records = _mixed_records()
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished"})
    result = build_report(run_dir, load_slo_spec())
    lines = console_block(result.summary)
    ref = headline_reference(records)
    said = (
        f"{len(records)} records = {ref['completed']} completed + {ref['failed']} failed + {ref['cancelled']} cancelled"
    )
    assert any(line.startswith(said + " (still in flight") for line in lines), lines
    assert any(f"achieved concurrency {ref['achieved_concurrency']:.2f}" in line for line in lines)
    assert any(f"measured window, {result.summary.overall['duration']:,.1f} s" in line for line in lines)


def _ab_run(tmp_path: Path) -> tuple[Path, list[dict]]:
    records = []
    for target, ttft in (("fast", 100.0), ("slow", 300.0)):
        records += [{**request(i, ttft + i, workload="chat" if i % 2 else "code", prompt_tokens=100 + 7 * i),
                     "target": target} for i in range(20)]  # fmt: skip
    records.append({**request(30, 0, ok=False, error_category="cancelled"), "target": "slow"})
    targets = [{"label": "fast", "url": "http://fast:1"}, {"label": "slow", "url": "http://slow:1"}]
    return make_run_dir(tmp_path / "ab", records, {"status": "finished", "targets": targets}), records


def test_ab_tables_are_per_target_and_the_answer_comes_first(tmp_path: Path) -> None:
    run_dir, records = _ab_run(tmp_path)
    spec = load_slo_spec(text="slos:\n  '*':\n    ttft_ms: {p95: 800}\n    e2e_ms: {p95: 2000}\n"
                              "    error_rate: {max: 0.01}\n")  # fmt: skip
    build_report(run_dir, spec)
    html = (run_dir / "report.html").read_text()
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = figures(html).rows
    assert "all" not in rows  # never pooled
    for target in ("fast", "slow"):
        mine = [r for r in records if r["target"] == target]
        whole = headline_reference(mine)
        assert float(rows[f"target:{target}"]["median_ttft_ms"]) == pytest.approx(whole["median_ttft_ms"])
        for workload in ("chat", "code"):
            ref = headline_reference(mine, workload)
            block = summary["targets"]["targets"][target]["workloads"][workload]
            cells = rows[f"target:{target}/workload:{workload}"]
            for key in ("completed", "cancelled", "records", "output_throughput", "median_e2el_ms", "p99_ttft_ms"):
                assert block[key] == pytest.approx(ref[key]) and float(cells[key]) == pytest.approx(ref[key])
            assert float(figures(html, "lengths-table").rows[f"target:{target}/workload:{workload}"]
                         ["p90_prompt_tokens"]) == pytest.approx(ref["p90_prompt_tokens"])  # fmt: skip
    assert summary["targets"]["targets"]["slow"]["cancelled"] == 1
    # The latency table is per target and workload too.
    assert 'data-scope="target:slow/workload:chat"><td class="l">slow · chat</td><td class="l">TTFT' in html
    # The answer right after the verdict, before the A/B table and the SLO table; every target named.
    ids = figures(html).ids
    assert ids.index("verdict") < ids.index("ab-answer") < ids.index("fidelity") < ids.index("slos")
    assert html.index("slow is slower") < html.index('<section id="slos">')
    assert "fast (http://fast:1), slow (http://slow:1)" in html.split("</title>")[0]
    assert "<b>slow</b> <code>http://slow:1</code>" in html


def test_margins_slo_source_and_options_read_as_words(tmp_path: Path) -> None:
    records = [request(i, 100.0) for i in range(20)]
    options = {"num_users": 8, "spawn_rate": 8.0, "run_time": 30, "locustfile": "/x/locustfiles/chat.py",
               "max_tokens": 64, "sweep_count": 8, "sweep_level_time": 30.0, "capacity_max": 1024,
               "capacity_step": 4, "web_port": 8089, "master_port": 5557, "request_timeout": 600.0,
               "stall_timeout": 5.0, "extra_body": '{"top_k": 5}'}  # fmt: skip
    # run.json records each option's default beside it, as the plugin writes it: tokenstorm's declared defaults
    defaults = recorded_options({f.dest: f.default_value() for topic in TOPICS for f in topic.flags})
    meta = {"status": "finished", "options": options, "option_defaults": defaults, "slo_spec_source": "<default>"}
    run_dir = make_run_dir(tmp_path / "run", records, meta)
    build_report(run_dir)
    html = (run_dir / "report.html").read_text()
    # 0 errors against at most 1%: 1 percentage point of headroom, not "-100.0%"
    assert "-100.0%" not in html and "-1.00 pp" in html and "&lt;= 1%" in html
    assert "&lt;default&gt;" not in html and "default: run error rate ≤ 1%" in html
    table = html.split('id="options"')[1].split("</table>")[0]
    assert "<code>-u/--users</code></th><td><code>8</code>" in table
    assert "<code>-t/--run-time</code></th><td><code>30 s</code>" in table
    assert "--stall-timeout" in table and "--extra-body" in table and "{&#34;top_k&#34;: 5}" in table
    for unused in ("--sweep-count", "--capacity-max", "--web-port", "--master-port", "--request-timeout"):
        assert unused not in table, unused
    # A sweep run shows its own options, defaults included.
    sweep = {**meta, "options": {**options, "locustfile": "/x/locustfiles/shape_sweep.py"}}
    sweep_dir = make_run_dir(tmp_path / "sweep", records, sweep)
    build_report(sweep_dir)
    table = (sweep_dir / "report.html").read_text().split('id="options"')[1].split("</table>")[0]
    assert "--sweep-count" in table and "--sweep-level-time" in table and "--capacity-max" not in table


def test_the_header_shows_the_captured_deployment_escaped_and_nothing_when_none(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    deployment = {
        "": {
            "url": "http://gpu:8000",
            "server_version": "0.11.0",
            "engine": {
                "cache_config": {
                    "block_size": "16",
                    "enable_prefix_caching": "True",
                    "cache_dtype": "fp8_e4m3",
                    "gpu_memory_utilization": "0.9",
                },
                "model_config": {"quantization": hostile},
            },
            "model": {"id": "Qwen/Qwen3-8B", "max_model_len": 32768},
            "problems": ["/version: HTTP 404"],
        }
    }
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559.0, "driver": "550.54.15"}
            for i in range(2)]  # fmt: skip
    records = [request(i, 100.0) for i in range(5)]
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished", "deployment": deployment, "gpus": gpus})
    build_report(run_dir)
    html = (run_dir / "report.html").read_text()
    header = html.split('<header id="header">')[1].split("</header>")[0]
    expected = ("server version <b>0.11.0</b>", "max_model_len 32,768", "block size <b>16</b>",
                "prefix caching <b>on</b>", "KV cache dtype <b>fp8_e4m3</b>", "GPU memory utilisation <b>0.9</b>",
                "Qwen/Qwen3-8B",
                "2 × NVIDIA H100 80GB HBM3 — 81,559 MiB, driver 550.54.15", "not read: /version: HTTP 404")  # fmt: skip
    for said in expected:
        assert said in header, said
    assert hostile not in html and "quantization=&lt;script&gt;alert(1)&lt;/script&gt;" in header
    bare = make_run_dir(tmp_path / "bare", records, {"status": "finished"})
    build_report(bare)
    header = (bare / "report.html").read_text().split('<header id="header">')[1].split("</header>")[0]
    assert "server version" not in header and "GPUs:" not in header and "engine configuration" not in header
