"""The web UI's tokenstorm tabs: live LLM rows (requests, output tok/s), GPU and vLLM server
tables, and the live SLO report at ``/tokenstorm/report``. The charts, the live SLO status and
the SIMULATED label in the header: :mod:`.webui_live`."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from locust.env import Environment

from ..rundir import CLIENT_BOUND_CPU_PCT, REPORT_FILE
from ..traffic import settings_from_options
from .context import context
from .options import OPTION_DESTS, RunOptions
from .webui_live import SIMULATED, add_live_view, no_gpu

__all__ = ["extend_web_ui", "form_problem"]

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
_SERVER_COLUMNS = (
    ("running", "Running"),
    ("waiting", "Waiting"),
    ("kv_cache_usage", "KV cache usage"),
    ("preemptions", "Preemptions"),
    ("prefix_cache_hits", "Prefix-cache hits"),
    ("generation_tokens", "Generated tokens"),
)


_NO_SERVER = "no /metrics samples of the target yet (none with --no-server-metrics)"


_CLIENT_BOUND = f"CLIENT-BOUND (load generator CPU > {CLIENT_BOUND_CPU_PCT:g}%)"


def form_problem(environment: Environment, form: dict[str, str]) -> str | None:
    """What is wrong with the web UI start form's tokenstorm values (``None``: nothing)."""
    values = dict(vars(environment.parsed_options)) if environment.parsed_options is not None else {}
    for key, raw in form.items():
        if key not in values or key not in OPTION_DESTS:
            continue  # Locust's own fields (run time, users, host...) are Locust's to check
        current = values[key]
        if isinstance(current, bool):
            values[key] = raw == "true"
        elif isinstance(current, (int, float)):
            try:
                values[key] = type(current)(raw)
            except ValueError:
                return f"--{key.replace('_', '-')} {raw!r}: not a number"
        elif current is None or isinstance(current, str):
            values[key] = raw
    namespace = SimpleNamespace(**values)
    try:
        RunOptions.parse(namespace)
        settings_from_options(namespace)
    except ValueError as exc:  # OptionError, WorkloadFileError, DatasetError
        return str(exc)
    return None


def _fmt(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def extend_web_ui(environment: Environment) -> None:
    """Add tokenstorm's tabs, tables and report link to Locust's web UI."""
    from flask import Response, jsonify, request

    web_ui = environment.web_ui
    assert web_ui is not None
    web_ui.template_args["extended_tabs"] = [
        {"title": "LLM", "key": "tokenstorm"},
        {"title": "GPU", "key": "tokenstorm-gpu"},
        {"title": "vLLM server", "key": "tokenstorm-server"},
    ]
    web_ui.template_args["extended_tables"] = [
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

    app = web_ui.app
    assert app is not None
    add_live_view(environment)
    web_ui.template_args["extended_csv_files"] = [
        {"href": "./tokenstorm/report", "title": "tokenstorm SLO report (live during a run, final after it)"},
        {"href": "./tokenstorm/live", "title": "tokenstorm live charts and SLO status (a page of their own)"},
    ]

    @app.route("/tokenstorm/report")
    def _report() -> Any:
        from reports import build_report  # reports is only needed when the page is asked for

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
        # Before Locust takes the form: a new host (also mid-run) gets no key, nor do the workers.
        context(environment).bind_key(environment.parsed_options, request.form.get("host") or environment.host)
        problem = form_problem(environment, dict(request.form.items()))
        if problem is None:
            return None
        return jsonify({"success": False, "message": f"tokenstorm: {problem}", "host": environment.host})

    @app.after_request
    def _add_llm_stats(response: Any) -> Any:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        ctx = context(environment)
        target = SIMULATED if ctx.simulated else (environment.host or "")
        urls = dict(ctx.options.targets)  # A/B rows are "workload @ label"

        def where(key: str) -> str:
            label = key.rpartition(" @ ")[2] if " @ " in key else ""
            url = urls.get(label, target if not label else "")
            return f"{url} (SIMULATED)" if label and ctx.simulated else url

        rows = [
            {
                "workload": w,
                "requests": ctx.requests_by_workload.get(w, 0),
                "tokens_per_s": round(r.rate(), 1),
                "tokens": r.total_tokens,
                "target": where(w),
            }
            for w, r in sorted(ctx.token_rate_by_workload.items())
        ]
        rows.append(
            {
                "workload": "Total" + (f" — {_CLIENT_BOUND}" if ctx.client_bound else ""),
                "requests": sum(ctx.requests_by_workload.values()),
                "tokens_per_s": round(ctx.token_rate.rate(), 1),
                "tokens": ctx.token_rate.total_tokens,
                "target": target,
            }
        )
        payload = response.get_json()
        monitor = ctx.monitor
        latest_gpu, server = monitor.latest() if monitor is not None else ([], {})
        gpu_rows = [{k: _fmt(g.get(k)) for k, _ in _GPU_COLUMNS} for g in latest_gpu] or [{"gpu": no_gpu(ctx)}]
        server_rows = [{k: _fmt(server.get(k)) for k, _ in _SERVER_COLUMNS}] if server else [{"running": _NO_SERVER}]
        payload["extended_stats"] = [
            {"key": "tokenstorm", "data": rows},
            {"key": "tokenstorm-gpu", "data": gpu_rows},
            {"key": "tokenstorm-server", "data": server_rows},
        ]
        response.set_data(json.dumps(payload))
        return response
