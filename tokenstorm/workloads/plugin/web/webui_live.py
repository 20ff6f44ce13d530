"""The live view inside Locust's web UI: charts in the LLM, GPU and vLLM server tabs, the live SLO
status (with the timing fidelity of the same requests first), SIMULATED in the header of every page
when the target is the built-in emulator, and once a run has ended its verdict, timing fidelity and
report link at the top of the LLM tab with the SLO status of the whole run (:mod:`.final`). The
start form's fields are grouped by topic (:mod:`.form`, ``webui_form.js``).

Locust's UI is a prebuilt React app whose extended tabs draw tables only. Rather than lean on
its minified bundle, the index page gets one ``<script>`` tag, served from this package
(``webui_live.js``, no dependencies, nothing from a CDN): it polls ``/tokenstorm/live.json``
and draws SVG charts below the tab's table, finding its place in the DOM each time it looks
(React re-renders under it). If Locust's page ever changes shape, the same view stands alone at
``/tokenstorm/live``, and the tables work as before.
"""

from __future__ import annotations

import html
import logging
import time
from importlib import resources
from typing import Any

import gevent
from locust.env import Environment

from ...rundir import LOAD_FILE, SERVER_FILE
from ..core import locust_compat
from ..core.context import RunContext, context
from .final import FinalOutcome
from .form import form_layout, trim_extra_options
from .live import FIDELITY_LABEL, SLO_MAX_REQUESTS, SLO_WINDOW_S
from .live_slo import judge_recent
from .server_history import GpuHistory, LoadHistory, ServerHistory

log = logging.getLogger("tokenstorm")

__all__ = ["NO_SERVER", "SIMULATED", "LiveState", "add_live_view", "live_payload", "no_gpu", "no_server", "script_tag"]

SIMULATED = "SIMULATED (built-in emulator)"
#: the live SLO status is judged again at most this often, however many pages poll
_SLO_EVERY_S = 2.0

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tokenstorm live — {title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<style>body{{font-family:system-ui,sans-serif;margin:0}} header{{display:flex;align-items:center;gap:16px;
padding:8px 24px;background:#15803d;color:#fff}} header a{{color:#fff;font-weight:700;text-decoration:none}}
main{{padding:8px 24px}} h2{{font-size:1.1em;margin:16px 0 4px}}</style></head>
<body><header><a href="../">tokenstorm</a><span>live view of {title}</span></header>
<main id="tokenstorm-live"><h2>LLM</h2><div data-tokenstorm-place="llm"></div>
<h2>GPU</h2><div data-tokenstorm-place="gpu"></div>
<h2>vLLM server</h2><div data-tokenstorm-place="server"></div></main>
<script src="./live.js"></script></body></html>"""


def no_gpu(ctx: RunContext) -> str:
    """What the GPU tab says instead of an empty table."""
    if not ctx.options.gpu_monitor:
        return (
            "no GPU samples: start the sidecar on the GPU host (python -m tokenstorm.monitors gpu --host 0.0.0.0 "
            "--port 9400) and run with --gpu-monitor http://GPU-HOST:9400 (or --gpu-monitor local)"
        )
    return f"no GPU samples from {ctx.options.gpu_monitor} yet (see the console for why)"


NO_SERVER = "no /metrics samples of the target yet"


def no_server(ctx: RunContext) -> str:
    """What the vLLM tab says instead of an empty table."""
    if not ctx.options.server_metrics:
        return "no /metrics samples: --no-server-metrics is set"
    return f"{NO_SERVER} (the console says why when it has none)"


def script_tag() -> str:
    """The tags added to Locust's index page (relative URLs, as Locust's own assets and report link)."""
    return '<script src="./tokenstorm/live.js" defer></script><script src="./tokenstorm/form.js" defer></script>'


class LiveState:
    """What the live view keeps between polls: the GPU file's read position, the last SLO judgement."""

    def __init__(self) -> None:
        self.gpu = GpuHistory()
        self.server = ServerHistory()
        self.load = LoadHistory()
        self.final = FinalOutcome()
        self.slo: list[dict[str, Any]] = []
        self.slo_requests = 0
        self.slo_at = 0.0
        self.slo_of: object = None  # the run (its record window) the judgement is of

    def slo_status(self, ctx: RunContext, gpu: dict[str, Any]) -> list[dict[str, Any]]:
        now = time.monotonic()
        if ctx.run_dir is not None and (now - self.slo_at >= _SLO_EVERY_S or self.slo_of is not ctx.run_dir):
            from tokenstorm.reports import load_slo_spec  # the default spec, as the report's; reports load on demand

            spec = ctx.slo_spec if ctx.slo_spec is not None else load_slo_spec()
            rows = ctx.live.recent_rows()
            self.slo_at, self.slo_of = now, ctx.run_dir  # before judging: polls meanwhile reuse the last
            labels = [label for label, _ in ctx.options.targets]
            clock = {worker: dict(figures) for worker, figures in ctx.clock_by_worker.items()}
            load = self.load.read(ctx.run_dir / LOAD_FILE, time.time())
            # In a thread of gevent's pool, so the judgement does not hold up the event loop that reads
            # the streams in one piece (pandas keeps the GIL, so the loop still runs in slices).
            pool = gevent.get_hub().threadpool
            try:
                self.slo = pool.apply(
                    judge_recent, (spec, rows, ctx.started_epoch_s, gpu, labels, time.time(), clock, load)
                )
            except Exception as exc:  # the charts and the SIMULATED badge stay; the status says why
                log.warning("tokenstorm: live SLO status failed: %r", exc)
                self.slo = [
                    {
                        "label": "live SLO status",
                        "measured": None,
                        "status": "no data",
                        "note": f"failed: {exc!r}"[:200],
                    }
                ]
            self.slo_requests = len(rows)
        return self.slo

    def timing(self, ctx: RunContext) -> dict[str, Any] | None:
        """The last live judgement's timing-fidelity row, if it is of the current run."""
        if self.slo_of is not ctx.run_dir or ctx.run_dir is None:
            return None
        return next((row for row in self.slo if row.get("label") == FIDELITY_LABEL), None)


def live_payload(environment: Environment, state: LiveState, now: float | None = None) -> dict[str, Any]:
    """Everything the live view draws, as one JSON object: ``users``, ``requests_per_s`` (Locust's current
    requests/s, as its header; None once the run has ended) and ``elapsed_s`` of the run; once it has
    ended, ``final`` (its verdict, report and whole-run rates, :class:`.final.FinalOutcome`) and the SLO
    status of the whole run."""
    ctx = context(environment)
    runner = environment.runner
    running = locust_compat.is_running(runner)
    now = time.time() if now is None else now
    if running:
        ctx.live.advance()  # points are due even when no request ends (a stalled server)
    run_dir = ctx.run_dir
    gpu = state.gpu.read(run_dir / "gpu.jsonl" if run_dir is not None else None)
    server_file = run_dir / SERVER_FILE if run_dir is not None else None
    server = state.server.read(server_file)
    final = None if running else state.final.read(run_dir, ctx.report_built)
    if final is not None and final["stopped_epoch_s"] is not None:
        ctx.live.finish(final["stopped_epoch_s"])  # the charts' last points, up to the end
    if final is not None:  # judged by the report on the whole run, not on the last 30 s (empty by now)
        slo, slo_requests = final["slo"], final["requests"]
    else:
        slo, slo_requests = state.slo_status(ctx, gpu), state.slo_requests
    started = ctx.started_epoch_s if run_dir is not None else None
    end = now if running or final is None or final["stopped_epoch_s"] is None else final["stopped_epoch_s"]
    stats = getattr(runner, "stats", None)
    return {
        "simulated": ctx.simulated,
        "simulated_label": SIMULATED,
        "target": SIMULATED if ctx.simulated else (environment.host or ""),
        "running": running,
        "state": str(getattr(runner, "state", "") or ""),
        "users": int(runner.user_count) if runner is not None else 0,
        # Locust's current requests/s are of the last seconds: none once the run has ended (the
        # final figures are the report's, in ``final``)
        "requests_per_s": round(float(stats.total.current_rps), 2) if stats is not None and running else None,
        "elapsed_s": round(max(0.0, end - started), 1) if started is not None else None,
        "run_dir": str(run_dir) if run_dir is not None else None,
        "final": {k: v for k, v in final.items() if k != "slo"} if final is not None else None,
        "ended": run_dir is not None and not running,
        "llm": ctx.live.snapshot(),
        "slo": slo,
        "slo_final": final is not None,
        "slo_window_s": SLO_WINDOW_S,
        "slo_max_requests": SLO_MAX_REQUESTS,
        "slo_requests": slo_requests,
        "slo_source": getattr(ctx.slo_spec, "source", "<default>"),
        "gpu": gpu,
        "gpu_empty": None if gpu else no_gpu(ctx),
        "server": server,
        "server_rows": state.server.latest_rows(server_file),
        "server_empty": None if server else no_server(ctx),
    }


def add_live_view(environment: Environment) -> LiveState:
    """Serve the live view's JSON, script and page, and put the script on Locust's index page; the
    state returned holds the last live judgement (the LLM table's Total row reads its timing)."""
    from flask import Response, jsonify, request

    web_ui = environment.web_ui
    assert web_ui is not None and web_ui.app is not None
    app = web_ui.app
    state = LiveState()
    script = resources.files(__package__).joinpath("webui_live.js").read_text(encoding="utf-8")
    form_script = resources.files(__package__).joinpath("webui_form.js").read_text(encoding="utf-8")

    @app.route("/tokenstorm/live.json")
    @web_ui.auth_required_if_enabled
    def _live_json() -> Any:
        return jsonify(live_payload(environment, state))

    @app.route("/tokenstorm/live.js")
    def _live_js() -> Any:
        return Response(script, mimetype="application/javascript")

    @app.route("/tokenstorm/form.js")
    def _form_js() -> Any:
        return Response(form_script, mimetype="application/javascript")

    @app.route("/tokenstorm/form.json")
    @web_ui.auth_required_if_enabled
    def _form_json() -> Any:
        from locust.argument_parser import ui_extra_args_dict

        helps = {k: v.get("help_text") for k, v in ui_extra_args_dict().items()}
        return jsonify(form_layout(environment, helps))

    @app.route("/tokenstorm/live")
    @web_ui.auth_required_if_enabled
    def _live_page() -> Any:
        ctx = context(environment)
        title = environment.host or ("the built-in emulator" if ctx.simulated else "no host yet")
        return Response(_PAGE.format(title=html.escape(title)), mimetype="text/html")

    def trim_form(template_args: dict[str, Any]) -> None:
        """The start form's tokenstorm fields trimmed (see :mod:`.form`)."""
        extra = template_args.get("extra_options")
        if isinstance(extra, dict):
            template_args["extra_options"] = trim_extra_options(environment, extra)

    locust_compat.after_template_args(web_ui, trim_form)

    @app.after_request
    def _add_script(response: Any) -> Any:
        if request.endpoint != "locust.index" or response.mimetype != "text/html" or response.direct_passthrough:
            return response
        page = response.get_data(as_text=True)
        if "</body>" in page:  # a page of another shape is left as it is: the view stays at /tokenstorm/live
            response.set_data(page.replace("</body>", script_tag() + "</body>", 1))
        return response

    return state
