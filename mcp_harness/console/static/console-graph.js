// mcp-harness console: the dependency graph. The server sends the tasks and edges as JSON (in the
// frame's data-graph attribute); dagre (vendored) lays them out in layers with edges routed around the boxes,
// and this draws the SVG. A task sits in the layer right after its last dependency. The picture fits the
// width, but never below a readable scale (READABLE): then the frame scrolls (drag or swipe); the buttons
// zoom. No inline script or style anywhere.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var W = 230, H = 56, READABLE = 0.75;
  var LABELS = {pending: "Pending", claimed: "Claimed", blocked: "Blocked", failed: "Failed", done: "Done",
                in_review: "In review", cancelled: "Cancelled"};
  var zoom = null;  // null: the default (fit when readable); else the scale a person chose

  function el(name, attrs, text) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function short(text, n) { return text.length <= n ? text : text.slice(0, n - 1) + "…"; }

  // An edge leaves its task's right side and enters the waiting task's left side, through the bend
  // points dagre placed between the layers (its slots in a layer it crosses are kept free of boxes).
  // Each piece is a curve with level ends, so it stays in the gap between two layers.
  function path(from, to, points) {
    var stops = [{x: from.x + W / 2, y: from.y}].concat(points.slice(1, -1), [{x: to.x - W / 2, y: to.y}]);
    var d = "M" + stops[0].x + "," + stops[0].y;
    for (var i = 1; i < stops.length; i++) {
      var a = stops[i - 1], b = stops[i], half = (b.x - a.x) / 2;
      d += " C" + (a.x + half) + "," + a.y + " " + (b.x - half) + "," + b.y + " " + b.x + "," + b.y;
    }
    return d;
  }

  // dagre's ranker option takes a function: each task's layer is the one right after its last dependency
  // (dagre's own rankers balance edge lengths and may push a task several layers right of its only
  // dependency). `minlen` is dagre's spacing of an edge (doubled inside dagre to leave room for labels).
  function earliest(g) {
    var rank = {};
    function visit(v) {
      if (rank[v] !== undefined) return rank[v];
      rank[v] = 0;  // a guard: the graph has no cycles (the server refuses them), but never loop
      var r = 0;
      (g.inEdges(v) || []).forEach(function (e) { r = Math.max(r, visit(e.v) + (g.edge(e).minlen || 1)); });
      rank[v] = r;
      g.node(v).rank = r;
      return r;
    }
    g.nodes().forEach(visit);
  }

  function layout(data) {
    var g = new dagre.graphlib.Graph({multigraph: false});
    g.setGraph({rankdir: "LR", nodesep: 22, ranksep: 60, edgesep: 12, marginx: 16, marginy: 24, ranker: earliest});
    g.setDefaultEdgeLabel(function () { return {}; });
    data.nodes.forEach(function (n) { g.setNode(n.key, {width: W, height: H}); });
    data.edges.forEach(function (e) { g.setEdge(e[1], e[0]); });  // from the dependency to the task that waits
    dagre.layout(g);
    return g;
  }

  function draw() {
    var frame = document.getElementById("graph-frame");
    if (!frame || !frame.hasAttribute("data-graph") || typeof dagre === "undefined") return;
    var data = JSON.parse(frame.getAttribute("data-graph"));
    var base = frame.getAttribute("data-task-url");
    var g = layout(data);
    var size = g.graph();
    var svg = el("svg", {"class": "graph", viewBox: "0 0 " + size.width + " " + size.height, role: "img",
                         "aria-label": frame.getAttribute("aria-label") || "Dependency graph"});
    var defs = el("defs");
    var marker = el("marker", {id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7",
                               markerHeight: "7", orient: "auto-start-reverse"});
    marker.appendChild(el("path", {d: "M0,0 L10,5 L0,10 z", "class": "arrowhead"}));
    defs.appendChild(marker);
    svg.appendChild(defs);
    var status = {};
    data.nodes.forEach(function (n) { status[n.key] = n.status; });
    g.edges().forEach(function (e) {
      svg.appendChild(el("path", {"class": "edge from-" + status[e.v], d: path(g.node(e.v), g.node(e.w), g.edge(e).points),
                                  "marker-end": "url(#arrow)", "data-from": e.v, "data-to": e.w}));
    });
    data.nodes.forEach(function (n) {
      var box = g.node(n.key), x = box.x - W / 2, y = box.y - H / 2;
      var cls = "node s-" + n.status + (n.kind === "gate" ? " kind-gate" : "") + (n.review ? " needs-review" : "");
      var a = el("a", {href: base + encodeURIComponent(n.key), "class": cls, "data-key": n.key});
      var tip = n.key + ": " + n.title + " (" + LABELS[n.status] + (n.owner && n.status === "claimed" ? ", held by " + n.owner : "") +
        (n.kind === "gate" ? "; gate: a person decides" : n.review ? "; a person reviews it" : "") + ")";
      a.appendChild(el("title", {}, tip));
      a.appendChild(el("rect", {x: x, y: y, width: W, height: H, rx: 8}));
      if (n.kind === "gate") a.appendChild(el("text", {x: x + 8, y: y - 4, "class": "node-badge gate"}, "◆ gate: a person decides"));
      else if (n.review) a.appendChild(el("text", {x: x + 8, y: y - 4, "class": "node-badge review"}, "● review"));
      a.appendChild(el("rect", {x: x, y: y, width: 6, height: H, rx: 3, "class": "band"}));
      a.appendChild(el("text", {x: x + 16, y: y + 22, "class": "node-key"}, short(n.key, 22)));
      a.appendChild(el("text", {x: x + 16, y: y + 42, "class": "node-title"}, short(n.title || "", 30)));
      a.appendChild(el("text", {x: x + W - 8, y: y + 22, "class": "node-status", "text-anchor": "end"}, LABELS[n.status]));
      svg.appendChild(a);
    });
    frame.replaceChildren(svg);
    frame.dataset.width = size.width;
    frame.dataset.height = size.height;
    scale();
  }

  function scale() {
    var frame = document.getElementById("graph-frame");
    var svg = frame && frame.querySelector("svg");
    if (!svg) return;
    var w = +frame.dataset.width, h = +frame.dataset.height;
    var fit = Math.min(1, (frame.clientWidth - 2) / w);
    var k = zoom === null ? Math.max(fit, Math.min(1, READABLE)) : zoom;  // fitted, unless too small to read
    svg.setAttribute("width", Math.round(w * k));
    svg.setAttribute("height", Math.round(h * k));
    var label = document.getElementById("graph-zoom-level");
    if (label) label.textContent = Math.round(k * 100) + "%";
  }

  function zoomBy(action) {
    var frame = document.getElementById("graph-frame");
    var svg = frame && frame.querySelector("svg");
    if (!svg) return;
    var current = +svg.getAttribute("width") / +frame.dataset.width;
    if (action === "in") zoom = Math.min(2, current * 1.25);
    else if (action === "out") zoom = Math.max(0.2, current / 1.25);
    else if (action === "fit") zoom = Math.min(1, (frame.clientWidth - 2) / +frame.dataset.width);
    else zoom = 1;
    scale();
  }

  // Drag to pan (a mouse; touch screens scroll the frame natively). A drag does not open a task.
  var drag = null;
  document.addEventListener("pointerdown", function (evt) {
    var frame = evt.target.closest && evt.target.closest("#graph-frame");
    if (!frame || evt.pointerType !== "mouse" || evt.button !== 0) return;
    drag = {frame: frame, x: evt.clientX, y: evt.clientY, left: frame.scrollLeft, top: frame.scrollTop, moved: false};
  });
  document.addEventListener("pointermove", function (evt) {
    if (!drag) return;
    var dx = evt.clientX - drag.x, dy = evt.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 4) drag.moved = true;
    if (drag.moved) {
      drag.frame.scrollLeft = drag.left - dx;
      drag.frame.scrollTop = drag.top - dy;
      drag.frame.classList.add("dragging");
    }
  });
  document.addEventListener("pointerup", function () {
    if (drag) drag.frame.classList.remove("dragging");
    setTimeout(function () { drag = null; }, 0);
  });
  document.addEventListener("click", function (evt) {
    if (drag && drag.moved && evt.target.closest && evt.target.closest("#graph-frame")) evt.preventDefault();
    var button = evt.target.closest && evt.target.closest("button[data-zoom]");
    if (button) zoomBy(button.getAttribute("data-zoom"));
  }, true);

  document.addEventListener("DOMContentLoaded", function () {
    draw();
    document.body.addEventListener("htmx:afterSwap", draw);  // a live refresh brings new data
    window.addEventListener("resize", scale);
  });
})();
