/* perftune's views of runs, drawn with Plotly: the same script for the live dashboard and the report.
 *
 * window.PERFTUNE = {mode: "live" | "static", page: "runs" | "run" | "compare", run, runs, data}.
 * Live: data comes from the dashboard's read-only JSON API and is polled every second.
 * Static (the report): every view's data is inlined in the page; nothing is fetched.
 *
 * Every value of the data comes from a store that someone else may have written: whatever this script puts
 * into HTML goes through esc() (text and attribute values, numbers included) or num(), or is set as
 * textContent; URLs are built with encodeURIComponent. The pages' Content-Security-Policy runs no other
 * script, but the escaping does not rely on it.
 */
(function () {
  "use strict";
  const P = window.PERFTUNE;
  const PLOT_CONFIG = {displaylogo: false, responsive: true};
  const COLOURS = {failed: "#d62728", timeout: "#ff7f0e", cancelled: "#7f7f7f"};
  const $ = (id) => document.getElementById(id);
  const FLAG_PREFIX = {"-f flags on": "-f", "-f flags off": "-fno-", "--param values": "--param "};
  // A table's own entry (a key from the store such as "constructor" is not one).
  const own = (table, key) => Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;
  const shorten = (flag, prefix) => flag.startsWith(prefix) ? flag.slice(prefix.length) :
    flag.startsWith("--param=") ? flag.slice(8) : flag;

  // The one escape of this script: any value as HTML text or a quoted attribute's value.
  function esc(s) {
    return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
      (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  }
  function num(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v !== "number") return esc(v);
    return Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(4) : String(+v.toPrecision(6));
  }
  // A value with its metric's unit (a built-in metric's: "0.0279 s"), as the command line prints it.
  function withUnit(v, unit) {
    return num(v) + (unit && v !== null && v !== undefined ? " " + esc(unit) : "");
  }
  // A run's status; "running (no driver)" for one whose driver is gone (a stale lease), as `perftune runs` says.
  function statusText(r) {
    return esc(r.status) + (r.driver_gone ? " (no driver)" : "");
  }
  function when(t) {
    if (!t) return "-";
    const d = new Date(t * 1000);
    return isNaN(d.getTime()) ? esc(t) : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }
  function improvement(imp) {
    if (!imp) return "-";
    // No ratio when a value is 0 or below: 1 + the relative improvement, shown in percent.
    const x = (v) => typeof v !== "number" ? esc(v)
      : imp.ratio === false ? ((v - 1) * 100 >= 0 ? "+" : "") + ((v - 1) * 100).toFixed(1) + "%"
      : v.toFixed(3) + "x";
    if (imp.is_baseline || !imp.interval) return x(imp.estimate);
    return x(imp.estimate) + " (" + x(imp.low) + " to " + x(imp.high) + ")";
  }
  // A run's page: by name (the URL says which run), by id where a name would be a dot segment of the path.
  function runHref(r) {
    return "runs/" + (r.name === "." || r.name === ".." ? esc(r.id) : encodeURIComponent(r.name));
  }
  async function get(path) {
    const r = await fetch(path, {headers: {"Accept": "application/json"}, credentials: "same-origin"});
    if (!r.ok) {
      // The API's errors are {"error": "one line"}: that line is the message.
      let text = await r.text();
      try { const body = JSON.parse(text); if (body && typeof body.error === "string") text = body.error; } catch (e) { /* not JSON */ }
      throw new Error(path + ": " + r.status + " " + text);
    }
    return r.json();
  }
  // The dashboard inserts plotly.js (P.plotly_src) once the page has drawn its first data, so that compiling
  // its 4.8 MB never holds up the tables or the first, static plots; the report inlines it after this
  // script, so it is there once the document is parsed. Plots drawn before it wait for it (plotlyReady).
  let plotlyStarted = false, plotlySettle = null;
  const plotlyReady = new Promise((resolve, reject) => { plotlySettle = {resolve, reject}; });
  plotlyReady.catch(() => {});  // each plot that waits reports the failure in its place
  function loadPlotly() {
    if (plotlyStarted) return plotlyReady;
    plotlyStarted = true;
    const settle = () => window.Plotly ? plotlySettle.resolve(window.Plotly) : plotlySettle.reject(new Error("plotly.js defined no Plotly"));
    if (window.Plotly || P.mode === "static") {
      if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", settle); else settle();
      return plotlyReady;
    }
    const tag = document.createElement("script");
    tag.id = "plotly-js";
    tag.async = true;
    tag.src = P.plotly_src;
    tag.addEventListener("load", settle);
    tag.addEventListener("error", () => plotlySettle.reject(new Error("plotly.js could not be loaded from " + tag.src)));
    document.head.appendChild(tag);
    return plotlyReady;
  }
  // Plotly draws a subset of HTML in every text it is given (trace names, labels, hover text, tick text,
  // titles): <a href>, <span style>, <b>, <br>, and it decodes entities. plotText() makes any string plain
  // text there: "<" is drawn as "<", never read as a tag.
  function plotText(s) {
    return String(s).replace(/[&<>]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c]));
  }
  // A copy of a plot's traces or layout with every string (a store's names, labels, categories) through
  // plotText(): no string given to Plotly is markup. Arrays of numbers are kept as they are.
  function plotSafe(v) {
    if (typeof v === "string") return plotText(v);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        if (typeof v[i] === "string" || (v[i] !== null && typeof v[i] === "object")) return v.map(plotSafe);
      }
      return v;
    }
    if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
      const out = {};
      for (const k of Object.keys(v)) Object.defineProperty(out, k, {value: plotSafe(v[k]), enumerable: true, writable: true, configurable: true});
      return out;
    }
    return v;
  }
  // The traces for Plotly (plotSafe), but for the tick text of parallel coordinates: Plotly writes that
  // as plain text (never markup, nor entities), so it is given as it is.
  function plotTraces(traces) {
    const safe = plotSafe(traces);
    safe.forEach((t, i) => {
      if (t && t.type === "parcoords" && Array.isArray(t.dimensions)) {
        t.dimensions.forEach((d, k) => { if (d && d.ticktext) d.ticktext = traces[i].dimensions[k].ticktext; });
      }
    });
    return safe;
  }
  // Draws at once with Plotly when it is there; else a static SVG now (quickPlot) and Plotly's plot, in its
  // place, once plotly.js has arrived. The promise settles with Plotly's plot.
  function plot(id, traces, layout) {
    const base = {margin: {l: 60, r: 20, t: 30, b: 45}, height: 340, legend: {orientation: "h", y: -0.2},
                  font: {size: 11}};
    const full = Object.assign(base, layout || {});
    const draw = (Plotly) => {
      const el = $(id);
      if (!el) return null;
      clearQuick(el);
      return Plotly.react(el, plotTraces(traces), plotSafe(full), PLOT_CONFIG);
    };
    if (window.Plotly) return Promise.resolve(draw(window.Plotly));
    if ($(id)) quickPlot($(id), traces, full);
    return plotlyReady.then(draw, (e) => {
      if ($(id)) $(id).innerHTML = '<p class="muted">' + esc(e.message) + "</p>";
      throw e;
    });
  }
  // ------------------------------------------------------------------ first paint: a small SVG plot

  // plotly.js is 4.8 MB: on a first visit it takes a second or more to fetch, compile and run, so until it
  // is there a scatter or line plot is drawn by these few lines as a static SVG (axes, ticks, titles,
  // legend, lines and markers: an even sample of at most QUICK_MARKERS per trace), which Plotly's
  // interactive plot replaces. Other plot types (bars, stacks, parallel coordinates) wait for Plotly.
  const QUICK_MARKERS = 1000, QUICK_LINE_POINTS = 5000;
  function evenSample(n, limit) {
    if (n <= limit) return null;
    const step = n / limit, picked = new Set();
    for (let i = 0; i < limit; i++) picked.add(Math.floor(i * step));
    picked.add(n - 1);  // the last point (the end of the run) always shows
    return [...picked].sort((a, b) => a - b);
  }
  // About n round steps (1, 2 or 5 times a power of ten) between lo and hi.
  function linearTicks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / Math.max(1, n), mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return ticks;
  }
  function logTicks(lo, hi, n) {  // lo, hi: log10 of the range's ends; returns values, not logs
    const ticks = [];
    for (const marks of [[1], [1, 2, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9]]) {
      ticks.length = 0;
      for (let k = Math.floor(lo); k <= Math.ceil(hi); k++) {
        for (const m of marks) { const v = m * Math.pow(10, k); if (Math.log10(v) >= lo - 1e-9 && Math.log10(v) <= hi + 1e-9) ticks.push(v); }
      }
      if (ticks.length >= Math.min(3, n)) break;
    }
    return ticks.length >= 2 ? ticks : linearTicks(Math.pow(10, lo), Math.pow(10, hi), n);
  }
  function tickText(v, format) {
    if (format === ".0%") return Math.round(v * 100) + "%";
    if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) return v.toExponential(1);
    return String(+v.toPrecision(4));
  }
  function quickPlot(el, traces, layout) {
    if (!traces.length || !traces.every((t) => (t.type === "scatter" || t.type === "scattergl") && !t.stackgroup)) return false;
    const m = layout.margin, H = layout.height, W = Math.max(300, el.clientWidth || 800);
    const legend = layout.showlegend !== false && traces.length > 1 && traces.some((t) => t.name);
    const x0 = m.l, x1 = W - m.r, y0 = m.t, y1 = H - m.b - (legend ? 22 : 0);
    const logY = layout.yaxis && layout.yaxis.type === "log";
    const yOf = (v) => logY ? (v > 0 ? Math.log10(v) : null) : v;
    // Each trace's points: markers sampled evenly, lines kept whole (a best-so-far line has few steps).
    const shown = traces.map((t) => {
      const n = Math.min(t.x.length, t.y.length), lines = String(t.mode).includes("lines");
      const idx = evenSample(n, lines ? QUICK_LINE_POINTS : QUICK_MARKERS);
      const pts = [];
      for (const i of idx || Array.from({length: n}, (_, k) => k)) {
        const x = t.x[i], y = yOf(t.y[i]);
        if (typeof x === "number" && typeof y === "number" && isFinite(x) && isFinite(y)) pts.push([x, y, t.y[i]]);
      }
      return pts;
    });
    let xlo = Infinity, xhi = -Infinity, ylo = Infinity, yhi = -Infinity;
    for (const pts of shown) for (const [x, y] of pts) { xlo = Math.min(xlo, x); xhi = Math.max(xhi, x); ylo = Math.min(ylo, y); yhi = Math.max(yhi, y); }
    if (!isFinite(xlo)) return false;
    const yr = layout.yaxis && layout.yaxis.range;
    if (yr && !logY) { ylo = yr[0]; yhi = yr[1]; }
    // A little room around the points, as Plotly's autorange leaves for its markers.
    const pad = (lo, hi) => hi > lo ? (hi - lo) * 0.04 : Math.abs(lo) * 0.1 || 1;
    if (traces.some((t) => String(t.mode).includes("markers"))) {
      const px = pad(xlo, xhi), py = pad(ylo, yhi);
      xlo -= px; xhi += px;
      if (!(yr && !logY)) { ylo -= py; yhi += py; }
    }
    // A single value (one trial, a flat line) still gets an axis around it.
    if (!(xhi > xlo)) { const d = pad(xlo, xhi); xlo -= d; xhi += d; }
    if (!(yhi > ylo)) { const d = pad(ylo, yhi); ylo -= d; yhi += d; }
    const sx = (x) => x0 + (x - xlo) / (xhi - xlo) * (x1 - x0), sy = (y) => y1 - (y - ylo) / (yhi - ylo) * (y1 - y0);
    const f = (v) => v.toFixed(1);
    const title = (axis) => axis && axis.title && axis.title.text ? axis.title.text : "";
    const yFormat = layout.yaxis && layout.yaxis.tickformat;
    const clip = "quick-clip-" + el.id;
    let s = '<svg class="quick-plot" xmlns="http://www.w3.org/2000/svg" width="100%" height="' + H + '" viewBox="0 0 ' + W + " " + H +
      '" font-size="11" font-family="sans-serif" data-points="' + shown.reduce((a, p, i) => a + (String(traces[i].mode).includes("markers") ? p.length : 0), 0) +
      '"><clipPath id="' + clip + '"><rect x="' + x0 + '" y="' + y0 + '" width="' + (x1 - x0) + '" height="' + (y1 - y0) + '"/></clipPath>';
    s += '<rect class="quick-area" x="' + x0 + '" y="' + y0 + '" width="' + (x1 - x0) + '" height="' + (y1 - y0) + '" fill="#fff" stroke="#ccc"/>';
    s += '<g class="quick-xticks">';
    // Categories (a slice of a choice parameter) are ticked with their names, as Plotly's axis is.
    const xa = layout.xaxis || {}, named = Array.isArray(xa.tickvals) && Array.isArray(xa.ticktext);
    const xTicks = named ? xa.tickvals.filter((v) => v >= xlo && v <= xhi) : linearTicks(xlo, xhi, Math.max(2, Math.round((x1 - x0) / 90)));
    for (const v of xTicks) {
      const x = f(sx(v));
      s += '<line x1="' + x + '" x2="' + x + '" y1="' + y0 + '" y2="' + y1 + '" stroke="#eee"/><text x="' + x + '" y="' + (y1 + 14) +
        '" text-anchor="middle">' + esc(named ? xa.ticktext[xa.tickvals.indexOf(v)] : tickText(v)) + "</text>";
    }
    s += '</g><g class="quick-yticks">';
    const yTicks = logY ? logTicks(ylo, yhi, Math.max(2, Math.round((y1 - y0) / 45))) : linearTicks(ylo, yhi, Math.max(2, Math.round((y1 - y0) / 45)));
    for (const v of yTicks) {
      const y = f(sy(logY ? Math.log10(v) : v));
      s += '<line x1="' + x0 + '" x2="' + x1 + '" y1="' + y + '" y2="' + y + '" stroke="#eee"/><text x="' + (x0 - 5) + '" y="' + y +
        '" dy="0.35em" text-anchor="end">' + esc(tickText(v, yFormat)) + "</text>";
    }
    s += "</g>";
    s += '<text class="quick-xtitle" x="' + f((x0 + x1) / 2) + '" y="' + (y1 + 32) + '" text-anchor="middle">' + esc(title(layout.xaxis)) + "</text>";
    s += '<text class="quick-ytitle" transform="translate(14 ' + f((y0 + y1) / 2) + ') rotate(-90)" text-anchor="middle">' +
      esc(title(layout.yaxis)) + "</text>";
    if (title(layout)) s += '<text class="quick-title" x="' + x0 + '" y="' + (y0 - 10) + '">' + esc(title(layout)) + "</text>";
    s += '<text class="quick-note" x="' + x1 + '" y="' + (y0 - 10) + '" text-anchor="end" fill="#999">interactive plot loading…</text>';
    s += '<g clip-path="url(#' + clip + ')">';
    traces.forEach((t, i) => {
      const pts = shown[i], mode = String(t.mode), colour = colourOf(t, i);
      s += '<g class="quick-trace" data-name="' + esc(t.name || "") + '" data-points="' + pts.length + '"' +
        (pts.length ? ' data-last="' + esc(pts[pts.length - 1][2]) + '"' : "") + ">";
      if (mode.includes("lines") && pts.length) {
        const shape = t.line && t.line.shape;
        let d = "M" + f(sx(pts[0][0])) + " " + f(sy(pts[0][1]));
        for (let k = 1; k < pts.length; k++) {
          const X = f(sx(pts[k][0])), Y = f(sy(pts[k][1]));
          d += shape === "hv" ? "H" + X + "V" + Y : shape === "vh" ? "V" + Y + "H" + X : "L" + X + " " + Y;
        }
        s += '<path d="' + d + '" fill="none" stroke="' + colour + '" stroke-width="' + esc((t.line && t.line.width) || 1.5) + '"/>';
      }
      if (mode.includes("markers")) {
        const mk = t.marker || {}, r = (Number(mk.size) || 6) / 2, op = mk.opacity === undefined ? 1 : esc(mk.opacity);
        if (mk.symbol === "x") {
          let d = "";
          for (const [x, y] of pts) { const X = sx(x), Y = sy(y); d += "M" + f(X - r) + " " + f(Y - r) + "l" + 2 * r + " " + 2 * r + "m0 " + -2 * r + "l" + -2 * r + " " + 2 * r; }
          s += '<path class="quick-x" d="' + d + '" stroke="' + colour + '" stroke-width="1.5" opacity="' + op + '"/>';
        } else {
          for (const [x, y, v] of pts) s += '<circle cx="' + f(sx(x)) + '" cy="' + f(sy(y)) + '" r="' + r + '" fill="' + colour + '" fill-opacity="' + op +
            '"><title>' + esc(num(x) + ": " + num(v)) + "</title></circle>";
        }
      }
      s += "</g>";
    });
    s += "</g>";
    if (legend) {
      let lx = x0;
      traces.forEach((t, i) => {
        if (!t.name) return;
        s += '<g class="quick-legend"><rect x="' + lx + '" y="' + (H - 16) + '" width="14" height="4" fill="' + colourOf(t, i) + '"/><text x="' + (lx + 18) +
          '" y="' + (H - 11) + '">' + esc(t.name) + "</text></g>";
        lx += 30 + 6.2 * t.name.length;
      });
    }
    clearQuick(el);
    el.insertAdjacentHTML("afterbegin", s + "</svg>");
    return true;
  }
  // Plotly's default colours, in its order, for traces that name none.
  const PLOTLY_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  function colourOf(t, i) {
    const c = (t.line && t.line.color) || (t.marker && typeof t.marker.color === "string" && t.marker.color);
    return esc(c || PLOTLY_COLOURS[i % PLOTLY_COLOURS.length]);
  }
  function clearQuick(el) {
    for (const old of el.querySelectorAll(":scope > svg.quick-plot")) old.remove();
  }
  // fn() once the element is within a screen of the viewport (at once without IntersectionObserver).
  function whenNear(id, fn) {
    if (!("IntersectionObserver" in window) || !$(id)) { fn(); return null; }
    const watch = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) { watch.disconnect(); fn(); }
    }, {rootMargin: "100% 0px"});
    watch.observe($(id));
    return watch;
  }
  // The next task after the browser has painted: what is drawn so far shows before the rest is computed.
  function afterPaint() {
    return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  }
  function poll(fn, ms) {
    let busy = false;
    setInterval(async () => {
      if (busy) return;
      busy = true;
      try { await fn(); } catch (e) { console.error(e.message); } finally { busy = false; }
    }, ms);
  }

  // ------------------------------------------------------------------ runs page

  function runsPage() {
    const state = {rows: P.data && P.data.runs || [], q: "", status: "", kind: "", chosen: new Set(), html: null};
    $("content").innerHTML =
      '<div class="controls"><input id="q" placeholder="search name, kind, machine" size="32">' +
      '<select id="status-filter"><option value="">any status</option></select>' +
      '<select id="kind-filter"><option value="">any kind</option></select>' +
      '<button id="compare" disabled>compare selected</button><span id="compare-note" class="muted"></span></div>' +
      '<table id="runs"><thead><tr><th></th><th>run</th><th>kind</th><th>status</th><th>progress</th>' +
      '<th>trials</th><th>failures</th><th>best</th><th>improvement (95% CI)</th><th>machine</th>' +
      '<th>started</th><th>finished</th></tr></thead><tbody></tbody></table>';
    $("q").addEventListener("input", (e) => { state.q = e.target.value.toLowerCase(); render(); });
    $("status-filter").addEventListener("change", (e) => { state.status = e.target.value; render(); });
    $("kind-filter").addEventListener("change", (e) => { state.kind = e.target.value; render(); });
    $("compare").addEventListener("click", () => {
      window.location.href = "compare?runs=" + [...state.chosen].map(encodeURIComponent).join(",");
    });
    function options(id, values, current) {
      const sel = $(id);
      const have = [...sel.options].map((o) => o.value);
      for (const v of values) if (!have.includes(v)) sel.add(new Option(v, v));
      sel.value = current;
    }
    function render() {
      options("status-filter", [...new Set(state.rows.map((r) => r.status))].sort(), state.status);
      options("kind-filter", [...new Set(state.rows.map((r) => r.kind))].sort(), state.kind);
      const rows = state.rows.filter((r) =>
        (!state.status || r.status === state.status) && (!state.kind || r.kind === state.kind) &&
        (!state.q || [r.name, r.kind, r.machine].join(" ").toLowerCase().includes(state.q)));
      const html = rows.map((r) => {
        if (r.error) {  // a damaged run: its name and what is wrong, the other runs as usual
          return '<tr data-run="' + esc(r.name) + '"><td></td><td><a href="' + runHref(r) + '">' + esc(r.name) + "</a></td><td>" +
            esc(r.kind) + '</td><td class="status-' + esc(r.status) + '">' + esc(r.status) + '</td><td colspan="8" class="error">' +
            esc(r.error) + "</td></tr>";
        }
        const total = r.budget_evals ? " of " + r.budget_evals : "";
        const pct = esc(Math.round(100 * r.progress));
        const bar = r.progress === null ? '<span class="muted">' + (r.budget_seconds ? esc(r.budget_seconds) + " s budget" : "-") + "</span>"
          : '<span class="bar"><span style="width:' + pct + '%"></span></span> ' + pct + "%";
        return '<tr data-run="' + esc(r.name) + '"><td><input type="checkbox" class="pick" value="' + esc(r.name) + '"' +
          (state.chosen.has(r.name) ? " checked" : "") + "></td>" +
          '<td><a href="' + runHref(r) + '">' + esc(r.name) + "</a></td><td>" + esc(r.kind) +
          '</td><td class="status-' + esc(r.status) + '">' + statusText(r) + "</td><td>" + bar + "</td><td>" +
          esc(r.n_trials) + esc(total) + "</td><td>" + esc(r.n_failed) + "</td><td>" + withUnit(r.best, r.unit) + "</td><td>" +
          improvement(r.improvement) + "</td><td>" + esc(r.machine || "-") + "</td><td>" + when(r.started_at) +
          "</td><td>" + when(r.finished_at) + "</td></tr>";
      }).join("");
      // Unchanged rows are left as they are: replacing them every second would swallow a click that lands
      // while they are swapped (the press on the old row, the release on the new one).
      if (html === state.html) {
        updateCompare();
        return;
      }
      state.html = html;
      $("runs").tBodies[0].innerHTML = html;
      for (const box of document.querySelectorAll(".pick")) {
        box.addEventListener("change", (e) => {
          if (e.target.checked) state.chosen.add(e.target.value); else state.chosen.delete(e.target.value);
          updateCompare();
        });
      }
      updateCompare();
    }
    function updateCompare() {
      const chosen = state.rows.filter((r) => state.chosen.has(r.name));
      const spaces = new Set(chosen.map((r) => r.space_fingerprint));
      // Runs that optimise different things (goal, metric, objectives) have no speedup over each other.
      const aims = new Set(chosen.map((r) => r.aim));
      const ok = chosen.length >= 2 && spaces.size === 1 && aims.size === 1;
      $("compare").disabled = !ok || P.mode !== "live";
      $("compare-note").textContent = chosen.length < 2 ? "" : spaces.size > 1 ? "the selected runs have different search spaces" :
        aims.size > 1 ? "the selected runs optimise different things: " + chosen.map((r) => r.name + " " + r.aim).join(", ") : "";
    }
    render();
    if (P.mode === "live") {
      const refresh = async () => { state.rows = (await get("api/runs")).runs; render(); };
      // This page draws no plot: plotly.js is fetched and compiled once the runs are shown, so that the
      // run page opened next finds it in the browser's caches.
      refresh().then(afterPaint).then(() => loadPlotly().catch(() => {}), (e) => console.error(e.message));
      poll(refresh, 1000);
    }
  }

  // ------------------------------------------------------------------ run page

  function section(id, title, body) {
    return '<h2 id="h-' + id + '">' + esc(title) + "</h2>" + (body || '<div id="' + id + '" class="plot"></div>');
  }

  // The run's API by its id (a name may hold "/" or ","); by name where the page gave no id.
  function runApi(path) {
    return "api/runs/" + encodeURIComponent(P.run_id !== undefined ? P.run_id : P.run) + path;
  }

  function runPage() {
    const state = {view: null, params: null, pareto: null, paretoAt: 0, paretoKey: null, x: "trial", table: {offset: 0, limit: 25, sort: "trial", descending: false,
                   status: "", technique: "", text: "", after: "", before: "", page: null}, version: null, paramsAt: 0};
    $("content").innerHTML =
      '<div id="summary"></div>' +
      section("best", "Best configuration", '<div id="best"></div>') +
      section("convergence", "Convergence", '<div class="controls">x axis: <select id="x-axis">' +
        '<option value="trial">trial</option><option value="time">time (s)</option></select></div>' +
        '<div id="convergence" class="plot"></div>') +
      // Shown only for a run with several objectives (its view has a front).
      '<div id="pareto-section" hidden>' + section("pareto", "Pareto front", '<p id="pareto-note" class="muted"></p>' +
        '<div id="pareto" class="plot"></div><table id="pareto-table"></table>') + "</div>" +
      section("trials", "Trials", '<div class="controls"><select id="t-status"><option value="">any status</option></select>' +
        '<select id="t-technique"><option value="">any technique</option></select>' +
        '<input id="t-text" placeholder="filter config or reason" size="28"><button id="t-prev">&lt; prev</button>' +
        '<span id="t-range"></span><button id="t-next">next &gt;</button><span id="t-note" class="muted"></span></div>' +
        '<table id="trial-table"><thead><tr>' +
        [["trial", "trial"], ["status", "status"], ["value", "value"], ["technique", "technique"], ["worker", "worker"],
         ["duration", "duration (s)"], [null, "samples"], [null, "reason"], [null, "config"]].map(([k, label]) =>
          k ? '<th class="sortable" data-sort="' + k + '">' + label + "</th>" : "<th>" + label + "</th>").join("") +
        "</tr></thead><tbody></tbody></table>") +
      section("importance", "Parameter importance", '<p id="importance-method" class="muted">fitting a random forest to the ' +
        "trials...</p><div id=\"importance\" class=\"plot\"></div>") +
      section("parallel", "Parallel coordinates", '<div id="parallel" class="plot"></div>') +
      section("slices", "Slice plots", '<div id="slices" class="slices"></div>') +
      section("credits", "Technique credits over time", '<div class="two"><div id="credits" class="plot"></div>' +
        '<div id="proposals" class="plot"></div></div><table id="techniques"></table>') +
      section("failures", "Failures by reason", '<div id="failures"></div>');
    $("x-axis").addEventListener("change", (e) => { state.x = e.target.value; drawConvergence(false).catch(() => {}); });
    // Any new filter or order starts at the first page; next and prev read from the page's last or first
    // row (keyset pagination: a page deep in a run of 100,000 trials costs what the first one does).
    const restart = () => Object.assign(state.table, {offset: 0, after: "", before: ""});
    $("t-status").addEventListener("change", (e) => { state.table.status = e.target.value; restart(); loadTable(); });
    $("t-technique").addEventListener("change", (e) => { state.table.technique = e.target.value; restart(); loadTable(); });
    let typing = null;
    $("t-text").addEventListener("input", (e) => {
      clearTimeout(typing);
      typing = setTimeout(() => { state.table.text = e.target.value; restart(); loadTable(); }, 250);
    });
    $("t-prev").addEventListener("click", () => {
      const t = state.table;
      t.offset = Math.max(0, t.offset - t.limit);
      Object.assign(t, {after: "", before: t.offset > 0 && t.page && t.page.first ? t.page.first : ""});
      loadTable();
    });
    $("t-next").addEventListener("click", () => {
      const t = state.table;
      t.offset += t.limit;
      Object.assign(t, {after: t.page && t.page.last ? t.page.last : "", before: ""});
      loadTable();
    });
    for (const th of document.querySelectorAll("#trial-table th.sortable")) {
      th.addEventListener("click", () => {
        const t = state.table;
        if (t.sort === th.dataset.sort) t.descending = !t.descending; else { t.sort = th.dataset.sort; t.descending = false; }
        restart();
        loadTable();
      });
    }

    function drawSummary() {
      const v = state.view, r = v.run;
      const budget = v.budget.evals ? r.n_trials + " of " + v.budget.evals + " trials" :
        v.budget.seconds ? r.n_trials + " trials (time budget " + v.budget.seconds + " s)" : r.n_trials + " trials";
      $("summary").innerHTML = '<table id="run-summary"><tr><th>run</th><td>' + esc(r.name) + " (id " + esc(r.id) + ")</td><th>status</th>" +
        '<td class="status-' + esc(r.status) + '">' + statusText(r) + "</td><th>kind</th><td>" + esc(r.kind) + "</td></tr>" +
        "<tr><th>progress</th><td>" + esc(budget) + "</td><th>best</th><td>" + withUnit(r.best, r.unit) + "</td><th>goal</th><td>" +
        esc(r.goal) + "imise " + esc(r.metric || "the objective") + (r.unit ? " (" + esc(r.unit) + ")" : "") +
        "</td></tr><tr><th>started</th><td>" + when(r.started_at) +
        "</td><th>finished</th><td>" + when(r.finished_at) + "</td><th>machine</th><td>" + esc(r.machine || "-") + " " +
        esc(r.cpu || "") + "</td></tr></table>";
      const sel = $("t-technique");
      const have = [...sel.options].map((o) => o.value);
      for (const t of v.techniques) if (!have.includes(t.technique)) sel.add(new Option(t.technique, t.technique));
      // Every status a trial can have (pruned ones, pending ones while the run goes on), from the view.
      const statuses = $("t-status");
      const listed = [...statuses.options].map((o) => o.value);
      for (const s of v.statuses || []) if (!listed.includes(s)) statuses.add(new Option(s, s));
    }

    function drawBest() {
      const b = state.view.best;
      if (!b) { $("best").innerHTML = "<p>No successful trial yet.</p>"; return; }
      // A flags run's value is its final option set's; the search's best trial is detail below.
      let out = '<p class="tight">value <b>' + withUnit(b.value, state.view.run.unit) + "</b> " + (b.final_flags ? "(the final option set)</p>" :
        "(trial " + esc(b.trial) + ", proposed by <code>" + esc(b.technique) + "</code>, " + esc(b.samples.length) + " samples)</p>");
      for (const line of b.lines) out += '<p class="improvement tight"><b>' + esc(line) + "</b></p>";
      if (b.command_line) {
        out += '<div class="controls"><b>command line</b><button id="copy">copy</button></div><code class="cmd" id="command-line">' +
          esc(b.command_line) + "</code>";
      }
      let params = b.only_differing ? '<p class="muted">' + esc(b.n_differing) + " of " + esc(b.n_params) +
        " parameters differ from the default (the others are at their default):</p>" : "";
      for (const [group, items] of Object.entries(b.groups)) {
        params += '<div class="group">' + esc(group) + " (" + esc(items.length) + ')</div><div class="grid">' +
          items.map(([k, v, d]) => '<div title="default: ' + esc(JSON.stringify(d)) + '"><code>' + esc(k) + "</code> = " +
            esc(typeof v === "string" ? v : JSON.stringify(v)) + "</div>").join("") + "</div>";
      }
      if (b.final_flags) {
        // A flags run answers with a (reduced) option set: that is the answer; the search's best trial is detail.
        out += '<div id="final-flags"><p class="tight">' + esc(b.n_final_flags) + " options besides the sources:</p>";
        for (const [group, flags] of Object.entries(b.final_flags)) {
          // The group names the prefix, so each option is shown without it: hundreds fit one screen.
          const prefix = own(FLAG_PREFIX, group);
          out += '<div class="flags"><b>' + esc(group) + " (" + esc(flags.length) + (prefix ? ", shown without " + esc(prefix) : "") +
            "):</b> <code>" + flags.map((f) => esc(prefix ? shorten(f, prefix) : f)).join(" ") + "</code></div>";
        }
        out += "</div><details><summary>the best trial of the search (trial " + esc(b.trial) + ", value " + withUnit(b.trial_value, state.view.run.unit) + "): " + esc(b.n_differing) + " of " +
          esc(b.n_params) + " parameters differ from the default</summary>" + params + "</details>";
      } else {
        out += params;
      }
      $("best").innerHTML = out;
      if ($("copy")) {
        $("copy").addEventListener("click", () => {
          const text = b.command_line;
          if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).catch(() => {});
          const range = document.createRange();
          range.selectNodeContents($("command-line"));
          const s = window.getSelection(); s.removeAllRanges(); s.addRange(range);
          $("copy").textContent = "copied";
        });
      }
    }

    // The first draw of a page shows about FIRST_POINTS points of each trace of more than 2,000, as SVG (a
    // WebGL context and thousands of SVG markers cost a second of a 2-core machine): the plot is there, and
    // answers the mouse, at once; the whole sample replaces it once the browser has painted the page.
    const FIRST_POINTS = 1000;
    function drawConvergence(first) {
      const c = state.view.convergence, time = state.x === "time";
      const xs = (key) => time ? c[key === "trial" ? "elapsed_s" : key + "_elapsed_s"] : c[key === "trial" ? "trial" : key + "_trial"];
      // Past 2,000 points a trace is WebGL; failures are marks along the top: a quarter of the points will do.
      const step = (n, share = 1) => first && n > 2000 ? Math.ceil(n / (FIRST_POINTS * share)) : 1;
      const every = (values, k) => k === 1 ? values : values.filter((_, i) => i % k === 0 || i === values.length - 1);
      const kv = step(c.value.length);
      let complete = kv === 1;
      const traces = [
        {type: kv === 1 && c.n_shown > 2000 ? "scattergl" : "scatter", mode: "markers", name: "trial value",
         x: every(time ? c.elapsed_s : c.trial, kv), y: every(c.value, kv), marker: {size: 5, color: "#1f77b4", opacity: 0.45}},
        {type: "scatter", mode: "lines", name: "best so far", x: xs("best"), y: c.best_value, line: {shape: "hv", color: "black", width: 2}},
      ];
      const top = c.value.length ? Math.max(...c.value.slice(0, 20000)) : 1;
      for (const [status, f] of Object.entries(c.failed)) {
        const kf = step(f.trial.length, 0.25);
        complete = complete && kf === 1;
        traces.push({type: kf === 1 && f.trial.length > 2000 ? "scattergl" : "scatter", mode: "markers",
                     name: status + " (" + f.trial.length + ")", x: every(time ? f.elapsed_s : f.trial, kf),
                     y: every(f.trial, kf).map(() => top), marker: {symbol: "x", size: 6, color: own(COLOURS, status) || "#d62728"}});
      }
      const thinned = !complete ? " (a first sample of every " + kv + "th value; all " + c.n_shown + " are being drawn)"
        : c.n_shown < c.n_points ? " (values of " + c.n_shown + " of the " + c.n_points +
        " successful trials, evenly spaced; the best-so-far line has every step)" : "";
      $("convergence").dataset.complete = "false";
      return plot("convergence", traces, {title: {text: thinned, font: {size: 11}},
           xaxis: {title: {text: time ? "time since the first trial (s)" : "trial"}},
           yaxis: {title: {text: state.view.run.unit ? "value (" + state.view.run.unit + ")" : "value"}, type: c.log_y ? "log" : "linear"},
           height: 380}).then(() => {
        $("convergence").dataset.complete = String(complete);
        return complete;
      });
    }

    function drawPareto() {
      const p = state.view.objectives ? state.pareto : null;
      $("pareto-section").hidden = !state.view.objectives;
      if (!p) return;
      const names = p.objectives.map((o) => o.name);
      const label = (o) => o.name + " (" + o.goal + ")";
      const f = p.front;
      // The front read along the first objective: the table and the step line follow it.
      const order = f.trial.map((_, i) => i).sort((a, b) => f.values[names[0]][a] - f.values[names[0]][b] || f.trial[a] - f.trial[b]);
      const thinned = p.n_shown < p.n_ok ? " (" + p.n_shown + " of the " + p.n_ok + " successful trials shown, evenly spaced)" : "";
      $("pareto-note").textContent = p.n_front + " trial" + (p.n_front === 1 ? "" : "s") + " on the front of " +
        p.objectives.map(label).join(", ") + ": no other successful, feasible trial is at least as good on every objective " +
        "and better on one" + thinned + ".";
      if (names.length === 2) {
        const [ox, oy] = p.objectives;
        const pick = (want) => p.trial.map((_, i) => i).filter((i) => p.feasible[i] === want);
        const cloud = (idx, name, marker) => ({type: idx.length > 2000 ? "scattergl" : "scatter", mode: "markers", name: name + " (" + idx.length + ")",
          x: idx.map((i) => p.values[ox.name][i]), y: idx.map((i) => p.values[oy.name][i]), text: idx.map((i) => "trial " + p.trial[i]),
          marker: marker});
        const traces = [cloud(pick(true), "trials", {size: 5, color: "#1f77b4", opacity: 0.4})];
        const infeasible = pick(false);
        if (infeasible.length) traces.push(cloud(infeasible, "infeasible", {size: 6, symbol: "x", color: COLOURS.failed, opacity: 0.5}));
        // The boundary of what the front dominates: along a minimised x it steps across then to the next point.
        traces.push({type: "scatter", mode: "lines+markers", name: "Pareto front (" + f.trial.length + ")",
          x: order.map((i) => f.values[ox.name][i]), y: order.map((i) => f.values[oy.name][i]),
          text: order.map((i) => "trial " + f.trial[i] + " (" + f.technique[i] + ")"),
          line: {shape: ox.goal === "min" ? "hv" : "vh", color: "black", width: 2}, marker: {size: 8, color: "#d62728"}});
        plot("pareto", traces, {height: 420, showlegend: true, xaxis: {title: {text: label(ox)}}, yaxis: {title: {text: label(oy)}}});
      } else {
        // Three or more objectives: one line per trial of the front across the objectives' axes.
        plot("pareto", [{type: "parcoords", name: "Pareto front (" + f.trial.length + ")",
          dimensions: p.objectives.map((o) => ({label: label(o), values: f.values[o.name]})),
          line: {color: f.values[names[0]], colorscale: "Viridis", reversescale: p.objectives[0].goal === "min", showscale: true}}],
          {height: 420, margin: {l: 70, r: 70, t: 50, b: 30}});
      }
      const shown = order.slice(0, 200);
      $("pareto-table").innerHTML = "<tr><th>trial</th>" + p.objectives.map((o) => "<th>" + esc(label(o)) + "</th>").join("") +
        "<th>technique</th><th>config</th></tr>" + shown.map((i) => '<tr data-trial="' + esc(f.trial[i]) + '"><td>' + esc(f.trial[i]) + "</td>" +
          names.map((n) => "<td>" + num(f.values[n][i]) + "</td>").join("") + "<td>" + esc(f.technique[i]) +
          '</td><td class="config">' + esc(f.config[i]) + "</td></tr>").join("") +
        (order.length > shown.length ? '<tr><td colspan="' + esc(names.length + 3) + '" class="muted">and ' +
          esc(order.length - shown.length) + " more</td></tr>" : "");
    }

    function drawCredits() {
      const v = state.view, cr = v.credits, pr = v.proposals;
      plot("credits", Object.keys(cr.share).map((n) => ({type: "scatter", mode: "lines", name: n, x: cr.trial, y: cr.share[n],
        line: {shape: "hv"}})), {title: {text: "share of the improvements found", font: {size: 12}},
        xaxis: {title: {text: "trial"}}, yaxis: {range: [0, 1.02], tickformat: ".0%"}, showlegend: true});
      plot("proposals", Object.keys(pr.share).map((n) => ({type: "scatter", mode: "lines", stackgroup: "one", name: n,
        x: pr.trial, y: pr.share[n]})), {title: {text: "share of proposals (window of " + pr.window + " trials)", font: {size: 12}},
        xaxis: {title: {text: "trial"}}, yaxis: {range: [0, 1], tickformat: ".0%"}, showlegend: true});
      $("techniques").innerHTML = "<tr><th>technique</th><th>trials</th><th>successful</th><th>share of improvements</th></tr>" +
        v.techniques.map((t) => "<tr><td>" + esc(t.technique) + "</td><td>" + esc(t.trials) + "</td><td>" + esc(t.ok) + "</td><td>" +
          esc(Math.round(100 * t.credit)) + "%</td></tr>").join("");
    }

    function drawFailures() {
      const f = state.view.failures;
      const pruned = (state.view.pruned ? "<p>" + esc(state.view.pruned) +
        " trials pruned early by the fidelity schedule (not failures).</p>" : "") +
        (state.view.cancelled ? "<p>" + esc(state.view.cancelled) +
        " trials cancelled by the run's end (a time budget, an interrupt; not failures).</p>" : "");
      if (!f.length) { $("failures").innerHTML = pruned + "<p>No failed or timed-out trial.</p>"; return; }
      const top = f.slice(0, 15).reverse();
      $("failures").innerHTML = pruned + '<div id="failures-plot" class="plot"></div><table id="failure-table"><tr><th>status</th>' +
        "<th>reason</th><th>trials</th></tr>" + f.map((r) => "<tr><td>" + esc(r.status) + "</td><td>" + esc(r.label) +
        "</td><td>" + esc(r.count) + "</td></tr>").join("") + "</table>";
      plot("failures-plot", [{type: "bar", orientation: "h", x: top.map((r) => r.count),
        y: top.map((r) => r.label.length > 70 ? r.label.slice(0, 67) + "..." : r.label),
        marker: {color: top.map((r) => own(COLOURS, r.status) || "#d62728")}, hovertext: top.map((r) => r.label), hoverinfo: "text+x"}],
        {height: 80 + 28 * top.length, margin: {l: 380, r: 20, t: 10, b: 35}, xaxis: {title: {text: "trials"}}});
    }

    function drawParams() {
      const p = state.params;
      $("importance-method").textContent = "Method: " + p.importance_method + (p.sampled ? " (" + p.n_trials +
        " of " + p.n_ok + " successful trials: the best quarter and an even sample of the rest)" : "") + ".";
      if (!p.params.length) {
        for (const id of ["importance", "parallel"]) $(id).innerHTML = '<p class="muted">No parameter varied among the successful trials.</p>';
        $("slices").innerHTML = "";
        return;
      }
      const imp = p.importance.slice(0, 20).reverse();
      if (imp.length) {
        plot("importance", [{type: "bar", orientation: "h", x: imp.map((i) => i[1]), y: imp.map((i) => i[0])}],
             {height: 60 + 22 * imp.length, margin: {l: 200, r: 20, t: 10, b: 35}, xaxis: {tickformat: ".0%"}});
      } else {
        $("importance").innerHTML = '<p class="muted">' + esc(p.importance_method) + "</p>";
      }
      // Parallel coordinates are WebGL and the slices thousands of SVG markers: seconds of a machine without
      // a GPU, during which the page would not answer. They are drawn when their section nears the screen.
      if (state.paramsWatch) state.paramsWatch.disconnect();
      state.paramsWatch = whenNear("h-parallel", drawParamPlots);
    }

    function drawParamPlots() {
      const p = state.params;
      const dims = p.params.map((n) => {
        const cats = p.categories[n];
        const d = {label: n.length > 18 ? n.slice(0, 17) + "…" : n, values: p.columns[n]};
        if (cats) { d.tickvals = cats.map((_, i) => i); d.ticktext = cats.map((c) => String(c).length > 12 ? String(c).slice(0, 11) + "…" : String(c)); }
        return d;
      });
      dims.push({label: "value", values: p.values});
      plot("parallel", [{type: "parcoords", dimensions: dims, line: {color: p.values, colorscale: "Viridis",
        reversescale: p.goal === "min", showscale: true}}], {height: 420, margin: {l: 70, r: 70, t: 50, b: 30}});
      $("slices").innerHTML = p.params.map((_, i) => '<div id="slice-' + i + '" class="plot"></div>').join("");
      p.params.forEach((n, i) => {
        const cats = p.categories[n];
        plot("slice-" + i, [{type: p.values.length > 2000 ? "scattergl" : "scatter", mode: "markers", x: p.columns[n], y: p.values,
          text: p.trial.map((t) => "trial " + t), marker: {size: 5, opacity: 0.5, color: p.trial, colorscale: "Blues"}}],
          {height: 260, title: {text: n, font: {size: 12}}, margin: {l: 50, r: 10, t: 30, b: 40},
           xaxis: cats ? {tickvals: cats.map((_, k) => k), ticktext: cats} : {}, yaxis: {type: state.view.convergence.log_y ? "log" : "linear"}});
      });
    }

    function renderTable(page) {
      const t = state.table;
      t.page = page;
      $("t-range").textContent = page.total ? (t.offset + 1) + "–" + Math.min(t.offset + page.rows.length, page.total) +
        " of " + page.total : "no trial matches";
      $("t-prev").disabled = t.offset === 0;
      $("t-next").disabled = t.offset + t.limit >= page.total;
      $("t-note").textContent = P.mode === "static" && P.data.trials_note ? " " + P.data.trials_note : "";
      for (const th of document.querySelectorAll("#trial-table th.sortable")) {
        th.classList.toggle("sorted", th.dataset.sort === t.sort);
        th.textContent = th.textContent.replace(/ [▲▼]$/, "") + (th.dataset.sort === t.sort ? (t.descending ? " ▼" : " ▲") : "");
      }
      $("trial-table").tBodies[0].innerHTML = page.rows.map((r) => '<tr data-trial="' + esc(r.trial) + '"><td>' + esc(r.trial) +
        '</td><td class="status">' + esc(r.status) + '</td><td class="value">' + num(r.value) + "</td><td>" + esc(r.technique) +
        "</td><td>" + esc(r.worker || "-") + "</td><td>" + num(r.duration_s) + "</td><td>" + esc(r.samples) + "</td><td>" +
        esc(r.reason || "") + '</td><td class="config">' + esc(r.config) + "</td></tr>").join("");
    }

    // The page shown is the answer to the last request: the buttons wait for it (the next page is read
    // after the last row of this one), and an answer overtaken by a newer request is dropped.
    let tableSeq = 0;
    async function loadTable() {
      const seq = ++tableSeq;
      $("t-prev").disabled = $("t-next").disabled = true;
      try {
        const page = await fetchTable();
        if (seq === tableSeq) renderTable(page);
      } catch (e) {
        if (seq === tableSeq && state.table.page) renderTable(state.table.page);
        throw e;
      }
    }

    async function fetchTable() {
      const t = state.table;
      if (P.mode === "static") return staticPage(P.data.trials, t);
      const q = new URLSearchParams({offset: t.offset, limit: t.limit, sort: t.sort, descending: t.descending ? "1" : "0",
                                     status: t.status, technique: t.technique, text: t.text});
      if (t.after) q.set("after", t.after);
      if (t.before) q.set("before", t.before);
      return get(runApi("/trials?") + q);
    }

    async function loadParams() {
      state.params = P.mode === "static" ? P.data.params : await get(runApi("/parameters"));
      state.paramsAt = Date.now();
      drawParams();
    }

    async function loadPareto() {
      state.pareto = P.mode === "static" ? P.data.pareto : (await get(runApi("/pareto"))).pareto;
      state.paretoAt = Date.now();
      drawPareto();
    }

    // The page's first draw puts the summary, the best configuration and the convergence plot on the
    // screen first, then the other views, then the convergence plot's whole sample.
    // Before plotly.js is there, each plot is drawn as a static SVG at once and by Plotly when it arrives;
    // the page does not wait for that, so that polls go on showing new trials meanwhile.
    async function drawAll() {
      const first = !state.drawn;
      state.drawn = true;
      drawSummary();
      drawBest();
      const withPlotly = !!window.Plotly;
      const convergence = drawConvergence(first);
      if (withPlotly) await convergence;
      if (first) {
        await afterPaint();
        loadPlotly().catch(() => {});  // now that the first data are on the screen
      }
      drawPareto();
      drawCredits();
      drawFailures();
      // The whole sample after a first one (drawn from the views of then, state.view, which a later poll
      // may have replaced).
      const whole = convergence.then(async (complete) => {
        if (!complete) {
          await afterPaint();
          await drawConvergence(false);
        }
      });
      if (withPlotly) await whole;
      else whole.catch(() => {});  // plotly.js missing: each plot says so in its place
    }

    async function refresh() {
      // The first time, the run's views are asked for with its version, not after it: one round trip less.
      const first = state.version === null ? [get(runApi("")), fetchTable()] : null;
      if (first) for (const p of first) p.catch(() => {});  // a failure is reported once, below
      const version = await get(runApi("/version"));
      const key = version.n_trials + "/" + version.status + (version.driver_gone ? "/gone" : "");
      // The front reads every trial's metrics: at most every 2 s while a run grows, so a poll that finds
      // no new trial may still owe it the last ones (and the end of the run at once).
      const paretoDue = () => state.view && state.view.objectives && state.paretoKey !== key &&
        (Date.now() - state.paretoAt > 2000 || version.status !== "running");
      if (key === state.version) {
        if (paretoDue()) { state.paretoKey = key; await loadPareto(); }
        return;
      }
      state.version = key;
      // The table and the run's views are read together and shown in the same task: the summary and the
      // table never disagree about the trials there are.
      const seq = tableSeq;
      const [view, page] = await Promise.all(first || [get(runApi("")), fetchTable()]);
      state.view = view;
      // Read alongside the version, the views may be of a few trials before it: the next poll catches up.
      if (first) state.version = view.n_trials + "/" + view.run.status + (view.run.driver_gone ? "/gone" : "");
      if (seq === tableSeq) renderTable(page);
      await drawAll();
      if (paretoDue()) { state.paretoKey = key; await loadPareto(); }
      // The parameter views fit a forest (seconds on a big run): refreshed at most every 10 s while a run
      // grows, and never waited for, so that the next poll still shows new trials within a second.
      if (!state.paramsBusy && (!state.params || Date.now() - state.paramsAt > 10000)) {
        state.paramsBusy = true;
        loadParams().catch((e) => console.error(e.message)).finally(() => { state.paramsBusy = false; });
      }
    }

    if (P.mode === "static") {
      state.view = P.data.run;
      state.pareto = P.data.pareto;
      loadTable();
      drawAll().then(loadParams).catch((e) => console.error(e.message));
    } else {
      // plotly.js is fetched (preloaded) meanwhile, but compiled and run only once the first data are on the
      // screen (drawAll starts it): the table and the static plots come first. A failure shows in each plot.
      refresh().catch((e) => {
        console.error(e.message);
        if (!state.view) $("summary").innerHTML = '<p class="error">' + esc(e.message) + "</p>";
      }).then(() => loadPlotly().catch(() => {}));
      poll(refresh, 1000);
    }
  }

  // The report's table: the same filters, sort and pages, over the trials inlined in the page.
  function staticPage(all, t) {
    const text = t.text.toLowerCase();
    let rows = all.filter((r) => (!t.status || r.status === t.status) && (!t.technique || r.technique === t.technique) &&
      (!text || r.config.toLowerCase().includes(text) || (r.reason || "").toLowerCase().includes(text)));
    const key = t.sort === "duration" ? "duration_s" : t.sort;
    rows = rows.slice().sort((a, b) => {
      const x = a[key], y = b[key];
      if (x === null || x === undefined) return (y === null || y === undefined) ? a.trial - b.trial : 1;
      if (y === null || y === undefined) return -1;
      const c = x < y ? -1 : x > y ? 1 : a.trial - b.trial;
      return t.descending ? -c : c;
    });
    return {total: rows.length, rows: rows.slice(t.offset, t.offset + t.limit)};
  }

  // ------------------------------------------------------------------ compare page

  function comparePage() {
    const state = {x: "trial", data: P.data && P.data.compare};
    $("content").innerHTML = '<div class="controls">x axis: <select id="x-axis"><option value="trial">trial</option>' +
      '<option value="time">time (s)</option></select></div><div id="compare-plot" class="plot"></div>' +
      '<table id="compare-table"></table>';
    $("x-axis").addEventListener("change", (e) => { state.x = e.target.value; draw(); });
    function draw() {
      const d = state.data, time = state.x === "time";
      plot("compare-plot", d.runs.map((r) => ({type: "scatter", mode: "lines", name: r.run.name, line: {shape: "hv", width: 2},
        x: time ? r.best_elapsed_s : r.best_trial, y: r.best_value})),
        {height: 440, xaxis: {title: {text: time ? "time since the first trial (s)" : "trial"}},
         yaxis: {title: {text: "best value so far" + (d.unit ? " (" + d.unit + ")" : "")}}, showlegend: true});
      $("compare-table").innerHTML = "<tr><th>run</th><th>status</th><th>trials</th><th>best</th><th>improvement (95% CI)</th>" +
        "<th>machine</th><th>started</th></tr>" + d.runs.map((r) => '<tr><td><a href="' + runHref(r.run) + '">' +
        esc(r.run.name) + "</a></td><td>" + statusText(r.run) + "</td><td>" + esc(r.n_trials) + "</td><td>" + withUnit(r.run.best, d.unit) + "</td><td>" +
        improvement(r.run.improvement) + "</td><td>" + esc(r.run.machine || "-") + "</td><td>" + when(r.run.started_at) + "</td></tr>").join("");
    }
    async function refresh() {
      state.data = await get("api/compare?runs=" + (P.run_ids || P.runs).map(encodeURIComponent).join(","));
      draw();
    }
    if (P.mode === "static") draw();
    else {
      refresh().catch((e) => { $("content").innerHTML = "<p>" + esc(e.message) + "</p>"; })
        .then(afterPaint).then(() => loadPlotly().catch(() => {}));
      poll(refresh, 2000);
    }
  }

  const pages = {runs: runsPage, run: runPage, compare: comparePage};
  if (P.mode === "static") loadPlotly();  // inlined after this script: there once the document is parsed
  // This script ends the page's body: the elements it fills are there, and its requests leave now rather
  // than after an asynchronous plotly.js has been compiled (that may delay DOMContentLoaded).
  if (document.readyState === "loading" && !document.getElementById("content")) {
    document.addEventListener("DOMContentLoaded", () => pages[P.page]());
  } else {
    pages[P.page]();
  }
})();
