"""The console's closing block, as ``vllm bench serve`` prints one: per workload (and per A/B target) the
requests, throughput and exact TTFT / ITL / TPOT / E2E p50 and p99 — the report's own figures, so the
console and the report never disagree (Locust's tables round its percentiles to two digits).

Every line fits ``WIDTH_CHARS`` columns: throughput and latency are two tables with the same rows, and a
sentence longer than that is wrapped (its continuation indented). Sessions are counted per workload (a
chat's sessions are not an agent's), the cost is given when a GPU-hour price was, and where the client's TTFT went
(the means of overhead, queue and prefill that add up to it) when the server timed the requests.
"""

from __future__ import annotations

import textwrap
from typing import Any

from tokenstorm.reports.judging.summary import RunSummary
from tokenstorm.reports.judging.verdict_words import slo_sentence
from tokenstorm.reports.sections.headline import accounting_text

__all__ = ["WIDTH_CHARS", "consistency_line", "console_block", "fit", "quality_line", "time_split_lines"]

#: the widest line of the block (a 100-column terminal shows each on one line)
WIDTH_CHARS = 100
_LATENCIES = (("TTFT", "ttft"), ("ITL", "itl"), ("TPOT", "tpot"), ("E2E", "e2el"))
_LABEL = 22  # the rows' label column
_LAT = 19  # a latency column: "12345.6/123456.7" and room


def _ms(block: dict[str, Any], stat: str, name: str) -> str:
    value = block.get(f"{stat}_{name}_ms")
    return "-" if value is None else f"{value:.1f}"


def _label(text: str) -> str:
    return text if len(text) <= _LABEL else text[: _LABEL - 1] + "…"


def _throughput_row(label: str, block: dict[str, Any]) -> str:
    return (
        f"{_label(label):<{_LABEL}} {block.get('completed', 0):>9,} {block.get('failed', 0):>7,} "
        f"{block.get('request_throughput', 0.0):>8.2f} {block.get('output_throughput', 0.0):>10.1f} "
        f"{block.get('total_token_throughput', 0.0):>12.1f} {block.get('achieved_concurrency', 0.0):>12.2f}"
    )


def _latency_row(label: str, block: dict[str, Any]) -> str:
    cells = "".join(f"{_ms(block, 'median', n) + '/' + _ms(block, 'p99', n):>{_LAT}}" for _, n in _LATENCIES)
    return f"{_label(label):<{_LABEL}}{cells}"


def _rows(summary: RunSummary) -> list[tuple[str, dict[str, Any]]]:
    """The tables' rows: A/B targets each apart with their workloads (never pooled, as the report), then
    the run, then its workloads."""
    rows: list[tuple[str, dict[str, Any]]] = []
    targets = (summary.targets or {}).get("targets") or {}
    for label, block in targets.items():
        rows.append((f"target {label}", block))
        workloads = block.get("workloads") or {}
        if len(workloads) > 1:
            rows += [(f"{label} · {workload}", b) for workload, b in sorted(workloads.items())]
    rows.append(("all" if not targets else "all targets", summary.overall))
    if len(summary.per_workload) > 1 and not targets:
        rows += sorted(summary.per_workload.items())
    return rows


def _session_blocks(summary: RunSummary) -> list[tuple[str, dict[str, Any]]]:
    """Each workload's own sessions (A/B: per target and workload): the run's pooled count would add a
    chat's sessions to an agent's."""
    targets = (summary.targets or {}).get("targets") or {}
    if targets:
        return [
            (f"{label} · {w}", b)
            for label, block in targets.items()
            for w, b in sorted((block.get("workloads") or {}).items())
            if b.get("sessions")
        ]
    return [(w, b) for w, b in sorted(summary.per_workload.items()) if b.get("sessions")]


def _agent_lines(summary: RunSummary) -> list[str]:
    """Sessions per workload, tool calls and the prefix-cache hit rate, as the report's agent and
    prefix-cache sections."""
    lines = []
    for name, block in _session_blocks(summary):
        line = (
            f"{name}: {block['completed_sessions']:,} of {block['sessions']:,} sessions completed "
            f"({block['failed_sessions']:,} failed, {block['unfinished_sessions']:,} unfinished)"
        )
        if not block.get("completed_sessions"):
            lines.append(line)
            continue
        lines.append(f"{line}, {block['mean_steps_per_session']:.1f} steps each")
        lines.append(
            f"  session p50/p95 {block['median_session_ms']:.0f}/{block['p95_session_ms']:.0f} ms, "
            f"{block['session_waiting_share']:.0%} of it waiting on the model"
        )
    overall = summary.overall
    if overall.get("tool_call_requests"):
        first, done = (f"{_ms(overall, 'median', n)}/{_ms(overall, 'p99', n)} ms" for n in ("ttft_tool", "tool_call"))
        lines.append(f"tool calls: {overall['tool_calls']:,} in {overall['tool_call_requests']:,} requests")
        lines.append(f"  first delta p50/p99 {first}, complete call p50/p99 {done}")
    rate = overall.get("prefix_cache_hit_rate")
    if rate is not None:
        source = (
            "records' cached ÷ prompt tokens"
            if overall.get("prefix_cache_hit_rate_source") == "records"
            else "vLLM /metrics hits ÷ queries"
        )
        lines.append(f"prefix-cache hit rate {rate:.1%} ({source})")
    return lines


def _cost_line(summary: RunSummary) -> str | None:
    """What the measured throughput costs, as the report's cost paragraph (None: no price given)."""
    overall = summary.overall
    if overall.get("cost_per_hour") is None:
        return None

    def money(value: float | None) -> str:
        return "-" if value is None else f"{value:,.4g}" if value < 10 else f"{value:,.2f}"

    gpus = f"{summary.gpus} GPU{'s' if summary.gpus != 1 else ''}"
    return (
        f"cost at {money(overall['gpu_cost_per_hour'])} per GPU-hour × {gpus}: "
        f"{money(overall.get('cost_per_1m_output_tokens'))} per 1M output tokens, "
        f"{money(overall.get('cost_per_1m_total_tokens'))} per 1M total tokens"
    )


def quality_line(summary: RunSummary) -> str | None:
    """``answers passed their checks: chat 99.20% of 1,234, contract 87.00% of 500`` (None: none checked);
    a workload's failing checks named with their rates, as the report's quality section has them."""
    quality = summary.quality
    if quality is None:
        return None
    parts = []
    for workload, block in sorted((quality.get("workloads") or {}).items()):
        rate = block.get("pass_rate")
        worst = [f"{n} {b['pass_rate']:.1%}" for n, b in (block.get("by_check") or {}).items() if b.get("failed")]
        parts.append(
            f"{workload} {'—' if rate is None else f'{rate:.2%}'} of {block.get('checked', 0):,}"
            + (f" ({', '.join(worst)})" if worst else "")
        )
    return "answers that passed their checks: " + "; ".join(parts)


def consistency_line(summary: RunSummary) -> str | None:
    """``consistency: 2 of 8 probe answers changed under load`` (None: no probes compared)."""
    consistency = summary.consistency
    if consistency is None or not consistency.get("compared"):
        return None
    return f"consistency: {consistency['changed']} of {consistency['compared']} probe answers changed under load"


def _time_split(block: dict[str, Any], where: str) -> str | None:
    """``where TTFT went (mean ms): overhead 3.1 + queue 12.0 + prefill 8.2 = 23.3; 99.8% server-timed``: the
    means that add up, over the requests the server timed (tokenstorm/reports/judging/breakdown.py); None: it timed
    none."""
    if not block.get("server_timed_requests"):
        return None
    parts = " + ".join(
        f"{name} {block.get(f'mean_{key}_ms') or 0.0:,.1f}"
        for name, key in (("overhead", "overhead"), ("queue", "server_queue"), ("prefill", "server_ttft"))
    )
    share = block.get("server_timing_share") or 0.0
    said = "100%" if share == 1 else f"{share:.1%}"
    total = block.get("mean_ttft_server_timed_ms") or 0.0
    return f"where TTFT went{where} (mean ms): {parts} = {total:,.1f}; {said} server-timed"


def time_split_lines(summary: RunSummary) -> list[str]:
    """Where the client's TTFT went, one line (an A/B run: one per target, never pooled); none when the
    server timed no request."""
    targets = (summary.targets or {}).get("targets") or {}
    found = [_time_split(b, f" on {label}") for label, b in targets.items()] or [_time_split(summary.overall, "")]
    return [line for line in found if line is not None]


def fit(line: str) -> list[str]:
    """``line`` as lines of at most ``WIDTH_CHARS``: wrapped at its spaces, the continuation indented."""
    if len(line) <= WIDTH_CHARS:
        return [line]
    return textwrap.wrap(line, WIDTH_CHARS, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)


def slo_lines(summary: RunSummary) -> list[str]:
    """``SLO held   chat ttft_ms p99 312 ms (95% CI 290–350) vs <= 500 ms``, one per judged SLO (at most
    :data:`_SLO_LINES`, failed and inconclusive first); none for a sweep or capacity search (judged per level)
    or the default check (the verdict line says it)."""
    if summary.sweep is not None or summary.capacity is not None or summary.default_check:
        return []
    judged = [r for r in summary.slo_results if r.judged]
    order = {"failed": 0, "inconclusive": 1}
    judged.sort(key=lambda r: order.get(r.result, 2))
    lines = [f"SLO {r.result or ('held' if r.passed else 'failed'):<12} {slo_sentence(r)}" for r in judged[:_SLO_LINES]]
    if len(judged) > _SLO_LINES:
        lines.append(f"... {len(judged) - _SLO_LINES} more SLOs: summary.json 'slos', the report's SLO table")
    return lines


#: the SLO lines the closing block shows at most
_SLO_LINES = 12


def console_block(summary: RunSummary) -> list[str]:
    """The lines of the closing block (empty when nothing was judged), none wider than ``WIDTH_CHARS``."""
    if not summary.overall.get("requests"):
        return []
    rows = _rows(summary)
    head = (
        f"{'':<{_LABEL}} {'ok':>9} {'failed':>7} {'req/s':>8} {'out tok/s':>10} {'total tok/s':>12} {'concurrency':>12}"
    )
    lat_head = f"{'ms, p50/p99':<{_LABEL}}" + "".join(f"{title:>{_LAT}}" for title, _ in _LATENCIES)
    rule = "-" * WIDTH_CHARS
    lines = [rule, head, *(_throughput_row(label, block) for label, block in rows), ""]
    lines += [lat_head, *(_latency_row(label, block) for label, block in rows), ""]
    overall = summary.overall
    lines.append(
        f"tokens of completed requests: {overall.get('total_input_tokens', 0):,} input, "
        f"{overall.get('total_output_tokens', 0):,} output"
    )
    lines.append(f"achieved concurrency {overall.get('achieved_concurrency', 0.0):.2f} (mean requests in flight)")
    if (offered := overall.get("offered_rate")) is not None:
        cv = overall.get("arrival_cv", 0.0)
        said = f"offered {offered:.1f} req/s (when each request was due), inter-arrival CV {cv:.2f}"
        lines.append(f"{said} (Poisson 1, fixed rate 0)")
    # As the report says them: the records accounted for, and the window every rate above covers.
    lines.append(accounting_text(overall))
    lines.append(
        f"rates over the measured window, {overall.get('duration', 0.0):,.1f} s: the first judged "
        "request's start to the last one's end"
    )
    lines += slo_lines(summary)
    lines += time_split_lines(summary)
    lines += _agent_lines(summary)
    lines += [line for line in (quality_line(summary), consistency_line(summary)) if line is not None]
    if (cost := _cost_line(summary)) is not None:
        lines.append(cost)
    lines.append(rule)
    return [part for line in lines for part in fit(line)]
