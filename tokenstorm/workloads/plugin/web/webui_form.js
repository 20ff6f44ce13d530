/* tokenstorm's start form in Locust's web UI (served by tokenstorm/workloads/plugin/web/webui_live.py).
 *
 * Locust renders custom arguments as one alphabetical list under "Custom parameters". This script
 * asks ./tokenstorm/form.json for the topics (target, workloads, load shape, SLO, monitors, output),
 * finds each field Locust rendered by its input's name, and orders them under one heading per
 * topic with the option's full help below it. It never moves or rewrites React's nodes: it sets CSS
 * `order` on them (the list is a flex column) and adds its own headings and help lines beside them,
 * looking again every PLACE_MS (React may re-render). If it finds nothing, the form is Locust's.
 */
(function () {
  "use strict";
  var PLACE_MS = 500;
  var me = document.currentScript;
  var base = me && me.src ? me.src.replace(/form\.js(\?.*)?$/, "") : "./tokenstorm/";
  var layout = null;

  function camel(dest) { return dest.replace(/_([a-z0-9])/g, function (_, c) { return c.toUpperCase(); }); }

  function field(dest) {
    var byName = document.querySelectorAll('form [name="' + camel(dest) + '"], form [name="' + dest + '"]');
    return byName.length ? byName[0] : null;
  }

  /* The element that holds every one of `nodes` (their lowest common ancestor). */
  function commonParent(nodes) {
    var up = nodes[0].parentElement;
    while (up && !nodes.every(function (n) { return up.contains(n); })) up = up.parentElement;
    return up;
  }

  function childOf(container, node) {
    while (node && node.parentElement !== container) node = node.parentElement;
    return node;
  }

  function mark(container, attr, key, make) {
    var found = null;
    for (var c = container.firstElementChild; c; c = c.nextElementSibling) {
      if (c.getAttribute(attr) === key) { found = c; break; }
    }
    if (!found) { found = make(); found.setAttribute(attr, key); container.appendChild(found); }
    return found;
  }

  function place() {
    if (!layout) return;
    var fields = [];
    layout.groups.forEach(function (g, gi) {
      g.fields.forEach(function (f, fi) {
        var input = field(f.dest);
        if (input) fields.push({ group: g.title, gi: gi, fi: fi, f: f, input: input });
      });
    });
    if (fields.length < 2) return;  // not rendered (yet), or not a page of this shape
    var container = commonParent(fields.map(function (x) { return x.input; }));
    if (!container || container.tagName === "FORM") return;  // fields of different lists: leave them
    container.setAttribute("data-tokenstorm-form", "");
    container.style.display = "flex";
    container.style.flexDirection = "column";
    container.style.rowGap = "6px";
    var seen = {};
    fields.forEach(function (x) {
      var item = childOf(container, x.input);
      if (!item) return;
      var order = x.gi * 1000 + 2 + 2 * x.fi;
      item.style.order = String(order);
      item.setAttribute("data-tokenstorm-field", x.f.dest);
      if (!seen[x.group]) {
        seen[x.group] = true;
        var head = mark(container, "data-tokenstorm-group", x.group, function () {
          var h = document.createElement("h4");
          h.textContent = x.group;
          h.style.cssText = "margin:18px 0 4px;font-size:15px;font-weight:700;border-bottom:1px solid " +
            "rgba(127,127,127,0.35);padding-bottom:2px";
          return h;
        });
        head.style.order = String(x.gi * 1000);
      }
      if (x.f.help) {
        var help = mark(container, "data-tokenstorm-help", x.f.dest, function () {
          var p = document.createElement("p");
          p.textContent = x.f.flag + ": " + x.f.help;  // textContent: nothing from the server is parsed as HTML
          p.style.cssText = "margin:-2px 0 10px 14px;font-size:12.5px;opacity:0.75;white-space:normal";
          return p;
        });
        help.style.order = String(order + 1);
      }
    });
  }

  function load() {
    fetch(base + "form.json", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) { if (d && d.groups) { layout = d; place(); } else { setTimeout(load, 3000); } })
      .catch(function () { setTimeout(load, 3000); });
  }

  load();
  setInterval(place, PLACE_MS);
})();
