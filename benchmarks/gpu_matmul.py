"""bf16 Triton matmul on one GPU: cuBLAS, triton.autotune, torch.compile(max-autotune) and perftune.

The kernel and its space are src/perftune/examples/gpu/triton_matmul.py (926 valid configurations:
tiles, GROUP_M, warps, stages, split-K for skinny shapes). Phases (each writes JSON lines to --out):

* ``tune``: per shape, cuBLAS timed (cool), perftune's drop-in over the whole list from a cold cache
  (its own cache folder and a fresh Triton compile cache), torch.compile(mode="max-autotune") from a
  fresh Inductor cache, then a sustained comparison (cuBLAS and perftune's config interleaved after a
  few seconds of load). Then the cache demonstration on the first shape: a second process launching
  the known key, and a list with one configuration added.
* ``exhaustive``: on --exhaustive shapes, every configuration of the list measured with the same
  harness (the exhaustive best), and triton.autotune itself (serial compile, do_bench) on a random
  sample of --triton-sample configurations from a cold compile cache: its wall time per
  configuration, scaled to the list, is its cold-cache wall time on the whole list.

All times are per launch, from CUDA events around CUDA-graph replays (at least 1 ms per sample), after
an L2 flush; medians. Usage (on the GPU machine):

    python benchmarks/gpu_matmul.py tune --out results.jsonl
    python benchmarks/gpu_matmul.py exhaustive --out results.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHAPES = [
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (16, 4096, 4096),
    (16, 8192, 8192),
    (64, 4096, 4096),
    (64, 8192, 8192),
    (256, 4096, 4096),
    (256, 8192, 8192),
]


def _emit(out: Path, record: dict[str, Any]) -> None:
    with out.open("a") as f:
        f.write(json.dumps(record, default=str) + "\n")
    print(json.dumps(record, default=str), flush=True)


def card_state() -> dict[str, str]:
    query = "name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        out = f"nvidia-smi failed: {exc}"
    return {"query": query, "value": out, "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def time_ms(fn: Any, n_samples: int = 15, graph: bool = True) -> list[float]:
    """Per-launch times of ``fn``: a CUDA graph of enough launches for 1 ms, after an L2 flush.

    ``graph=False`` for callables that replay CUDA graphs of their own (torch.compile's max-autotune):
    the same launches, issued directly.
    """
    import torch

    flush = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        fn()
    end.record()
    end.synchronize()
    n_launch = max(1, min(200, math.ceil(1.0 / max(start.elapsed_time(end) / 5, 1e-4))))

    def direct() -> None:
        for _ in range(n_launch):
            fn()

    replay = direct
    if graph:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            direct()
        replay = cuda_graph.replay
    out = []
    for _ in range(n_samples):
        flush.zero_()
        start.record()
        replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / n_launch)
    return out


def _tflops(shape: tuple[int, int, int], ms: float) -> float:
    m, n, k = shape
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def _launcher(mm: Any, a: Any, b: Any, c: Any, config: Any) -> Any:
    m, k = a.shape
    n = b.shape[1]
    meta = config.all_kwargs()
    split = config.kwargs["SPLIT_K"] > 1

    def run() -> None:
        if split:
            c.zero_()
        mm.matmul_kernel[mm.grid](
            a,
            b,
            c,
            m,
            n,
            k,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            c.stride(0),
            c.stride(1),
            **meta,
        )

    return run


def _fresh_caches(tag: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"gpu-matmul-{tag}-"))
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")
    os.environ["PERFTUNE_TRITON_CACHE"] = str(root / "perftune")
    return root


def phase_tune(args: argparse.Namespace, out: Path) -> None:
    import torch
    import triton

    import perftune.triton
    from perftune.examples.gpu import triton_matmul as mm

    configs = mm.matmul_configs()
    _emit(
        out,
        {
            "phase": "tune",
            "card_before": card_state(),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "n_configs": len(configs),
            "cpus": os.cpu_count(),
            "loadavg": os.getloadavg(),
        },
    )
    shapes = [SHAPES[i] for i in args.shape_index] if args.shape_index else SHAPES
    first_cache: Path | None = None
    for shape in shapes:
        m, n, k = shape
        torch.manual_seed(0)
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        c_ref = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        cublas = time_ms(lambda: torch.matmul(a, b, out=c_ref))  # noqa: B023
        root = _fresh_caches(f"{m}x{n}x{k}")
        first_cache = first_cache or root
        kernel = perftune.triton.autotune(
            configs=configs,
            key=["M", "N", "K"],
            prune_configs_by={"early_config_prune": mm.prune_for_shape},
            reset_to_zero=["c_ptr"],
            budget=args.budget,
        )(mm.matmul_kernel)
        t0 = time.perf_counter()
        c = mm.matmul(a, b, kernel)
        torch.cuda.synchronize()
        wall_s = time.perf_counter() - t0
        report = kernel.last_report
        err = float((c.float() - c_ref.float()).abs().max()) / float(c_ref.float().abs().max())
        c_pt = torch.zeros((m, n), device="cuda", dtype=torch.bfloat16)
        perftune_ms = time_ms(_launcher(mm, a, b, c_pt, kernel.best_config))
        # torch.compile max-autotune, from a fresh Inductor cache.
        compiled = torch.compile(lambda x, y: torch.matmul(x, y), mode="max-autotune", dynamic=False)
        t1 = time.perf_counter()
        try:
            compiled(a, b)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t1
            inductor_ms = time_ms(lambda: compiled(a, b), graph=False)  # noqa: B023
        except Exception as exc:  # report, and go on with the other contenders
            compile_s, inductor_ms = None, [math.nan]
            print("torch.compile failed:", exc, flush=True)
        torch._dynamo.reset()
        # Sustained: a few seconds of load, then cuBLAS and perftune's config interleaved.
        load = time.perf_counter()
        while time.perf_counter() - load < args.heat_s:
            for _ in range(20):
                torch.matmul(a, b, out=c_ref)
            torch.cuda.synchronize()
        sus_cublas, sus_pt = [], []
        for _ in range(5):
            sus_cublas += time_ms(lambda: torch.matmul(a, b, out=c_ref), 3)  # noqa: B023
            sus_pt += time_ms(_launcher(mm, a, b, c_pt, kernel.best_config), 3)
        rec = {
            "phase": "tune",
            "shape": shape,
            "cublas_ms": statistics.median(cublas),
            "perftune_ms": statistics.median(perftune_ms),
            "perftune_wall_s": wall_s,
            "perftune_measured": report.n_measured,
            "perftune_candidates": report.n_candidates,
            "perftune_failures": len(report.failures),
            "perftune_compile_s": report.compile_s,
            "perftune_best": report.best,
            "perftune_rel_err": err,
            "inductor_ms": statistics.median(inductor_ms),
            "inductor_compile_s": compile_s,
            "sustained_cublas_ms": statistics.median(sus_cublas),
            "sustained_perftune_ms": statistics.median(sus_pt),
            "failure_examples": report.failures[:3],
            "loadavg": os.getloadavg(),
        }
        rec["perftune_vs_cublas_cool"] = rec["cublas_ms"] / rec["perftune_ms"]
        rec["perftune_vs_cublas_sustained"] = rec["sustained_cublas_ms"] / rec["sustained_perftune_ms"]
        rec["tflops_cublas"] = _tflops(shape, rec["cublas_ms"])
        rec["tflops_perftune"] = _tflops(shape, rec["perftune_ms"])
        _emit(out, rec)
    if first_cache is not None and args.cache_demo:
        cache_demo(out, shapes[0], first_cache)
    _emit(out, {"phase": "tune", "card_after": card_state(), "loadavg": os.getloadavg()})


_SECOND = """
import time, json, os, sys
t0 = time.perf_counter()
import torch, perftune.triton
from perftune.examples.gpu import triton_matmul as mm
m, n, k = {shape}
a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t1 = time.perf_counter()
c = mm.matmul(a, b)
torch.cuda.synchronize()
t2 = time.perf_counter()
r = mm.tuned_matmul.last_report
print(json.dumps({{"from_cache": r.from_cache, "n_measured": r.n_measured, "import_and_setup_s": t1 - t0,
                  "first_launch_s": t2 - t1, "best": r.best}}))
"""


def cache_demo(out: Path, shape: tuple[int, int, int], root: Path) -> None:
    """A second process launches the tuned key from the cache; one added config is measured alone."""
    import torch

    import perftune.triton
    from perftune.examples.gpu import triton_matmul as mm

    env = {
        **os.environ,
        "PERFTUNE_TRITON_CACHE": str(root / "perftune"),
        "TRITON_CACHE_DIR": str(root / "triton"),
    }
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _SECOND.format(shape=tuple(shape))],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    second = (
        json.loads(proc.stdout.strip().splitlines()[-1])
        if proc.returncode == 0
        else {"error": proc.stderr[-2000:]}
    )
    second["process_wall_s"] = time.perf_counter() - t0
    os.environ["PERFTUNE_TRITON_CACHE"] = str(root / "perftune")
    configs = mm.matmul_configs()
    added = perftune.triton.to_triton_config(
        {
            "BLOCK_M": 128,
            "BLOCK_N": 128,
            "BLOCK_K": 64,
            "GROUP_M": 4,
            "SPLIT_K": 1,
            "num_warps": 8,
            "num_stages": 3,
        }
    )
    kernel = perftune.triton.autotune(
        configs=[*configs, added],
        key=["M", "N", "K"],
        prune_configs_by={"early_config_prune": mm.prune_for_shape},
        reset_to_zero=["c_ptr"],
    )(mm.matmul_kernel)
    m, n, k = shape
    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    t1 = time.perf_counter()
    mm.matmul(a, b, kernel)
    torch.cuda.synchronize()
    report = kernel.last_report
    _emit(
        out,
        {
            "phase": "cache",
            "shape": shape,
            "second_process": second,
            "add_one_config": {
                "n_measured": report.n_measured,
                "wall_s": time.perf_counter() - t1,
                "from_cache": report.from_cache,
                "measured": list(report.times_ms),
            },
        },
    )


def phase_exhaustive(args: argparse.Namespace, out: Path) -> None:
    import torch
    import triton

    import perftune.triton
    from perftune.examples.gpu import triton_matmul as mm

    configs = mm.matmul_configs()
    _emit(
        out,
        {
            "phase": "exhaustive",
            "card_before": card_state(),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "loadavg": os.getloadavg(),
        },
    )
    for index in args.exhaustive:
        shape = SHAPES[index]
        m, n, k = shape
        torch.manual_seed(0)
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        valid = mm.prune_for_shape(configs, {"K": k})
        _fresh_caches(f"ex-{m}x{n}x{k}")
        kernel = perftune.triton.autotune(
            configs=valid, key=["M", "N", "K"], reset_to_zero=["c_ptr"], budget=len(valid), store=None
        )(mm.matmul_kernel)
        t0 = time.perf_counter()
        mm.matmul(a, b, kernel)
        torch.cuda.synchronize()
        wall_s = time.perf_counter() - t0
        report = kernel.last_report
        times = sorted(report.times_ms.values())
        best = min(times)
        # triton.autotune itself on a random sample, cold compile cache: its cost per configuration.
        _fresh_caches(f"tr-{m}x{n}x{k}")
        sample = random.Random(index).sample(valid, args.triton_sample)
        tuned = triton.autotune(configs=sample, key=["M", "N", "K"], reset_to_zero=["c_ptr"])(
            mm.matmul_kernel
        )
        c = torch.zeros((m, n), device="cuda", dtype=torch.bfloat16)
        t1 = time.perf_counter()
        tuned[mm.grid](
            a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)
        )
        torch.cuda.synchronize()
        triton_sample_s = time.perf_counter() - t1
        c_tr = torch.zeros((m, n), device="cuda", dtype=torch.bfloat16)
        triton_best_ms = statistics.median(time_ms(_launcher(mm, a, b, c_tr, tuned.best_config)))
        # perftune's search (default budget) on the same list, cold caches, in this same run.
        _fresh_caches(f"pt-{m}x{n}x{k}")
        searched = perftune.triton.autotune(
            configs=valid, key=["M", "N", "K"], reset_to_zero=["c_ptr"], store=None
        )(mm.matmul_kernel)
        t2 = time.perf_counter()
        mm.matmul(a, b, searched)
        torch.cuda.synchronize()
        search_wall_s = time.perf_counter() - t2
        search_report = searched.last_report
        # Interleaved, the order alternating, one output buffer: the same power state, memory and
        # placement for both. A second launcher of the exhaustive best is timed in the same rounds
        # (an A/A check): two copies of one kernel differing shows this timing's own noise floor.
        c_out = torch.zeros((m, n), device="cuda", dtype=torch.bfloat16)
        best_cfg = perftune.triton.to_triton_config(report.best)
        ex_samples: list[float] = []
        se_samples: list[float] = []
        aa_samples: list[float] = []
        runs = [
            (ex_samples, _launcher(mm, a, b, c_out, best_cfg)),
            (se_samples, _launcher(mm, a, b, c_out, searched.best_config)),
            (aa_samples, _launcher(mm, a, b, c_out, best_cfg)),
        ]
        for r in range(10):
            for samples, fn in runs[r % 3 :] + runs[: r % 3]:
                samples += time_ms(fn, 3)
        exhaustive_best_ms = statistics.median(ex_samples)
        search_ms = statistics.median(se_samples)
        same_config = dict(search_report.best) == dict(report.best)
        _emit(
            out,
            {
                "phase": "exhaustive",
                "shape": shape,
                "n_valid": len(valid),
                "n_measured": report.n_measured,
                "n_failed": len(report.failures),
                "harness_wall_s": wall_s,
                "best_ms_search": best,
                "exhaustive_best_ms": exhaustive_best_ms,
                "exhaustive_best": report.best,
                "median_over_best": statistics.median(times) / best,
                "n_within_2pct": sum(t <= 1.02 * best for t in times),
                "times_ms_sorted_head": times[:20],
                "all_times": report.times_ms,
                "triton_sample": args.triton_sample,
                "triton_sample_wall_s": triton_sample_s,
                "triton_s_per_config": triton_sample_s / args.triton_sample,
                "triton_full_list_s_scaled": triton_sample_s / args.triton_sample * len(valid),
                "triton_sample_best_ms": triton_best_ms,
                "triton_sample_best": str(tuned.best_config),
                "perftune_search_ms": search_ms,
                "perftune_search_best": search_report.best,
                "perftune_search_measured": search_report.n_measured,
                "perftune_search_wall_s": search_wall_s,
                # The same configuration is the same kernel: its ratio is 1 whatever the timing says.
                "perftune_same_config_as_exhaustive": same_config,
                "perftune_over_exhaustive": 1.0 if same_config else exhaustive_best_ms / search_ms,
                "perftune_over_exhaustive_timed": exhaustive_best_ms / search_ms,
                "exhaustive_best_aa_ms": statistics.median(aa_samples),
                "aa_ratio": exhaustive_best_ms / statistics.median(aa_samples),
                "loadavg": os.getloadavg(),
            },
        )
    _emit(out, {"phase": "exhaustive", "card_after": card_state(), "loadavg": os.getloadavg()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["tune", "exhaustive"])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--budget", type=int, default=None, help="perftune's evaluations (default: 15%% of the list)"
    )
    parser.add_argument("--shape-index", type=int, nargs="*", default=None)
    parser.add_argument("--exhaustive", type=int, nargs="*", default=[1, 4])
    parser.add_argument("--triton-sample", type=int, default=30)
    parser.add_argument("--heat-s", type=float, default=3.0)
    parser.add_argument("--no-cache-demo", dest="cache_demo", action="store_false")
    args = parser.parse_args()
    if args.phase == "tune":
        phase_tune(args, args.out)
    else:
        phase_exhaustive(args, args.out)


if __name__ == "__main__":
    main()
