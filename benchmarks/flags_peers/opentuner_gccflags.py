"""OpenTuner 0.8.8's gcc-flags approach, driven through its API; the peer side of benchmarks/flags.py.

Runs in OpenTuner's own virtual environment (``pip install opentuner==0.8.8 'sqlalchemy<2'``), as a
subprocess of the benchmark. It follows the approach of OpenTuner's examples/gccflags tuner (written
anew here for Python 3 and the API): flags found with the regex ``^  (-f[a-z0-9-]+) `` in
``gcc --help=optimizers``, each checked by one compile of the program; params found with the regex
``^  ([a-z0-9-]+) `` in ``gcc --help=params`` (GCC 10+ prints ``--param=name=``, so none are found);
``-O`` as an integer 0..3 and every flag as on/off/default; one timed run per configuration; no output
check. Builds of ``--workers`` candidates run in parallel, runs one at a time (as perftune's).

Usage: python opentuner_gccflags.py --source prog.c --args '["640","5"]' --budget-s 300 --workers 2
       --out result.json [--cc gcc] [--link -lm]
Writes JSON: flags found/kept, check time, trials, the best-so-far history and the final flags.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import opentuner
from opentuner import ConfigurationManipulator, EnumParameter, IntegerParameter
from opentuner.api import TuningRunManager
from opentuner.measurement.interface import DefaultMeasurementInterface
from opentuner.resultsdb.models import Result

cli = argparse.ArgumentParser()
cli.add_argument("--source", required=True)
cli.add_argument("--args", default="[]")
cli.add_argument("--budget-s", type=float, default=300.0)
cli.add_argument("--workers", type=int, default=1)
cli.add_argument("--cc", default="gcc")
cli.add_argument("--link", default="-lm")
cli.add_argument("--out", required=True)
cli.add_argument(
    "--clock",
    choices=["wall", "cpu"],
    default="wall",
    help="wall: its own way (wall time of one run); cpu: user+sys time, for a busy machine",
)
opts = cli.parse_args()
run_args = json.loads(opts.args)
link = opts.link.split()
work = tempfile.mkdtemp(prefix="ot-gccflags-")
t0 = time.perf_counter()


def compile_cmd(flags, output):
    return [opts.cc, opts.source, "-o", output, *flags, *link]


# 1. Flags, each checked with one compile (the peer's own way, counted in its budget).
help_text = subprocess.run([opts.cc, "--help=optimizers"], capture_output=True, text=True).stdout
found = re.findall(r"^  (-f[a-z0-9-]+) ", help_text, re.MULTILINE)


def works(flag):
    r = subprocess.run(
        compile_cmd([flag], os.path.join(work, "check.bin")), capture_output=True, text=True, timeout=60
    )
    return r.returncode == 0 and "warning: this target" not in r.stderr and "has been renamed" not in r.stderr


flags = [f for f in found if works(f)]
check_s = time.perf_counter() - t0
params_text = subprocess.run([opts.cc, "--help=params"], capture_output=True, text=True).stdout
params_found = re.findall(r"^  ([a-z0-9-]+) ", params_text, re.MULTILINE)

manipulator = ConfigurationManipulator()
manipulator.add_parameter(IntegerParameter("-O", 0, 3))
for flag in flags:
    manipulator.add_parameter(EnumParameter(flag, ["on", "off", "default"]))


def cfg_to_flags(cfg):
    out = [f"-O{cfg['-O']}"]
    for flag in flags:
        if cfg[flag] == "on":
            out.append(flag)
        elif cfg[flag] == "off":
            out.append("-f" + flag[5:] if flag.startswith("-fno-") else "-fno-" + flag[2:])
    return out


db = os.path.join(work, "opentuner.db")
ot_args = argparse.ArgumentParser(parents=opentuner.argparsers()).parse_args(
    ["--database", "sqlite:///" + db]
)
interface = DefaultMeasurementInterface(
    args=ot_args,
    manipulator=manipulator,
    project_name="gccflags",
    program_name=os.path.basename(opts.source),
    program_version="1",
)
api = TuningRunManager(interface, ot_args)


def build(i, cfg):
    out = os.path.join(work, f"cand{i}.bin")
    try:
        r = subprocess.run(compile_cmd(cfg_to_flags(cfg), out), capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    return out if r.returncode == 0 else None


def run(binary):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        r = subprocess.run([binary, *run_args], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    elapsed = time.perf_counter() - start
    if opts.clock == "cpu":
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed if r.returncode == 0 else None


history = []
n_trials = 0
n_failed = 0
best_time = float("inf")
counter = 0
with ThreadPoolExecutor(max_workers=opts.workers) as pool:
    while time.perf_counter() - t0 < opts.budget_s:
        batch = []
        while len(batch) < opts.workers:
            desired = api.get_next_desired_result()
            if desired is None:
                break
            batch.append(desired)
        if not batch:
            continue
        futures = []
        for desired in batch:
            counter += 1
            futures.append(pool.submit(build, counter, desired.configuration.data))
        for desired, fut in zip(batch, futures, strict=True):
            binary = fut.result()
            seconds = run(binary) if binary else None
            if binary:
                os.remove(binary)
            n_trials += 1
            if seconds is None:
                n_failed += 1
                api.report_result(desired, Result(state="ERROR", time=float("inf")))
                continue
            api.report_result(desired, Result(time=seconds))
            if seconds < best_time:
                best_time = seconds
                history.append([time.perf_counter() - t0, seconds, cfg_to_flags(desired.configuration.data)])
best = api.get_best_configuration()
if best is not None:
    api.finish()  # it fails when nothing was measured (the flag check ate the whole budget)
shutil.rmtree(work, ignore_errors=True)
result = {
    "flags_found": len(found),
    "flags_kept": len(flags),
    "check_s": check_s,
    "params_found": len(params_found),
    "n_trials": n_trials,
    "n_failed": n_failed,
    "history": history,
    "final_flags": cfg_to_flags(best) if best else ["-O3"],
    "wall_s": time.perf_counter() - t0,
}
with open(opts.out, "w") as fh:
    json.dump(result, fh)
print(json.dumps({k: v for k, v in result.items() if k != "history"}))
sys.exit(0)
