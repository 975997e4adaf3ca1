"""Algorithmic choice as a :class:`perftune.targets.Target`: a selector per site, timed at one size."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from perftune.targets._target import Example, Outcome, TargetBase
from perftune.targets.choice._file import ChoiceError
from perftune.targets.choice._site import AlgorithmSite
from perftune.targets.choice._tune import input_copy
from perftune.trial import Status

__all__ = ["ChoiceTarget"]


_EXAMPLE_SITES: list[AlgorithmSite] = []


def _example_site() -> AlgorithmSite:
    # Made on first use, not on import: a site joins the process's registry of sites when created.
    if not _EXAMPLE_SITES:
        _EXAMPLE_SITES.append(AlgorithmSite("perftune-target-example",
                                            {"builtin": sorted, "bubble": _bubble, "broken": _broken}))
    return _EXAMPLE_SITES[0]


def _example_program(xs: list[int]) -> list[int]:
    return _example_site()(xs)  # type: ignore[no-any-return]


def _bubble(xs: list[int]) -> list[int]:
    out = list(xs)
    for i in range(len(out)):
        for j in range(len(out) - 1 - i):
            if out[j] > out[j + 1]:
                out[j], out[j + 1] = out[j + 1], out[j]
    return out


def _broken(xs: list[int]) -> list[int]:
    raise ChoiceError("the 'broken' alternative is not implemented")


def _example_input(n: int, rng: np.random.Generator) -> list[int]:
    return [int(v) for v in rng.integers(0, 1000, n)]


def _sorted_right(data: list[int], out: list[int]) -> bool:
    return list(out) == sorted(data)


class ChoiceTarget(TargetBase):
    """Times a program whose algorithm sites follow a configuration (one selector per site).

    :func:`~perftune.targets.choice.tune_sites` tunes the same sites bottom-up over growing sizes; this
    target is one size, for any driver. It is used from Python (the program is Python code).

    Args:
        program: Runs the code under tuning on one input.
        sites: The algorithm sites it calls.
        make_input: Builds an input of a size (not timed).
        size: The input size timed.
        check: Optional ``check(input, output) -> bool``; a wrong output (False, or the check raising)
            fails the trial.
        max_levels: Most levels per selector.
        seed: Seed of the inputs.

    Example:
        >>> site = AlgorithmSite("doc-target", {"builtin": sorted})
        >>> t = ChoiceTarget(lambda xs: site(xs), [site], make_input=lambda n, rng: list(range(n)), size=8)
        >>> t.evaluate(t.space().default()).status.value
        'ok'
    """

    kind: ClassVar[str] = "choice"

    def __init__(self, program: Callable[[Any], Any], sites: Sequence[AlgorithmSite], *,
                 make_input: Callable[[int, np.random.Generator], Any], size: int,
                 check: Callable[[Any, Any], bool] | None = None, max_levels: int = 4,
                 seed: int | None = None) -> None:
        from perftune.space import Space

        if not sites:
            raise ChoiceError("ChoiceTarget: no algorithm sites given")
        self.program = program
        self.sites = {s.name: s for s in sites}
        self.make_input = make_input
        self.size = size
        self.check = check
        self._rng = np.random.default_rng(seed)
        self._space = Space({
            s.name: s.selector(max_levels=max_levels, size_range=(
                s.size_range[0], max(s.size_range[0] + 1, min(s.size_range[1], size))))
            for s in sites
        })

    @classmethod
    def example(cls, workdir: str) -> Example:
        """Sorting 200 numbers; the ``broken`` alternative fails, bubble sort is slow but right."""
        from perftune.space import Config, Levels

        site = _example_site()
        target = cls(_example_program, [site], make_input=_example_input, size=200, check=_sorted_right,
                     max_levels=1, seed=0)
        return Example(target, failing=Config({site.name: Levels((), ("broken",))}))

    def space(self) -> Any:
        return self._space

    def evaluate(self, config: Any) -> Outcome:
        started = time.time()
        data = self.make_input(self.size, self._rng)
        reference = input_copy(data) if self.check is not None else data
        try:
            with contextlib.ExitStack() as stack:
                for name, site in self.sites.items():
                    stack.enter_context(site.use(config[name]))
                t0 = time.perf_counter()
                out = self.program(data)
                elapsed = time.perf_counter() - t0
        except Exception as error:  # the program is user code: any exception is a failed trial
            return Outcome(Status.FAILED, reason=f"{type(error).__name__}: {error}"[:2000],
                           started_at=started, finished_at=time.time())
        if self.check is not None:
            try:
                right = self.check(reference, out)
            except Exception as error:  # a check in the assert style (np.testing) raises on a wrong output
                right, why = False, f": {type(error).__name__}: {error}"[:2000]
            else:
                why = ""
            if not right:
                return Outcome(Status.FAILED, reason=f"wrong output at size {self.size}{why}",
                               started_at=started, finished_at=time.time())
        return Outcome(Status.OK, value=elapsed, started_at=started, finished_at=time.time())
