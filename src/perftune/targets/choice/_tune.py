"""Tune the cutoffs and algorithms of a program's algorithm sites, bottom-up by input size.

As in PetaBricks, the program is first tuned on small inputs; the selectors that win there seed the
next, larger size, where a survivor may keep its selector or grow a new top level (a different
algorithm above a new cutoff between the two sizes). The ladder itself is :func:`increa`.

Example:
    >>> # doctest: +SKIP
    >>> result = tune_sites(my_sort, [sort_site], make_input=random_list, sizes=[100, 1000, 10000])
    >>> result.save()            # writes ./perftune-choices.json (or $PERFTUNE_CHOICES)
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perftune.targets.choice._file import ChoiceError, ChoicesFile, load_choices
from perftune.targets.choice._ladder import LadderResult, LadderSettings, increa
from perftune.targets.choice._site import AlgorithmSite

__all__ = ["SiteTuning", "tune_sites"]


@dataclass
class SiteTuning:
    """Outcome of :func:`tune_sites`.

    Attributes:
        choices: The tuned selectors, as a :class:`ChoicesFile` (sites only).
        time_s: Median time of the program at the largest size with the tuned selectors.
        ladder: The full ladder report (per-size costs, failures, survivors).
    """

    choices: ChoicesFile
    time_s: float
    ladder: LadderResult

    def save(self, path: str | Path | None = None) -> Path:
        """Merge the tuned selectors into the tuned-choices file (default location) and write it."""
        existing = load_choices(path, warn=False)
        existing.update(self.choices)
        return existing.write(path)

    def apply(self, sites: Sequence[AlgorithmSite]) -> None:
        """Install the tuned selectors in ``sites`` in this process."""
        for s in sites:
            if s.name in self.choices.sites:
                s.set(*self.choices.sites[s.name])


def _log_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    lo, hi = max(1, lo), max(1, hi)
    if hi <= lo:
        return lo
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def tune_sites(
    program: Callable[[Any], Any],
    sites: Sequence[AlgorithmSite],
    *,
    make_input: Callable[[int, np.random.Generator], Any],
    sizes: Sequence[int],
    check: Callable[[Any, Any], bool] | None = None,
    max_levels: int = 4,
    settings: LadderSettings | None = None,
    seed: int | None = None,
) -> SiteTuning:
    """Tune the selectors of ``sites`` for ``program``, from small inputs to large ones.

    Args:
        program: Runs the code under tuning on one input (it calls the sites, maybe recursively).
        sites: The algorithm sites to tune.
        make_input: Builds a fresh input of a given size (not timed).
        sizes: Increasing input sizes; the result is tuned for the last one.
        check: Optional ``check(input, output) -> bool``; a wrong output fails that candidate.
        max_levels: Most levels per selector.
        settings: Ladder settings (population, survival, noise resolution).
        seed: Seed for candidate generation and inputs.

    Returns:
        A :class:`SiteTuning`; call ``.save()`` to write the tuned-choices file.
    """
    from perftune.space import Levels, Space

    if not sites:
        raise ChoiceError("tune_sites: no algorithm sites given")
    names = [s.name for s in sites]
    if len(set(names)) != len(names):
        raise ChoiceError(f"tune_sites: site names repeat: {names}")
    if list(sizes) != sorted(set(sizes)) or not sizes or sizes[0] < 1:
        raise ChoiceError(f"tune_sites: sizes must be positive and strictly increasing, got {list(sizes)}")
    space = Space({s.name: s.selector(max_levels=max_levels) for s in sites})
    by_name = {s.name: s for s in sites}
    input_rng = np.random.default_rng(None if seed is None else seed + 7919)

    def objective(config: Any, size: int) -> float:
        data = make_input(size, input_rng)
        reference = list(data) if check is not None and isinstance(data, list) else data
        with contextlib.ExitStack() as stack:
            for name, site in by_name.items():
                stack.enter_context(site.use(config[name]))
            t0 = time.perf_counter()
            out = program(data)
            elapsed = time.perf_counter() - t0
        if check is not None and not check(reference, out):
            raise ChoiceError(f"wrong output at size {size} with {dict(config)}")
        return elapsed

    def propose(config: Any, below: int, size: int, rng: np.random.Generator) -> list[Any]:
        # PetaBricks' bottom-up step: keep what serves the small sizes, try a new algorithm on top.
        out = []
        for name, site in by_name.items():
            lv = config[name]
            lo, hi = site.size_range
            if len(lv.choices) >= max_levels:
                continue
            floor = max(lv.cutoffs[-1] + 1 if lv.cutoffs else lo + 1, below // 4, lo + 1)
            if floor >= min(size, hi):
                continue
            cut = _log_int(rng, floor, min(size, hi))
            for alt in site.alternatives:
                if alt != lv.choices[-1]:
                    new = Levels(cutoffs=(*lv.cutoffs, cut), choices=(*lv.choices, alt))
                    out.append(config.replace(**{name: new}))
        return out

    # Seeds: the current selectors, and every single algorithm alone (the baselines to beat).
    seeds = []
    base = {s.name: s.levels for s in sites}
    from perftune.space import Config

    seeds.append(Config(base))
    for s in sites:
        for alt in s.alternatives:
            seeds.append(Config({**base, s.name: Levels(cutoffs=(), choices=(alt,))}))
    ladder = increa(objective, space, list(sizes), settings=settings, seed=seed, seeds=seeds, propose=propose)
    out = ChoicesFile()
    for name in names:
        lv = ladder.best[name]
        out.set_site(name, lv.cutoffs, lv.choices)
    return SiteTuning(choices=out, time_s=ladder.value, ladder=ladder)
