"""The gcc flags target as a :class:`perftune.targets.Target`: one configuration, one build and timed runs."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from typing import Any, ClassVar

from perftune.space import Config
from perftune.targets._target import Example, Outcome, TargetBase
from perftune.targets.flags._discover import discover, language_of
from perftune.targets.flags._evaluate import Evaluator, Program, link_args_for
from perftune.targets.flags._space import build_space, render
from perftune.targets.flags._task import FlagsTask, check_task_file, task_from_toml
from perftune.trial import Status

__all__ = ["FlagsTarget"]

# How a flags measurement's status reads as a trial's (anything else is FAILED, its reason kept).
_STATUS = {"ok": Status.OK, "timeout": Status.TIMEOUT, "cancelled": Status.CANCELLED}

_EXAMPLE_SOURCE = """\
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
    for (long i = 0; i < n; i++) s += (i * i) % 7;
#ifdef __OPTIMIZE_SIZE__
    s += 1; /* a "miscompilation" at -Os: the example's failing configuration */
#endif
    printf("%ld\\n", s);
    return 0;
}
"""


class FlagsTarget(TargetBase):
    """Builds a program with a configuration's flags, checks its output against ``-O2`` and times it.

    ``perftune run`` hands a flags task file the whole run (:meth:`run_task`: the search, then the
    reduction to a minimal flag set and the comparison with ``-O3``); :meth:`space` and :meth:`evaluate`
    are the same measurement for any driver.

    Args:
        task: The task (what :func:`perftune.targets.flags.task_from_toml` read).
        workdir: Where build and run scratch directories go (the sandbox's default when None).

    Example:
        >>> target = FlagsTarget(FlagsTask(sources=("prog.c",), run_args=("100",), cwd="."))  # doctest: +SKIP
        >>> target.explain(target.space().default())  # doctest: +SKIP
        'gcc -O3 prog.c -o prog -lm'
    """

    kind: ClassVar[str] = "flags"

    def __init__(self, task: FlagsTask, *, workdir: str | None = None) -> None:
        self.task = task
        self.workdir = workdir
        self._info: Any = None
        self._space: Any = None
        self._evaluator: Evaluator | None = None

    @classmethod
    def from_task(cls, path: str, table: Mapping[str, Any]) -> FlagsTarget:
        """``[target] kind = "flags"`` (see :func:`perftune.targets.flags.task_from_toml`).

        The rest of the file is checked too (:func:`perftune.targets.flags.check_task_file`): a table or
        key this kind does not use is an error naming its line, not silently ignored.
        """
        import tomllib

        from perftune.targets._registry import read_task_text

        text = ""
        if os.path.isfile(path):
            text = read_task_text(path)
            check_task_file(tomllib.loads(text), path, text)
        return cls(task_from_toml(table, path, text=text))

    @classmethod
    def example(cls, workdir: str) -> Example:
        """A loop of milliseconds built with the system gcc (no ``--param`` knobs); -Os changes its output."""
        if shutil.which("gcc") is None:
            return Example(None, skip="gcc is not installed")
        with open(os.path.join(workdir, "loop.c"), "w") as f:
            f.write(_EXAMPLE_SOURCE)
        os.chmod(os.path.join(workdir, "loop.c"), 0o644)
        os.chmod(workdir, 0o755)
        task = FlagsTask(sources=("loop.c",), run_args=("200000",), cwd=workdir, include_params=False,
                         run_timeout_s=10.0)
        # Scratch directories stay the sandbox's own: the candidate's user must reach them.
        target = cls(task)
        failing = Config({**target.space().default(), "O": "s"})
        return Example(target, failing=failing)

    def _compiler(self) -> Any:
        if self._info is None:
            t = self.task
            self._info = discover(t.compiler, language=language_of(t.compiler, t.sources))
        return self._info

    def space(self) -> Any:
        if self._space is None:
            self._space = build_space(self._compiler(), include_params=self.task.include_params)
        return self._space

    def _ready(self) -> Evaluator:
        # The reference output is the -O2 build's, as in tune_flags: built on the first evaluation.
        if self._evaluator is None:
            t = self.task
            program = Program(sources=t.sources, run_args=t.run_args,
                              link_args=link_args_for(t.compiler, t.sources, t.link_args),
                              compile_args=t.compile_args, rel_tol=t.rel_tol, abs_tol=t.abs_tol, cwd=t.cwd,
                              run_timeout_s=t.run_timeout_s, clock=t.clock)
            evaluator = Evaluator(program, self._compiler(), workdir=self.workdir)
            evaluator.set_reference(["-O2"])
            self._evaluator = evaluator
        return self._evaluator

    def evaluate(self, config: Any) -> Outcome:
        import time

        started = time.time()
        try:
            m = self._ready().measure(render(config, self._compiler()))
        except Exception as error:  # a reference that cannot be built fails every trial, with its reason
            return Outcome(Status.FAILED, reason=f"{type(error).__name__}: {error}", started_at=started,
                           finished_at=time.time())
        status = _STATUS.get(m.status, Status.FAILED)
        if status is Status.OK:
            return Outcome(status, value=m.value, samples=list(m.samples), started_at=started,
                           finished_at=time.time())
        reason = m.reason or m.status
        if status is Status.FAILED and not reason.startswith(m.status):
            reason = f"{m.status}: {reason}"
        return Outcome(status, reason=reason, started_at=started, finished_at=time.time())

    def explain(self, config: Any) -> str:
        """The compiler command line of ``config``."""
        t = self.task
        return shlex.join([t.compiler, *t.compile_args, *render(config, self._compiler()), *t.sources,
                           "-o", "prog", *link_args_for(t.compiler, t.sources, t.link_args)])

    def run_task(self, *, budget: Any, workers: int, store: Any, seed: int | None, name: str,
                 on_trial: Any = None, lag: int | None = None) -> Any:
        """The whole flags run of a task file: :meth:`FlagsTask.run` (returns a ``FlagsResult``)."""
        return self.task.run(budget=budget, workers=workers, store=store, seed=seed, name=name,
                             on_trial=on_trial, lag=lag)

    def __getstate__(self) -> dict[str, Any]:
        # Worker processes build their own evaluator (it holds locks and sandboxes).
        return {**self.__dict__, "_evaluator": None}
