"""The live view inside Locust's web UI: charts in the LLM and GPU tabs, the live SLO status, and
SIMULATED in the header of every page when the target is the built-in emulator.

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

from . import locust_compat
from .context import RunContext, context
from .live import SLO_MAX_REQUESTS, SLO_WINDOW_S, GpuHistory, judge_recent

log = logging.getLogger("tokenstorm")

__all__ = ["SIMULATED", "add_live_view", "no_gpu", "script_tag"]

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
<h2>GPU</h2><div data-tokenstorm-place="gpu"></div></main>
<script src="./live.js"></script></body></html>"""


def no_gpu(ctx: RunContext) -> str:
    """What the GPU tab says instead of an empty table."""
    if not ctx.options.gpu_monitor:
        return ("no GPU samples: start the sidecar on the GPU host (python -m monitors gpu --host 0.0.0.0 "
                "--port 9400) and run with --gpu-monitor http://GPU-HOST:9400 (or --gpu-monitor local)")  # fmt: skip
    return f"no GPU samples from {ctx.options.gpu_monitor} yet (see the console for why)"


def script_tag() -> str:
    """The tag added to Locust's index page (a relative URL, as Locust's own assets and report link)."""
    return '<script src="./tokenstorm/live.js" defer></script>'


class _LiveState:
    """What the live view keeps between polls: the GPU file's read position, the last SLO judgement."""

    def __init__(self) -> None:
        self.gpu = GpuHistory()
        self.slo: list[dict[str, Any]] = []
        self.slo_requests = 0
        self.slo_at = 0.0
        self.slo_of: object = None  # the run (its record window) the judgement is of

    def slo_status(self, ctx: RunContext, gpu: dict[str, Any]) -> list[dict[str, Any]]:
        now = time.monotonic()
        if ctx.run_dir is not None and (now - self.slo_at >= _SLO_EVERY_S or self.slo_of is not ctx.run_dir):
            from reports import load_slo_spec  # the default spec, as the report's; reports load on demand

            spec = ctx.slo_spec if ctx.slo_spec is not None else load_slo_spec()
            rows = ctx.live.recent_rows()
            self.slo_at, self.slo_of = now, ctx.run_dir  # before judging: polls meanwhile reuse the last
            labels = [label for label, _ in ctx.options.targets]
            # In a thread of gevent's pool, so the judgement does not hold up the event loop that reads
            # the streams in one piece (pandas keeps the GIL, so the loop still runs in slices).
            pool = gevent.get_hub().threadpool
            try:
                self.slo = pool.apply(judge_recent, (spec, rows, ctx.started_epoch_s, gpu, labels, time.time()))
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


def live_payload(environment: Environment, state: _LiveState) -> dict[str, Any]:
    """Everything the live view draws, as one JSON object."""
    ctx = context(environment)
    running = locust_compat.is_running(environment.runner)
    if running:
        ctx.live.advance()  # points are due even when no request ends (a stalled server)
    gpu = state.gpu.read(ctx.run_dir / "gpu.jsonl" if ctx.run_dir is not None else None)
    return {
        "simulated": ctx.simulated,
        "simulated_label": SIMULATED,
        "target": SIMULATED if ctx.simulated else (environment.host or ""),
        "running": running,
        "llm": ctx.live.snapshot(),
        "slo": state.slo_status(ctx, gpu),
        "slo_window_s": SLO_WINDOW_S,
        "slo_max_requests": SLO_MAX_REQUESTS,
        "slo_requests": state.slo_requests,
        "slo_source": getattr(ctx.slo_spec, "source", "<default>"),
        "gpu": gpu,
        "gpu_empty": None if gpu else no_gpu(ctx),
    }


def add_live_view(environment: Environment) -> None:
    """Serve the live view's JSON, script and page, and put the script on Locust's index page."""
    from flask import Response, jsonify, request

    web_ui = environment.web_ui
    assert web_ui is not None and web_ui.app is not None
    app = web_ui.app
    state = _LiveState()
    script = resources.files(__package__).joinpath("webui_live.js").read_text(encoding="utf-8")

    @app.route("/tokenstorm/live.json")
    @web_ui.auth_required_if_enabled
    def _live_json() -> Any:
        return jsonify(live_payload(environment, state))

    @app.route("/tokenstorm/live.js")
    def _live_js() -> Any:
        return Response(script, mimetype="application/javascript")

    @app.route("/tokenstorm/live")
    @web_ui.auth_required_if_enabled
    def _live_page() -> Any:
        ctx = context(environment)
        title = environment.host or ("the built-in emulator" if ctx.simulated else "no host yet")
        return Response(_PAGE.format(title=html.escape(title)), mimetype="text/html")

    @app.after_request
    def _add_script(response: Any) -> Any:
        if request.endpoint != "locust.index" or response.mimetype != "text/html" or response.direct_passthrough:
            return response
        page = response.get_data(as_text=True)
        if "</body>" in page:  # a page of another shape is left as it is: the view stays at /tokenstorm/live
            response.set_data(page.replace("</body>", script_tag() + "</body>", 1))
        return response
