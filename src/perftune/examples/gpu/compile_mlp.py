"""Tune torch.compile's Inductor settings for a small MLP on its real inputs (CPU or GPU).

Run:
    python -m perftune.examples.gpu.compile_mlp            # on the GPU if there is one, else the CPU
    python -m perftune.examples.gpu.compile_mlp --budget 4 --device cpu
"""

from __future__ import annotations

import argparse

import torch

from perftune.torch import tune_compile


class MLP(torch.nn.Module):
    """A small MLP (Linear, GELU, LayerNorm), the kind of block torch.compile fuses well."""

    def __init__(self, width: int = 256, depth: int = 3) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        for _ in range(depth):
            layers += [torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.LayerNorm(width)]
        self.body = torch.nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=8, help="candidates, baselines included")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    model = MLP().to(args.device).eval()
    x = torch.randn(args.batch, 256, device=args.device)
    result = tune_compile(model, (x,), budget=args.budget, progress=print)
    print(result.summary())
    y = result.compiled(x)
    print("compiled output", tuple(y.shape))


if __name__ == "__main__":
    main()
