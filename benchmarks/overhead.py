"""Per-trial overhead of the tuner itself (ask + tell + persist) on a trivial objective.

perftune's default search with a SQLite store, seeded (reproducible: results reach the search in
ticket order, deciding cost is charged in counted work) and unseeded (deciding cost in seconds), side
by side in one run with Optuna (TPE and random, in memory and SQLite) and OpenTuner 0.8.8; each peer
runs in its own virtual environment under ``.peers/`` (created on first use), called as a subprocess.
Every tool tunes the same 6-parameter mixed space (one float) with the same trivial objective. The
overhead at N trials is the mean wall time per trial over the 500 trials before N; the whole-run mean
is the total wall time (and, for perftune, CPU time: less distorted on a shared machine) over the
trials done, the first import of the surrogate's libraries included (from a warm file cache: the
script reads them once before the first row, so that the row order does not decide who pays the disk).

Usage:
    python benchmarks/overhead.py [--trials 20000] [--peer-seconds 300] [--out benchmarks/results/overhead.md]
        [--skip-peers] [--optuna-only] [--repeats 1]

``--repeats K`` runs perftune's two rows and Optuna's random sampler in memory K times more, one after
the other (seeded, unseeded, random, seeded, ...), and adds a table of every repeat's whole-run mean with
the ratio of the rows measured next to each other: on a machine whose speed drifts (a shared VM), one
run's absolute numbers say as much about the moment as about the tools.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deterministic import machine  # the host's line, CPU model included (hosts change under a VM)

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


def run_perftune(n_trials: int, db: str, seed: int | None) -> dict:
    """Runs in a subprocess of this script (``--perftune-runner``)."""
    from perftune import Tuner
    from perftune.space import Bool, Choice, Float, Int, LogFloat, Space

    space = Space({
        "block": Int(1, 64), "alpha": Float(0.0, 1.0), "rate": LogFloat(1e-4, 1.0),
        "tile": Choice([16, 32, 64, 128, 256]), "algo": Choice(["a", "b", "c", "d"]), "unroll": Bool(),
    })

    def objective(c):
        return ((c["block"] - 17) ** 2 + c["alpha"] + abs(math.log(c["rate"])) + c["tile"] / 256
                + len(c["algo"]) + c["unroll"])

    tuner = Tuner(space, store=f"sqlite:///{db}", name="overhead", checkpoint_every=1000, seed=seed)
    elapsed: list[float] = []
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(n_trials):
        trial = tuner.ask()
        if trial is None:
            break
        tuner.tell(trial, objective(trial.config))
        elapsed.append(time.perf_counter() - t0)
    tuner.close()
    cpu_s = time.process_time() - c0
    technique = tuner.technique
    deciding = getattr(technique, "deciding_time_s", {}) or {}
    counts = getattr(technique, "counts", {}) or {}
    per_technique = {name: {"proposals": int(counts.get(name, 0)),
                            "ms_per_proposal": (deciding[name] / counts[name] * 1e3) if counts.get(name)
                            else None}
                     for name in deciding}
    return {"elapsed_s": elapsed, "n": len(elapsed), "techniques": per_technique, "cpu_s": cpu_s,
            "deciding_ms_per_trial": tuner.deciding_s / max(1, len(elapsed)) * 1e3}


SEEDS = ("0", "none")  # perftune's rows: seeded, unseeded
RANDOM_ROW = "Optuna random, memory"
GOAL_MS = 0.5  # issue [10]: a seeded default run of 10k trials, SQLite, trivial objective


def whole_ms(data: dict) -> float:
    """Wall time per trial over the whole run (ms)."""
    return data["elapsed_s"][-1] / data["n"] * 1e3 if data["n"] else math.nan


def repeat_table(repeats: list[dict[str, float]], perftune_labels: list[str]) -> list[str]:
    """Every repeat's whole-run means, their medians, and perftune / Optuna random per repeat."""
    keys = list(repeats[0])
    ratio = RANDOM_ROW in keys
    head = ["repeat", *keys] + [f"{k.split(', ')[-1]} / Optuna random" for k in perftune_labels if ratio]
    out = ["", f"Whole-run ms per trial in each of {len(repeats)} repeats (repeat 1 is the table above; "
           "the rows of one repeat ran one after the other):", "", "| " + " | ".join(head) + " |",
           "|" + "---|" * len(head)]
    for r, rep in enumerate(repeats, 1):
        cells = [f"{rep[k]:.3f}" for k in keys]
        if ratio:
            cells += [f"{rep[k] / rep[RANDOM_ROW]:.2f}" for k in perftune_labels]
        out.append(f"| {r} | " + " | ".join(cells) + " |")
    med = {k: statistics.median([rep[k] for rep in repeats]) for k in keys}
    cells = [f"{med[k]:.3f}" for k in keys]
    if ratio:
        ratios = {k: statistics.median([r[k] / r[RANDOM_ROW] for r in repeats]) for k in perftune_labels}
        cells += [f"{ratios[k]:.2f}" for k in perftune_labels]
    out.append("| median | " + " | ".join(cells) + " |")
    seeded = perftune_labels[0]
    n_met = sum(rep[seeded] <= GOAL_MS for rep in repeats)
    out += ["", f"{seeded}: at most {GOAL_MS} ms per trial over the whole run in {n_met} of {len(repeats)} "
            f"repeats (median {med[seeded]:.3f})."]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--peer-seconds", type=float, default=300.0, help="stop a peer after this long")
    parser.add_argument("--out", default=str(HERE / "results" / "overhead.md"))
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--optuna-only", action="store_true", help="of the peers, run Optuna only")
    parser.add_argument("--repeats", type=int, default=1,
                        help="run perftune's rows and Optuna random (memory) this many times, interleaved")
    parser.add_argument("--perftune-runner", nargs=3, metavar=("N", "DB", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.perftune_runner:
        n, db, seed = args.perftune_runner
        print(json.dumps(run_perftune(int(n), db, None if seed == "none" else int(seed))))
        return

    rows: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        def call(cmd: list[str]) -> dict:
            out = subprocess.run(cmd, check=True, capture_output=True, text=True)
            return json.loads(out.stdout.strip().splitlines()[-1])

        # Read the surrogate's libraries from disk once, untimed: otherwise the row that runs first pays
        # the cold file cache (seconds of I/O wait on a busy machine) and the next one does not. Each row
        # still pays the import itself, in its own process.
        subprocess.run([sys.executable, "-c", "import sklearn.tree, scipy.special"], check=False)
        def perftune_row(seed: str, tag: str = "") -> dict:
            return call([sys.executable, __file__, "--perftune-runner", str(args.trials),
                         f"{tmp}/perftune-{seed}{tag}.db", seed])

        perftune_rows: list[tuple[str, dict]] = []
        for seed in SEEDS:
            label = f"perftune default, SQLite, {'seeded' if seed != 'none' else 'unseeded'}"
            print(f"{label} ...", flush=True)
            perftune_rows.append((label, perftune_row(seed)))
        rows.extend(perftune_rows)
        if not args.skip_peers:
            optuna_py = ensure_venv("optuna", ["optuna>=4,<6"])
            runner = str(HERE / "overhead_peers" / "optuna_runner.py")

            def optuna_row(sampler: str, storage: str, tag: str = "") -> dict:
                return call([str(optuna_py), runner, sampler, storage, str(args.trials),
                             str(args.peer_seconds), f"{tmp}/optuna-{sampler}{tag}.db"])

            for sampler in ("tpe", "random"):
                for storage in ("memory", "sqlite"):
                    label = f"Optuna {sampler.upper() if sampler == 'tpe' else 'random'}, {storage}"
                    print(f"{label} ...", flush=True)
                    rows.append((label, optuna_row(sampler, storage)))
        repeats: list[dict[str, float]] = []
        if args.repeats > 1:
            first = {label: data for label, data in rows}
            keys = [label for label, _ in perftune_rows] + ([RANDOM_ROW] if RANDOM_ROW in first else [])
            repeats.append({k: whole_ms(first[k]) for k in keys})
            for r in range(2, args.repeats + 1):
                again: dict[str, float] = {}
                for seed, (label, _) in zip(SEEDS, perftune_rows, strict=True):
                    print(f"repeat {r}: {label} ...", flush=True)
                    again[label] = whole_ms(perftune_row(seed, f"-{r}"))
                if RANDOM_ROW in first:
                    print(f"repeat {r}: {RANDOM_ROW} ...", flush=True)
                    again[RANDOM_ROW] = whole_ms(optuna_row("random", "memory", f"-{r}"))
                repeats.append(again)
        if not args.skip_peers and not args.optuna_only:
            print("OpenTuner 0.8.8 ...", flush=True)
            opentuner_py = ensure_venv("opentuner", ["opentuner==0.8.8", "sqlalchemy<2"])
            cmd = [str(opentuner_py), str(HERE / "overhead_peers" / "opentuner_runner.py"), str(args.trials),
                   str(args.peer_seconds), f"{tmp}/opentuner.db"]
            rows.append(("OpenTuner 0.8.8 default ensemble, SQLite", call(cmd)))

    lines = [
        "# Tuner overhead per trial (ask + tell + persist), trivial objective",
        "",
        f"Command: `python {' '.join(['benchmarks/overhead.py', *sys.argv[1:]])}`  ",
        f"Machine: {machine()}  ",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC  ",
        f"Overhead at N = mean wall time per trial over trials N-{WINDOW}..N; '-' = not reached "
        f"(peers stop after {args.peer_seconds:g} s).",
        "",
        "| tool | trials done | ms/trial, whole run | CPU ms/trial, whole run "
        "| ms/trial at 1k | ms/trial at 10k | ms/trial at 20k |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, data in rows:
        marks = per_trial_ms(data["elapsed_s"])
        cells = ["-" if marks[m] is None else f"{marks[m]:.3f}" for m in MARKS]
        n_done = data["n"]
        whole = f"{data['elapsed_s'][-1] / n_done * 1e3:.3f}" if n_done else "-"
        cpu = f"{data['cpu_s'] / n_done * 1e3:.3f}" if n_done and "cpu_s" in data else "-"
        lines.append(f"| {label} | {n_done} | {whole} | {cpu} | " + " | ".join(cells) + " |")
    for label, pt in perftune_rows:
        lines += ["", f"{label}: deciding time (inside ask/tell of the techniques), over the whole run:", "",
                  "| technique | proposals | ms per proposal |", "|---|---|---|"]
        for name, info in sorted(pt.get("techniques", {}).items()):
            ms = info["ms_per_proposal"]
            lines.append(f"| {name} | {info['proposals']} | {'-' if ms is None else f'{ms:.3f}'} |")
        lines.append(f"| (all, per trial) | {pt['n']} | {pt['deciding_ms_per_trial']:.3f} |")
    if repeats:
        lines += repeat_table(repeats, [label for label, _ in perftune_rows])
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
