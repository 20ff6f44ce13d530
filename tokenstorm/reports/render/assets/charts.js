/* The report's interactive charts, drawn with uPlot from the page's JSON (id "chart-data"; written by
 * tokenstorm/reports/render/charts.py). Each chart is a <figure data-chart="ID"> of the page. Hover: the legend under a
 * chart shows every line's value at the cursor (the over-time charts follow one cursor together). Drag
 * across a chart: zoom in; Ctrl (or Cmd) + wheel: zoom in and out around the cursor (a plain wheel scrolls
 * the page); double-click or "reset zoom": the whole range again. The over-time charts zoom together.
 * Click a legend entry: hide or show its line. The drawn charts are window.tokenstormCharts[ID]. */
(function () {
  "use strict";
  var source = document.getElementById("chart-data");
  if (!source || typeof uPlot === "undefined") return;
  var specs = JSON.parse(source.textContent).charts;
  specs.forEach(function (spec) {  // each distinct x array is in the page once: spec.xs[series.xi]
    spec.series.forEach(function (s) { s.x = spec.xs[s.xi]; });
  });
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
  var charts = {};
  var groups = {};  // kind -> [{u, full}] that zoom together
  var syncing = false;
  window.tokenstormCharts = charts;

  /** An axis tick: thousands separated, at most one decimal from 100 up, else 3 significant digits. */
  function fmt(v) {
    if (v == null || !isFinite(v)) return "—";
    if (Math.abs(v) >= 100) return v.toLocaleString("en-US", {maximumFractionDigits: 1});
    return String(Number(v.toPrecision(3)));
  }

  function grouped(v, digits) {
    return v.toLocaleString("en-US", {minimumFractionDigits: digits, maximumFractionDigits: digits});
  }

  /** A legend's value as the page writes its unit (tokenstorm/reports/judging/formats.py, kept in step by hand). */
  var FORMATS = {
    ms: function (v) {  // 13,480 · 256 · 19.3 · 9.95 (judged on the figure as rounded, as formats.ms)
      if (Math.abs(Math.round(v * 10) / 10) >= 100) return grouped(v, 0);
      return Math.abs(Math.round(v * 100) / 100) >= 10 ? v.toFixed(1) : v.toFixed(2);
    },
    tok_s: function (v) { return Math.abs(v) >= 100 ? grouped(v, 0) : v.toFixed(1); },
    per_s: function (v) { return Math.abs(v) >= 100 ? grouped(v, 1) : v.toFixed(2); },
    percent: function (v) { return v.toFixed(2) + "%"; },
    count: function (v) { return grouped(v, 0); },
    number: function (v) {
      if (Math.abs(v) >= 100) return grouped(v, 1);
      if (v !== 0 && Math.abs(v) < 0.001) return v.toFixed(6).replace(/0+$/, "");
      return String(Number(v.toPrecision(3)));
    },
  };

  /** The index nearest to i where ys has a value: the over-time lines are sampled at different times
   * (a GPU every second, requests per bin), joined on one x axis with holes between samples. A bin
   * with no requests (null) stays empty: it has no value to show. */
  function nearest(ys, i) {
    if (i == null || ys[i] !== undefined) return i;
    for (var d = 1; d < ys.length; d++) {
      if (i - d >= 0 && ys[i - d] !== undefined) return i - d;
      if (i + d < ys.length && ys[i + d] !== undefined) return i + d;
    }
    return i;
  }

  /* The percentile axis in "nines": p50, p90, p99, p99.9 evenly apart, so the tail, where SLOs are set,
   * gets room beside the body: p0–p90, p90–p99 and p99–max a third of the width each (NINES_EPS puts the
   * maximum, p100, a finite step past p99.9). */
  var NINES_EPS = 1e-3;
  function nines(p) { return -Math.log10(1 + NINES_EPS - p / 100); }
  function fromNines(v) { return 100 * (1 + NINES_EPS - Math.pow(10, -v)); }
  var NINES_TICKS = [0, 50, 90, 99, 99.9, 100];
  function all(u, splits) { return splits; }  // every tick we chose (uPlot thins a log-like axis's own)

  function setX(u, min, max) {
    u.setScale("x", {min: min, max: max});
  }

  function follow(u, kind) {
    if (syncing) return;
    syncing = true;
    (groups[kind] || []).forEach(function (o) {
      if (o.u !== u) setX(o.u, u.scales.x.min, u.scales.x.max);
    });
    syncing = false;
  }

  function shade(u, spec) {
    var ctx = u.ctx, top = u.bbox.top, height = u.bbox.height;
    ctx.save();
    spec.bands.forEach(function (b) {
      var x0 = u.valToPos(Math.max(b.start, u.scales.x.min), "x", true);
      var x1 = u.valToPos(Math.min(b.end, u.scales.x.max), "x", true);
      if (x1 > x0) {
        ctx.fillStyle = "rgba(140, 140, 140, 0.18)";
        ctx.fillRect(x0, top, x1 - x0, height);
      }
    });
    ctx.restore();
  }

  function mark(u, spec) {
    var ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = "rgba(200, 0, 0, 0.6)";
    ctx.lineWidth = 1 * uPlot.pxRatio;
    spec.marks.forEach(function (m) {
      if (m.at < u.scales.x.min || m.at > u.scales.x.max) return;
      var x = Math.round(u.valToPos(m.at, "x", true)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    });
    ctx.restore();
  }

  /** The x range of every chart of a kind together (time: from 0): the over-time charts share one axis. */
  function fullRanges(all) {
    var out = {};
    all.forEach(function (spec) {
      var r = out[spec.kind] = out[spec.kind] || [spec.kind === "time" ? 0 : Infinity, -Infinity];
      spec.series.forEach(function (s) {
        s.x.forEach(function (x) { r[0] = Math.min(r[0], x); r[1] = Math.max(r[1], x); });
      });
      spec.bands.forEach(function (b) { r[1] = Math.max(r[1], b.end); });
    });
    Object.keys(out).forEach(function (k) {
      if (!(out[k][1] > out[k][0])) out[k] = [out[k][0] - 1, out[k][0] + 1];
    });
    return out;
  }

  function draw(spec, figure) {
    var box = figure.querySelector(".plot");
    var time = spec.kind === "time";
    var data = uPlot.join(spec.series.map(function (s) { return [s.x, s.y]; }));
    var series = [{
      label: time ? "time (s)" : "percentile",
      value: function (u, v) {
        if (v == null) return "—";
        return time ? fmt(v) + " s" : v === 100 ? "max" : "p" + Number(v.toFixed(2));
      },
    }];
    var unit = FORMATS[spec.unit] || FORMATS.number;
    spec.series.forEach(function (s, i) {
      series.push({
        label: s.label,
        stroke: PALETTE[i % PALETTE.length],
        width: 1.5,
        dash: s.dash ? [6, 4] : undefined,
        paths: s.step ? uPlot.paths.stepped({align: 1}) : undefined,
        points: {size: 4},
        value: function (u, v) { return v == null || !isFinite(v) ? "—" : unit(v); },
      });
    });
    var height = time ? 230 : 280;
    var opts = {
      width: Math.max(200, box.clientWidth),
      height: height,
      series: series,
      scales: {
        x: time ? {time: false} : {time: false, distr: 100, fwd: nines, bwd: fromNines},
        y: {range: function (u, lo, hi) {
          if (spec.y_max != null) return [0, spec.y_max];
          return [0, hi > 0 ? uPlot.rangeNum(0, hi, 0.1, true)[1] : 1];
        }},
      },
      axes: [
        time ? {label: spec.x_label, labelSize: 20, size: 36} : {
          label: spec.x_label, labelSize: 20, size: 36,
          filter: all, ticks: {filter: all}, grid: {filter: all},
          splits: function (u) {
            return NINES_TICKS.filter(function (p) { return p >= u.scales.x.min && p <= u.scales.x.max; });
          },
          values: function (u, vals) { return vals.map(function (p) { return p === 100 ? "max" : "p" + p; }); },
        },
        {label: spec.y_label, labelSize: 20, size: 60, values: function (u, vals) { return vals.map(fmt); }},
      ],
      cursor: {
        sync: {key: spec.kind, setSeries: false},
        dataIdx: function (u, si, i) { return nearest(u.data[si], i); },
        drag: {x: true, y: false},
        y: false,  // no horizontal hairline: its height means nothing on the charts that follow the cursor
        bind: {dblclick: function () { return null; }},
      },
      legend: {live: true},
      hooks: {
        drawClear: [function (u) { shade(u, spec); }],
        draw: [function (u) { mark(u, spec); }],
        setScale: [function (u, key) { if (key === "x" && u.tokenstormReady) follow(u, spec.kind); }],
      },
    };
    var u = new uPlot(opts, data, box);
    var full = fulls[spec.kind];
    setX(u, full[0], full[1]);
    function reset() { setX(u, full[0], full[1]); }
    u.over.addEventListener("dblclick", reset);
    u.over.addEventListener("wheel", function (e) {
      if (!(e.ctrlKey || e.metaKey)) return;  // a plain wheel scrolls the page
      e.preventDefault();
      // in the axis's own terms (seconds, or nines), so the point under the cursor stays put
      var f = time ? function (v) { return v; } : nines, b = time ? f : fromNines;
      var min = f(u.scales.x.min), max = f(u.scales.x.max), lo0 = f(full[0]), hi0 = f(full[1]);
      var rect = u.over.getBoundingClientRect(), k = e.deltaY < 0 ? 0.75 : 1 / 0.75;
      var at = f(u.posToVal(e.clientX - rect.left, "x"));
      var span = Math.min((max - min) * k, hi0 - lo0);
      var lo = Math.max(lo0, at - (at - min) * span / (max - min));
      var hi = Math.min(hi0, lo + span);
      setX(u, b(Math.max(lo0, hi - span)), b(hi));
    }, {passive: false});
    var button = document.createElement("button");
    button.type = "button";
    button.className = "reset-zoom";
    button.textContent = "reset zoom";
    button.addEventListener("click", reset);
    figure.querySelector("figcaption").appendChild(button);
    charts[spec.id] = u;
    (groups[spec.kind] = groups[spec.kind] || []).push({u: u, box: box, height: height});
    u.tokenstormReady = true;
  }

  var fulls = fullRanges(specs);
  specs.forEach(function (spec) {
    var figure = document.querySelector('figure[data-chart="' + spec.id + '"]');
    if (figure) draw(spec, figure);
  });
  window.addEventListener("resize", function () {
    Object.keys(groups).forEach(function (kind) {
      groups[kind].forEach(function (g) { g.u.setSize({width: Math.max(200, g.box.clientWidth), height: g.height}); });
    });
  });
  document.body.dataset.charts = String(Object.keys(charts).length);
})();
