"""Deterministic metric benchmark: a 0.3 s command whose stdout_regex score is a function of its parameters.

The task prints ``score=N`` after ``sleep 0.3``, N computed from two integer parameters, so repeated
runs of one configuration print the same value. perftune should measure it once per configuration:
``perftune run`` with a budget of 30 trials should take at most 1.3x the time of 30 single runs of the
command (run directly, without perftune or its sandbox). Before the noise handling learnt about
deterministic metrics it took about 6x (31 runs per new best, 4 per other trial); the
``deterministic = false`` row reproduces that behaviour with today's code.

The perftune time is the wall time of the whole ``perftune run`` process (start-up, loading and
checking the task, the reference run of the default configuration, the sandbox, the store).

perftune's modules are byte-compiled first (``compileall``), as pip does when it installs a wheel: with
``PYTHONDONTWRITEBYTECODE`` set (as on some development machines) an editable install would otherwise
compile about 75 modules from source at every start.

Usage:
    python benchmarks/deterministic.py [--trials 30] [--sleep 0.3] [--modes auto,false]
                                       [--techniques default,random] [--repeat 1] [--perftune PATH]
                                       [--out benchmarks/results/deterministic.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = "sleep {sleep}; echo score=$(( ($0 - 37) * ($0 - 37) + ($1 - 61) * ($1 - 61) ))"

TASK = """\
name = "deterministic-bench"

[space]
x = {{ type = "int", min = 0, max = 99, default = 0 }}
y = {{ type = "int", min = 0, max = 99, default = 0 }}

[run]
command = ["sh", "-c", "{script}", "{{x}}", "{{y}}"]
timeout_s = 30

[objective]
metric = "stdout_regex"
pattern = 'score=(\\d+)'
goal = "min"
deterministic = {deterministic}
{tuning}"""


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node() or 'vm'}, {os.cpu_count()} cores, {model}, Python {platform.python_version()}"


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def single_runs(n: int, sleep: float) -> float:
    """Wall time of ``n`` plain runs of the command (the configurations of a grid walk)."""
    script = SCRIPT.format(sleep=sleep)
    t0 = time.perf_counter()
    for i in range(n):
        subprocess.run(["sh", "-c", script, str(i % 100), str((7 * i) % 100)], check=True,
                       capture_output=True)
    return time.perf_counter() - t0


def perftune_run(
    n: int, sleep: float, deterministic: str, perftune: str, technique: str | None
) -> dict[str, float]:
    """Wall time of ``perftune run`` with ``n`` trials, where it went, command runs and the best score."""
    from perftune.store import open_store

    folder = Path(tempfile.mkdtemp(prefix="perftune-bench-det-"))
    try:
        os.chmod(folder, 0o755)  # as root, candidates run as an unprivileged user
        task = folder / "task.toml"
        tuning = f'\n[tuning]\ntechnique = "{technique}"\n' if technique else ""
        task.write_text(TASK.format(script=SCRIPT.format(sleep=sleep), deterministic=deterministic,
                                    tuning=tuning))
        os.chmod(task, 0o644)
        url = f"sqlite:///{folder / 'perftune.db'}"
        started = time.time()
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([perftune, "run", str(task), "--budget", str(n), "--seed", "1", "--store", url,
                        "--name", "bench"], check=True, capture_output=True)
        elapsed = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        store = open_store(url)
        trials = store.trials(store.get_run("bench").id)
        in_trials = sum(t.finished_at - t.started_at for t in trials)
        first = min(t.started_at for t in trials)
        return {
            "elapsed": elapsed,
            # perftune's CPU time, with that of what it waited for (its sandbox helper, the candidates)
            "cpu": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
            "trials": len(trials),
            "runs": sum(t.metrics.get("n_runs", 0.0) for t in trials) + 1,  # + the reference run
            "best": min(t.value for t in trials if t.value is not None),
            "startup": first - started,  # start-up, loading and checking the task, the reference run
            "in_trials": in_trials,
            "between": elapsed - (first - started) - in_trials,  # search, store, imports on the way
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--sleep", type=float, default=0.3)
    parser.add_argument("--modes", default="auto,false",
                        help="values of [objective] deterministic to run, comma-separated")
    parser.add_argument("--techniques", default="default",
                        help="search techniques to run, comma-separated ('default': the default ensemble)")
    parser.add_argument("--repeat", type=int, default=1, help="run each row this many times")
    parser.add_argument("--perftune", default=None,
                        help="the perftune executable to time (default: the one next to this Python)")
    parser.add_argument("--out", default=None, help="write a Markdown table here")
    args = parser.parse_args()
    perftune = args.perftune or shutil.which("perftune", path=os.path.dirname(sys.executable)) or "perftune"
    import perftune as package

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(package.__file__)],
                   check=True, env=env, stdout=subprocess.DEVNULL)

    load_before = load()
    lines = [
        "| mode | technique | trials | command runs | single-runs s | perftune s | ratio | start-up s "
        "| in trials s | between trials s | perftune CPU s | load before | best score |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for technique in args.techniques.split(","):
        for mode in args.modes.split(","):
            for _ in range(args.repeat):
                value = f'"{mode}"' if mode == "auto" else mode
                before = load().split()[0]
                base = single_runs(args.trials, args.sleep)  # next to each run: the load changes
                r = perftune_run(args.trials, args.sleep, value, perftune,
                                 None if technique == "default" else technique)
                lines.append(
                    f"| deterministic = {value} | {technique} | {r['trials']} | {r['runs']:.0f} | {base:.2f} "
                    f"| {r['elapsed']:.2f} | {r['elapsed'] / base:.2f} | {r['startup']:.2f} "
                    f"| {r['in_trials']:.2f} | {r['between']:.2f} | {r['cpu']:.2f} | {before} "
                    f"| {r['best']:g} |"
                )
                print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    if args.out:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        command = " ".join(["python benchmarks/deterministic.py", *sys.argv[1:]])
        Path(args.out).write_text(
            "# Deterministic stdout_regex metric: measured once per configuration\n\n"
            f"Command: `{command}`  \nMachine: {machine()}, shared: load average {load_before} at the "
            f"start, {load()} at the end  \n"
            f"Date: {now}  \n"
            f"Task: `sleep {args.sleep}; echo score=N`, N a function of two int parameters; "
            f"`perftune run --budget {args.trials} --seed 1`, wall time of the whole process. "
            "Single runs: the command run directly, without perftune or its sandbox. "
            "Command runs: every run of the command by perftune, the default's reference run "
            "included. Start-up: from starting `perftune run` to the first trial (imports, loading and "
            "checking the task, the default's reference run). Between trials: the search (its first "
            "model fit imports scikit-learn), the store, checkpoints. "
            "perftune CPU: user + system time of the `perftune run` process and of what it waited for "
            "(its sandbox helper, the commands). "
            "Load before: the 1-minute load average before the row (2 cores). "
            "Goal: ratio <= 1.3 with the default (`auto`).\n\n"
            f"{table}\n"
        )


if __name__ == "__main__":
    main()
