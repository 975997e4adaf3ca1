"""OpenTuner 0.8.8 through its ask/tell API (TuningRunManager), default technique ensemble.

Needs SQLAlchemy < 2: OpenTuner finds repeated configurations through its results database.
Mapping: integers -> IntegerParameter; ordered value lists -> IntegerParameter over the index;
choices -> EnumParameter; booleans -> BooleanParameter; floats -> FloatParameter; permutations ->
PermutationParameter. Constraint violations and measured failures are reported as
``Result(state="ERROR", time=inf)`` (OpenTuner's idiom); repeats get the value already measured.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import random
import tempfile
from typing import Any

import numpy as np
import opentuner
from _problems import BudgetSpent, Ledger, Problem
from _runner import main
from opentuner.api import TuningRunManager
from opentuner.measurement.interface import DefaultMeasurementInterface
from opentuner.resultsdb.models import Result
from opentuner.search.manipulator import (
    BooleanParameter,
    ConfigurationManipulator,
    EnumParameter,
    FloatParameter,
    IntegerParameter,
    PermutationParameter,
)

logging.disable(logging.WARNING)

# A converged OpenTuner run proposes only configurations it has measured; after this many generations
# in a row without a new one, the run is over (its best so far stands).
MAX_IDLE_GENERATIONS = 200
DATABASE = os.environ.get("QUALITY_OT_DB", "sqlite:///{tmp}/ot.db")


def manipulator(problem: Problem) -> ConfigurationManipulator:
    m = ConfigurationManipulator()
    for p in problem.params:
        if p.kind == "int":
            m.add_parameter(IntegerParameter(p.name, int(p.lo), int(p.hi)))
        elif p.kind == "float":
            m.add_parameter(FloatParameter(p.name, p.lo, p.hi))
        elif p.kind == "ordinal":
            if len(p.values) > 1:
                m.add_parameter(IntegerParameter(p.name, 0, len(p.values) - 1))
        elif p.kind == "bool":
            m.add_parameter(BooleanParameter(p.name))
        elif p.kind == "choice":
            m.add_parameter(EnumParameter(p.name, list(p.values)))
        elif p.kind == "perm":
            m.add_parameter(PermutationParameter(p.name, list(p.values)))
    return m


def to_config(problem: Problem, data: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for p in problem.params:
        if p.kind == "ordinal":
            config[p.name] = p.values[int(data[p.name])] if len(p.values) > 1 else p.values[0]
        elif p.kind == "perm":
            config[p.name] = tuple(data[p.name])
        elif p.kind == "int":
            config[p.name] = int(data[p.name])
        elif p.kind == "float":
            config[p.name] = float(data[p.name])
        else:
            config[p.name] = data[p.name]
    return config


def run_one(problem: Problem, tool: str, seed: int, ledger: Ledger) -> dict[str, Any] | None:
    random.seed(seed)
    np.random.seed(seed)
    parser = argparse.ArgumentParser(parents=opentuner.argparsers())
    with tempfile.TemporaryDirectory() as tmp:
        args = parser.parse_args(["--no-dups", "--database", DATABASE.format(tmp=tmp)])
        interface = DefaultMeasurementInterface(
            args=args, manipulator=manipulator(problem), project_name="quality",
            program_name=problem.name, program_version=str(seed),
        )
        api = TuningRunManager(interface, args)
        n_none = 0
        try:
            while not ledger.done:
                dr = api.get_next_desired_result()
                if dr is None:  # nothing new this generation: OpenTuner only re-proposed measured ones
                    n_none += 1
                    if n_none > MAX_IDLE_GENERATIONS:
                        ledger.stalled = True
                        break
                    continue
                n_none = 0
                status, value = ledger.evaluate(to_config(problem, dr.configuration.data))
                if status == "ok":
                    api.report_result(dr, Result(time=float(value)))
                else:
                    api.report_result(dr, Result(state="ERROR", time=math.inf))
        except BudgetSpent:
            pass
        finally:
            api.finish()
    return None


if __name__ == "__main__":
    main(run_one, ["opentuner"])
