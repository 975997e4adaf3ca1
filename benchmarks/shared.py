"""Throughput of a shared run: 1, 2, 4 and 8 worker processes attached to one run in PostgreSQL.

Each worker is its own process (``Tuner.attach(run, store=url).work(objective)``); the objective sleeps
0.2 s, so 2 cores suffice and the ideal is N trials per 0.2 s. The workers import, attach and then wait
at a barrier, so process start-up is not counted: the throughput is the trials over the span from the
first trial's start to the last one's end (from the store's ``started_at``/``finished_at``). One of the
workers also proposes (the default search, unseeded) for all of them, between its own measurements.

The store is a throwaway PostgreSQL server (``initdb`` in a temporary folder, run as the ``postgres``
user when this runs as root) unless ``--store URL`` is given (``sqlite:///x.db`` works too).

Usage:
    python benchmarks/shared.py [--workers 1 2 4 8] [--trials-per-worker 25] [--sleep 0.2]
        [--store URL] [--out benchmarks/results/shared.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from glob import glob
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def worker_main(url: str, run: str, budget: int, sleep_s: float, barrier: Path, technique: str) -> None:
    """One worker: attach (the first creates the run), wait at the barrier, work until the run is over."""
    from perftune import Tuner
    from perftune.space import Int, Space

    space = Space({"x": Int(0, 999, default=500), "y": Int(0, 999, default=500)})

    def objective(config) -> float:  # noqa: ANN001
        time.sleep(sleep_s)
        return (config["x"] - 300) ** 2 + (config["y"] - 700) ** 2

    worker = Tuner.attach(run, store=url, space=space, budget=budget, technique=technique)
    (barrier / f"ready-{os.getpid()}").write_text("")
    while not (barrier / "go").exists():
        time.sleep(0.005)
    cpu = time.process_time()
    worker.work(objective)
    (barrier / f"cpu-{os.getpid()}").write_text(str(time.process_time() - cpu))


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A PostgreSQL server in a temporary folder on a free port, stopped and removed at the end."""
    bindirs = sorted(glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    if not bindirs:
        sys.exit("no PostgreSQL binaries in /usr/lib/postgresql/*/bin: install Debian's postgresql, "
                 "or give --store URL")
    bindir = Path(bindirs[0])
    root = Path(tempfile.mkdtemp(prefix="perftune-bench-pg-"))
    run_as: dict[str, object] = {}
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"LC_ALL": "C"}
    data = root / "data"
    subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "perftune", "--auth=trust", "-E", "UTF8",
                    "--locale=C", "--no-sync"], check=True, capture_output=True, env=env, cwd=root, **run_as)
    options = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
               "-c max_connections=200")
    ctl = [str(bindir / "pg_ctl"), "-D", str(data)]
    subprocess.run([*ctl, "-l", str(root / "log"), "-w", "-o", options, "start"], check=True,
                   capture_output=True, env=env, cwd=root, **run_as)
    try:
        yield f"postgresql://perftune@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*ctl, "-m", "fast", "-w", "stop"], capture_output=True, env=env, cwd=root, **run_as)
        shutil.rmtree(root, ignore_errors=True)


def measure(url: str, n: int, budget: int, sleep_s: float, technique: str) -> dict[str, Any]:
    from perftune.store import open_store

    run = f"bench-shared-{n}-{int(time.time() * 1000)}"
    with tempfile.TemporaryDirectory() as tmp:
        barrier = Path(tmp)
        cmd = [sys.executable, __file__, "--worker", url, run, str(budget), str(sleep_s), str(barrier),
               technique]
        procs = [subprocess.Popen(cmd, cwd=ROOT) for _ in range(n)]
        while len(list(barrier.glob("ready-*"))) < n:
            if any(p.poll() not in (None, 0) for p in procs):
                sys.exit("a worker failed before the barrier")
            time.sleep(0.01)
        (barrier / "go").write_text("")
        for p in procs:
            if p.wait() != 0:
                sys.exit(f"a worker exited with status {p.returncode}")
        cpu_s = sum(float(f.read_text()) for f in barrier.glob("cpu-*"))
    with open_store(url) as store:
        info = store.get_run(run)
        trials = store.trials(info.id)
        n_reissued = sum(1 for lease in store.trial_leases(info.id) if lease.n_issues > 1)
    started = min(t.started_at for t in trials if t.started_at is not None)
    finished = max(t.finished_at for t in trials if t.finished_at is not None)
    span = finished - started
    rate = len(trials) / span
    ideal = n / sleep_s
    return {"n": n, "technique": technique, "trials": len(trials), "ok": sum(t.ok for t in trials),
            "span_s": span, "rate": rate, "ideal": ideal, "cpu_ms": 1000 * cpu_s / len(trials),
            "ratio": rate / ideal, "reissued": n_reissued}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        url, run, budget, sleep_s, barrier, technique = sys.argv[2:8]
        worker_main(url, run, int(budget), float(sleep_s), Path(barrier), technique)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--trials-per-worker", type=int, default=25)
    parser.add_argument("--sleep", type=float, default=0.2)
    parser.add_argument("--technique", nargs="+", default=["random", "default"],
                        help="the search of each series: 'random' costs nothing to decide (the shared run's "
                             "own overhead), 'default' is perftune's default search (its deciding cost too)")
    parser.add_argument("--store", default=None, help="a store URL (default: a throwaway PostgreSQL server)")
    parser.add_argument("--out", default=str(HERE / "results" / "shared.md"))
    args = parser.parse_args()
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        url = args.store or stack.enter_context(throwaway_postgres())
        rows = []
        for technique in args.technique:
            for n in args.workers:
                row = measure(url, n, n * args.trials_per_worker, args.sleep, technique)
                rows.append(row)
                print(f"{technique}, {n} workers: {row['trials']} trials in {row['span_s']:.2f} s = "
                      f"{row['rate']:.2f}/s, ideal {row['ideal']:.1f}/s: {row['ratio']:.3f}; "
                      f"CPU {row['cpu_ms']:.1f} ms/trial", flush=True)
    load_after = os.getloadavg()
    command = "python benchmarks/shared.py " + " ".join(sys.argv[1:])
    store_kind = "SQLite" if args.store and args.store.startswith("sqlite") else "PostgreSQL"
    lines = [
        "# Shared runs: throughput of N worker processes on one run",
        "",
        f"Command: `{command.strip()}`  ",
        f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}, Python "
        f"{platform.python_version()}; 1-minute load average (what else ran counts in it) "
        f"{load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after  ",
        f"Store: {store_kind} ({'throwaway server on this machine' if not args.store else 'given'})",
        "",
        f"Each worker is a process running `Tuner.attach(run, store=url).work(objective)`; the objective "
        f"sleeps {args.sleep:g} s, so the ideal is N trials per {args.sleep:g} s. One worker also proposes "
        "for all (unseeded), in a thread beside its own measurements: with `random` the search costs "
        "nothing, so the rows show what sharing costs; with `default` (perftune's default search) its "
        "deciding cost is added. Throughput: trials over the span from the first trial's start to the last "
        "one's end (process start-up excluded by a barrier). CPU/trial: the CPU time of all the workers "
        "while they work (claiming, recording, proposing, heartbeats; not their start-up) over the trials; "
        "the machine's load inflates waits, not this. Again: trials issued again (none is killed here).",
        "",
        "| search | workers | trials | span (s) | trials/s | ideal/s | of ideal | CPU/trial (ms) | again |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['technique']} | {r['n']} | {r['trials']} | {r['span_s']:.2f} | {r['rate']:.2f} | "
                     f"{r['ideal']:.1f} | {r['ratio']:.3f} | {r['cpu_ms']:.1f} | {r['reissued']} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
