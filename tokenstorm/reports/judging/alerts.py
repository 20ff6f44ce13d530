"""Prometheus alerting rules from an SLO file, over the series ``--metrics-port`` exports.

    python -m tokenstorm.reports alert-rules slo.yaml [--window 5m] [--for 5m] > tokenstorm-rules.yml

Each target becomes one rule judged over a sliding ``window``: a latency percentile by
``histogram_quantile`` over the client-side histogram (its buckets bound the resolution: see
``tokenstorm/workloads/plugin/export/prometheus.py``), a mean by ``rate(sum)/rate(count)``, the error rate by the
requests counter, throughputs by counter rates, one check's pass rate (``quality_<check>``) by the checks
counter. Targets a live series cannot judge (``max``, goodput, GPU memory, ``quality`` — a record's every
check — and the consistency probes) are listed as skipped; the end-of-run report still judges them exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from tokenstorm.reports.judging.slo_spec import LATENCY_METRICS, SloSpec, SloTarget
from tokenstorm.workloads.rundir.series import CHECKS as _CHECKS
from tokenstorm.workloads.rundir.series import GPU_UTIL, OUTPUT_TOKENS, REQUESTS, SLO_HISTOGRAMS, USERS

__all__ = ["AlertRuleError", "AlertRules", "alert_rules"]


class AlertRuleError(ValueError):
    """A bad ``--window`` / ``--for``."""


_DURATION = re.compile(r"^\d+(ms|s|m|h|d|w|y)$")


@dataclass
class AlertRules:
    """The rule file (``document``) and the targets that could not become rules, with why."""

    document: dict[str, Any]
    skipped: list[tuple[SloTarget, str]]

    def to_yaml(self) -> str:
        """The rule file as YAML."""
        return yaml.safe_dump(self.document, sort_keys=False, allow_unicode=True, width=200)


def _selector(t: SloTarget, *matchers: tuple[str, str, str]) -> str:
    parts = [] if t.scope in ("run", "*") else [f'workload="{t.scope}"']
    parts += [f'{label}{op}"{value}"' for label, op, value in matchers]
    return "{" + ",".join(parts) + "}" if parts else ""


def _expr(t: SloTarget, spec: SloSpec, window: str) -> tuple[str, str] | str:
    """``(expression that is true when the target is broken, unit)`` or why there is none."""
    by = "workload" if t.scope == "*" else ""
    group = f" by ({by})" if by else ""
    if t.metric in LATENCY_METRICS:
        hist = SLO_HISTOGRAMS.get(t.metric)
        if hist is None:  # the server's own timing of each request: in the records, not in a live series
            return f"{t.metric} is not a client-side series (the report judges it)"
        sel = _selector(t)
        if t.stat == "max":
            return "a maximum cannot be read from a histogram (the report judges it)"
        if t.stat == "mean":
            rates = [f"sum{group}(rate({hist}_{part}{sel}[{window}]))" for part in ("sum", "count")]
            value = " / ".join(rates)
        else:
            q = float(t.stat[1:]) / 100
            le = "le, workload" if by else "le"
            value = f"histogram_quantile({q:g}, sum by ({le}) (rate({hist}_bucket{sel}[{window}])))"
        return f"({value}) * 1000 > {t.threshold:g}", "ms"
    if t.metric == "error_rate":
        errors = f"sum{group}(rate({REQUESTS}_total{_selector(t, ('outcome', '=', 'error'))}[{window}]))"
        judged = f"sum{group}(rate({REQUESTS}_total{_selector(t, ('outcome', '!=', 'cancelled'))}[{window}]))"
        return f"{errors} / {judged} > {t.threshold:g}", ""
    if t.metric.startswith("quality_"):
        check = ("check", "=", t.metric.removeprefix("quality_"))
        # On the failures' share: with none passing at all there is no "pass" series to divide.
        failed = f"sum{group}(rate({_CHECKS}_total{_selector(t, check, ('result', '=', 'fail'))}[{window}]))"
        checked = f"sum{group}(rate({_CHECKS}_total{_selector(t, check)}[{window}]))"
        return f"{failed} / {checked} > {1 - t.threshold:g}", ""
    # Throughput floors hold only while load is offered: an idle load generator breaks none.
    running = f" and on() sum({USERS}) > 0"
    if t.metric in ("output_tokens_per_s", "output_tokens_per_s_per_gpu"):
        per = ""
        if t.metric.endswith("per_gpu"):  # GPUs: the SLO file's, else those the sidecar samples, else 1
            per = f" / {spec.gpus}" if spec.gpus else f" / scalar(count({GPU_UTIL}) or vector(1))"
        rate = f"sum{group}(rate({OUTPUT_TOKENS}_total{_selector(t)}[{window}])){per}"
        return f"({rate} < {t.threshold:g}){running}", "tok/s"
    if t.metric == "requests_per_s":
        ok = _selector(t, ("outcome", "=", "ok"))
        return f"(sum{group}(rate({REQUESTS}_total{ok}[{window}])) < {t.threshold:g}){running}", "req/s"
    return f"{t.metric} is not a client-side series (the report judges it)"


def alert_rules(spec: SloSpec, window: str = "5m", for_: str = "5m", group: str = "tokenstorm-slo") -> AlertRules:
    """The Prometheus rule file for ``spec``."""
    for name, value in (("window", window), ("for", for_)):
        if not _DURATION.match(value):
            raise AlertRuleError(f"--{name} {value!r}: a Prometheus duration like 5m, 30s, 1h")
    rules: list[dict[str, Any]] = []
    skipped: list[tuple[SloTarget, str]] = []
    for t in spec.targets:
        made = _expr(t, spec, window)
        if isinstance(made, str):
            skipped.append((t, made))
            continue
        expr, unit = made
        scope = "each workload" if t.scope == "*" else "all workloads" if t.scope == "run" else t.scope
        name = re.sub(r"[^A-Za-z0-9_]", "_", f"TokenstormSlo_{t.scope.replace('*', 'each')}_{t.metric}_{t.stat}")
        rules.append(
            {
                "alert": name,
                "expr": expr,
                "for": for_,
                "labels": {"severity": "page", "slo": t.label, "source": spec.source},
                "annotations": {
                    "summary": f"SLO broken: {t.label}" + (f" {unit}" if unit else ""),
                    "description": f"{scope}: {t.metric} {t.stat} over the last {window} (client side, as tokenstorm "
                    f"measures it) is past {t.threshold:g}{(' ' + unit) if unit else ''} "
                    f"({spec.source}:{t.line}).",
                },
            }
        )
    return AlertRules({"groups": [{"name": group, "rules": rules}]}, skipped)
