"""Agent sessions and tool calls in the outputs, on constructed runs written with the project's own
writers: the session figures (steps, session latency, waiting on the model), tool-call timing, the
``tool_call_ms`` and ``session_ms`` SLOs (summary.json, JUnit, report table, console) checked against numpy
on the raw records; A/B twins sharing a session id kept apart; the agent section escaped."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from tests.unit.reports.test_headline import figures
from tokenstorm.reports import SloSpecError, build_report, console_block, evaluate, load_run, load_slo_spec, summarize
from tokenstorm.workloads.rundir import RequestRecord, RunMeta, SegmentWriter, write_run_meta


def _write_run(path: Path, rows: list[dict], meta: dict | None = None) -> Path:
    """A run directory as the plugin writes one: request segments and run.json."""
    path.mkdir(parents=True, exist_ok=True)
    writer = SegmentWriter(path / "requests")
    for r in rows:
        writer.write(RequestRecord(**{"endpoint": "/v1/chat/completions", "model": "m", "stream": True, **r}))
    writer.close()
    write_run_meta(path, RunMeta(**{"target": "http://gpu:8000", "model": "m", "status": "finished",
                                    "started_epoch_s": 1000.0, "records": len(rows), **(meta or {})}))  # fmt: skip
    return path


def _agent_rows(seed: int = 3, sessions: int = 40, target: str = "", workload: str = "agent") -> list[dict]:
    """Sessions of 1-6 steps: each step a streamed tool call but the last (an answer); session 0 has a
    failed step, session 1 never got its last step (the run ended first)."""
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    for s in range(sessions):
        t = 1000.0 + s * 0.7
        steps = int(rng.integers(1, 7))
        for step in range(steps):
            last = step == steps - 1
            ttft = float(rng.uniform(0.05, 0.4))
            e2e = ttft + float(rng.uniform(0.2, 2.0))
            prompt = int(rng.integers(500, 4000))
            row = {"workload": workload, "start_epoch_s": t, "ok": True, "ttft_s": ttft, "e2e_s": e2e,
                   "output_tokens": int(rng.integers(10, 200)), "prompt_tokens": prompt, "tpot_s": 0.01,
                   "itl_gaps_s": [0.01] * 5, "finish_reason": "stop" if last else "tool_calls",
                   "session_id": f"s{s}", "step": step, "session_end": last and s != 1, "target": target,
                   "cached_tokens": int(prompt * rng.uniform(0, 0.9))}  # fmt: skip
            if not last:
                first = ttft + float(rng.uniform(0.0, 0.05))
                row.update(tool_calls=int(rng.integers(1, 3)), ttft_tool_s=first,
                           tool_call_s=min(e2e, first + float(rng.uniform(0.1, 1.0))),
                           tool_call_tokens=int(rng.integers(5, 80)))  # fmt: skip
            if s == 0 and step == steps - 1:
                row.update(ok=False, error_category="http_5xx", status_code=500, error_detail="<b>boom</b>",
                           ttft_s=None, e2e_s=0.3, session_end=False)  # fmt: skip
            rows.append(row)
            t += e2e + float(rng.uniform(0.01, 0.5))  # the agent's own time before the next step
    return rows


def _reference(rows: list[dict]) -> dict[str, float]:
    """The session and tool-call figures straight from the records, with numpy."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(f"{r.get('target', '')}/{r['session_id']}", []).append(r)
    done = [s for s in by.values() if all(r["ok"] for r in s) and any(r["session_end"] for r in s)]
    latency = np.array([max(r["start_epoch_s"] + r["e2e_s"] for r in s) - min(r["start_epoch_s"] for r in s)
                        for s in done]) * 1000  # fmt: skip
    waiting = np.array([sum(r["e2e_s"] for r in s) for s in done]) * 1000
    steps = np.array([len(s) for s in done])
    ok = [r for r in rows if r["ok"]]
    first = np.array([r["ttft_tool_s"] for r in ok if r.get("ttft_tool_s") is not None]) * 1000
    call = np.array([r["tool_call_s"] for r in ok if r.get("tool_call_s") is not None]) * 1000
    args = np.array([r["tool_call_tokens"] for r in ok if r.get("tool_calls")])
    ref = {
        "sessions": len(by), "completed_sessions": len(done),
        "failed_sessions": sum(not all(r["ok"] for r in s) for s in by.values()),
        "unfinished_sessions": sum(all(r["ok"] for r in s) and not any(r["session_end"] for r in s)
                                   for s in by.values()),
        "mean_steps_per_session": steps.mean(), "median_steps_per_session": np.percentile(steps, 50),
        "p90_steps_per_session": np.percentile(steps, 90), "max_steps_per_session": steps.max(),
        "session_waiting_share": waiting.sum() / latency.sum(),
        "tool_call_requests": len(args), "tool_calls": sum(r.get("tool_calls") or 0 for r in ok),
        "total_tool_call_tokens": args.sum(), "mean_tool_call_tokens": args.mean(),
        "p99_tool_call_tokens": np.percentile(args, 99),
    }  # fmt: skip
    for name, values in (("session", latency), ("session_wait", waiting), ("ttft_tool", first), ("tool_call", call)):
        for stat, q in (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            ref[f"{stat}_{name}_ms"] = np.percentile(values, q)
        ref[f"max_{name}_ms"], ref[f"mean_{name}_ms"] = values.max(), values.mean()
    return ref


_SLO = """
slos:
  agent:
    tool_call_ms: {p95: 100000, p50: 1}
    session_ms: {p95: 100000, max: 1}
"""


def test_session_and_tool_call_figures_match_numpy_everywhere_a_user_reads_them(tmp_path: Path) -> None:
    rows = _agent_rows() + [{"workload": "chat", "start_epoch_s": 1001.0 + i, "ok": True, "ttft_s": 0.1,
                             "e2e_s": 0.5, "output_tokens": 20, "prompt_tokens": 100} for i in range(5)]  # fmt: skip
    agent = [r for r in rows if r["workload"] == "agent"]
    ref = _reference(agent)
    assert ref["failed_sessions"] == 1 and ref["unfinished_sessions"] == 1  # the data has what is tested
    run_dir = _write_run(tmp_path / "run", rows)
    result = build_report(run_dir, load_slo_spec(text=_SLO))
    summary = json.loads((run_dir / "summary.json").read_text())
    html = (run_dir / "report.html").read_text()
    sessions_shown = figures(html, "agent-sessions-table").rows
    tools_shown = figures(html, "agent-tools-table").rows
    for scope, block in (("all", summary), ("workload:agent", summary["workloads"]["agent"])):
        for key, want in ref.items():
            assert block[key] == pytest.approx(want, rel=1e-9), (scope, key)
            shown = sessions_shown[scope] if key in sessions_shown[scope] else tools_shown[scope]
            if key in shown:
                assert float(shown[key]) == pytest.approx(want, rel=1e-9), (scope, key)
    # Every column a user reads in the two tables is checked above.
    assert set(sessions_shown["all"]) | set(tools_shown["all"]) <= set(ref)
    # The chat workload has neither sessions nor tool calls: no row of its own in the agent tables.
    assert "workload:chat" not in sessions_shown and summary["workloads"]["chat"]["sessions"] == 0
    # The SLOs: judged on the same numbers, in summary.json, JUnit, the report's table.
    slos = {(s["metric"], s["stat"]): s for s in summary["slos"]}
    assert slos[("tool_call_ms", "p95")]["measured"] == pytest.approx(ref["p95_tool_call_ms"])
    assert slos[("tool_call_ms", "p50")]["passed"] is False  # 1 ms: broken
    assert slos[("session_ms", "p95")]["measured"] == pytest.approx(ref["p95_session_ms"])
    assert slos[("session_ms", "max")]["measured"] == pytest.approx(ref["max_session_ms"])
    assert summary["verdict"] == "failed" and result.exit_code == 1
    cases = {c.get("name"): c for c in ET.fromstring((run_dir / "junit.xml").read_text()).iter("testcase")}
    assert cases["agent session_ms max <= 1"].find("failure") is not None
    assert cases["agent session_ms p95 <= 100000"].find("failure") is None
    assert '<td class="l">session_ms</td>' in html and '<td class="l">tool_call_ms</td>' in html
    # The console says the sessions too.
    text = "\n".join(console_block(summarize(load_run(run_dir), load_slo_spec(text=_SLO))))
    assert f"{ref['completed_sessions']} of {ref['sessions']} sessions completed" in text
    assert f"session p50/p95 {ref['median_session_ms']:.0f}/{ref['p95_session_ms']:.0f} ms" in text
    # A server message in a failed step is text, never markup.
    assert "<b>boom</b>" not in html and "&lt;b&gt;boom&lt;/b&gt;" in html
    assert 'id="agent"' in html and 'alt="agent sessions and tool calls"' in html  # the sessions' figure
    # TTFT of the session steps over time, an interactive chart: per time bin, numpy's p50 of the steps' TTFT.
    assert 'data-chart="agent-ttft"' in html
    chart = json.loads(re.search(r'id="chart-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    ttft = next(c for c in chart["charts"] if c["id"] == "agent-ttft")
    p50 = next(s for s in ttft["series"] if s["label"] == "agent TTFT p50")
    mids = np.array(ttft["xs"][p50["xi"]])
    half = (mids[1] - mids[0]) / 2
    done = [r for r in agent if r["ok"]]
    checked = 0
    for mid, value in zip(mids[:-1], p50["y"][:-1], strict=True):
        inside = [r["ttft_s"] * 1000 for r in done if mid - half <= r["start_epoch_s"] - 1000.0 < mid + half]
        assert (value is None) if not inside else value == pytest.approx(np.percentile(inside, 50), rel=1e-5)
        checked += bool(inside)
    assert checked >= 10


def test_ab_twins_sharing_a_session_id_are_two_sessions(tmp_path: Path) -> None:
    rows = _agent_rows(target="a", sessions=12) + _agent_rows(seed=4, target="b", sessions=12)
    run = load_run(_write_run(tmp_path / "run", rows, {"targets": [{"label": "a"}, {"label": "b"}]}))
    summary = summarize(run, load_slo_spec(text=_SLO))
    assert summary.targets is not None
    for label in ("a", "b"):
        ref = _reference([r for r in rows if r["target"] == label])
        block = summary.targets["targets"][label]
        assert block["sessions"] == 12 and block["p95_session_ms"] == pytest.approx(ref["p95_session_ms"])
        measured = {(r.target, r.metric, r.stat): r.measured for r in summary.slo_results}
        assert measured[(label, "session_ms", "p95")] == pytest.approx(ref["p95_session_ms"])
    assert summary.overall["sessions"] == 24  # pooled twins would read 12


def test_warmup_and_cancelled_steps_take_their_session_out_of_the_judgement(tmp_path: Path) -> None:
    rows = _agent_rows(sessions=10)
    for r in rows:
        if r["session_id"] == "s2":
            r["warmup"] = True
        if r["session_id"] == "s3" and r["session_end"]:
            r.update(ok=False, error_category="cancelled", session_end=False)
    run = load_run(_write_run(tmp_path / "run", rows))
    judged = [r for r in rows if r["session_id"] not in ("s2", "s3")]
    summary = summarize(run, load_slo_spec(text=_SLO))
    assert summary.overall["sessions"] == 8
    assert summary.overall["p95_session_ms"] == pytest.approx(_reference(judged)["p95_session_ms"])


def test_a_run_without_tool_calls_or_sessions_says_why_the_slo_has_no_value(tmp_path: Path) -> None:
    rows = [{"workload": "agent", "start_epoch_s": 1000.0 + i, "ok": True, "ttft_s": 0.1, "e2e_s": 0.5,
             "output_tokens": 20, "prompt_tokens": 100} for i in range(5)]  # fmt: skip
    run_dir = _write_run(tmp_path / "run", rows)
    results = {r.metric: r for r in evaluate(load_run(run_dir), load_slo_spec(text=_SLO))}
    assert results["tool_call_ms"].measured is None and results["tool_call_ms"].note == "no tool calls to measure"
    assert results["session_ms"].note == "no completed sessions to measure" and not results["session_ms"].passed
    build_report(run_dir, load_slo_spec(text=_SLO))
    html = (run_dir / "report.html").read_text()
    assert 'id="agent"' not in html and "sessions" not in json.loads((run_dir / "summary.json").read_text())


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("slos:\n  agent:\n    session_ms: {min: 5}\n", "session_ms: unknown statistic (use p50"),
        ("slos:\n  agent:\n    tool_call_ms: {p100: 5}\n", "tool_call_ms: unknown statistic (use p50"),
        ("slos:\n  agent:\n    session: {p95: 5}\n", "itl_ms, tpot_ms, e2e_ms, tool_call_ms, session_ms"),
    ],
)
def test_bad_agent_slos_are_refused_with_the_line(text: str, reason: str) -> None:
    with pytest.raises(SloSpecError) as err:
        load_slo_spec(text=text)
    assert str(err.value).startswith("<text>:3: ") and reason in str(err.value)


def test_live_export_of_tool_call_timing_matches_numpy_on_the_records() -> None:
    """``--metrics-port``: the tool-call histograms and counters, as Prometheus parses them back."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from tokenstorm.reports.judging.alerts import alert_rules
    from tokenstorm.workloads.plugin.export.prometheus import LATENCY_BUCKETS_S, ClientMetrics

    rows = _agent_rows(sessions=30)
    metrics = ClientMetrics()
    for r in rows:
        metrics.observe(r)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}  # fmt: skip
    ok = [r for r in rows if r["ok"]]
    wl = (("workload", "agent"),)
    for name, col in (("tokenstorm_time_to_first_tool_call_seconds", "ttft_tool_s"),
                      ("tokenstorm_tool_call_seconds", "tool_call_s")):  # fmt: skip
        arr = np.array([r[col] for r in ok if r.get(col) is not None])
        for bound in LATENCY_BUCKETS_S:
            assert got[(f"{name}_bucket", (("le", repr(float(bound))), *wl))] == int((arr <= bound).sum())
        assert got[(f"{name}_count", wl)] == len(arr) and got[(f"{name}_sum", wl)] == pytest.approx(arr.sum())
    assert got[("tokenstorm_tool_calls_total", wl)] == sum(r.get("tool_calls") or 0 for r in ok)
    assert got[("tokenstorm_tool_call_tokens_total", wl)] == sum(r.get("tool_call_tokens") or 0 for r in ok)
    # The tool_call_ms SLO becomes a live alert on that histogram.
    rules = alert_rules(load_slo_spec(text=_SLO)).document["groups"][0]["rules"]
    assert any("tokenstorm_tool_call_seconds_bucket" in r["expr"] and "histogram_quantile(0.95" in r["expr"]
               for r in rules)  # fmt: skip


def test_the_run_row_pools_the_workloads_sessions_without_merging_them(tmp_path: Path) -> None:
    # Two traffic models whose session ids happen to repeat: each workload's sessions stay their own.
    coding, legal = _agent_rows(sessions=20), _agent_rows(seed=9, sessions=15, workload="legal")
    summary = summarize(load_run(_write_run(tmp_path / "run", coding + legal)), load_slo_spec(text=_SLO))
    ref_c, ref_l = _reference(coding), _reference(legal)
    run = summary.overall
    assert run["sessions"] == ref_c["sessions"] + ref_l["sessions"] == 35
    assert run["completed_sessions"] == ref_c["completed_sessions"] + ref_l["completed_sessions"]
    assert run["max_steps_per_session"] == max(ref_c["max_steps_per_session"], ref_l["max_steps_per_session"])
    both = [(w, r) for w, rows in (("agent", coding), ("legal", legal)) for r in rows]
    pooled = _reference([{**r, "target": w} for w, r in both])  # keyed apart by workload, as the report does
    assert run["p95_session_ms"] == pytest.approx(pooled["p95_session_ms"])
    assert (
        run["session_waiting_share"] == pytest.approx(pooled["session_waiting_share"])
        and run["session_waiting_share"] < 1
    )


def test_sessions_of_a_model_that_never_marks_its_last_step_are_not_counted(tmp_path: Path) -> None:
    # Every traffic model's requests carry a session id; only a model that marks the last step (session_end)
    # lets a finished session be told from one the run cut short.
    chat = [{"workload": "chat", "start_epoch_s": 1000.0 + i, "ok": True, "ttft_s": 0.1, "e2e_s": 0.5,
             "output_tokens": 20, "prompt_tokens": 100, "session_id": f"c{i // 3}", "step": i % 3}
            for i in range(12)]  # fmt: skip
    agent = _agent_rows(sessions=8)
    run_dir = _write_run(tmp_path / "run", chat + agent)
    build_report(run_dir, load_slo_spec(text=_SLO))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["sessions"] == 8 == summary["workloads"]["agent"]["sessions"]
    assert summary["workloads"]["chat"]["sessions"] == 0 and summary["workloads"]["chat"]["unfinished_sessions"] == 0
    assert "workload:chat" not in figures((run_dir / "report.html").read_text(), "agent-sessions-table").rows
    only_chat = _write_run(tmp_path / "chat", chat)
    build_report(only_chat, load_slo_spec())
    assert 'id="agent"' not in (only_chat / "report.html").read_text()


def test_hostile_names_in_the_agent_section_stay_text(tmp_path: Path) -> None:
    evil = '<img src=x onerror="alert(1)">'
    run_dir = _write_run(tmp_path / "run", _agent_rows(sessions=6, workload=evil), {"model": evil})
    build_report(run_dir, load_slo_spec())
    html = (run_dir / "report.html").read_text()
    assert evil not in html
    section = html[html.index('<section id="agent">') : html.index("</section>", html.index('<section id="agent">'))]
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in section


def test_goodput_counts_a_step_late_with_its_tool_call_as_not_good(tmp_path: Path) -> None:
    rows = _agent_rows(sessions=30)
    threshold_ms = 700.0
    spec = load_slo_spec(text=f"slos:\n  agent:\n    tool_call_ms: {{p95: {threshold_ms}}}\n")
    run = load_run(_write_run(tmp_path / "run", rows))
    good = [r for r in rows if r["ok"] and (r.get("tool_call_s") is None or r["tool_call_s"] * 1000 <= threshold_ms)]
    late = [r for r in rows if r["ok"] and r.get("tool_call_s") is not None and r["tool_call_s"] * 1000 > threshold_ms]
    assert late and any(r.get("tool_call_s") is None for r in good)  # both kinds are in the data
    summary = summarize(run, spec).overall
    assert summary["request_goodput"] * summary["duration"] == pytest.approx(len(good))


def test_a_star_slo_on_tool_calls_or_sessions_judges_only_the_workloads_that_have_them(tmp_path: Path) -> None:
    from tests.conftest import make_run_dir, request

    rows = [request(i, 100, workload="chat") for i in range(20)]
    rows += [request(i, 100, workload="agent", tool_calls=1, ttft_tool_s=0.1, tool_call_s=0.3, session_id=f"s{i}",
                     step=0, session_end=True) for i in range(20, 40)]  # fmt: skip
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  '*':\n    tool_call_ms: {p95: 1000}\n    session_ms: {p95: 5000}\n")
    summary = build_report(make_run_dir(tmp_path / "run", rows), load_slo_spec(slo)).summary
    judged = sorted((r.scope, r.metric) for r in summary.slo_results)
    assert judged == [("agent", "session_ms"), ("agent", "tool_call_ms")], judged
    assert summary.verdict == "passed", summary.reason
