"""tune_compile on three models (an MLP, a transformer block, ResNet-18): speedup over plain torch.compile
and over mode="max-autotune", with confidence intervals, outputs checked against eager.

Each candidate compiles in a fresh process; the winner, plain torch.compile, max-autotune and eager are
then timed interleaved in one more fresh process (CUDA events, warm-up, rotated order, medians).

Run (on a GPU machine; the device command is in benchmarks/gpu_torch_device.sh):
    python benchmarks/gpu_compile.py --out benchmarks/results --budget 8 --seconds 60
    python benchmarks/gpu_compile.py --device cpu --models mlp --budget 3   # the CPU path, small
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


class MLP(torch.nn.Module):
    """Four Linear-GELU-LayerNorm layers with a residual."""

    def __init__(self, width: int = 1024, depth: int = 4) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = []
        for _ in range(depth):
            layers += [torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width),
                       torch.nn.LayerNorm(width)]
        self.body = torch.nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + x


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention (SDPA) and a GELU MLP."""

    def __init__(self, d: int = 1024, heads: int = 16) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(att)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def build(name: str, device: str, dtype: torch.dtype) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    if name == "mlp":
        model: torch.nn.Module = MLP() if device == "cuda" else MLP(width=128, depth=2)
        x = torch.randn(256 if device == "cuda" else 32, model.body[0].in_features)
    elif name == "transformer":
        model = Block() if device == "cuda" else Block(d=128, heads=4)
        x = torch.randn(8, 512, 1024) if device == "cuda" else torch.randn(2, 64, 128)
    elif name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(weights=None)
        x = torch.randn(32, 3, 224, 224) if device == "cuda" else torch.randn(2, 3, 64, 64)
    else:
        raise SystemExit(f"unknown model {name!r}")
    return model.to(device, dtype).eval(), (x.to(device, dtype),)


def card_state() -> str:
    fields = "name,driver_version,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,utilization.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        out = f"nvidia-smi unavailable ({exc})"
    return f"{fields}: {out}"


def versions() -> str:
    try:
        import triton

        tv = triton.__version__
    except ImportError:
        tv = "none"
    load = os.getloadavg()
    return (f"torch {torch.__version__}, triton {tv}, python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def fmt_ci(ci: Any) -> str:
    return "n/a" if ci is None else f"{ci.estimate:.3f}x [{ci.lo:.3f}, {ci.hi:.3f}]"


def main() -> None:
    from perftune.drive import Budget
    from perftune.torch import TimingPlan, options_of, tune_compile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default="mlp,transformer,resnet18")
    parser.add_argument("--budget", type=int, default=8, help="candidates per model, baselines included")
    parser.add_argument("--seconds", type=float, default=60.0, help="search time per model")
    parser.add_argument("--timeout", type=float, default=150.0, help="per fresh process")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--workers", type=int, default=1, help="candidates compiled in parallel")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype) if args.device == "cuda" else torch.float32
    args.out.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = [
        "# tune_compile: torch.compile/Inductor settings tuned per model", "",
        f"Command: `python benchmarks/gpu_compile.py {' '.join(sys.argv[1:])}`  ",
        f"Date: {started}; device {args.device}; dtype {dtype}  ",
        f"Versions: {versions()}  ",
        f"Card before: {card_state()}", "",
        f"Budget per model: {args.budget} candidates or {args.seconds:g} s of search, whichever ends first "
        "(plain torch.compile and max-autotune are the first two candidates); each candidate compiles in a "
        "fresh process; then eager, plain torch.compile, max-autotune and the two best candidates are timed "
        "interleaved in one fresh process (20 rounds, CUDA events). Speedups are ratios of geometric means "
        "with 95% Welch intervals (perftune.measure.speedup_ci).", "",
    ]
    rows, details, record = [], [], {}
    for name in args.models.split(","):
        model, inputs = build(name, args.device, dtype)
        t0 = time.monotonic()
        try:
            result = tune_compile(model, inputs, budget=Budget(evals=args.budget, seconds=args.seconds),
                                  timeout_s=args.timeout, workers=args.workers,
                                  progress=lambda line, n=name: print(n, line, flush=True),
                                  final_plan=TimingPlan(n_warmup=5, n_rounds=20, min_sample_s=1e-3))
        except Exception as exc:  # one model failing must not lose the others' results
            rows.append(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:200]} | | | | | | |")
            continue
        wall = time.monotonic() - t0
        final = {vt.label: vt for vt in result.final}

        def ms(label: str, final: dict[str, Any] = final) -> str:
            vt = final.get(label)
            return f"{vt.median_s * 1e3:.3f}" if vt is not None and vt.median_s else "failed"

        worst_err = max((vt.rel_error or 0.0) for vt in result.final if vt.status.value == "ok")
        rows.append(f"| {name} | {ms('eager')} | {ms('torch.compile')} | {ms('max-autotune')} | "
                    f"{result.time_s * 1e3:.3f} | {fmt_ci(result.speedup_vs_default)} | "
                    f"{fmt_ci(result.speedup_vs_max_autotune)} | {worst_err:.1e} | {wall:.0f} s |")
        details.append(f"### {name}\n\nWinner settings: `{result.best_settings or 'plain torch.compile'}`  ")
        if result.note:
            details.append(f"Note: {result.note}  ")
        details.append("\n| candidate | status | median ms | options / reason |\n|---|---|---|---|")
        for t in result.trials:
            med = f"{t.value * 1e3:.3f}" if t.value is not None else ""
            what = options_of(t.config) if t.reason is None else f"{options_of(t.config)}: {t.reason}"
            details.append(f"| {t.id} | {t.status.value} | {med} | `{what}` |")
        details.append("\n| confirmation variant | status | compile s | median ms | rel. error vs eager |")
        details.append("|---|---|---|---|---|")
        for vt in result.final:
            comp = f"{vt.compile_s:.1f}" if vt.compile_s is not None else ""
            err = f"{vt.rel_error:.1e}" if vt.rel_error is not None else ""
            status = f"{vt.status.value} {vt.reason or ''}".strip()
            details.append(f"| {vt.label} | {status} | {comp} | {ms(vt.label)} | {err} |")
        details.append("")
        record[name] = {
            "best_settings": result.best_settings, "time_s": result.time_s, "wall_s": wall,
            "speedup_vs_default": str(result.speedup_vs_default),
            "speedup_vs_max_autotune": str(result.speedup_vs_max_autotune),
            "final": [{"label": vt.label, "status": vt.status.value, "reason": vt.reason,
                       "compile_s": vt.compile_s, "samples_s": vt.samples_s, "rel_error": vt.rel_error}
                      for vt in result.final],
            "trials": [{"id": t.id, "status": t.status.value, "value": t.value, "reason": t.reason,
                        "options": dict(t.config)} for t in result.trials],
        }
        print(result.summary(), flush=True)
        write(args.out, header, rows, details, record)
    write(args.out, header, rows, details, record)


def write(out: Path, header: list[str], rows: list[str], details: list[str], record: dict[str, Any]) -> None:
    table = ["| model | eager ms | torch.compile ms | max-autotune ms | tuned ms | tuned vs torch.compile "
             "| tuned vs max-autotune | max rel. error | tuning wall |",
             "|---|---|---|---|---|---|---|---|---|"]
    footer = ["", f"Card after: {card_state()}  ", f"Load after: {versions()}", ""]
    text = "\n".join(header + table + rows + footer + ["## Per model", ""] + details)
    (out / "gpu-compile.md").write_text(text + "\n")
    (out / "gpu-compile.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    print("\n".join(table + rows))


if __name__ == "__main__":
    main()
