"""CPU/GPU placement of a matrix product on host arrays: numpy on the CPU, or torch on the GPU.

The GPU alternative copies both operands to the device, multiplies and copies the product back, so its
time includes the transfers: for small matrices the copies and the launch cost more than the CPU's whole
product, for large ones the GPU wins by far. ``tune_placement`` measures both at a ladder of sizes and
puts the cutoff where their times cross; on a machine without a GPU the site runs numpy at every size.

Run:
    python -m perftune.examples.gpu.placement tune    # measure, print the table, write the choices file
    python -m perftune.examples.gpu.placement run 700 # one product with the tuned choices
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from perftune.choice import DeviceSite, tune_placement

matmul_site = DeviceSite("gpu-placement-matmul", size=lambda pair: pair[0].shape[0], default="numpy",
                         size_range=(2, 1 << 15))

TUNE_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)


@matmul_site.alternative("numpy", device="cpu")
def on_cpu(pair: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    a, b = pair
    return a @ b


@matmul_site.alternative("torch-cuda", device="cuda")
def on_gpu(pair: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    import torch

    a, b = pair
    ga = torch.from_numpy(a).to("cuda", non_blocking=False)
    gb = torch.from_numpy(b).to("cuda", non_blocking=False)
    return (ga @ gb).cpu().numpy()  # .cpu() waits for the product: the time is end to end


def random_pair(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return (rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32))


def close_enough(pair: tuple[np.ndarray, np.ndarray], out: Any) -> bool:
    a, b = pair
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # float32 products on either device (the GPU may use TF32 if the user enabled it: 1e-3).
    return bool(np.linalg.norm(out - ref) <= 1e-3 * np.linalg.norm(ref))


def tune(sizes: tuple[int, ...] = TUNE_SIZES, n_rounds: int = 5) -> Any:
    return tune_placement(matmul_site, random_pair, list(sizes), check=close_enough, n_rounds=n_rounds)


def main(argv: list[str]) -> None:
    if argv[:1] == ["tune"]:
        result = tune()
        print(result.table())
        print("tuned:", result.cutoffs, result.choices)
        print("wrote", result.save())
        return
    n = int(argv[1]) if len(argv) > 1 else 700
    pair = random_pair(n, np.random.default_rng(1))
    t0 = time.perf_counter()
    out = matmul_site(pair)
    elapsed = time.perf_counter() - t0
    assert close_enough(pair, out)
    print(f"{matmul_site!r}\n{n} x {n} on {matmul_site.choose(n)} in {elapsed * 1e3:.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
