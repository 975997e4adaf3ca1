"""Time against energy on the GPU: perftune's multi-objective search over the bf16 Triton matmul's
configurations (``triton_matmul.matmul_space``), with the energy read from NVML's counter.

Each configuration is compiled, checked against ``torch.matmul`` once, then launched back to back for at
least ``--window-s`` seconds between two reads of the GPU's total-energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules, through ctypes: no Python binding needed). Its
two metrics are the time per launch (CUDA events around the window) and the energy per launch; perftune's
default multi-objective search looks for the Pareto front of the two. Run it on a GPU::

    python -m perftune.examples.gpu.matmul_energy 8192 8192 8192 --budget 40 --out front.json

The energy counter covers the whole board, so the idle draw during a window is part of every launch's
energy: a configuration that is fast but power-hungry and one that is slower but frugal can both be on
the front. Keep other work off the GPU while it runs.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from typing import Any

from perftune.errors import PerftuneError

__all__ = ["Nvml", "main", "measure_config", "tune_time_and_energy"]


class Nvml:
    """The total-energy counter of one GPU, through NVML's C library (``libnvidia-ml.so.1``).

    Raises:
        PerftuneError: one line, when the library or the GPU is not there, or the GPU has no counter.
    """

    def __init__(self, index: int = 0) -> None:
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            raise PerftuneError(
                f"NVML: cannot load libnvidia-ml.so.1 ({exc}); is an NVIDIA driver installed?"
            ) from None
        self._lib = lib
        self._check(lib.nvmlInit_v2(), "nvmlInit_v2")
        handle = ctypes.c_void_p()
        self._check(lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)),
                    f"nvmlDeviceGetHandleByIndex_v2({index})")
        self._handle = handle
        self.energy_j()  # fails here, once, on a GPU without the counter

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            text = "?"
            try:
                self._lib.nvmlErrorString.restype = ctypes.c_char_p
                text = self._lib.nvmlErrorString(ctypes.c_int(rc)).decode()
            except Exception:  # noqa: BLE001 - the code alone is still a clear message
                pass
            raise PerftuneError(f"NVML: {what} failed with code {rc} ({text})")

    def energy_j(self) -> float:
        """Joules the GPU has used since its driver loaded."""
        mj = ctypes.c_ulonglong()
        self._check(self._lib.nvmlDeviceGetTotalEnergyConsumption(self._handle, ctypes.byref(mj)),
                    "nvmlDeviceGetTotalEnergyConsumption")
        return mj.value / 1000.0


def measure_config(
    config: dict[str, Any], a: Any, b: Any, nvml: Nvml, window_s: float = 0.5
) -> dict[str, float]:
    """Compile and check one configuration, then its time (ms) and energy (mJ) per launch."""
    import torch

    from perftune.examples.gpu.triton_matmul import grid, matmul_kernel

    m, k = a.shape
    n = b.shape[1]
    if k % (config["BLOCK_K"] * config["SPLIT_K"]):
        raise PerftuneError(f"K = {k} does not split into BLOCK_K * SPLIT_K = "
                            f"{config['BLOCK_K'] * config['SPLIT_K']} steps")
    c = torch.zeros((m, n), device=a.device, dtype=a.dtype)
    split = config["SPLIT_K"] > 1
    meta = {key: config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K")}

    def launch() -> None:
        if split:
            c.zero_()  # split-K adds into C
        matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), num_warps=config["num_warps"],
                            num_stages=config["num_stages"], **meta)

    launch()  # compiles
    torch.cuda.synchronize()
    reference = a @ b
    err = float((c.float() - reference.float()).abs().max())
    scale = float(reference.float().abs().max()) or 1.0
    if err > 0.02 * scale:
        raise PerftuneError(f"wrong result: differs from torch.matmul by {err:.3g} (max |C| {scale:.3g})")
    # Launches for about a tenth of the window, to size it; then the window itself.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        launch()
    end.record()
    end.synchronize()
    per_launch_s = max(start.elapsed_time(end) / 5 / 1000, 1e-6)
    n_launch = max(10, int(window_s / per_launch_s))
    torch.cuda.synchronize()
    e0 = nvml.energy_j()
    start.record()
    for _ in range(n_launch):
        launch()
    end.record()
    end.synchronize()
    e1 = nvml.energy_j()
    time_ms = start.elapsed_time(end) / n_launch
    energy_mj = (e1 - e0) * 1000.0 / n_launch
    if energy_mj <= 0:
        raise PerftuneError(f"the energy counter did not move in {n_launch} launches; raise --window-s")
    return {"time": time_ms, "energy": energy_mj, "launches": float(n_launch)}


def tune_time_and_energy(m: int, n: int, k: int, *, budget: int = 40, seed: int = 0,
                         window_s: float = 0.5, store: str | None = None) -> Any:
    """The multi-objective run (``goal={"time": "min", "energy": "min"}``); returns perftune's result."""
    import torch

    import perftune
    from perftune.examples.gpu.triton_matmul import matmul_space
    from perftune.space import Space

    torch.manual_seed(0)
    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    nvml = Nvml(torch.cuda.current_device())
    base = matmul_space()
    # The kernel needs K to split into whole BLOCK_K * SPLIT_K steps: a declared constraint, so that the
    # search never proposes what cannot run.
    space = Space(dict(base.params), constraints=[*base.constraints, f"{k} % (BLOCK_K * SPLIT_K) == 0"])
    return perftune.tune(lambda config: measure_config(dict(config), a, b, nvml, window_s), space,
                         budget=budget, seed=seed, goal={"time": "min", "energy": "min"},
                         name=f"matmul-energy-{m}x{n}x{k}", store=store)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shape", nargs="*", type=int, default=[8192, 8192, 8192], help="M N K")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window-s", type=float, default=0.5, help="seconds of launches per energy reading")
    parser.add_argument("--out", help="write the front and every trial as JSON here")
    args = parser.parse_args(argv)
    if len(args.shape) != 3:
        parser.error("give M N K")
    m, n, k = args.shape
    t0 = time.perf_counter()
    result = tune_time_and_energy(m, n, k, budget=args.budget, seed=args.seed, window_s=args.window_s)
    wall = time.perf_counter() - t0
    front = sorted(result.pareto, key=lambda t: t.metrics["time"])
    ok = [t for t in result.trials if t.ok]
    print(f"{m}x{n}x{k}: {len(ok)} configurations measured, {len(result.trials) - len(ok)} failed, "
          f"{wall:.0f} s; Pareto front (time per launch, energy per launch):")
    for t in front:
        print(f"  {t.metrics['time']:.4f} ms  {t.metrics['energy']:.2f} mJ  {dict(t.config)}")
    if args.out:
        rows = [{"config": dict(t.config), "status": t.status.value, "reason": t.reason,
                 "metrics": dict(t.metrics or {})} for t in result.trials]
        with open(args.out, "w") as fh:
            json.dump({"shape": [m, n, k], "budget": args.budget, "seed": args.seed, "wall_s": wall,
                       "front": [{"config": dict(t.config), **dict(t.metrics)} for t in front],
                       "trials": rows}, fh, indent=1)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except PerftuneError as exc:
        raise SystemExit(f"error: {exc}") from None
