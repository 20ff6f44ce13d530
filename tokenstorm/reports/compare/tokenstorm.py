"""A tokenstorm run directory as compared runs: its ``summary.json`` (built first if missing) and
``run.json``, one column per A/B target (each target's own figures, never the targets pooled).

The context a comparison needs to be read fairly comes from the run itself: peak users from
``load.jsonl`` (else ``-u``), the load shape from the locustfile and its options, the measured
prompt and output lengths, the verdict and timing fidelity, and the deployment captured at run time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenstorm.reports.compare.model import ALL, CLOSED_LOOP, ComparedRun
from tokenstorm.workloads.rundir import RunMeta, read_load, read_run_meta, read_summary
from tokenstorm.workloads.rundir.secrets import display_url

__all__ = ["load_shape", "read_tokenstorm"]

_VERDICTS = {
    "passed": "SLOs held",
    "failed": "SLOs failed",
    "run_failed": "run failed",
    "incomplete": "incomplete",
    "unreliable": "timing not trustworthy",
}


def _summary(run_dir: Path) -> dict[str, Any]:
    summary = read_summary(run_dir)
    if summary is None:
        from tokenstorm.reports.build import build_report  # only when needed: building pulls in plotting

        build_report(run_dir)
        summary = read_summary(run_dir)
    return summary or {}


def read_tokenstorm(run_dir: Path, argument: int) -> list[ComparedRun]:
    """The columns of tokenstorm run ``run_dir``: one, or one per A/B target."""
    summary = _summary(run_dir)
    meta = read_run_meta(run_dir) or RunMeta(status="unknown")
    common = _common(run_dir, argument, summary, meta)
    ab = summary.get("targets") if isinstance(summary.get("targets"), dict) else None
    if not ab or not isinstance(ab.get("targets"), dict) or not ab["targets"]:
        return [_one_target(run_dir, summary, meta, common)]
    return _per_target(run_dir, summary, meta, ab, common)


def _common(run_dir: Path, argument: int, summary: dict[str, Any], meta: RunMeta) -> dict[str, Any]:
    """What every column of the run shares: where it came from, the load, the mix, the GPUs, the options."""
    loads = read_load(run_dir)
    peak = max((s.users for s in loads), default=None)
    users = peak if peak else _int(meta.options.get("num_users"))
    mix = _mix(summary)
    return {
        "source": run_dir,
        "argument": argument,
        "tool": f"tokenstorm {meta.versions.get('tokenstorm', '')}".strip(),
        "users_peak": users,
        "load_shape": load_shape(meta.options, users),
        "load_kind": load_shape(meta.options, None),
        "simulated": meta.simulated,
        "max_tokens": str(meta.options["max_tokens"])
        if meta.options.get("max_tokens") not in (None, "")
        else "each workload's own",
        "workload_mix": mix,
        "gpus": list(meta.gpus),
        "options": dict(meta.options),
    }


def _one_target(run_dir: Path, summary: dict[str, Any], meta: RunMeta, common: dict[str, Any]) -> ComparedRun:
    """The run's one column (no A/B targets)."""
    workloads = {str(w): b for w, b in (summary.get("workloads") or {}).items() if isinstance(b, dict)}
    captured = meta.deployment if isinstance(meta.deployment, dict) else {}  # a hand-edited "deployment": null
    deployment = captured.get("") or next(iter(captured.values()), {})
    problems = [f"{run_dir.name}: deployment only partly captured: {p}" for p in deployment.get("problems") or []]
    return ComparedRun(
        name=run_dir.name,
        figures=_with_quality(
            {ALL: _figures(summary), **workloads}, summary.get("quality"), summary.get("consistency")
        ),
        duration_s=_float(summary.get("duration")),
        target_url=display_url(str(deployment.get("url") or meta.target or "")) or None,
        model=_model(deployment, meta),
        verdict=_verdict(summary.get("verdict"), summary.get("verdict_reason")),
        verdict_ok=summary.get("verdict") == "passed" if summary.get("verdict") else None,
        fidelity=_fidelity(summary.get("timing_fidelity")),
        fidelity_ok=_fidelity_ok(summary.get("timing_fidelity")),
        prompt_tokens_mean=_mean_len(summary, "total_input_tokens"),
        output_tokens_mean=_mean_len(summary, "total_output_tokens"),
        deployment=dict(deployment),
        notes=problems,
        **common,
    )


def _per_target(
    run_dir: Path, summary: dict[str, Any], meta: RunMeta, ab: dict[str, Any], common: dict[str, Any]
) -> list[ComparedRun]:
    """One column per A/B target, the baseline first."""
    runs = []
    for label, block in _in_given_order(ab, meta):
        deployment = (meta.deployment if isinstance(meta.deployment, dict) else {}).get(str(label), {})
        slos = (
            f"{block.get('slos_failed', 0)} of {block.get('slos', 0)} SLOs failed"
            if block.get("slos_failed")
            else (f"all {block.get('slos', 0)} SLOs held")
        )
        per_workload: dict[str, Any] = block["workloads"] if isinstance(block.get("workloads"), dict) else {}
        quality = ((summary.get("quality") or {}).get("targets") or {}).get(label)
        consistency = ((summary.get("consistency") or {}).get("targets") or {}).get(label)
        runs.append(
            ComparedRun(
                name=f"{run_dir.name}[{label}]",
                figures=_with_quality(
                    {ALL: _figures(block), **{str(w): dict(b) for w, b in per_workload.items()}}, quality, consistency
                ),
                target_label=str(label),
                duration_s=_float(block.get("duration")),
                target_url=display_url(str(deployment.get("url") or block.get("url") or "")) or None,
                model=_model(deployment, meta),
                verdict=_verdict(block.get("verdict"), slos),
                verdict_ok=block.get("verdict") == "passed",
                fidelity=_fidelity(block.get("timing_fidelity") or summary.get("timing_fidelity")),
                fidelity_ok=_fidelity_ok(block.get("timing_fidelity") or summary.get("timing_fidelity")),
                prompt_tokens_mean=_mean_len(block, "total_input_tokens"),
                output_tokens_mean=_mean_len(block, "total_output_tokens"),
                deployment=dict(deployment),
                notes=[
                    f"{run_dir.name}[{label}]: deployment only partly captured: {p}"
                    for p in deployment.get("problems") or []
                ]
                + (
                    []
                    if per_workload
                    else [
                        f"{run_dir.name}: summary.json has per-workload figures pooled over the A/B targets only: "
                        "its columns show the all-workloads rows, per target"
                    ]
                ),
                **common,
            )
        )
    return runs


def _in_given_order(ab: dict[str, Any], meta: RunMeta) -> list[tuple[str, dict[str, Any]]]:
    """The A/B targets' blocks in the order ``--targets`` gave them (run.json), the baseline first:
    summary.json's keys are sorted, and the first target given is the baseline, not the first by name."""
    blocks = {str(k): v for k, v in ab["targets"].items() if isinstance(v, dict)}
    given = [str(t.get("label")) for t in meta.targets if isinstance(t, dict) and str(t.get("label")) in blocks]
    first = [str(ab["baseline"])] if str(ab.get("baseline")) in blocks else []
    order = list(dict.fromkeys([*first, *given, *blocks]))
    return [(label, blocks[label]) for label in order]


def _with_quality(figures: dict[str, dict[str, Any]], quality: Any, consistency: Any) -> dict[str, dict[str, Any]]:
    """``figures`` with summary.json's answer quality (its ``quality`` and ``consistency`` blocks) as flat figures:
    the pass rate per scope, the needle recall, the probes' changed share (the whole run's)."""
    if isinstance(quality, dict):
        # a run's block has "run"; an A/B target's block is its run figures with its "workloads"
        scopes = {ALL: quality.get("run", quality), **(quality.get("workloads") or {})}
        for scope, block in scopes.items():
            if not isinstance(block, dict):
                continue
            row = figures.setdefault(str(scope), {})
            row["quality_pass_rate"] = _float(block.get("pass_rate"))
            row["quality_checked"] = _float(block.get("checked"))
            needle = (block.get("by_check") or {}).get("needle")
            if isinstance(needle, dict):
                row["needle_pass_rate"] = _float(needle.get("pass_rate"))
                row["needle_checked"] = _float(needle.get("checked"))
    if isinstance(consistency, dict) and consistency.get("changed_share") is not None:
        row = figures.setdefault(ALL, {})
        row["consistency_changed_share"] = _float(consistency.get("changed_share"))
        row["consistency_compared"] = _float(consistency.get("compared"))
    return figures


def _figures(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if not isinstance(v, dict | list)}


def _model(deployment: dict[str, Any], meta: RunMeta) -> str | None:
    model: dict[str, Any] = deployment["model"] if isinstance(deployment.get("model"), dict) else {}
    return str(model.get("id") or meta.model or "") or None


def _verdict(verdict: Any, reason: Any) -> str | None:
    if not verdict:
        return None
    words = _VERDICTS.get(str(verdict), str(verdict))
    if reason and str(reason).lower().startswith(words.lower()):  # "timing not trustworthy — timing not ..."
        return str(reason)
    return words + (f" — {reason}" if reason else "")


def _fidelity(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    if doc.get("reason"):  # "timing trustworthy: ...", "timing NOT trustworthy: ...", "timing not measured: ..."
        return str(doc["reason"])
    if not doc.get("measured", True):
        return "timing not measured"
    return "timing trustworthy" if doc.get("trustworthy") else "timing NOT trustworthy"


def _fidelity_ok(doc: Any) -> bool | None:
    return bool(doc.get("trustworthy")) if isinstance(doc, dict) and doc.get("measured", True) else None


def _mix(summary: dict[str, Any]) -> dict[str, float]:
    counts = {
        str(w): float(b.get("requests") or 0)
        for w, b in (summary.get("workloads") or {}).items()
        if isinstance(b, dict)
    }
    total = sum(counts.values())
    return {w: n / total for w, n in sorted(counts.items())} if total else {}


def _mean_len(block: dict[str, Any], key: str) -> float | None:
    total, completed = _float(block.get(key)), _float(block.get("completed"))
    return total / completed if total is not None and completed else None


def _float(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _int(x: Any) -> int | None:
    return int(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def load_shape(options: dict[str, Any], users: int | None) -> str:
    """One phrase for how a run offered its load, from its locustfile and options: ``closed loop, 8
    users, +8 users/s, wait 0-1 s``, ``open loop: poisson 5 req/s``, ``steps 8x60,16x60``...; ``users``
    None: the kind alone (``closed loop``), to compare with other tools' loads."""
    files = options.get("locustfile") or options.get("locustfiles") or ""
    names = [Path(str(f)).stem for f in (files if isinstance(files, list) else str(files).split(","))]
    opt = options.get
    if opt("steps"):
        return f"steps {opt('steps')} (users x seconds)"
    if any(n == "shape_sweep" for n in names):
        levels = opt("sweep_levels") or f"automatic, {opt('sweep_count')} levels up to {opt('sweep_max_users')}"
        return f"sweep: users {levels}, {opt('sweep_level_time')} s a level"
    if any(n == "shape_capacity" for n in names):
        return (
            f"capacity search: {opt('capacity_start')} users +{opt('capacity_step')} every "
            f"{opt('capacity_step_time')} s (max {opt('capacity_max')})"
        )
    if any(n == "shape_steps" for n in names):
        return "steps"
    if any(n == "open_loop" for n in names):
        return f"open loop: {opt('arrival') or 'poisson'} {opt('arrival_rate')} req/s"
    if opt("trace") or any(n == "trace_replay" for n in names):
        return f"trace replay: {Path(str(opt('trace') or '')).name} at {opt('trace_speed') or 1:g}x"
    waits = [f"wait {opt('wait_time')} s"] if opt("wait_time") not in (None, "") else []
    waits += [
        f"{k.removesuffix('_think_time')} think {v} s"
        for k, v in sorted(options.items())
        if k.endswith("_think_time") and v not in (None, "")
    ]
    if users is None:  # the kind alone, as other tools' closed loops read: "closed loop"
        return ", ".join([CLOSED_LOOP, *waits])
    spawn = opt("spawn_rate")
    ramp = [f"+{spawn:g} users/s"] if isinstance(spawn, int | float) else []
    return ", ".join([f"{CLOSED_LOOP}, {users} users", *ramp, *waits])
