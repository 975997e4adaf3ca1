"""OpenTuner side of benchmarks/overhead.py; runs in its own virtual environment (opentuner 0.8.8, sqlalchemy<2).

Usage: python opentuner_runner.py N_TRIALS MAX_SECONDS DB_PATH
Prints one JSON line with the cumulative wall time after each trial.
"""

import argparse
import json
import math
import sys
import time

from opentuner import ConfigurationManipulator, EnumParameter, FloatParameter, IntegerParameter, LogFloatParameter
from opentuner.api import TuningRunManager
from opentuner.measurement.interface import DefaultMeasurementInterface
from opentuner.resultsdb.models import Result
from opentuner.search.manipulator import BooleanParameter
import opentuner

n_trials, max_s, db = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
manipulator = ConfigurationManipulator()
manipulator.add_parameter(IntegerParameter("block", 1, 64))
manipulator.add_parameter(FloatParameter("alpha", 0.0, 1.0))
manipulator.add_parameter(LogFloatParameter("rate", 1e-4, 1.0))
manipulator.add_parameter(EnumParameter("tile", [16, 32, 64, 128, 256]))
manipulator.add_parameter(EnumParameter("algo", ["a", "b", "c", "d"]))
manipulator.add_parameter(BooleanParameter("unroll"))
args = argparse.ArgumentParser(parents=opentuner.argparsers()).parse_args(["--database", f"sqlite:///{db}", "--no-dups"])
interface = DefaultMeasurementInterface(args=args, manipulator=manipulator, project_name="overhead",
                                        program_name="overhead", program_version="1")
api = TuningRunManager(interface, args)
elapsed = []
t0 = time.perf_counter()
for _ in range(n_trials):
    desired = api.get_next_desired_result()
    while desired is None:
        desired = api.get_next_desired_result()
    c = desired.configuration.data
    value = (c["block"] - 17) ** 2 + c["alpha"] + abs(math.log(c["rate"])) + c["tile"] / 256 + len(c["algo"]) + c["unroll"]
    api.report_result(desired, Result(time=value))
    now = time.perf_counter() - t0
    elapsed.append(now)
    if now > max_s:
        break
api.finish()
print(json.dumps({"elapsed_s": elapsed, "n": len(elapsed)}))
