"""Answer quality in the outputs, on constructed runs written with the project's own writers: pass rates per
workload and check and the needle table (summary.json) against plain Python over the raw rows, the
``quality`` / ``quality_<check>`` / ``consistency_changed`` SLOs (their FILE:LINE errors, their verdicts, the
JUnit cases, the console line), and the live checks counter."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from tests.unit.reports.test_agent_report import _write_run
from tokenstorm.reports import SloSpecError, build_report, console_block, evaluate, load_run, load_slo_spec

CHECKS = {"chat": ("script", "repetition", "complete"), "contract": ("needle",), "code": ("code_language",),
          "mine": ("my_check",)}  # fmt: skip
FAIL_P = {"script": 0.05, "repetition": 0.02, "complete": 0.03, "needle": 0.3, "code_language": 0.1, "my_check": 0.5}
SCRIPT = "<script>alert('answer')</script>"


def quality_rows(seed: int = 5, n: int = 600) -> list[dict]:
    """Records of four workloads with checks and one without; a few in the warm-up, cancelled or failed."""
    rng = np.random.default_rng(seed)
    rows = []
    workloads = [*CHECKS, "plain"]
    for i in range(n):
        w = workloads[i % len(workloads)]
        t = 1000.0 + i * 0.1
        row = {"workload": w, "start_epoch_s": t, "ok": True, "ttft_s": 0.05, "e2e_s": 0.5, "tpot_s": 0.01,
               "output_tokens": 40, "prompt_tokens": int(rng.integers(500, 90000)), "itl_gaps_s": [0.01] * 3,
               "finish_reason": "stop", "warmup": i < 20}  # fmt: skip
        if i % 97 == 3:
            row.update(ok=False, error_category="http_5xx", status_code=500, ttft_s=None)
        elif i % 89 == 4:
            row.update(ok=False, error_category="cancelled")
        elif w in CHECKS:
            # a late run of needle failures beyond the sample bound, and failures everywhere else at random
            results = {c: bool(rng.random() >= FAIL_P[c]) for c in CHECKS[w]}
            row["check_results"] = ",".join(f"{c}:{'pass' if ok else 'fail'}" for c, ok in results.items())
            failed = [c for c, ok in results.items() if not ok]
            row["check"] = failed[0] if failed else "pass"
            if failed:
                row["check_detail"] = f"{failed[0]} failed <b>here</b>"
                row["answer_sample"] = f"answer {i} {SCRIPT}"
            if w == "contract":
                row["needle_depth"] = float(rng.uniform(0, 1))
        rows.append(row)
    return rows


def _judged(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["ok"] and not r["warmup"] and r.get("error_category") != "cancelled"]


def _reference(rows: list[dict]) -> dict:
    """Pass rates per workload and check, by plain counting over the rows."""
    out: dict = {}
    for r in _judged(rows):
        if r.get("check") is None:
            continue
        w = out.setdefault(r["workload"], {"checked": 0, "passed": 0, "by_check": {}})
        w["checked"] += 1
        w["passed"] += r["check"] == "pass"
        for part in r["check_results"].split(","):
            name, result = part.split(":")
            c = w["by_check"].setdefault(name, {"checked": 0, "passed": 0})
            c["checked"] += 1
            c["passed"] += result == "pass"
    return out


def _bucket(tokens: int) -> str:
    for limit, name in ((2048, "2K"), (4096, "4K"), (8192, "8K"), (16384, "16K"), (32768, "32K"), (65536, "64K")):
        if tokens <= limit:
            return name
    return ">64K"


def _quarter(depth: float) -> str:
    return "0–25%" if depth < 0.25 else "25–50%" if depth < 0.5 else "50–75%" if depth < 0.75 else "75–100%"


SLO = """slos:
  chat:
    quality: {min: 99%}
  contract:
    quality_needle: {min: 50%}
  mine:
    quality_my_check: {min: 10%}
  plain:
    quality: {min: 90%}
  run:
    consistency_changed: {max: 0%}
"""


def test_pass_rates_and_needle_table_in_summary_json_match_the_raw_rows(tmp_path: Path) -> None:
    rows = quality_rows()
    run_dir = _write_run(tmp_path / "run", rows)
    build_report(run_dir, load_slo_spec(text=SLO))
    quality = json.loads((run_dir / "summary.json").read_text())["quality"]
    ref = _reference(rows)
    assert set(quality["workloads"]) == set(CHECKS)  # "plain" had no checked answer
    for w, expected in ref.items():
        got = quality["workloads"][w]
        assert (got["checked"], got["passed"]) == (expected["checked"], expected["passed"])
        assert got["pass_rate"] == pytest.approx(expected["passed"] / expected["checked"], rel=1e-12)
        assert set(got["by_check"]) == set(CHECKS[w])  # a user's own check named as its function is
        for name, c in expected["by_check"].items():
            assert got["by_check"][name]["checked"] == c["checked"]
            assert got["by_check"][name]["failed"] == c["checked"] - c["passed"]
            assert got["by_check"][name]["pass_rate"] == pytest.approx(c["passed"] / c["checked"], rel=1e-12)
    total = sum(w["checked"] for w in ref.values())
    assert quality["run"]["checked"] == total  # warm-up, cancelled and failed requests are never counted
    assert quality["run"]["passed"] == sum(w["passed"] for w in ref.values())
    cells: dict[tuple[str, str], list[bool]] = {}
    for r in _judged(rows):
        if "needle:" in r.get("check_results", ""):
            key = (_bucket(r["prompt_tokens"]), _quarter(r["needle_depth"]))
            cells.setdefault(key, []).append(r["check"] == "pass")
    table = {(n["context"], n["depth"]): n for n in quality["needle"]}
    assert set(table) == set(cells) and len(cells) > 10
    for key, passes in cells.items():
        assert (table[key]["checked"], table[key]["passed"]) == (len(passes), sum(passes))
    assert "consistency" not in json.loads((run_dir / "summary.json").read_text())  # no probes.jsonl


def test_quality_slos_judge_each_workload_and_fail_without_checked_answers(tmp_path: Path) -> None:
    rows = quality_rows()
    ref = _reference(rows)
    run_dir = _write_run(tmp_path / "run", rows)
    result = build_report(run_dir, load_slo_spec(text=SLO))
    by = {(r.scope, r.metric): r for r in result.summary.slo_results}
    chat = by[("chat", "quality")]
    assert chat.op == ">=" and chat.threshold == 0.99 and not chat.passed
    assert chat.measured == pytest.approx(ref["chat"]["passed"] / ref["chat"]["checked"], rel=1e-12)
    needle = ref["contract"]["by_check"]["needle"]
    assert by[("contract", "quality_needle")].measured == pytest.approx(needle["passed"] / needle["checked"])
    assert by[("contract", "quality_needle")].passed
    assert by[("mine", "quality_my_check")].passed  # a user's own check, by its function's name
    plain = by[("plain", "quality")]
    assert plain.measured is None and not plain.passed and "no data" in plain.note
    consistency = by[("run", "consistency_changed")]
    assert consistency.measured is None and not consistency.passed and "probes.jsonl" in consistency.note
    assert result.exit_code == 1 and "chat quality min" in result.summary.reason
    junit = ET.fromstring((run_dir / "junit.xml").read_text())
    cases = {c.get("name"): c for c in junit.iter("testcase")}
    failure = cases["chat quality min >= 0.99"].find("failure")
    assert failure is not None and f"{chat.measured:.2%}" in failure.get("message", "")
    assert cases["contract quality_needle min >= 0.5"].find("failure") is None
    listing = cases["quality"].findtext("system-out") or ""
    assert f"chat: {chat.measured:.2%} of {ref['chat']['checked']:,}" in listing and "needle" in listing
    suite = junit.find("testsuite")
    assert suite is not None and int(suite.get("tests", "0")) == len(list(junit.iter("testcase")))
    line = next(x for x in console_block(result.summary) if x.startswith("answers that passed their checks"))
    assert f"chat {chat.measured:.2%} of {ref['chat']['checked']:,}" in line and "plain" not in line


def test_star_quality_judges_only_workloads_with_checks_and_fails_when_none_has(tmp_path: Path) -> None:
    rows = quality_rows()
    run = load_run(_write_run(tmp_path / "run", rows))
    results = evaluate(run, load_slo_spec(text="slos:\n  '*':\n    quality: {min: 1%}\n"))
    assert sorted(r.scope for r in results) == sorted(CHECKS) and all(r.passed for r in results)
    bare = [{k: v for k, v in r.items() if k not in ("check", "check_results")} for r in rows]
    star = load_slo_spec(text="slos:\n  '*':\n    quality: {min: 1%}\n")
    none = evaluate(load_run(_write_run(tmp_path / "bare", bare)), star)
    assert len(none) == 1 and not none[0].passed and none[0].measured is None


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("slos:\n  chat:\n    quality: {max: 99%}\n", 3, "quality: unknown statistic (use min)"),
        ("slos:\n  chat:\n    quality: {min: 120%}\n", 3, "fraction"),
        ("slos:\n  chat:\n    quality: {min: 99}\n", 3, "fraction"),
        ("slos:\n  chat:\n    quality_not-a-name: {min: 99%}\n", 3, "quality_<check>: not a check name"),
        ("slos:\n  chat:\n    quality_: {min: 99%}\n", 3, "not a check name"),
        ("slos:\n  chat:\n    consistency_changed: {max: 0%}\n", 3, "whole-run target"),
        ("slos:\n  run:\n    consistency_changed: {min: 0%}\n", 3, "consistency_changed: unknown statistic (use max)"),
        ("slos:\n  run:\n    qualty: {min: 99%}\n", 3, "quality_<check>"),
    ],
)
def test_bad_quality_targets_name_the_line_and_the_reason(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(text)
    with pytest.raises(SloSpecError) as err:
        load_slo_spec(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and reason in str(err.value)


def test_a_users_own_check_and_percentages_parse(tmp_path: Path) -> None:
    spec = load_slo_spec(text="slos:\n  chat:\n    quality_cites_clause_7: {min: 95%}\n    quality: {min: 0.99}\n")
    assert [(t.metric, t.threshold, t.op) for t in spec.targets] == [
        ("quality_cites_clause_7", 0.95, ">="), ("quality", 0.99, ">=")]  # fmt: skip


def _probe(phase: str, probe: int, text: str, ok: bool = True, target: str = "") -> str:
    users = 8 if phase != "before" else 0
    return json.dumps({"phase": phase, "probe": probe, "target": target, "text": text, "ok": ok,
                       "error": None if ok else "boom", "epoch_s": 1000.0, "users": users})  # fmt: skip


def test_consistency_from_probes_jsonl_counts_changed_answers_and_reads_defensively(tmp_path: Path) -> None:
    run_dir = _write_run(tmp_path / "run", quality_rows())
    lines = [_probe("before", i, f"answer {i}") for i in range(6)]
    lines += [_probe("under_load", 0, "answer 0"), _probe("under_load", 1, "answer 1 changed"),
              _probe("under_load", 2, "answer 2"), _probe("under_load", 3, "x", ok=False),
              _probe("under_load", 4, "answer 4 <b>changed</b>"), "{not json", json.dumps(["a list"])]  # fmt: skip
    (run_dir / "probes.jsonl").write_text("\n".join(lines) + "\n")
    result = build_report(run_dir, load_slo_spec(text=SLO))
    block = json.loads((run_dir / "summary.json").read_text())["consistency"]
    # probes 0-4 have both passes; 3 failed under load and 5 has none: 4 compared, 2 changed
    assert (block["probes"], block["compared"], block["changed"], block["failed"]) == (6, 4, 2, 2)
    assert block["changed_share"] == 0.5 and block["unreadable_lines"] == 2 and "pairs" not in block
    slo = next(r for r in result.summary.slo_results if r.metric == "consistency_changed")
    assert slo.measured == 0.5 and not slo.passed and slo.note == "2 of 4 probe answers changed under load"
    (run_dir / "probes.jsonl").write_text("\n".join(_probe("before", i, "a") for i in range(3)) + "\n")
    early = evaluate(load_run(run_dir), load_slo_spec(text="slos:\n  run:\n    consistency_changed: {max: 0%}\n"))
    assert early[0].measured is None and "ended before the probes under load" in early[0].note


def test_a_sweep_level_is_judged_on_its_answers_quality_too() -> None:
    from tokenstorm.reports import measure_sweep_level

    rows = [r for r in quality_rows() if r["workload"] == "contract"]
    spec = load_slo_spec(text="slos:\n  contract:\n    quality_needle: {min: 99%}\n    e2e_ms: {p95: 60000}\n")
    level = measure_sweep_level(rows, spec, users=4, kind="level", started_epoch_s=1000.0,
                                judged_from_epoch_s=1000.0, judged_to_epoch_s=1100.0)  # fmt: skip
    verdicts = {v.target: v for v in level.slos}
    judged = [r for r in rows if r["ok"] and r.get("error_category") != "cancelled" and r.get("check")]
    rate = sum(r["check"] == "pass" for r in judged) / len(judged)  # a level's own warm-up flags do not count
    assert verdicts["contract quality_needle min >= 0.99"].measured == pytest.approx(rate)
    assert not level.held and verdicts["contract e2e_ms p95 <= 60000"].passed


def test_live_export_counts_each_check_by_result_as_the_records_say() -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from tokenstorm.workloads.plugin.export.prometheus import ClientMetrics

    rows = quality_rows()
    metrics = ClientMetrics()
    for r in rows:
        metrics.observe(r)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    text = generate_latest(registry).decode()
    got = {(s.labels["workload"], s.labels["check"], s.labels["result"]): s.value
           for f in text_string_to_metric_families(text) if f.name == "tokenstorm_checks"
           for s in f.samples if s.name == "tokenstorm_checks_total"}  # fmt: skip
    expected: dict[tuple[str, str, str], float] = {}
    for r in rows:  # the exporter leaves warm-up requests out, as the report does
        if r["warmup"] or not r["ok"] or not r.get("check_results"):
            continue
        for part in r["check_results"].split(","):
            name, result = part.split(":")
            expected[(r["workload"], name, result)] = expected.get((r["workload"], name, result), 0) + 1
    assert got == expected and any(k[2] == "fail" for k in got)


def test_ab_targets_are_judged_on_their_own_answers(tmp_path: Path) -> None:
    rows = [{**r, "target": t} for t, seed in (("fast", 1), ("slow", 2)) for r in quality_rows(seed=seed, n=300)]
    meta = {"targets": [{"label": "fast", "url": "http://a"}, {"label": "slow", "url": "http://b"}]}
    result = build_report(_write_run(tmp_path / "run", rows, meta), load_slo_spec(text=SLO))
    quality = json.loads((tmp_path / "run" / "summary.json").read_text())["quality"]
    for target in ("fast", "slow"):
        ref = _reference([r for r in rows if r["target"] == target])["chat"]
        assert quality["targets"][target]["workloads"]["chat"]["checked"] == ref["checked"]
        slo = next(r for r in result.summary.slo_results if r.target == target and r.scope == "chat")
        assert slo.measured == pytest.approx(ref["passed"] / ref["checked"], rel=1e-12)


def test_alert_rule_for_one_checks_pass_rate_reads_the_live_counter() -> None:
    from tokenstorm.reports.judging.alerts import alert_rules

    rules = alert_rules(
        load_slo_spec(text="slos:\n  contract:\n    quality_needle: {min: 90%}\n    quality: {min: 1%}\n")
    )
    (rule,) = rules.document["groups"][0]["rules"]
    # judged on the failures' share: a check that never passes has no "pass" series, and must still fire
    assert 'tokenstorm_checks_total{workload="contract",check="needle",result="fail"}' in rule["expr"]
    assert "pass" not in rule["expr"] and rule["expr"].endswith("> 0.1")
    assert [t.metric for t, _ in rules.skipped] == ["quality"]  # a record's every check: the report judges it
