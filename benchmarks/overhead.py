"""Per-trial overhead of the tuner itself (ask + tell + persist) on a trivial objective.

perftune's default ensemble with a SQLite store, side by side in one run with Optuna (TPE and random,
in memory and SQLite) and OpenTuner 0.8.8; each peer runs in its own virtual environment under
``.peers/`` (created on first use), called as a subprocess. Every tool tunes the same 6-parameter
mixed space with the same trivial objective. The overhead at N trials is the mean wall time per
trial over the 500 trials before N.

Usage:
    python benchmarks/overhead.py [--trials 20000] [--peer-seconds 300] [--out benchmarks/results/overhead.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = ROOT / ".peers"
MARKS = (1000, 10000, 20000)
WINDOW = 500


def ensure_venv(name: str, packages: list[str]) -> Path:
    venv = PEERS / name
    python = venv / "bin" / "python"
    stamp = venv / ".installed-overhead"
    if not stamp.exists():
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
        stamp.touch()
    return python


def per_trial_ms(elapsed: list[float]) -> dict[int, float | None]:
    out: dict[int, float | None] = {}
    for mark in MARKS:
        if len(elapsed) >= mark:
            out[mark] = (elapsed[mark - 1] - elapsed[mark - 1 - WINDOW]) / WINDOW * 1e3
        else:
            out[mark] = None
    return out


def run_perftune(n_trials: int, db: str) -> dict:
    """Runs in a subprocess of this script (``--perftune-runner``)."""
    from perftune import Tuner
    from perftune.space import Bool, Choice, Float, Int, LogFloat, Space

    space = Space({
        "block": Int(1, 64), "alpha": Float(0.0, 1.0), "rate": LogFloat(1e-4, 1.0),
        "tile": Choice([16, 32, 64, 128, 256]), "algo": Choice(["a", "b", "c", "d"]), "unroll": Bool(),
    })

    def objective(c):
        return (c["block"] - 17) ** 2 + c["alpha"] + abs(math.log(c["rate"])) + c["tile"] / 256 + len(c["algo"]) + c["unroll"]

    tuner = Tuner(space, store=f"sqlite:///{db}", name="overhead", checkpoint_every=1000)
    elapsed: list[float] = []
    t0 = time.perf_counter()
    for _ in range(n_trials):
        trial = tuner.ask()
        if trial is None:
            break
        tuner.tell(trial, objective(trial.config))
        elapsed.append(time.perf_counter() - t0)
    tuner.close()
    technique = tuner.technique
    deciding = getattr(technique, "deciding_time_s", {}) or {}
    counts = getattr(technique, "counts", {}) or {}
    per_technique = {name: {"proposals": int(counts.get(name, 0)),
                            "ms_per_proposal": (deciding[name] / counts[name] * 1e3) if counts.get(name) else None}
                     for name in deciding}
    return {"elapsed_s": elapsed, "n": len(elapsed), "techniques": per_technique,
            "deciding_ms_per_trial": tuner.deciding_s / max(1, len(elapsed)) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--peer-seconds", type=float, default=300.0, help="stop a peer after this long")
    parser.add_argument("--out", default=str(HERE / "results" / "overhead.md"))
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--perftune-runner", nargs=2, metavar=("N", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.perftune_runner:
        print(json.dumps(run_perftune(int(args.perftune_runner[0]), args.perftune_runner[1])))
        return

    rows: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        def call(cmd: list[str]) -> dict:
            out = subprocess.run(cmd, check=True, capture_output=True, text=True)
            return json.loads(out.stdout.strip().splitlines()[-1])

        print("perftune (default ensemble, SQLite) ...", flush=True)
        pt = call([sys.executable, __file__, "--perftune-runner", str(args.trials), f"{tmp}/perftune.db"])
        rows.append(("perftune default ensemble, SQLite", pt))
        if not args.skip_peers:
            optuna_py = ensure_venv("optuna", ["optuna>=4,<6"])
            opentuner_py = ensure_venv("opentuner", ["opentuner==0.8.8", "sqlalchemy<2"])
            runner = str(HERE / "overhead_peers" / "optuna_runner.py")
            for sampler in ("tpe", "random"):
                for storage in ("memory", "sqlite"):
                    label = f"Optuna {sampler.upper() if sampler == 'tpe' else 'random'}, {storage}"
                    print(f"{label} ...", flush=True)
                    cmd = [str(optuna_py), runner, sampler, storage, str(args.trials), str(args.peer_seconds),
                           f"{tmp}/optuna-{sampler}.db"]
                    rows.append((label, call(cmd)))
            print("OpenTuner 0.8.8 ...", flush=True)
            cmd = [str(opentuner_py), str(HERE / "overhead_peers" / "opentuner_runner.py"), str(args.trials),
                   str(args.peer_seconds), f"{tmp}/opentuner.db"]
            rows.append(("OpenTuner 0.8.8 default ensemble, SQLite", call(cmd)))

    lines = [
        "# Tuner overhead per trial (ask + tell + persist), trivial objective",
        "",
        f"Command: `python benchmarks/overhead.py --trials {args.trials} --peer-seconds {args.peer_seconds:g}`  ",
        f"Machine: {platform.node()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}  ",
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        f"Overhead at N = mean wall time per trial over trials N-{WINDOW}..N; '-' = not reached "
        f"(peers stop after {args.peer_seconds:g} s).",
        "",
        "| tool | trials done | ms/trial at 1k | ms/trial at 10k | ms/trial at 20k |",
        "|---|---|---|---|---|",
    ]
    for label, data in rows:
        marks = per_trial_ms(data["elapsed_s"])
        cells = ["-" if marks[m] is None else f"{marks[m]:.3f}" for m in MARKS]
        lines.append(f"| {label} | {data['n']} | " + " | ".join(cells) + " |")
    lines += ["", "perftune's own deciding time (inside ask/tell of the techniques), over the whole run:", "",
              "| technique | proposals | ms per proposal |", "|---|---|---|"]
    for name, info in sorted(pt.get("techniques", {}).items()):
        ms = info["ms_per_proposal"]
        lines.append(f"| {name} | {info['proposals']} | {'-' if ms is None else f'{ms:.3f}'} |")
    lines.append(f"| (all, per trial) | {pt['n']} | {pt['deciding_ms_per_trial']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
