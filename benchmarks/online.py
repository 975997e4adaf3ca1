"""Online tuning with the racer on a workload that shifts halfway (examples/online/service.py).

What it measures, for the issue's claims:

* the latency each request saw from the racer against the safe configuration's own time on the same
  request (re-run in-process right after, interleaved with the baselines), and the racing overhead
  the racer measured itself (latency minus the answering configuration's time in its worker);
* the time (requests and seconds) until the configuration the racer serves with is within 5% of an
  offline-tuned configuration, in each half (offline tuning: ``perftune.tune`` on training requests of
  that half, drawn with another seed);
* recovery after the shift (the same measure from the shift on, against the second half's offline
  configuration), and when the shift was detected;
* default, offline-tuned and racer side by side, per half.

Racing uses twice the hardware per raced request; the report says how many requests were raced.

Run: ``nice .venv/bin/python benchmarks/online.py`` (about 3-6 minutes on the shared 2-core machine);
``--out benchmarks/results/online-<date>.md`` writes the report there as well as to stdout.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "online"))

import service  # noqa: E402  (the example is the workload)

WINDOW = 50  # requests per window of the "within 5%" measure
SPARSE = 25


def machine() -> list[str]:
    try:
        model = next(line.split(":", 1)[1].strip() for line in subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines()
            if line.startswith("Model name"))
    except StopIteration:
        model = platform.processor() or "unknown"
    load = os.getloadavg()
    return [
        f"# command: {' '.join([Path(sys.executable).name, *sys.argv])}",
        f"# date: {_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"# machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {model}; "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        f"# load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (the machine is shared with "
        "other jobs: wall-clock timings are disturbed, see the notes)",
    ]


def time_in_process(config: Any, request: list[int]) -> float:
    t0 = time.perf_counter()
    service.serve(config, request)
    return time.perf_counter() - t0


def offline_tune(requests: list[list[int]], budget: int, seed: int) -> tuple[Any, float]:
    """The best configuration for ``requests`` by perftune.tune (total time; hopeless ones cut short)."""
    import perftune
    from perftune.space import Space

    space = Space({service.sort_site.name: service.sort_site.selector()})
    best = [float("inf")]

    def total_time(config: Any) -> float:
        total = 0.0
        for r in requests:
            total += time_in_process(config, r)
            if total > 4 * best[0]:
                raise RuntimeError("more than 4x the best total so far")  # a FAILED trial, not a number
        best[0] = min(best[0], total)
        return total

    result = perftune.tune(total_time, space, budget=budget, seed=seed)
    assert result.best is not None
    return result.best.config, result.best.value / len(requests)


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def first_within(served: list[float], reference: list[float], start: int, tolerance: float) -> int | None:
    """First request i >= start such that the WINDOW requests from i on are within tolerance in total."""
    for i in range(start, len(served) - WINDOW + 1):
        if sum(served[i:i + WINDOW]) <= (1 + tolerance) * sum(reference[i:i + WINDOW]):
            return i
    return None


def main(argv: list[str] | None = None) -> None:
    from perftune.online import Racer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--size", type=int, default=5000, help="integers per request")
    parser.add_argument("--offline-budget", type=int, default=60)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    lines = machine()
    n, half = args.requests, args.requests // 2
    def request(i: int) -> list[int]:
        return service.request(i, n, args.size, seed=0)

    space_default = service.sort_site.selector().default
    default = {service.sort_site.name: space_default}

    racer = Racer(service.sort_site, check=service.is_sorted_permutation, seed=0)
    t0 = time.perf_counter()
    train = service.workload(16, size=args.size, seed=1)
    offline1, _ = offline_tune(train[:8], args.offline_budget, seed=0)
    offline2, _ = offline_tune(train[8:], args.offline_budget, seed=0)
    del train
    offline_s = time.perf_counter() - t0

    # The racer serves the workload (it was started first: its zygote is a fork of a small process).
    safe_at: list[Any] = []
    finished_at: list[float] = []
    clock = 0.0  # serving time: the requests are made outside it
    for i in range(n):
        r = request(i)
        safe_at.append(racer.safe)
        t_start = time.perf_counter()
        racer(r)
        clock += time.perf_counter() - t_start
        finished_at.append(clock)
    racer_s = clock
    racer.close()
    records = list(racer.records)
    assert len(records) == n
    delivered = [rec.latency_s for rec in records]

    # Replay, interleaved per request so that load changes hit every contender alike.
    contenders = {"default": default, "offline (1st half)": offline1, "offline (2nd half)": offline2}
    # The first half's configuration is quadratic on the second half (insertion sort on random data):
    # it is timed on every SPARSE-th request there, and its mean is over those.
    replay: dict[str, list[float]] = {k: [] for k in [*contenders, "racer's safe"]}
    for i in range(n):
        r = request(i)
        for k, c in contenders.items():
            if k == "offline (1st half)" and i >= half and (i - half) % SPARSE:
                replay[k].append(float("nan"))
            else:
                replay[k].append(time_in_process(c, r))
        replay["racer's safe"].append(time_in_process(safe_at[i], r))
    load_end = os.getloadavg()

    overhead = [rec.overhead_s for rec in records if rec.overhead_s is not None]
    raced = [rec for rec in records if rec.candidate_trial is not None]
    raced_overhead = [rec.overhead_s for rec in raced if rec.overhead_s is not None]
    bound = pct(overhead, 99)
    excess = [d - s for d, s in zip(delivered, replay["racer's safe"], strict=True)]
    violations = [(i, e) for i, e in enumerate(excess) if e > bound]
    # Requests a candidate answered: in the race the safe configuration was still running, so there it
    # was faster; against the safe configuration's in-process replay (whole machine, no racing) it may not be.
    by_cand = [(rec, s_rep) for rec, s_rep in zip(records, replay["racer's safe"], strict=True)
               if rec.answered_by == "candidate"]
    cand_faster = sum(rec.candidate_s is not None and rec.candidate_s <= s_rep for rec, s_rep in by_cand)
    out = [*lines, f"# load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}", ""]
    out += [f"{n} requests of {args.size} integers; the first {half} nearly sorted (log-normal values), "
            f"the rest random with 64 distinct values. Offline tuning: perftune.tune, {args.offline_budget} "
            f"trials per half on 8 training requests of that half (another seed), {offline_s:.0f} s.", ""]
    out += ["| configuration | selector |", "|---|---|"]
    out += [f"| {k} | `{c[service.sort_site.name]}` |" for k, c in contenders.items()]
    out += [f"| racer's safe at the end | `{racer.safe[service.sort_site.name]}` |", ""]

    out += ["## Side by side (mean latency per request, ms)", "",
            "| | first half | second half | whole run |", "|---|---:|---:|---:|"]
    def row(label: str, xs: list[float]) -> str:
        def mean(part: list[float]) -> tuple[float, str]:
            kept = [x for x in part if x == x]  # nan: not timed
            return statistics.fmean(kept), "" if len(kept) == len(part) else f" ({len(kept)} timed)"
        (m1, k1), (m2, k2) = mean(xs[:half]), mean(xs[half:])
        whole = (m1 * half + m2 * (n - half)) / n  # each half weighted by its number of requests
        return f"| {label} | {m1 * 1e3:.2f}{k1} | {m2 * 1e3:.2f}{k2} | {whole * 1e3:.2f} |"
    for k in contenders:
        out.append(row(f"{k} config, in-process", replay[k]))
    out.append(row("racer's safe config, in-process (replayed)", replay["racer's safe"]))
    out.append(row("**racer, as delivered** (racing overhead included)", delivered))
    out.append("")

    out += ["## Racer against its safe configuration, request by request", "",
            "Racing overhead measured by the racer (latency minus the answering configuration's time in "
            f"its worker): median {statistics.median(overhead) * 1e3:.2f} ms, "
            f"p95 {pct(overhead, 95) * 1e3:.2f} ms, p99 {bound * 1e3:.2f} ms, "
            f"max {max(overhead) * 1e3:.2f} ms; on the raced requests alone: median "
            f"{statistics.median(raced_overhead) * 1e3:.2f} ms, p99 {pct(raced_overhead, 99) * 1e3:.2f} ms "
            "(the others ran in the caller's process, with no hop to a worker).",
            f"Delivered latency minus the safe configuration's in-process time on the same request: median "
            f"{statistics.median(excess) * 1e3:.2f} ms, p95 {pct(excess, 95) * 1e3:.2f} ms, "
            f"p99 {pct(excess, 99) * 1e3:.2f} ms, max {max(excess) * 1e3:.2f} ms; "
            f"{sum(e < 0 for e in excess)} of {n} requests were answered faster than the safe configuration "
            f"takes alone in-process.",
            f"Requests slower than safe + the p99 overhead ({bound * 1e3:.2f} ms): {len(violations)} of {n}"
            + (f" (worst: request {max(violations, key=lambda v: v[1])[0]}, "
               f"{max(v[1] for v in violations) * 1e3:.2f} ms over the safe time)." if violations else "."),
            f"A candidate answered {len(by_cand)} requests (the safe configuration still running, killed); "
            f"on {cand_faster} of them the candidate's time in its pinned worker was also below the safe "
            "configuration's time in the in-process replay, which has the whole machine.",
            f"Losers killed: {racer.n_killed}; killing one and swapping in the side's spare worker took "
            f"median {statistics.median(racer.kill_s) * 1e3:.3f} ms on the request's path"
            if racer.kill_s else "No loser was killed.", ""]
    n_alone = n - len(raced)
    out += [f"Hardware: {len(raced)} of {n} requests were raced (both halves of the machine busy), "
            f"{n_alone} ran with the safe configuration alone in the caller's process while no exploration "
            "epoch was open.", ""]

    out += ["## Time to reach within 5% of the offline-tuned configuration", "",
            f"Measured on the racer's safe configuration replayed in-process, over windows of {WINDOW} "
            "requests (the first request of the first window whose total is within 5% of the offline "
            "configuration's on the same requests).", ""]
    def when(k: int | None, lo: int) -> str:
        if k is None or (lo == 0 and k >= half) or k + WINDOW > n:
            return "not reached"
        t = finished_at[k - 1] - (finished_at[lo - 1] if lo else 0.0) if k else 0.0
        since = "the start" if lo == 0 else "the shift"
        return f"request {k} ({k - lo} requests, {t:.1f} s of serving after {since})"

    for label, ref, lo in (("first half", replay["offline (1st half)"], 0),
                           ("after the shift", replay["offline (2nd half)"], half)):
        i = first_within(replay["racer's safe"], ref, lo, 0.05)
        j = first_within(delivered, ref, lo, 0.05)
        out.append(f"- {label}: safe configuration {when(i, lo)}; delivered latency {when(j, lo)}")
    out += ["", f"Shift detected at request(s) {racer.shifts} (the workload shifts at request {half}); "
            "promotions:", ""]
    out += [f"- request {p.seq} (epoch {p.epoch}): {p.wins} wins in {p.races} races -> "
            f"`{p.config[service.sort_site.name]}`" for p in racer.promotions]
    out += ["", f"Racer wall time for the {n} requests: {racer_s:.1f} s."]
    text = "\n".join(out) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
