(function () {
  "use strict";
  var svg = document.getElementById("timeline");
  var L = +svg.dataset.left, W = +svg.dataset.width, END = +svg.dataset.end;
  var v0 = +svg.dataset.v0, v1 = +svg.dataset.v1;
  var items = Array.prototype.slice.call(svg.querySelectorAll(".t"));
  var axis = document.getElementById("axis");
  var H = svg.viewBox.baseVal.height;
  var NS = "http://www.w3.org/2000/svg";
  function X(t) { return L + (t - v0) / (v1 - v0) * W; }
  // Point labels (no end time) per row, in time order: shown only where they do not overlap.
  var rows = {};
  items.forEach(function (el) {
    if (el.tagName === "text" && el.dataset.b === undefined) {
      var row = el.getAttribute("y");
      (rows[row] = rows[row] || []).push(el);
    }
  });
  Object.keys(rows).forEach(function (row) {
    rows[row].sort(function (p, q) { return p.dataset.a - q.dataset.a; });
  });
  function declutter() {
    Object.keys(rows).forEach(function (row) {
      var free = -Infinity;
      rows[row].forEach(function (el) {
        var x = X(+el.dataset.a) + 2;
        var fits = x >= free;
        el.style.display = fits ? "" : "none";
        if (fits) free = x + el.textContent.length * 6.5 + 4;
      });
    });
  }
  function fmt(t) { return (t / 1000).toFixed(3) + "s"; }
  function ticks() {
    while (axis.firstChild) axis.removeChild(axis.firstChild);
    var span = v1 - v0, raw = span / 10, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var r = raw / p, step = r <= 1 ? p : r <= 2 ? 2 * p : r <= 5 ? 5 * p : 10 * p;
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var x = X(t), line = document.createElementNS(NS, "line");
      line.setAttribute("class", "axis-line");
      line.setAttribute("x1", x); line.setAttribute("x2", x);
      line.setAttribute("y1", 18); line.setAttribute("y2", H);
      axis.appendChild(line);
      var text = document.createElementNS(NS, "text");
      text.setAttribute("class", "axis-text");
      text.setAttribute("x", x + 2); text.setAttribute("y", 14);
      text.textContent = fmt(t);
      axis.appendChild(text);
    }
  }
  function layout() {
    for (var i = 0; i < items.length; i++) {
      var el = items[i], d = el.dataset, xa = X(+d.a);
      switch (el.tagName) {
        case "rect":
          if (d.b !== undefined) {
            el.setAttribute("x", xa);
            el.setAttribute("width", Math.max(1, X(+d.b) - xa));
          } else {
            el.setAttribute("x", xa - (+d.w) / 2);
          }
          break;
        case "text":
          el.setAttribute("x", xa + 2);
          if (d.b !== undefined) {
            el.style.display = X(+d.b) - xa > el.textContent.length * 6.5 + 4 ? "" : "none";
          }
          break;
        case "circle":
          el.setAttribute("cx", xa);
          break;
      }
    }
    declutter();
    ticks();
    document.getElementById("range").textContent = fmt(v0) + " – " + fmt(v1);
  }
  var pending = false;
  function setView(a, b) {
    var pad = Math.max(1, END * 0.05);
    var span = Math.max(1, Math.min(b - a, END + 2 * pad));
    a = Math.max(-pad, Math.min(a, END + pad - span));
    v0 = a; v1 = a + span;
    if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; layout(); }); }
  }
  function zoom(factor, at) {
    if (at === undefined) at = (v0 + v1) / 2;
    setView(at - (at - v0) * factor, at + (v1 - at) * factor);
  }
  function timeAt(clientX) {
    var r = svg.getBoundingClientRect();
    var vx = (clientX - r.left) * svg.viewBox.baseVal.width / r.width;
    return v0 + (vx - L) / W * (v1 - v0);
  }
  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, timeAt(e.clientX));
  }, { passive: false });
  var drag = null;
  svg.addEventListener("mousedown", function (e) { drag = { x: e.clientX, v0: v0, v1: v1 }; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    var dt = (e.clientX - drag.x) * svg.viewBox.baseVal.width / r.width / W * (drag.v1 - drag.v0);
    setView(drag.v0 - dt, drag.v1 - dt);
  });
  document.getElementById("zoom-in").addEventListener("click", function () { zoom(0.5); });
  document.getElementById("zoom-out").addEventListener("click", function () { zoom(2); });
  document.getElementById("reset").addEventListener("click", function () { setView(0, Math.max(END, 1)); });
  var buttons = document.querySelectorAll("button.goto");
  Array.prototype.forEach.call(buttons, function (button) {
    button.addEventListener("click", function () {
      var a = +button.dataset.a, b = +button.dataset.b, k = button.dataset.k;
      var pad = Math.max(500, (b - a) * 0.15);
      setView(a - pad, b + pad);
      Array.prototype.forEach.call(svg.querySelectorAll(".ev"), function (ev) {
        var mine = (" " + ev.dataset.anomalies + " ").indexOf(" " + k + " ") >= 0;
        ev.classList.toggle("focus", mine);
      });
      Array.prototype.forEach.call(document.querySelectorAll("#anomalies li"), function (li) {
        li.classList.toggle("active", li.id === "anomaly-" + k);
      });
      svg.scrollIntoView({ block: "nearest" });
    });
  });
  layout();
})();
