"""The console's closing block, as ``vllm bench serve`` prints one: per workload (and per A/B target) the
requests, throughput and exact TTFT / ITL / TPOT / E2E p50 and p99 — the report's own figures, so the
console and the report never disagree (Locust's tables round its percentiles to two digits)."""

from __future__ import annotations

from typing import Any

from reports.judging.summary import RunSummary
from reports.sections.headline import accounting_text

__all__ = ["console_block"]

_LATENCIES = (("TTFT", "ttft"), ("ITL", "itl"), ("TPOT", "tpot"), ("E2E", "e2el"))


def _ms(block: dict[str, Any], stat: str, name: str) -> str:
    value = block.get(f"{stat}_{name}_ms")
    return "-" if value is None else f"{value:.1f}"


def _row(label: str, block: dict[str, Any]) -> str:
    counts = f"{block.get('completed', 0):>7,} {block.get('failed', 0):>6,}"
    rates = f"{block.get('request_throughput', 0.0):>7.2f} {block.get('output_throughput', 0.0):>9.1f}"
    lat = " ".join(f"{_ms(block, 'median', n):>7}/{_ms(block, 'p99', n):<7}" for _, n in _LATENCIES)
    return f"{label[:18]:<18} {counts} {rates}  {lat}".rstrip()


def _agent_lines(overall: dict[str, Any]) -> list[str]:
    """Sessions, tool calls and the prefix-cache hit rate, as the report's agent and prefix-cache sections."""
    lines = []
    if overall.get("sessions"):
        line = (f"agent: {overall['completed_sessions']:,} of {overall['sessions']:,} sessions completed "
                f"({overall['failed_sessions']:,} failed, {overall['unfinished_sessions']:,} unfinished)")  # fmt: skip
        if overall.get("completed_sessions"):
            line += (f", {overall['mean_steps_per_session']:.1f} steps each; session p50/p95 "
                     f"{overall['median_session_ms']:.0f}/{overall['p95_session_ms']:.0f} ms, "
                     f"{overall['session_waiting_share']:.0%} of it waiting on the model")  # fmt: skip
        lines.append(line)
    if overall.get("tool_call_requests"):
        first, done = (f"{_ms(overall, 'median', n)}/{_ms(overall, 'p99', n)} ms" for n in ("ttft_tool", "tool_call"))
        lines.append(f"tool calls: {overall['tool_calls']:,} in {overall['tool_call_requests']:,} requests; "
                     f"first delta p50/p99 {first}, complete call p50/p99 {done}")  # fmt: skip
    rate = overall.get("prefix_cache_hit_rate")
    if rate is not None:
        source = "records' cached ÷ prompt tokens" if overall.get("prefix_cache_hit_rate_source") == "records" \
            else "vLLM /metrics hits ÷ queries"  # fmt: skip
        lines.append(f"prefix-cache hit rate {rate:.1%} ({source})")
    return lines


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
        parts.append(f"{workload} {'—' if rate is None else f'{rate:.2%}'} of {block.get('checked', 0):,}"
                     + (f" ({', '.join(worst)})" if worst else ""))  # fmt: skip
    line = "answers that passed their checks: " + "; ".join(parts)
    consistency = summary.consistency
    if consistency is not None and consistency.get("compared"):
        line += f"; consistency: {consistency['changed']} of {consistency['compared']} probe answers changed under load"
    return line


def console_block(summary: RunSummary) -> list[str]:
    """The lines of the closing block (empty when nothing was judged)."""
    if not summary.overall.get("requests"):
        return []
    head = f"{'':<18} {'ok':>7} {'failed':>6} {'req/s':>7} {'out tok/s':>9}  " + " ".join(
        f"{title + ' p50/p99 ms':<15}" for title, _ in _LATENCIES
    )
    head = head.rstrip()
    lines = ["-" * len(head), head]
    targets = (summary.targets or {}).get("targets") or {}
    for label, block in targets.items():  # A/B: each target apart, and its workloads, never pooled (as the report)
        lines.append(_row(f"target {label}", block))
        workloads = block.get("workloads") or {}
        if len(workloads) > 1:
            lines += [_row(f"{label} · {workload}", b) for workload, b in sorted(workloads.items())]
    lines.append(_row("all" if not targets else "all targets", summary.overall))
    if len(summary.per_workload) > 1 and not targets:
        lines += [_row(workload, block) for workload, block in sorted(summary.per_workload.items())]
    overall = summary.overall
    lines.append(f"{overall.get('total_input_tokens', 0):,} input and "
                 f"{overall.get('total_output_tokens', 0):,} output tokens of completed requests, "
                 f"{overall.get('total_token_throughput', 0.0):,.1f} total tok/s, achieved concurrency "
                 f"{overall.get('achieved_concurrency', 0.0):.2f} (mean requests in flight)")  # fmt: skip
    # As the report says them: the records accounted for, and the window every rate above covers.
    lines.append(accounting_text(overall))
    lines += _agent_lines(overall)
    if (quality := quality_line(summary)) is not None:
        lines.append(quality)
    lines.append(f"rates over the measured window, {overall.get('duration', 0.0):,.1f} s (first judged request's "
                 "start to the last one's end), as in the report; the periodic lines were the last 10 s")  # fmt: skip
    lines.append("-" * len(head))
    return lines
