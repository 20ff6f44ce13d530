"""The web UI's tokenstorm tabs: live LLM rows (requests, output tok/s), GPU and vLLM server
tables (read from the run directory's sample files, so they stay after Stop; KV cache in %, as the
report), and the SLO report at ``/tokenstorm/report``. The charts, the live SLO status, the verdict
after a run and the SIMULATED label in the header: :mod:`.webui_live`."""

from __future__ import annotations

import json
from typing import Any

from locust.env import Environment

from ...rundir import GPU_FILE, REPORT_FILE, SERVER_FILE
from ...rundir.secrets import split_credentials
from ..core import locust_compat
from ..core.context import context
from ..core.targets import scrub_targets
from .final import ENDED_RATE, total_label
from .form_check import FormCheck
from .server_history import latest_gpus
from .webui_live import SIMULATED, LiveState, add_live_view, no_gpu, no_server

__all__ = ["extend_web_ui"]

_GPU_COLUMNS = (
    ("gpu", "GPU"),
    ("name", "Name"),
    ("util_gpu_pct", "Util %"),
    ("mem_used_mib", "Memory used MiB"),
    ("mem_total_mib", "Memory total MiB"),
    ("power_w", "Power W"),
    ("temp_c", "Temp °C"),
    ("sm_clock_mhz", "SM MHz"),
)
#: the newest sample of each target; counters since the run's first sample (server_history.server_row)
_SERVER_COLUMNS = (
    ("target", "Target"),
    ("running", "Running"),
    ("waiting", "Waiting"),
    ("kv_cache_pct", "KV cache usage %"),
    ("prefix_hit_pct", "Prefix-cache hit rate % (run)"),
    ("preemptions", "Preemptions (run)"),
    ("generation_tokens", "Generated tokens (run)"),
)


def _clear_current_rates(payload: dict[str, Any]) -> None:
    """Locust's "current" rates of a stopped run read 0 (Locust keeps the last seconds' as they were)."""
    for key in ("current_rps", "current_fail_per_sec"):
        if key in payload:
            payload[key] = 0.0
    for row in payload.get("stats") or []:
        if isinstance(row, dict):
            row.update({k: 0.0 for k in ("current_rps", "current_fail_per_sec") if k in row})


def _fmt(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def extend_web_ui(environment: Environment) -> None:
    """Add tokenstorm's tabs, tables and report link to Locust's web UI."""
    from flask import Response, jsonify, request

    web_ui = environment.web_ui
    assert web_ui is not None
    _add_tabs(web_ui.template_args)
    app = web_ui.app
    assert app is not None
    live = add_live_view(environment)
    form_check = FormCheck.at_start_up(environment)  # the command line's options, before any form

    @app.route("/tokenstorm/report")
    def _report() -> Any:
        from tokenstorm.reports import build_report  # reports is only needed when the page is asked for

        ctx = context(environment)
        if ctx.run_dir is None:
            return Response("No run yet: start one, then open this page again.", mimetype="text/plain")
        ctx.flush()
        report = ctx.run_dir / REPORT_FILE
        if not ctx.report_built:  # during a run: rebuild from what is on disk now
            build_report(ctx.run_dir, ctx.slo_spec, live=True)
        return Response(report.read_text(encoding="utf-8"), mimetype="text/html")

    @app.before_request
    def _check_start_form() -> Any:
        """A run started from the form is checked like the command line: a bad value is answered
        with its one line in the form, before any traffic."""
        if request.method != "POST" or not request.path.endswith("/swarm"):
            return None
        problem = _start_form_problem(environment, form_check, dict(request.form.items()))
        if problem is None:
            return None
        return jsonify({"success": False, "message": f"tokenstorm: {problem}", "host": environment.host})

    @app.after_request
    def _add_llm_stats(response: Any) -> Any:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        payload = response.get_json()
        payload["extended_stats"], ended = _extended_stats(environment, live)
        if ended:  # Locust's header (RPS) and its table's current rates: nothing is sent any more
            _clear_current_rates(payload)
        response.set_data(json.dumps(payload))
        return response


def _add_tabs(template_args: dict[str, Any]) -> None:
    """The LLM, GPU and vLLM server tabs with their tables' columns, and the links to tokenstorm's pages."""
    template_args["extended_tabs"] = [
        {"title": "LLM", "key": "tokenstorm"},
        {"title": "GPU", "key": "tokenstorm-gpu"},
        {"title": "vLLM server", "key": "tokenstorm-server"},
    ]
    template_args["extended_tables"] = [
        {
            "key": "tokenstorm",
            "structure": [
                {"key": "workload", "title": "Workload"},
                {"key": "requests", "title": "Requests recorded"},
                {"key": "tokens_per_s", "title": "Output tok/s (10 s)"},
                {"key": "tokens", "title": "Output tokens"},
                {"key": "target", "title": "Target"},
            ],
        },
        {"key": "tokenstorm-gpu", "structure": [{"key": k, "title": t} for k, t in _GPU_COLUMNS]},
        {"key": "tokenstorm-server", "structure": [{"key": k, "title": t} for k, t in _SERVER_COLUMNS]},
    ]
    template_args["extended_csv_files"] = [
        {
            "href": "./tokenstorm/report",
            "title": "tokenstorm SLO report (HTML, not Locust's): live during a run, "
            "final after it — the LLM tab links it with the verdict",
        },
        {"href": "./tokenstorm/live", "title": "tokenstorm live charts and SLO status (a page of their own)"},
    ]


def _start_form_problem(environment: Environment, form_check: FormCheck, form: dict[str, str]) -> str | None:
    """The one line refusing the start form's run (None: it may start)."""
    # A new host (also mid-run) gets no key (the key lives in the context, never in Locust's options).
    host = form.get("host") or environment.host
    problem = form_check.problem(environment, form)
    if problem is None and (
        (host and split_credentials(host)[1] is not None) or scrub_targets(form.get("targets") or "")[1]
    ):
        problem = "host: user:password in a URL is not taken from the web form; start tokenstorm with --host URL"
    if problem is None:
        context(environment).warn_key_not_sent(environment.parsed_options, host)
    return problem


def _extended_stats(environment: Environment, live: LiveState) -> tuple[list[dict[str, Any]], bool]:
    """The LLM, GPU and server tabs' rows for Locust's ``/stats/requests``, and whether the run has ended."""
    ctx = context(environment)
    target = SIMULATED if ctx.simulated else (environment.host or "")
    urls = dict(ctx.options.targets)  # A/B rows are "workload @ label"

    def where(key: str) -> str:
        label = key.rpartition(" @ ")[2] if " @ " in key else ""
        url = urls.get(label, target if not label else "")
        return f"{url} (SIMULATED)" if label and ctx.simulated else url

    # Locust asks for this table no more once its runner has stopped: what the last answer says
    # stays on the page. So once the run has ended no figure of the last seconds is given as if live,
    # and the Total row says only what the run's own verdict says (final.total_label).
    running = locust_compat.is_running(environment.runner)
    ended = not running and ctx.run_dir is not None
    rows = [
        {
            "workload": w,
            "requests": ctx.requests_by_workload.get(w, 0),
            "tokens_per_s": ENDED_RATE if ended else round(r.rate(), 1),
            "tokens": r.total_tokens,
            "target": where(w),
        }
        for w, r in sorted(ctx.token_rate_by_workload.items())
    ]
    timing = live.timing(ctx)
    final = live.final.read(ctx.run_dir, ctx.report_built) if ended else None
    rows.append(
        {
            "workload": total_label(ended, timing["status"] if timing is not None else None, final),
            "requests": sum(ctx.requests_by_workload.values()),
            "tokens_per_s": ENDED_RATE if ended else round(ctx.token_rate.rate(), 1),
            "tokens": ctx.token_rate.total_tokens,
            "target": target,
        }
    )
    latest_gpu = latest_gpus(ctx.run_dir / GPU_FILE) if ctx.run_dir is not None else []
    gpu_rows = [{k: _fmt(g.get(k)) for k, _ in _GPU_COLUMNS} for g in latest_gpu] or [{"gpu": no_gpu(ctx)}]
    server = live.server.latest_rows(ctx.run_dir / SERVER_FILE if ctx.run_dir is not None else None)
    server_rows = [{k: _fmt(row.get(k)) for k, _ in _SERVER_COLUMNS} for row in server]
    if not any(row.get("target") for row in server_rows):  # one target: its column would be empty
        server_rows = [{**row, "target": target} for row in server_rows]
    server_rows = server_rows or [{"target": no_server(ctx)}]
    stats = [
        {"key": "tokenstorm", "data": rows},
        {"key": "tokenstorm-gpu", "data": gpu_rows},
        {"key": "tokenstorm-server", "data": server_rows},
    ]
    return stats, ended
