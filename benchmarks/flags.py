"""Compiler-flag tuning: perftune vs OpenTuner 0.8.8's gcc-flags approach on the bundled programs.

For each bundled program and each tool, one at a time (so that timings are not disturbed): tune for
``--budget-s`` seconds with ``--workers`` parallel builds, then the harness itself (the same code for
both tools) builds the tool's final flags and plain -O3, checks the output against the -O2 build
(with the program's declared tolerance), and times them interleaved (``--confirm-runs`` pairs) for a
speedup over -O3 with a 95% confidence interval (perftune.measure.speedup_ci). The figure at
``--read-at-s`` (2 minutes by default) is read off the same run: the configuration each tool held as
its best at that moment, re-measured the same way. A tool whose final flags change the output gets
1.0 in the geometric mean (the user would have to fall back to -O3).

OpenTuner runs in its own virtual environment (``--opentuner-python``; created under ``.peers/`` with
``pip install opentuner==0.8.8 'sqlalchemy<2'`` when missing), through its API, as a subprocess:
benchmarks/flags_peers/opentuner_gccflags.py. perftune runs in this process
(perftune.targets.flags.tune_flags). perftune's budget covers its search; its confirmation and the
minimal-set reduction come after and are reported in the ``total s`` column. OpenTuner's budget
includes its one-compile-per-flag check, which is its own approach.

Usage:
    .venv/bin/python benchmarks/flags.py                       # full: 6 programs x 2 tools x 5 min (~1 h)
    .venv/bin/python benchmarks/flags.py --programs matmul,stencil --budget-s 120 --read-at-s 60 \\
        --label reduced                                        # the reduced run committed on a shared VM
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PEER = ROOT / "benchmarks" / "flags_peers" / "opentuner_gccflags.py"


def _machine() -> str:
    model = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs ({model}), {platform.system()} {platform.release()}, {gcc}; "
        f"load average at start {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )


def _opentuner_python(given: str | None) -> str:
    if given:
        return given
    for candidate in (
        ROOT / ".peers" / "opentuner" / "bin" / "python",
        ROOT / ".peers" / "opentuner-flags" / "bin" / "python",
    ):
        if candidate.exists():
            return str(candidate)
    venv = ROOT / ".peers" / "opentuner-flags"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "opentuner==0.8.8", "sqlalchemy<2"], check=True
    )
    return str(venv / "bin" / "python")


class Harness:
    """Builds and times option sets of one program the same way for every tool."""

    def __init__(self, source: Path, args: list[str], rel_tol: float, workdir: str, clock: str) -> None:
        self.source, self.args, self.rel_tol, self.workdir, self.clock = source, args, rel_tol, workdir, clock
        self.reference = self._run(self.build(["-O2"]))[1]

    def build(self, flags: list[str]) -> str:
        out = os.path.join(self.workdir, f"h{abs(hash(tuple(flags))) % 10**12}")
        r = subprocess.run(
            ["gcc", *flags, str(self.source), "-o", out, "-lm"], capture_output=True, text=True, timeout=300
        )
        if r.returncode != 0:
            raise RuntimeError(f"harness build failed: {r.stderr.strip().splitlines()[-1:]}")
        return out

    def _run(self, binary: str) -> tuple[float, str]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        r = subprocess.run([binary, *self.args], capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise RuntimeError(f"harness run failed: exit {r.returncode}")
        if self.clock == "cpu":
            elapsed = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return elapsed, r.stdout

    def median_s(self, flags: list[str], n: int = 5, clock: str | None = None) -> float:
        binary = self.build(flags)
        saved, self.clock = self.clock, clock or self.clock
        try:
            return statistics.median(self._run(binary)[0] for _ in range(n))
        finally:
            self.clock = saved

    def compare(self, flags: list[str], n_pairs: int) -> dict[str, Any]:
        """Output check and interleaved timing of ``flags`` against -O3."""
        from perftune.measure import speedup_ci
        from perftune.targets.flags import compare_outputs

        base, cand = self.build(["-O3"]), self.build(flags)
        _, out = self._run(cand)
        diff = compare_outputs(self.reference, out, rel_tol=self.rel_tol)
        tb: list[float] = []
        tc: list[float] = []
        for _ in range(n_pairs):
            tb.append(self._run(base)[0])
            tc.append(self._run(cand)[0])
        ci = speedup_ci(tb, tc)
        return {
            "flags": flags,
            "output_ok": diff is None,
            "output_diff": diff,
            "speedup": ci.estimate,
            "lo": ci.lo,
            "hi": ci.hi,
            "O3_s": statistics.median(tb),
            "tuned_s": statistics.median(tc),
        }


def _at(trace: list[list[Any]], t_s: float) -> list[str]:
    best = ["-O3"]
    for elapsed, _, flags in trace:
        if elapsed <= t_s:
            best = list(flags)
    return best


def run_perftune(name: str, prog: Any, args: argparse.Namespace) -> dict[str, Any]:
    from perftune.targets.flags import tune_flags

    t0 = time.perf_counter()
    result = tune_flags(
        [str(prog.source)],
        list(prog.args),
        budget=f"{args.budget_s}s",
        workers=args.workers,
        rel_tol=prog.rel_tol,
        seed=args.seed,
        confirm_runs=args.confirm_runs,
        clock=args.clock,
    )
    wall = time.perf_counter() - t0
    return {
        "tool": "perftune",
        "final_flags": result.flags,
        "winner_flags": result.winner_flags,
        "trace": [[t, s, f] for t, s, f in result.trace],
        "n_trials": result.n_trials,
        "failures": result.failures,
        "wall_s": wall,
        "own_speedup": result.speedup,
        "own_ci": list(result.ci),
        "contributions": result.contributions,
    }


def run_opentuner(name: str, prog: Any, args: argparse.Namespace, python: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ot.json")
        cmd = [
            python,
            str(PEER),
            "--source",
            str(prog.source),
            "--args",
            json.dumps(list(prog.args)),
            "--budget-s",
            str(args.budget_s),
            "--workers",
            str(args.workers),
            "--out",
            out,
            "--clock",
            args.peer_clock,
        ]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        wall = time.perf_counter() - t0
        if r.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"OpenTuner run failed: {r.stderr.strip().splitlines()[-3:]}")
        data = json.loads(Path(out).read_text())
    return {
        "tool": "opentuner",
        "final_flags": data["final_flags"],
        "trace": data["history"],
        "n_trials": data["n_trials"],
        "failures": {"failed": data["n_failed"]},
        "wall_s": wall,
        "check_s": data["check_s"],
        "flags_kept": data["flags_kept"],
        "params_found": data["params_found"],
    }


def _plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for row in rows:
        base = row["O3_s_before"]
        xs, ys = [0.0], [1.0]
        for elapsed, best_s, _ in row["trace"]:
            xs.append(elapsed)
            ys.append(base / best_s if best_s > 0 else 1.0)
        xs.append(row["budget_s"])
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", label=f"{row['tool']} (in-run best)")
        ax.scatter(
            [row["budget_s"]],
            [row["final"]["speedup"]],
            marker="o",
            label=f"{row['tool']} final, re-measured",
        )
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("tuning time (s)")
    ax.set_ylabel("speedup over -O3")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _write_report(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    done: list[str],
    tools: list[str],
    started: datetime.datetime,
    machine: str,
) -> str:
    """Write the table (and the raw JSON) for the programs done so far; return the table."""
    stem = f"flags-{args.label}"

    def effective(r: dict[str, Any]) -> float:
        return r["speedup"] if r["output_ok"] else 1.0

    command = shlex.join([sys.executable.replace(str(ROOT) + "/", ""), *sys.argv])
    budget = f"{args.budget_s:g} s"
    lines = [
        f"# Compiler-flag tuning: perftune vs OpenTuner 0.8.8 ({args.label})",
        "",
        f"- command: `{command}`",
        f"- date: {started:%Y-%m-%d %H:%M} UTC; machine: {machine}",
        f"- budget {budget} per program per tool, {args.workers} workers (parallel builds, one run at a "
        f"time); figure at {args.read_at_s:g} s read off the same run; speedups re-measured by the harness: "
        f"{args.confirm_runs} interleaved pairs against plain -O3, 95% CI; clock: {args.clock} time "
        f"(OpenTuner's own runs: {args.peer_clock} time)",
        "",
        f"| program | tool | speedup final ({budget}) | 95% CI | at {args.read_at_s:g} s | output | trials "
        "| total s | final flags |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        f, a = r["final"], r["at_read"]
        flags = " ".join(f["flags"])
        if len(flags) > 80:
            flags = flags[:77] + "..."
        at_read = f"{a['speedup']:.3f}" + ("" if a["output_ok"] else " (wrong output)")
        lines.append(
            f"| {r['program']} | {r['tool']} | {f['speedup']:.3f} | {f['lo']:.3f}-{f['hi']:.3f} | {at_read}"
            f" | {'ok' if f['output_ok'] else 'WRONG'} | {r['n_trials']} | {r['wall_s']:.0f} | `{flags}` |"
        )
    lines.append("")
    for tool in tools:
        finals = [effective(r["final"]) for r in rows if r["tool"] == tool]
        reads = [effective(r["at_read"]) for r in rows if r["tool"] == tool]
        if finals:
            gm = math.exp(statistics.mean(math.log(x) for x in finals))
            gm_read = math.exp(statistics.mean(math.log(x) for x in reads))
            lines.append(
                f"- {tool}: geometric-mean speedup over -O3 {gm:.3f} (final), {gm_read:.3f} "
                f"(at {args.read_at_s:g} s)"
            )
    ot_rows = [r for r in rows if r["tool"] == "opentuner"]
    if ot_rows:
        r0 = ot_rows[0]
        checks = ", ".join(f"{r['check_s']:.0f} s" for r in ot_rows)
        lines.append(
            f"- OpenTuner kept {r0['flags_kept']} flags after its one-compile-per-flag check "
            f"({checks} of its budget) and found "
            f"{r0['params_found']} params (its parser predates GCC 10's `--param=` syntax)"
        )

    if args.note:
        lines.append(f"- note: {args.note}")
    lines.append("")
    lines.append("Plots: " + ", ".join(f"`{stem}-{n}.png`" for n in done))
    text = "\n".join(lines) + "\n"
    (RESULTS / f"{stem}.md").write_text(text)
    (RESULTS / f"{stem}.json").write_text(
        json.dumps(
            {"args": vars(args), "machine": machine, "date": started.isoformat(), "rows": rows},
            indent=1,
            default=str,
        )
    )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--programs", default="all", help="comma-separated bundled programs, or all")
    parser.add_argument("--tools", default="perftune,opentuner")
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--read-at-s", type=float, default=120.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--confirm-runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--label", default="full")
    parser.add_argument("--opentuner-python", default=None)
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="clock of perftune's runs and of the harness (cpu: user+sys time, steadier on a busy machine); "
        "OpenTuner keeps its own (wall time of one run)",
    )
    parser.add_argument(
        "--peer-clock",
        choices=["wall", "cpu"],
        default="wall",
        help="clock of OpenTuner's runs (wall: its own way)",
    )
    parser.add_argument("--note", default="", help="a line added to the results file (e.g. machine load)")
    args = parser.parse_args()

    from perftune.targets.flags import bundled

    programs = bundled()
    names = list(programs) if args.programs == "all" else args.programs.split(",")
    tools = args.tools.split(",")
    ot_python = _opentuner_python(args.opentuner_python) if "opentuner" in tools else ""
    started = datetime.datetime.now(datetime.UTC)
    machine = _machine()
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"flags-{args.label}"
    done: list[str] = []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flags-bench-") as workdir:
        for name in names:
            prog = programs[name]
            harness = Harness(prog.source, list(prog.args), prog.rel_tol, workdir, args.clock)
            for tool in tools:
                # The curve of each tool is drawn against -O3 timed with the tool's own clock.
                own_clock = args.clock if tool == "perftune" else args.peer_clock
                o3_before = harness.median_s(["-O3"], clock=own_clock)
                print(f"[{name}] {tool}: tuning {args.budget_s:g} s ...", file=sys.stderr, flush=True)
                row = (
                    run_perftune(name, prog, args)
                    if tool == "perftune"
                    else run_opentuner(name, prog, args, ot_python)
                )
                row.update(program=name, budget_s=args.budget_s, O3_s_before=o3_before)
                row["final"] = harness.compare(row["final_flags"], args.confirm_runs)
                row["at_read"] = harness.compare(_at(row["trace"], args.read_at_s), args.confirm_runs)
                f = row["final"]
                print(
                    f"[{name}] {tool}: {f['speedup']:.3f}x [{f['lo']:.3f}, {f['hi']:.3f}] output "
                    f"{'ok' if f['output_ok'] else 'WRONG'}; {row['n_trials']} trials",
                    file=sys.stderr,
                    flush=True,
                )
                rows.append(row)
            _plot(
                [r for r in rows if r["program"] == name],
                RESULTS / f"{stem}-{name}.png",
                f"{name}: {args.budget_s:g} s, {args.workers} workers",
            )
            done.append(name)
            _write_report(
                args, rows, done, tools, started, machine
            )  # a partial table after each program: nothing measured is lost

    print(_write_report(args, rows, done, tools, started, machine))


if __name__ == "__main__":
    main()
