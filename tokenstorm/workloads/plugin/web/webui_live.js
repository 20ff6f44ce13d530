/* tokenstorm's live view in Locust's web UI (served by tokenstorm/workloads/plugin/webui_live.py).
 *
 * No dependencies and nothing fetched from elsewhere: it polls ./tokenstorm/live.json and draws
 * SVG line charts below the LLM, GPU and vLLM server tabs' tables, the live SLO status, SIMULATED
 * in the header, and once a run has ended its verdict and report link above the LLM table. React owns Locust's page and re-renders under us, so every PLACE_MS the script looks
 * again for where its elements belong and puts them back; it never touches React's own nodes.
 * All text goes in through textContent/setAttribute: nothing from the server is parsed as HTML.
 */
(function () {
  "use strict";
  var POLL_MS = 2000;
  var PLACE_MS = 500;
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  var TABS = { "tokenstorm": "llm", "tokenstorm-gpu": "gpu", "tokenstorm-server": "server" };
  var KINDS = ["llm", "gpu", "server"];
  var W = 640, H = 230, LEFT = 56, RIGHT = 16, TOP = 12, BOTTOM = 30;
  var TICKS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  var me = document.currentScript;
  var base = me && me.src ? me.src.replace(/live\.js(\?.*)?$/, "") : "./tokenstorm/";
  var data = null;
  var drawn = { llm: null, gpu: null, server: null, final: null };  // the payload each panel last drew

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svg(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "—";
    var a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(2);
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function clock(t, step) {
    var d = new Date(t * 1000), pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + (step < 60 ? ":" + pad(d.getSeconds()) : "");
  }

  function span(s) {
    if (s === null || s === undefined) return "—";
    s = Math.round(s);
    var h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), sec = s % 60;
    return (h ? h + " h " : "") + (h || m ? m + " min " : "") + sec + " s";
  }

  /* Time ticks at a round step (1 s ... 1 day), 4 to 8 of them across [t0, t1]. */
  function timeTicks(t0, t1) {
    var step = TICKS_S[TICKS_S.length - 1];
    for (var i = 0; i < TICKS_S.length; i++) { if ((t1 - t0) / TICKS_S[i] <= 7) { step = TICKS_S[i]; break; } }
    var out = [];
    for (var t = Math.ceil(t0 / step) * step; t <= t1 + 1e-6; t += step) out.push(t);
    return { step: step, ticks: out };
  }

  /* One chart: lines = [{label, color, dash, key, t: [epoch s], v: [number|null]}]. */
  function chart(name, title, lines, yMax) {
    var fig = el("figure", { "class": "tokenstorm-chart", "data-chart": name });
    fig.style.margin = "0";
    fig.appendChild(el("figcaption", {}, title)).style.fontWeight = "600";
    var ts = [], top = 0, any = false;  // the time axis spans every point time (one axis for a tab's charts)
    lines.forEach(function (l) {
      l.t.forEach(function (t, i) {
        ts.push(t);
        if (l.v[i] !== null && l.v[i] !== undefined) { any = true; top = Math.max(top, l.v[i]); }
      });
    });
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, width: "100%", role: "img", "aria-label": title });
    s.style.overflow = "visible";
    var t0 = ts.length ? Math.min.apply(null, ts) : 0, t1 = ts.length ? Math.max.apply(null, ts) : 1;
    if (t1 <= t0) t1 = t0 + 1;
    var y1 = yMax || niceMax(top * 1.05);
    function x(t) { return LEFT + (t - t0) / (t1 - t0) * (W - LEFT - RIGHT); }
    function y(v) { return TOP + (1 - Math.min(v, y1) / y1) * (H - TOP - BOTTOM); }
    [0, 0.25, 0.5, 0.75, 1].forEach(function (f) {
      var yy = y(f * y1);
      s.appendChild(svg("line", { x1: LEFT, x2: W - RIGHT, y1: yy, y2: yy, stroke: "currentColor", "stroke-opacity": f ? 0.15 : 0.5 }));
      s.appendChild(svg("text", { x: LEFT - 6, y: yy + 4, "text-anchor": "end", "font-size": 12, fill: "currentColor" }, fmt(f * y1)));
    });
    if (any) {
      var tk = timeTicks(t0, t1);
      tk.ticks.forEach(function (t) {
        var xx = x(t);
        s.appendChild(svg("line", { x1: xx, x2: xx, y1: TOP, y2: H - BOTTOM, stroke: "currentColor", "stroke-opacity": 0.08 }));
        s.appendChild(svg("line", { x1: xx, x2: xx, y1: H - BOTTOM, y2: H - BOTTOM + 4, stroke: "currentColor", "stroke-opacity": 0.5 }));
        s.appendChild(svg("text", { x: xx, y: H - 10, "text-anchor": "middle", "font-size": 12, fill: "currentColor",
                                    "class": "tokenstorm-tick" }, clock(t, tk.step)));
      });
    } else {
      s.appendChild(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", "font-size": 13, fill: "currentColor" }, data && data.ended ? "no data" : "no data yet"));
    }
    var legend = el("div", {});
    legend.style.cssText = "display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px";
    lines.forEach(function (l) {
      var d = "", pen = "M", n = 0, last = null;
      l.t.forEach(function (t, i) {
        var v = l.v[i];
        if (v === null || v === undefined) { pen = "M"; return; }
        d += pen + x(t).toFixed(1) + " " + y(v).toFixed(1) + " ";
        pen = "L";
        n += 1;
        last = v;
      });
      var path = svg("path", { d: d.trim(), fill: "none", stroke: l.color, "stroke-width": 2,
                               "stroke-dasharray": l.dash ? "6 4" : "none", "data-series": l.label,
                               "data-key": l.key, "data-points": n, "data-last": last === null ? "" : last });
      path.appendChild(svg("title", {}, l.label));
      s.appendChild(path);
      var item = el("span", {}, l.label + " " + fmt(last));
      var swatch = el("span", {});
      swatch.style.cssText = "display:inline-block;width:16px;height:0;margin-right:4px;vertical-align:middle;" +
        "border-top:2px " + (l.dash ? "dashed " : "solid ") + l.color;
      item.insertBefore(swatch, item.firstChild);
      legend.appendChild(item);
    });
    fig.appendChild(s);
    fig.appendChild(legend);
    return fig;
  }

  function grid() {
    var g = el("div", {});
    g.style.cssText = "display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:18px 28px;" +
      "margin:12px 0;width:100%";
    return g;
  }

  var LLM_CHARTS = [
    ["ttft", "TTFT (ms)", [["ttft_p50_ms", "p50", false], ["ttft_p95_ms", "p95", true]]],
    ["itl", "ITL (ms)", [["itl_p50_ms", "p50", false], ["itl_p99_ms", "p99", true]]],
    ["e2e", "E2E latency (ms)", [["e2e_p50_ms", "p50", false], ["e2e_p95_ms", "p95", true]]],
    ["tpot", "TPOT (ms)", [["tpot_p50_ms", "p50", false], ["tpot_p95_ms", "p95", true]]],
    ["tokens", "Output tokens/s", [["tokens_per_s", "", false]]],
    ["errors", "Errors/s", [["errors_per_s", "", false]]],
  ];

  function drawLlm(panel) {
    var llm = data.llm, names = Object.keys(llm.workloads);
    panel.appendChild(runFigures());
    panel.appendChild(el("p", {}, "Each point sums up the " + llm.window_s + " s before it, one every " + llm.every_s +
      " s, per workload (dashed: the tail percentile). Latencies of successful requests."));
    var g = panel.appendChild(grid());
    LLM_CHARTS.forEach(function (c) {
      var lines = [];
      names.forEach(function (w, i) {
        c[2].forEach(function (s) {
          lines.push({ label: s[1] ? w + " " + s[1] : w, key: s[0], color: COLORS[i % COLORS.length], dash: s[2],
                       t: llm.t, v: llm.workloads[w][s[0]] });
        });
      });
      g.appendChild(chart(c[0], c[1], lines));
    });
    panel.appendChild(sloTable());
  }

  /* The run's figures above the charts: Locust's current ones while it runs; once it has ended, the
     report's of the whole run, marked final (Locust's current rates would stay as they last were). */
  function runFigures() {
    var p = el("p", { id: "tokenstorm-run-figures", "data-final": data.ended ? "true" : "false" });
    if (!data.ended) {
      p.textContent = (data.running ? "Running: " : "") + data.users + " users, " + fmt(data.requests_per_s) +
        " requests/s (Locust's current), elapsed " + span(data.elapsed_s);
      return p;
    }
    var f = data.final;
    p.textContent = "Ended after " + span(data.elapsed_s) + " — " + (f ? "final, of the whole run (the report's): " +
      f.requests + " requests completed, " + fmt(f.requests_per_s) + " requests/s, " + fmt(f.output_tokens_per_s) +
      " output tok/s" : "the run's figures come with its report (being built)");
    return p;
  }

  var STATUS_COLORS = { pass: "#15803d", fail: "#c62828", warn: "#e65100", inconclusive: "#9a6700" };
  var STATUS_WORDS = { wait: "TOO FEW YET" };

  function sloTable() {
    var box = el("div", { id: "tokenstorm-slo" });
    var scope = data.slo_final ? "final, judged by the report on the whole run (" + data.slo_requests + " requests completed)"
      : data.slo_requests + " requests that ended in the last " + data.slo_window_s + " s (the newest " +
        data.slo_max_requests + " at most)";
    box.setAttribute("data-final", data.slo_final ? "true" : "false");
    var source = data.slo_source === "<default>" ? "the default SLO (no --slo file)" : data.slo_source;
    box.appendChild(el("h3", {}, "SLO status — " + scope + " — " + source)).style.margin = "8px 0 4px";
    if (data.ended && !data.slo_final) {  // the last 30 s hold nothing any more: the report judges the whole run
      box.appendChild(el("p", {}, "The run has ended: its SLOs are judged on the whole run as the report is built…"));
      return box;
    }
    var table = box.appendChild(el("table", {}));
    table.style.cssText = "border-collapse:collapse;font-size:14px";
    var head = table.appendChild(el("tr", {}));
    ["SLO", "Measured", "Status", ""].forEach(function (h) { head.appendChild(el("th", {}, h)).style.textAlign = "left"; });
    data.slo.forEach(function (r) {
      var tr = table.appendChild(el("tr", { "data-slo": r.label, "data-status": r.status }));
      var share = r.metric === "error_rate" || r.metric === "timing_fidelity";  // timing: the share of token events read late
      var measured = r.measured === null ? "—" : share ? (r.measured * 100).toFixed(2) + "%" + (r.metric === "timing_fidelity" ? " late" : "") : fmt(r.measured);
      [r.label, measured].forEach(function (v) { tr.appendChild(el("td", {}, v)).style.padding = "2px 12px 2px 0"; });
      var badge = tr.appendChild(el("td", {})).appendChild(el("span", {}, STATUS_WORDS[r.status] || r.status.toUpperCase()));
      badge.style.cssText = "padding:1px 8px;border-radius:4px;color:#fff;font-weight:600;white-space:nowrap;background:" +
        (STATUS_COLORS[r.status] || "#757575");
      tr.appendChild(el("td", {}, r.note || "")).style.opacity = "0.7";
    });
    if (!data.slo.length) box.appendChild(el("p", {}, data.ended ? "The run has ended: its report is being built." :
                                                        "Judged once the run has started."));
    return box;
  }

  var VERDICT_COLORS = { passed: "#15803d", failed: "#c62828", run_failed: "#c62828", unreliable: "#e65100",
                         incomplete: "#e65100", inconclusive: "#9a6700" };

  /* Above the LLM table once the run has ended: the verdict, its reason, the timing fidelity line
     and the report, as the console's last lines say them. */
  function drawFinal(panel) {
    var f = data.final;
    panel.hidden = !data.ended;
    if (!data.ended) return;
    panel.style.cssText = "margin:8px 0 12px;padding:12px 16px;border-radius:6px;border:2px solid " +
      (f ? VERDICT_COLORS[f.verdict] || "#757575" : "#757575");
    if (!f) { panel.appendChild(el("p", {}, "The run has ended: building its report…")); return; }
    var head = panel.appendChild(el("div", {}));
    head.style.cssText = "display:flex;flex-wrap:wrap;align-items:center;gap:8px 16px";
    var badge = head.appendChild(el("span", { id: "tokenstorm-verdict", "data-verdict": f.verdict },
                                    f.verdict.toUpperCase().replace("_", " ")));
    badge.style.cssText = "padding:4px 14px;border-radius:4px;color:#fff;font-weight:700;font-size:20px;" +
      "letter-spacing:0.04em;background:" + (VERDICT_COLORS[f.verdict] || "#757575");
    // Under --timing-verdict warn, and when the timing made the verdict (unreliable), the reason repeats
    // the fidelity line, said in full just below: the reason keeps its own words.
    var reason = f.fidelity ? f.reason.split(" — timing not trustworthy (--timing-verdict warn)")[0] : f.reason;
    var untrusted = f.fidelity ? f.fidelity.replace(/^timing NOT trustworthy: /, "") : "";
    if (untrusted && untrusted !== f.fidelity) reason = reason.replace(" — " + untrusted, "");
    head.appendChild(el("span", { id: "tokenstorm-verdict-reason" }, reason)).style.fontSize = "16px";
    if (f.fidelity) {
      var fid = panel.appendChild(el("p", { id: "tokenstorm-fidelity", "data-trustworthy": String(f.trustworthy) },
                                      "Timing fidelity: " + f.fidelity));
      fid.style.margin = "8px 0 0";
      if (f.trustworthy === false) fid.style.color = "#c62828";
    }
    var line = panel.appendChild(el("p", {}));
    line.style.margin = "8px 0 0";
    // Relative to this script's own folder: right on Locust's page and on the page of its own alike.
    var href = f.report_url.indexOf("./tokenstorm/") === 0 ? base + f.report_url.slice("./tokenstorm/".length) : f.report_url;
    var a = line.appendChild(el("a", { id: "tokenstorm-report-link", href: href, target: "_blank", rel: "noopener" },
                                "Open the tokenstorm report (HTML)"));
    a.style.cssText = "font-weight:700;font-size:16px";
    line.appendChild(el("span", {}, " — " + f.report_path + (f.simulated ? " — SIMULATED" : "") +
      " (Locust's own \"Download Report\" is a different page)")).style.opacity = "0.75";
  }

  function drawServer(panel) {
    var names = Object.keys(data.server);
    if (!names.length) {  // in Locust's tab the table above says why; alone, the panel says it
      var alone = panel.parentNode && panel.parentNode.hasAttribute("data-tokenstorm-place");
      panel.hidden = !alone;
      if (alone) panel.appendChild(el("p", { "data-empty": "" }, data.server_empty));
      return;
    }
    panel.hidden = false;
    panel.appendChild(el("p", {}, "vLLM's own /metrics, one sample every monitor interval" +
      (names.length > 1 || names[0] ? " per target" : "") + ". Hit rate: hits over queries of the " + data.llm.window_s + " s before each sample; " +
      "preemptions: since the run's first sample."));
    var g = panel.appendChild(grid());
    [["sched", "Requests running / waiting", [["running", "running", false], ["waiting", "waiting", true]], 0],
     ["kv", "KV cache usage (%)", [["kv_cache_pct", "KV cache", false]], 100],
     ["prefix", "Prefix-cache hit rate (%)", [["prefix_hit_pct", "hit rate", false]], 100],
     ["preemptions", "Preemptions (since the run started)", [["preemptions", "preemptions", false]], 0]
    ].forEach(function (c) {
      var lines = [];
      names.forEach(function (n, i) {
        c[2].forEach(function (s) {
          lines.push({ label: n ? n + " " + s[1] : s[1], key: s[0], color: COLORS[i % COLORS.length], dash: s[2],
                       t: data.server[n].t, v: data.server[n][s[0]] });
        });
      });
      g.appendChild(chart(c[0], c[1], lines, c[3]));
    });
  }

  function drawGpu(panel) {
    var names = Object.keys(data.gpu);
    if (!names.length) {  // in Locust's tab the table above says why, in one line; alone, the panel says it
      var alone = panel.parentNode && panel.parentNode.hasAttribute("data-tokenstorm-place");
      panel.hidden = !alone;
      if (alone) panel.appendChild(el("p", { "data-empty": "" }, data.gpu_empty));
      return;
    }
    panel.hidden = false;
    var g = panel.appendChild(grid());
    [["util", "GPU utilisation (%)", "util_gpu_pct", 100], ["memory", "GPU memory used (MiB)", "mem_used_mib", 0],
     ["power", "GPU power (W)", "power_w", 0]].forEach(function (c) {
      var lines = names.map(function (n, i) {
        return { label: n, key: c[2], color: COLORS[i % COLORS.length], dash: false, t: data.gpu[n].t, v: data.gpu[n][c[2]] };
      });
      g.appendChild(chart(c[0], c[1], lines, c[3]));
    });
  }

  function draw(kind, panel) {
    if (!data || drawn[kind] === data) return;
    drawn[kind] = data;
    while (panel.firstChild) panel.removeChild(panel.firstChild);
    ({ llm: drawLlm, gpu: drawGpu, server: drawServer, final: drawFinal })[kind](panel);
  }

  function placeBadge() {
    var badge = document.getElementById("tokenstorm-simulated");
    if (!data || !data.simulated) { if (badge) badge.remove(); return; }
    if (badge && badge.isConnected) { fitBadge(badge); return; }
    badge = el("span", { id: "tokenstorm-simulated", title: "The target is tokenstorm's emulator, not a real server",
                         "aria-label": data.simulated_label });
    // Two short lines, not one long one: Locust's header of a running run fills 1,400 px by itself.
    var cut = data.simulated_label.indexOf(" ");
    var first = badge.appendChild(el("span", {}, cut > 0 ? data.simulated_label.slice(0, cut) : data.simulated_label));
    first.style.cssText = "display:block;font-size:14px;letter-spacing:0.04em";
    if (cut > 0) {
      var rest = badge.appendChild(el("span", {}, data.simulated_label.slice(cut + 1)));
      rest.style.cssText = "display:block;font-size:11px;font-weight:600";
    }
    badge.style.cssText = "margin:0 12px;padding:2px 10px;border-radius:4px;background:#b71c1c;color:#fff;" +
      "font-weight:700;font-family:system-ui,sans-serif;line-height:1.2;text-align:center;white-space:nowrap";
    var header = document.querySelector("header");
    var logo = header && header.querySelector("a");
    if (logo) { logo.insertAdjacentElement("afterend", badge); fitBadge(badge); return; }
    badge.style.cssText += ";position:fixed;top:4px;left:50%;transform:translateX(-50%);z-index:2000";
    document.body.appendChild(badge);
  }

  /* Should the page still be wider than its window (a narrow one, many header figures), the badge
     says SIMULATED alone; its title says the rest. */
  function fitBadge(badge) {
    var root = document.documentElement;
    if (root.scrollWidth > root.clientWidth) {
      badge.textContent = "SIMULATED";
      badge.title = data.simulated_label + ": the target is tokenstorm's emulator, not a real server";
    }
  }

  /* Where a panel goes: its place on the stand-alone page, else under the active tab's table. */
  function anchor(kind) {
    var place = document.querySelector('[data-tokenstorm-place="' + kind + '"]');
    if (place) return { inside: place };
    if (TABS[new URLSearchParams(location.search).get("tab")] !== kind) return null;
    var table = document.querySelector("main table");
    var box = table && (table.closest(".MuiTableContainer-root") || table);
    return box ? { after: box } : { inside: document.body };
  }

  function put(id, kind, at) {
    var panel = document.getElementById(id);
    if (!at) { if (panel) panel.remove(); return; }
    if (!panel) { panel = el("section", { id: id }); drawn[kind] = null; }
    if (at.after && panel.previousElementSibling !== at.after) at.after.insertAdjacentElement("afterend", panel);
    if (at.before && panel.nextElementSibling !== at.before) at.before.insertAdjacentElement("beforebegin", panel);
    if (at.inside && panel.parentNode !== at.inside) at.inside.appendChild(panel);
    if (at.first && panel.parentNode !== at.first) at.first.insertBefore(panel, at.first.firstChild);
    draw(kind, panel);
  }

  function place() {
    placeBadge();
    KINDS.forEach(function (kind) { put("tokenstorm-" + kind + "-charts", kind, anchor(kind)); });
    // The verdict goes first in the LLM tab: above its table, or first on the page of its own.
    var llm = anchor("llm");
    put("tokenstorm-final", "final", !llm ? null : llm.after ? { before: llm.after } : { first: llm.inside });
  }

  function poll() {
    fetch(base + "live.json", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) { if (d) { data = d; place(); } })
      .catch(function () {})  // the master went away, or is busy: try again at the next poll
      .then(function () { setTimeout(poll, POLL_MS); });
  }

  poll();
  setInterval(place, PLACE_MS);
})();
