"""The replay target: a recorded T1/T4 problem as a :class:`perftune.targets.Target`."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from perftune.errors import PerftuneError
from perftune.space import Config
from perftune.targets._target import Example, Outcome, TargetBase, outcome_of
from perftune.targets.replay._ktcache import load_kt
from perftune.targets.replay._load import ReplayProblem, load

__all__ = ["ReplayTarget"]


class ReplayTarget(TargetBase):
    """Looks configurations up in recorded results: instant, deterministic, failures as recorded.

    Args:
        problem: What :func:`perftune.targets.replay.load` returned.

    Example:
        >>> target = ReplayTarget(load("conv.T1.json", "conv.A4000.T4.json.gz"))  # doctest: +SKIP
        >>> target.evaluate(target.space().default()).status  # doctest: +SKIP
        <Status.OK: 'ok'>
    """

    kind: ClassVar[str] = "replay"
    deterministic = True

    def __init__(self, problem: ReplayProblem) -> None:
        self.problem = problem
        self.goal = problem.goal  # a throughput replayed from a cache is maximised

    @classmethod
    def from_task(cls, path: str, table: Mapping[str, Any]) -> ReplayTarget:
        """``[target] kind = "replay"`` with ``t1`` and ``t4``, or ``t1`` and ``kt`` (a Kernel Tuner cache).

        Paths are relative to the task file.
        """
        folder = os.path.dirname(os.path.abspath(path))
        if "kt" in table and "t4" in table:
            raise PerftuneError(f"{path}: keys target.t4 and target.kt: give one of them, not both")
        results = "kt" if "kt" in table else "t4"
        files = []
        for key in ("t1", results):
            value = table.get(key)
            if not isinstance(value, str) or not value:
                what = "Kernel Tuner cache" if key == "kt" else f"{key.upper()} file"
                hint = " (or target.kt, a Kernel Tuner cache)" if key == "t4" else ""
                raise PerftuneError(f"{path}: key target.{key}: expected the path of the {what}{hint}")
            files.append(os.path.join(folder, value))
        return cls(load_kt(files[0], files[1]) if results == "kt" else load(files[0], files[1]))

    @classmethod
    def example(cls, workdir: str) -> Example:
        """Twelve recorded configurations; one of them failed when it was measured."""
        t1 = {"ConfigurationSpace": {
            "TuningParameters": [
                {"Name": "bx", "Type": "int", "Values": "[1, 2, 4, 8]", "Default": 1},
                {"Name": "t", "Type": "int", "Values": "[1, 2, 3]", "Default": 1},
            ],
            "Conditions": [],
        }}
        results = []
        for bx, t in itertools.product([1, 2, 4, 8], [1, 2, 3]):
            failed = (bx, t) == (8, 2)
            results.append({
                "configuration": {"bx": bx, "t": t}, "times": {"runtimes": []},
                "invalidity": "runtime" if failed else "correct", "correctness": 0 if failed else 1,
                "measurements": [{"name": "time", "unit": "ms",
                                  "value": "RuntimeFailedConfig" if failed else float(abs(bx - 4) + t)}],
                "objectives": ["time"],
            })
        p1 = os.path.join(workdir, "example.T1.json")
        p4 = os.path.join(workdir, "example.dev.T4.json")
        with open(p1, "w") as f:
            json.dump(t1, f)
        with open(p4, "w") as f:
            json.dump({"schema_version": "1.0.0", "results": results}, f)
        target = cls(load(p1, p4))
        return Example(target, failing=Config({"bx": 8, "t": 2}))

    def space(self) -> Any:
        return self.problem.space

    def evaluate(self, config: Any) -> Outcome:
        return outcome_of(self.problem.objective, config)
