"""LLVM pass ordering as a :class:`perftune.targets.Target`: a pass sequence, an instruction count."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, ClassVar

from perftune.errors import PerftuneError, TaskError
from perftune.targets._target import Example, Outcome, TargetBase
from perftune.targets.llvm._actions import ACTIONS, action_index, pipeline_of
from perftune.targets.llvm._datasets import get_benchmark
from perftune.trial import Status

__all__ = ["LlvmTarget"]


class LlvmTarget(TargetBase):
    """Instruction count of a benchmark after a pass sequence (deterministic: a count, not a timing).

    The output check against the -O0 build is :meth:`verify`: it runs the program, so it is kept for the
    winner (``perftune llvm-passes`` and :func:`~perftune.targets.llvm.tune_passes` do the same search
    with their own seeds and local search).

    Args:
        benchmark: URI or file (see :func:`~perftune.targets.llvm.get_benchmark`).
        length: Longest pass sequence searched.
        engine: ``"helper"`` (persistent libLLVM process) or ``"opt"`` (one ``opt`` per step).
        timeout_s: Limit of one engine step.

    Example:
        >>> target = LlvmTarget("benchmark://perftune-v0/crc32", length=8)  # doctest: +SKIP
        >>> target.evaluate(target.space().default()).value  # doctest: +SKIP
    """

    kind: ClassVar[str] = "llvm"
    deterministic = True

    def __init__(self, benchmark: str, *, length: int = 160, engine: str = "helper",
                 timeout_s: float = 60.0) -> None:
        from perftune.space import PassSequence, Space

        self.benchmark = benchmark
        self.engine = engine
        self.timeout_s = timeout_s
        self._space = Space({"passes": PassSequence([a.name for a in ACTIONS], max_length=length)})
        self._evaluator: Any = None

    @classmethod
    def from_task(cls, path: str, table: Mapping[str, Any]) -> LlvmTarget:
        """``[target] kind = "llvm"``: ``benchmark`` (a URI or a file), optional ``length`` and ``engine``.

        The benchmark is resolved (compiled, generated) and its module parsed here, so that a task whose
        every trial would fail says why in one line (:class:`~perftune.errors.TaskError`) before the run.
        """
        import os

        from perftune.targets.llvm._datasets import _SHORT_FORM

        benchmark = table.get("benchmark")
        if not isinstance(benchmark, str) or not benchmark:
            raise PerftuneError(f"{path}: key target.benchmark: expected a benchmark URI or a file")
        if "://" not in benchmark:
            # A file is relative to the task file; a dataset's short form (perftune-v0/crc32,
            # CompilerGym's cbench-v1/crc32) is not a file unless the task's folder has one by that name.
            beside = os.path.join(os.path.dirname(os.path.abspath(path)), benchmark)
            if os.path.exists(beside) or not _SHORT_FORM.match(benchmark):
                benchmark = beside
        length = table.get("length", 160)
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise PerftuneError(f"{path}: key target.length: expected a positive integer")
        engine = table.get("engine", "helper")
        if engine not in ("helper", "opt"):
            raise PerftuneError(f"{path}: key target.engine: expected 'helper' or 'opt', got {engine!r}")
        unknown = sorted(set(table) - {"kind", "benchmark", "length", "engine"})
        if unknown:
            raise PerftuneError(f"{path}: key target.{unknown[0]}: unknown key "
                                "(known: benchmark, engine, kind, length)")
        _check_benchmark(path, benchmark)
        return cls(benchmark, length=length, engine=engine)

    @classmethod
    def example(cls, workdir: str) -> Example:
        """The bundled crc32 program, sequences of up to 6 passes, one ``opt`` process per step."""
        import shutil

        if shutil.which("opt-14") is None and shutil.which("opt") is None:
            return Example(None, skip="LLVM 14 (opt-14) is not installed")
        return Example(cls("benchmark://perftune-v0/crc32", length=6, engine="opt", timeout_s=20.0))

    def _ready(self) -> Any:
        if self._evaluator is None:
            from perftune.targets.llvm._tune import SequenceEvaluator

            self._evaluator = SequenceEvaluator(get_benchmark(self.benchmark), engine=self.engine,
                                                timeout_s=self.timeout_s)
        return self._evaluator

    def space(self) -> Any:
        return self._space

    def evaluate(self, config: Any) -> Outcome:
        import time

        started = time.time()
        try:
            count = self._ready().count([action_index(name) for name in config["passes"]])
        except Exception as error:  # a pass that crashes or is refused: that sequence failed
            reason = f"{type(error).__name__}: {error}"[:2000]
            return Outcome(Status.FAILED, reason=reason, started_at=started, finished_at=time.time())
        return Outcome(Status.OK, value=float(count), metrics={"instructions": float(count)},
                       started_at=started, finished_at=time.time())

    def verify(self, config: Any) -> str | None:
        """The program built after ``config`` prints what its -O0 build prints (None), else why not."""
        ev = self._ready()
        ev.count([action_index(name) for name in config["passes"]])
        return None if ev.output_ok() else "miscompiled: the program's output differs from its -O0 build"

    def explain(self, config: Any) -> str:
        """The ``opt`` command line of ``config``."""
        pipeline = pipeline_of([action_index(name) for name in config["passes"]])
        return shlex.join(["opt-14", f"-passes={pipeline}" if pipeline else "-passes=verify", "input.bc"])

    def __getstate__(self) -> dict[str, Any]:
        # A worker process starts its own engine.
        return {**self.__dict__, "_evaluator": None}


def _check_benchmark(path: str, benchmark: str) -> None:
    """TaskError (one line) unless BENCHMARK resolves to a module with instructions that LLVM parses."""
    from perftune.targets.llvm._engine import OptEngine
    from perftune.targets.llvm._errors import LlvmError

    try:
        bench = get_benchmark(benchmark)
        engine = OptEngine()
        try:
            count = engine.load(bench.bitcode)
        finally:
            engine.close()
    except LlvmError as error:
        raise TaskError(f"{path}: key target.benchmark: {error}") from None
    if count == 0:
        raise TaskError(f"{path}: key target.benchmark: {bench.uri}: the module has no instructions "
                        "(nothing for a pass sequence to change)")
