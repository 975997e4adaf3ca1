"""Learned per-input dispatch for a Triton kernel on a GPU, against tuning every key and one config for all.

The kernel is the example bf16 matmul (``src/perftune/examples/gpu/triton_matmul.py``: 926 valid
configurations, key ``M, N, K``). :class:`perftune.adapt.TritonSite` learns landmarks on the training
shapes (one per shape cluster, plus the overall one) and a dispatcher; on held-out test shapes (other
M, N and K), every landmark and the kernel's first configuration are measured through the kernel's
own benchmark (``Autotuner.benchmark``: a benchmark process, CUDA events, L2 flushed, outputs checked),
so the dispatcher's pick, the per-shape best landmark (the oracle of the landmarks) and the best single
landmark come from one table. Then the kernel tunes the first ``--per-key`` test shapes itself, the way
``perftune.triton.autotune`` (and Triton) do without a dispatcher: its wall time per new shape, and its
configuration re-measured beside the dispatcher's pick in a fresh benchmark.

Usage (on the GPU machine, from the repository root; ``benchmarks/adapt_triton_device.sh`` does it)::

    python benchmarks/adapt_triton.py run --out adapt-triton.json
    python benchmarks/adapt_triton.py report adapt-triton.json > benchmarks/results/adapt-triton.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Training shapes: LLM-style projections (M tokens, N x K weights) at six M and two weight shapes.
TRAIN = [(m, n, k) for m in (16, 64, 256, 1024, 4096, 8192) for n, k in ((4096, 4096), (8192, 2048))]
# Held out: other M (between and beyond the training ones) and other weight shapes.
TEST = [(m, n, k) for m in (32, 128, 512, 2048, 6144) for n, k in ((2048, 8192), (6144, 4096))]


def card_state() -> str:
    query = "name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu"
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"


def _launch(shape: tuple[int, int, int]) -> Any:
    import torch

    from perftune.adapt import Launch
    from perftune.examples.gpu.triton_matmul import grid

    m, n, k = shape
    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    c = torch.zeros((m, n), device="cuda", dtype=torch.bfloat16)
    return Launch(a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                  c.stride(1), grid=grid)


def _measure_all(kernel: Any, launch: Any, configs: list[dict[str, Any]]) -> list[float | None]:
    """Milliseconds of each configuration on ``launch`` (None: failed or pruned), one benchmark."""
    out: list[float | None] = []
    with kernel.benchmark(*launch.args, grid=launch.grid, **launch.kwargs) as bench:
        for config in configs:
            try:
                out.append(bench.measure(config))
            except Exception as e:  # a failure is data here, not an error of the benchmark
                print(f"  {config}: {str(e)[:120]}", flush=True)
                out.append(None)
    return out


def run(args: argparse.Namespace) -> None:
    os.environ.setdefault("PERFTUNE_TRITON_CACHE", tempfile.mkdtemp(prefix="perftune-triton-"))
    import torch

    from perftune.adapt import TritonSite
    from perftune.examples.gpu.triton_matmul import tuned_matmul
    from perftune.targets.triton import triton_config_dict

    record: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "card_before": card_state(),
        "train": TRAIN,
        "test": TEST,
        "budget": args.budget,
        "clusters": args.clusters,
        "landmark_search": "each landmark the kernel's own tuning of the cluster's largest shape",
    }
    kernel = tuned_matmul
    site = TritonSite(kernel)
    train = [_launch(s) for s in TRAIN]
    t0 = time.perf_counter()
    tuning = site.tune(train, budget=args.budget, n_clusters=args.clusters, seed=0)
    record["tune_wall_s"] = time.perf_counter() - t0
    record["n_trials"] = tuning.n_trials
    record["summary"] = tuning.summary()
    print(record["summary"], flush=True)
    landmarks = [dict(lm) for lm in tuning.landmarks]
    default = triton_config_dict(kernel.configs[0])
    record["landmarks"] = landmarks
    record["default"] = default
    record["train_time_ms"] = (tuning.time_s * 1e3).tolist()
    record["train_ok"] = tuning.ok.tolist()
    del train
    torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps(record, indent=1))  # what is done survives a time limit

    rows = []
    for shape in TEST:
        launch = _launch(shape)
        named = site.arguments(launch)
        pick = site.choose(named)
        assert pick is not None
        t0 = time.perf_counter()
        for _ in range(1000):
            site.choose(named)
        decide_us = (time.perf_counter() - t0) * 1e3
        times = _measure_all(kernel, launch, [*landmarks, default])
        rows.append({"shape": shape, "pick": landmarks.index(pick), "decide_us": decide_us,
                     "landmark_ms": times[:-1], "default_ms": times[-1]})
        print(json.dumps(rows[-1]), flush=True)
        del launch
    record["rows"] = rows
    record["per_key"] = []
    record["card_after"] = card_state()
    Path(args.out).write_text(json.dumps(record, indent=1))

    # Tuning per key, as the kernel does without a dispatcher (its own default budget).
    kernel.choose_with(None)
    per_key = []
    for shape in TEST[: args.per_key]:
        launch = _launch(shape)
        t0 = time.perf_counter()
        kernel[launch.grid](*launch.args)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        report = kernel.last_report
        tuned = dict(report.best)
        pick = site.choose(site.arguments(launch))
        again = _measure_all(kernel, launch, [tuned, pick])
        per_key.append({"shape": shape, "tune_wall_s": wall, "n_measured": report.n_measured,
                        "tuned": tuned, "tuned_ms": again[0], "pick_ms": again[1]})
        print(json.dumps(per_key[-1]), flush=True)
    record["per_key"] = per_key
    record["card_after"] = card_state()
    Path(args.out).write_text(json.dumps(record, indent=1))


def _geomean(xs: list[float]) -> float:
    return math.exp(statistics.mean(math.log(x) for x in xs))


def report(args: argparse.Namespace) -> None:
    r = json.loads(Path(args.results).read_text())
    landmarks = r["landmarks"]
    train_ms = r["train_time_ms"]
    ok_train = r["train_ok"]
    # The best single landmark on the training shapes (every shape answered), as a user would pick one.
    totals = [sum(row[j] for row in train_ms) if all(o[j] for o in ok_train) else math.inf
              for j in range(len(landmarks))]
    single = min(range(len(landmarks)), key=lambda j: totals[j])
    # Runs before the field: perftune.tune over the objective on two representatives per cluster.
    search = r.get("landmark_search", "each landmark a perftune.tune search on two representatives of its "
                   "cluster, compiled one at a time in the benchmark process")
    print("# Learned per-input dispatch for a Triton kernel (perftune.adapt.TritonSite)\n")
    print("Command: `bash benchmarks/adapt_triton_device.sh` (`python benchmarks/adapt_triton.py run`), "
          "then `python benchmarks/adapt_triton.py report`  ")
    print(f"Date: {r['date']}; device: {r['device']} (torch {r['torch']})  ")
    print(f"Card before: `{r['card_before']}`  \nCard after: `{r['card_after']}`\n")
    print(f"Kernel: the example bf16 matmul (926 configurations, key M, N, K). Training: {len(r['train'])} "
          f"shapes {r['train']}; {r['clusters']} clusters, {search} "
          f"(budget: {r['budget'] or 'the per-key default, per cluster'}); "
          f"learning took {r['tune_wall_s']:.0f} s ({r['n_trials']} trials). Test (held out): "
          f"{len(r['test'])} shapes {r['test']}. Every time is the kernel's own benchmark (CUDA events, L2 "
          "flushed, outputs checked), median milliseconds; the landmarks and the first configuration are "
          "measured on each test shape in one benchmark.\n")
    print("```\n" + r["summary"] + "\n```\n")
    print("## Test shapes: the dispatcher's pick against the landmarks' best, one config for all, the "
          "first config\n")
    print("| shape (M, N, K) | dispatcher picks | its ms | best landmark ms (oracle) | pick / oracle | "
          f"best single landmark ({single}) ms | first config ms | decide (µs) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    pick_r, single_r, default_r, pick_ms_all, oracle_all, single_all, default_all = [], [], [], [], [], [], []
    for row in r["rows"]:
        lm = row["landmark_ms"]
        finite = [x for x in lm if x is not None]
        oracle = min(finite)
        pick_ms = lm[row["pick"]]
        s_ms = lm[single]
        d_ms = row["default_ms"]
        pick_r.append(pick_ms / oracle if pick_ms else math.inf)
        single_r.append(s_ms / oracle if s_ms else math.inf)
        if d_ms:
            default_r.append(d_ms / oracle)
        pick_ms_all.append(pick_ms or math.inf)
        oracle_all.append(oracle)
        single_all.append(s_ms or math.inf)
        default_all.append(d_ms or math.inf)
        fmt = lambda x: "failed" if x is None else f"{x:.4f}"  # noqa: E731
        print(f"| {tuple(row['shape'])} | {row['pick']} | {fmt(pick_ms)} | {oracle:.4f} | "
              f"{pick_ms / oracle if pick_ms else math.inf:.3f} | {fmt(s_ms)} | {fmt(d_ms)} | "
              f"{row['decide_us']:.1f} |")
    print()
    print("| over the test shapes | dispatcher | best single landmark | first config | "
          "oracle of the landmarks |")
    print("|---|---:|---:|---:|---:|")
    print(f"| geomean of time / oracle | {_geomean(pick_r):.3f} | {_geomean(single_r):.3f} | "
          f"{_geomean(default_r):.3f} | 1.000 |")
    print(f"| total ms (sum over shapes) | {sum(pick_ms_all):.3f} | {sum(single_all):.3f} | "
          f"{sum(default_all):.3f} | {sum(oracle_all):.3f} |")
    print()
    if r["per_key"]:
        print("## Tuning each new key instead (the kernel without a dispatcher)\n")
        print("| shape | tuning wall (s) | configs measured | tuned ms | dispatcher's pick ms | "
              "pick / tuned |")
        print("|---|---:|---:|---:|---:|---:|")
        for row in r["per_key"]:
            t, p = row["tuned_ms"], row["pick_ms"]
            ratio = p / t if (p and t) else math.nan
            print(f"| {tuple(row['shape'])} | {row['tune_wall_s']:.1f} | {row['n_measured']} | "
                  f"{t if t is None else f'{t:.4f}'} | {p if p is None else f'{p:.4f}'} | {ratio:.3f} |")
        print()
    print("Landmarks:\n")
    for j, lm in enumerate(landmarks):
        note = " (the first configuration, the searches' seed)" if lm == r["default"] else ""
        print(f"- {j}: `{lm}`{note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--out", default="adapt-triton.json")
    p.add_argument("--budget", type=int, default=None,
                   help="trials of all landmark searches (default: a key's tuning budget per cluster)")
    p.add_argument("--clusters", type=int, default=4)
    p.add_argument("--per-key", type=int, default=4)
    q = sub.add_parser("report")
    q.add_argument("results")
    args = ap.parse_args()
    run(args) if args.cmd == "run" else report(args)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    main()
