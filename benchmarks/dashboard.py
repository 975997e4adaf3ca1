"""How long the dashboard takes to load its pages on a run of 100,000 trials.

A fresh SQLite store gets one run of N trials (inserted through ``Store.add_trial``, as the driver writes
them: a 6-parameter configuration, 3 samples, 10% failures) and a second, small run. A real
``perftune dashboard`` process serves it; the pages are timed over HTTP, the way the browser loads them:

- runs page: ``GET /`` and ``GET /api/runs`` (the static assets are cached by the browser after the
  first visit, and timed on their own);
- run page: ``GET /runs/NAME``, ``GET /api/runs/NAME`` (summary, convergence, credits, failures, best) and
  the first page of the trial table ``GET /api/runs/NAME/trials``; the parameter views
  (``/parameters``: a random forest on at most 2,000 trials) load after the page and are timed apart;
- the trial table deep in the run, read at an offset (the database walks the rows it skips) and read
  after the last row of the page before (a keyset cursor, as the page's "next" button reads it: an
  index walk from that row), by trial and by value among the successful trials.

Each is timed cold (the first request, sent as soon as the server answers: the views it reads in the
background when it starts are still being computed, and the request waits for them) and warm (median of
5 repeats: the views of a run are cached until its trial count or status changes). A user who opens the
page a few seconds after ``perftune dashboard`` started gets the warm numbers.
With ``--browser``, the run page and the runs page are also timed in chromium (Playwright), cold (a new
browser profile) and warm (opened from the runs page): from navigation until the trial table is drawn,
until the first convergence plot (perftune's static SVG, before plotly.js has run) is on the screen, until
Plotly's interactive plot has replaced it, until the plot has all its points, and until every view is
drawn.

    .venv/bin/python benchmarks/dashboard.py     # 100,000 trials, writes benchmarks/results/dashboard.md
    .venv/bin/python benchmarks/dashboard.py --trials 10000 --browser --out -
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np

from perftune.space import Choice, Float, Int, Permutation, Pow2, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

RESULTS = Path(__file__).resolve().parent / "results" / "dashboard.md"
TECHNIQUES = ("random", "model", "ga", "boundary", "coordinate-descent")


def make_space() -> Space:
    return Space({"block_x": Pow2(1, 1024), "block_y": Pow2(1, 1024), "unroll": Int(1, 16),
                  "alpha": Float(0.0, 1.0), "algo": Choice(["naive", "tiled", "strassen"]),
                  "order": Permutation(["i", "j", "k"])})


def fill(db: str, n: int, seed: int = 0) -> float:
    """Store a run of ``n`` trials; returns the seconds it took."""
    space = make_space()
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    with open_store(db) as store:
        run_id = store.create_run("big", space, {"budget": {"evals": n}}, "min", None).id
        configs = space.sample(rng, n=n)
        start = time.time() - n * 0.01
        for i, config in enumerate(configs):
            began = start + i * 0.01
            if rng.random() < 0.1:
                trial = Trial(i, config, Status.TIMEOUT if i % 3 else Status.FAILED,
                              reason="timeout: run timed out after 2 s" if i % 3 else "exit 1: wrong output",
                              technique=TECHNIQUES[i % 5], worker=f"w{i % 4}", started_at=began,
                              finished_at=began + 0.008)
            else:
                value = float(1.0 + rng.random() + 1.0 / (1 + i / 1000))
                trial = Trial(i, config, Status.OK, value=value, loss=value,
                              samples=[value * 0.99, value, value * 1.01], technique=TECHNIQUES[i % 5],
                              worker=f"w{i % 4}", started_at=began, finished_at=began + 0.008)
            store.add_trial(run_id, trial)
        store.finish_run(run_id)
        small = store.create_run("small", space, {}, "min", None).id
        for i, config in enumerate(space.sample(rng, n=50)):
            store.add_trial(small, Trial(i, config, Status.OK, value=2.0 + i, loss=2.0 + i,
                                         technique="random"))
        store.finish_run(small)
    return time.perf_counter() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
    return time.perf_counter() - t0, len(body)


def timed(base: str, paths: list[str], repeats: int = 5) -> tuple[float, list[float], int]:
    """(cold seconds, warm seconds of each repeat, bytes) of loading ``paths`` one after the other."""
    def once() -> tuple[float, int]:
        total, size = 0.0, 0
        for p in paths:
            s, n = get(base + p)
            total += s
            size += n
        return total, size

    cold, size = once()
    warm = [once()[0] for _ in range(repeats)]
    return cold, warm, size


# Recorded in the page, in ms since its navigation started (performance.now()), by a MutationObserver.
_MARKS = """
window.__marks = {};
new MutationObserver(() => {
  const m = window.__marks, now = performance.now(), q = (s) => document.querySelector(s);
  const mark = (name, selector) => { if (m[name] === undefined && q(selector)) m[name] = now; };
  mark("runs", "#runs tbody tr");
  mark("table", "#trial-table tbody tr");
  // The first plot: perftune's static SVG (before plotly.js has run) or Plotly's, whichever comes first;
  // "shown" is the end of the next frame after it entered the page (rendered, unless the page is busy).
  if (m.first === undefined && q("#convergence > svg.quick-plot, #convergence .main-svg")) {
    m.first = now;
    requestAnimationFrame(() => setTimeout(() => { m.shown = performance.now(); }, 0));
  }
  mark("plot", "#convergence .main-svg");
  mark("complete", "#convergence[data-complete='true']");
  mark("credits", "#credits .main-svg");
  mark("importance", "#importance .main-svg");
  mark("params", "#slices .main-svg");
  mark("parallel", "#parallel .main-svg");
}).observe(document, {subtree: true, childList: true, attributes: true});
"""
_LOADED = ("() => { const m = window.__marks || {}; return m.table !== undefined && m.shown !== undefined "
           "&& m.plot !== undefined; }")
_EVERYTHING = ("() => { const m = window.__marks || {}; return ['complete', 'credits', 'importance']"
               ".every((k) => m[k] !== undefined); }")
_SCROLLED = ("() => { const m = window.__marks || {}; "
             "return m.params !== undefined && m.parallel !== undefined; }")


def browser_time(base: str, path: str, repeats: int = 5) -> dict[str, list[dict[str, float]]]:
    """Marks (s since navigation) of the run page and the runs page in chromium, cold and warm.

    Cold: a new browser profile (empty HTTP cache, no compiled code) opens the page directly. Warm: the
    user has the runs page open (plotly.js is fetched and compiled once its table is drawn) and then opens
    the run page, as one does; each repeat is a fresh navigation from the runs page.
    """
    from playwright.sync_api import sync_playwright

    def marks(page: object) -> dict[str, float]:
        got = {k: v / 1000 for k, v in page.evaluate("() => window.__marks").items()}  # type: ignore[attr-defined]
        if "table" in got and "shown" in got:
            got["loaded"] = max(got["table"], got["shown"])
        views = [got[k] for k in ("complete", "credits", "importance") if k in got]
        if len(views) == 3:
            got["every"] = max(views)
        if "scrolled" in got and "params" in got and "parallel" in got:
            got["below"] = max(got["params"], got["parallel"]) - got["scrolled"]
        return got

    def scroll_down(page: object) -> None:
        # Parallel coordinates and slices are drawn when their section nears the screen.
        page.evaluate("() => { window.__marks.scrolled = performance.now(); "  # type: ignore[attr-defined]
                      "document.getElementById('h-slices').scrollIntoView(); }")
        page.wait_for_function(_SCROLLED, timeout=120_000)  # type: ignore[attr-defined]

    out: dict[str, list[dict[str, float]]] = {
        k: [] for k in ("run cold", "run warm", "runs cold", "runs warm")}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for _ in range(repeats):
            for what, url, ready in (("run cold", base + path, _LOADED), ("runs cold", base, "() => "
                                     "(window.__marks || {}).runs !== undefined")):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.add_init_script(_MARKS)
                page.goto(url)
                page.wait_for_function(ready, timeout=120_000)
                if what == "run cold":
                    page.wait_for_function(_EVERYTHING, timeout=120_000)
                    scroll_down(page)
                out[what].append(marks(page))
                context.close()
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.add_init_script(_MARKS)
        for _ in range(repeats):
            page.goto(base)
            page.wait_for_function("() => (window.__marks || {}).runs !== undefined", timeout=120_000)
            out["runs warm"].append(marks(page))
            page.wait_for_function("() => !!window.Plotly", timeout=120_000)
            page.goto(base + path)
            page.wait_for_function(_LOADED, timeout=120_000)
            page.wait_for_function(_EVERYTHING, timeout=120_000)
            scroll_down(page)
            out["run warm"].append(marks(page))
        context.close()
        browser.close()
    return out


def browser_lines(marks: dict[str, list[dict[str, float]]], *_: object) -> list[str]:
    def cell(runs: list[dict[str, float]], key: str) -> str:
        values = sorted(m[key] for m in runs if key in m)
        if not values:
            return "-"
        return f"{statistics.median(values):.2f} ({values[0]:.2f}-{values[-1]:.2f})"

    n = len(marks["run warm"])
    lines = ["",
             "In chromium (Playwright, Debian's chromium, headless, software WebGL), seconds from the "
             f"start of the navigation (`performance.now()` in the page), median (min-max) of {n} "
             "navigations. *Table*: the trial table's first page is in the page. *First plot shown*: the "
             "convergence plot is in the page and a frame has been rendered since (the end of the next "
             "animation frame): the static SVG that perftune's views.js draws before plotly.js has run "
             "(axes, ticks, legend, the whole best-so-far line and an even sample of at most 1,000 values "
             "and of the failures), or Plotly's plot if it came first. *Loaded* is the later of the two. "
             "*Plotly* is Plotly's first, interactive draw replacing the SVG (hover, zoom, pan; an even "
             "sample of about 1,000 values as SVG); *whole* is the plot redrawn with all the values it has "
             "(20,000, WebGL); *every view* adds the credits, the failures and the parameter importance "
             "(fetched after the page: a forest); *below* is how long the parallel coordinates (WebGL) and "
             "slice plots, drawn when their section nears the screen, take after scrolling to them.",
             "Cold: a new browser profile opens the page (empty HTTP cache, nothing compiled). Warm: from "
             "the runs page, once it has fetched and compiled plotly.js in the background (the run page "
             "still runs plotly.js anew: it is inserted once the first data are on the screen).",
             "",
             "| page | table | first plot shown (SVG) | loaded | Plotly interactive | convergence whole "
             "| every view | below |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for what in ("run cold", "run warm"):
        runs = marks[what]
        lines.append(f"| run page, {what.split()[1]} | {cell(runs, 'table')} | {cell(runs, 'shown')} | "
                     f"{cell(runs, 'loaded')} | {cell(runs, 'plot')} | {cell(runs, 'complete')} | "
                     f"{cell(runs, 'every')} | {cell(runs, 'below')} |")
    for what in ("runs cold", "runs warm"):
        lines.append(f"| runs page, {what.split()[1]} (its table) | {cell(marks[what], 'runs')} | - | "
                     f"{cell(marks[what], 'runs')} | - | - | - | - |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--browser", action="store_true", help="also time the run page in chromium")
    ap.add_argument("--out", default=str(RESULTS), help="markdown file to write ('-': stdout only)")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "big.db")
        fill_s = fill(db, args.trials)
        port = free_port()
        exe = Path(sys.executable).with_name("perftune")
        proc = subprocess.Popen([str(exe), "dashboard", "--store", db, "--port", str(port)],
                                stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}/"
        try:
            for _ in range(300):
                try:
                    get(base + "api/runs/small/version")
                    break
                except OSError:
                    time.sleep(0.1)
            rows = []
            rows.append(("runs page (/ + /api/runs)", *timed(base, ["", "api/runs"])))
            rows.append(("run page (/runs/big + /api/runs/big + first table page)",
                         *timed(base, ["runs/big", "api/runs/big", "api/runs/big/trials?offset=0&limit=25"])))
            deep = args.trials * 9 // 10
            deep_ok = args.trials * 8 // 10  # a tenth of the trials failed: the successful ones are 90%
            for label, query, offset in (("by trial", "sort=trial", deep),
                                         ("by value, status ok", "sort=value&status=ok", deep_ok)):
                page = f"api/runs/big/trials?limit=25&{query}"
                rows.append((f"table page at offset {offset:,}, {label} (offset: the rows skipped are read)",
                             *timed(base, [f"{page}&offset={offset}"])))
                # The page after the last row of the one before it, as the page's "next" button reads it.
                with urllib.request.urlopen(f"{base}{page}&offset={offset - 25}", timeout=120) as r:
                    last = json.loads(r.read())["last"]
                after = urllib.parse.quote(last)
                rows.append(("the same page read after the row before it (keyset cursor)",
                             *timed(base, [f"{page}&offset={offset}&after={after}"])))
            rows.append(("table page filtered by text (config contains \"strassen\")",
                         *timed(base, ["api/runs/big/trials?offset=0&limit=25&text=strassen"])))
            rows.append(("parameter views (after the page: forest on 2,000 trials)",
                         *timed(base, ["api/runs/big/parameters"], repeats=2)))
            rows.append(("static assets (plotly.js, views.js, views.css: cached by the browser)",
                         *timed(base, ["static/plotly.min.js", "static/views.js", "static/views.css"])))
            in_browser = browser_time(base, "runs/big") if args.browser else None
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    load_after = os.getloadavg()
    lines = [
        "# Dashboard on a run of 100,000 trials" if args.trials == 100_000
        else f"# Dashboard on {args.trials} trials",
        "",
        f"Command: `nice .venv/bin/python benchmarks/dashboard.py --trials {args.trials}"
        f"{' --browser' if args.browser else ''}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}; SQLite store in a temporary folder.",
        f"Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}.",
        f"Load average before/after: {load_before[0]:.1f} / {load_after[0]:.1f} (1-minute, "
        f"{os.cpu_count()} cores; whatever else ran on the machine counts in it).",
        "",
        f"Store: one run of {args.trials:,} trials (6 parameters, 3 samples, 10% failures) inserted with "
        f"`Store.add_trial` in {fill_s:.1f} s, and one run of 50.",
        "Measured over HTTP (urllib, one request after the other, as the page issues them) against a real "
        "`perftune dashboard` process. Cold: the first request, sent as soon as the server answers (it is "
        "then still reading the newest runs' views in the background, and the request waits for that). Warm: "
        "median of the repeats (the views of a run are cached until its trial count or status changes; "
        "the table pages are never cached: each is a query).",
        "",
        "| what | cold (s) | warm median (s) | bytes |",
        "|---|---:|---:|---:|",
    ]
    for name, cold, warm, size in rows:
        lines.append(f"| {name} | {cold:.3f} | {statistics.median(warm):.3f} | {size:,} |")
    if in_browser is not None:
        lines += browser_lines(in_browser, load_before, load_after)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
