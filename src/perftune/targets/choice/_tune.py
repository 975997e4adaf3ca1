"""Tune the cutoffs and algorithms of a program's algorithm sites, bottom-up by input size.

As in PetaBricks, the program is first tuned on small inputs; the selectors that win there seed the
next, larger size, where a survivor may keep its selector or grow a new top level (a different
algorithm above a new cutoff between the two sizes). The ladder itself is :func:`increa`; it measures
the declared defaults and the previous size's best (as that size ran it, without the levels above it)
at every size. Before the result is returned it is
timed against the defaults at every tuned size (interleaved, several samples): a selector measured
slower than the defaults at any of them is not kept (the next survivor, else the defaults, is), and
:attr:`SiteTuning.notes` says why.

Example:
    >>> from perftune.targets.choice import use_choices
    >>> _ = use_choices(ChoicesFile())  # start from an empty tuned-choices file
    >>> site = AlgorithmSite("doc-tune", {"builtin": sorted, "twice": lambda xs: sorted(sorted(xs))})
    >>> result = tune_sites(site, [site], make_input=lambda n, rng: rng.integers(0, 99, n).tolist(),
    ...                     sizes=[8, 64], seed=0)
    >>> set(result.choices.sites["doc-tune"][1]) <= {"builtin", "twice"}
    True
    >>> path = result.save()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import copy
import math
import numbers
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perftune.targets.choice._file import (
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    merge_into_file,
)
from perftune.targets.choice._ladder import (
    LadderResult,
    LadderSettings,
    as_list,
    check_callable,
    check_int,
    increa,
)
from perftune.targets.choice._site import AlgorithmSite

__all__ = ["SiteTuning", "simplify_levels", "tune_sites"]



def input_copy(data: Any) -> Any:
    """A copy of an input, made before a program may change it in place (an in-place sort of a NumPy
    array): what ``check(input, output)`` compares with, and what the next run of the same input gets.
    An input that cannot be copied is used as it is.

    Example:
        >>> import numpy as np
        >>> a = np.array([3, 1, 2]); b = input_copy(a); a.sort(); b
        array([3, 1, 2])
    """
    try:
        return copy.deepcopy(data)
    except Exception:  # noqa: BLE001 - an input deepcopy cannot copy (a handle): used as it is
        return data

@dataclass
class SiteTuning:
    """Outcome of :func:`tune_sites`.

    Attributes:
        choices: The tuned selectors, as a :class:`ChoicesFile` (sites only).
        time_s: Median time of the program at the largest size with the tuned selectors.
        ladder: The full ladder report (per-size costs, failures, survivors).
        default_time_s: Median time of the program at the largest size with the declared defaults
            (None if the defaults could not be measured there).
        comparison: ``(size, tuned_s, default_s)`` medians of the final check at each tuned size where
            the tuned selectors run a different program from the defaults (interleaved samples).
        notes: What the tuning could not do or replaced, in words (a size the settings left no room to
            tune, a selector dropped for being slower than the defaults, the defaults kept).
    """

    choices: ChoicesFile
    time_s: float
    ladder: LadderResult
    default_time_s: float | None = None
    comparison: list[tuple[int, float, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def save(self, path: str | Path | None = None) -> Path:
        """Merge the tuned selectors into the tuned-choices file (default location) and write it."""
        return merge_into_file(path, lambda f: f.update(self.choices))

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


def simplify_levels(
    cutoffs: Sequence[int], choices: Sequence[str]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Drop cutoffs between two levels that run the same algorithm (same behaviour, shorter table).

    Example:
        >>> simplify_levels([2, 24, 254], ["merge", "insertion", "insertion", "radix"])
        ((2, 254), ('merge', 'insertion', 'radix'))
    """
    cut: list[int] = []
    names = [choices[0]]
    for c, name in zip(cutoffs, choices[1:], strict=True):
        if name != names[-1]:
            cut.append(c)
            names.append(name)
    return tuple(cut), tuple(names)


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
        check: Optional ``check(input, output) -> bool``; a wrong output fails that candidate. Without
            it, a candidate that raises fails, and the final verification (below) still runs the
            chosen selector at every level's sizes, so that none is saved that raises at a size below
            the smallest tuned one.
        max_levels: Most levels per selector.
        settings: Ladder settings (population, survival, noise resolution).
        seed: Seed for candidate generation and inputs.

    Returns:
        A :class:`SiteTuning`; call ``.save()`` to write the tuned-choices file. Its selectors are
        never measured slower than the declared defaults at a tuned size: the ladder carries the
        defaults and each size's best up to the largest size, and a final interleaved timing at every
        tuned size replaces a selector that loses there (by the next survivor, else the defaults).
    """
    from perftune.space import Levels, Space

    check_callable(program, "tune_sites: program")
    check_callable(make_input, "tune_sites: make_input")
    if check is not None:
        check_callable(check, "tune_sites: check")
    if isinstance(sites, AlgorithmSite):
        raise ChoiceError(f"tune_sites: sites must be a list of algorithm sites, got the site {sites.name!r} "
                          "alone; pass [site]")
    sites = as_list(sites, "tune_sites: sites")
    if not sites:
        raise ChoiceError("tune_sites: no algorithm sites given")
    not_sites = [s for s in sites if not isinstance(s, AlgorithmSite)]
    if not_sites:
        raise ChoiceError(f"tune_sites: sites must be AlgorithmSite objects, got {not_sites[0]!r:.60}")
    names = [s.name for s in sites]
    if len(set(names)) != len(names):
        raise ChoiceError(f"tune_sites: site names repeat: {names}")
    sizes = as_list(sizes, "tune_sites: sizes")
    if any(isinstance(n, bool) or not isinstance(n, numbers.Integral) for n in sizes):
        raise ChoiceError(f"tune_sites: sizes must be integers (input sizes), got {sizes}")
    sizes = [int(n) for n in sizes]
    if sizes != sorted(set(sizes)) or not sizes or sizes[0] < 1:
        raise ChoiceError(f"tune_sites: sizes must be positive and strictly increasing, got {sizes}")
    max_levels = check_int(max_levels, "tune_sites: max_levels", 1)
    # Cutoffs above the largest tuned size would never be measured: keep them inside the ladder.
    space = Space(
        {
            s.name: s.selector(
                max_levels=max_levels,
                size_range=(s.size_range[0], max(s.size_range[0] + 1, min(s.size_range[1], sizes[-1]))),
            )
            for s in sites
        }
    )
    by_name = {s.name: s for s in sites}
    input_rng = np.random.default_rng(None if seed is None else seed + 7919)

    def objective(config: Any, size: int) -> float:
        data = make_input(size, input_rng)
        reference = input_copy(data) if check is not None else data
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
    with warnings.catch_warnings():
        # Tuning before there is a tuned-choices file is the usual first step, not a problem to report
        # (a corrupt file still warns: the tuning is about to replace it).
        warnings.filterwarnings("ignore", message=r".*tuned-choices file not found",
                                category=ChoicesFileWarning)
        base = {s.name: s.levels for s in sites}
    from perftune.space import Config

    seeds.append(Config(base))
    for s in sites:
        for alt in s.alternatives:
            seeds.append(Config({**base, s.name: Levels(cutoffs=(), choices=(alt,))}))
    default = space.default()
    ladder = increa(
        objective, space, sizes, settings=settings, seed=seed, seeds=[c for c in seeds if space.is_valid(c)],
        propose=propose, baselines=[default], carry=_trim,
    )
    # A level is only checked on the sizes the measurements happened to visit; before trusting a
    # selector, run the program at both ends, the middle and a random size of every level's range
    # (without a check too: a level below the smallest tuned size may never have run, and may raise).
    top = sizes[-1]
    survivors = [(_trim(c, top), v) for c, v in ladder.survivors]
    chosen, chosen_value = survivors[0]
    for config, value in survivors:
        problem = _verify(config, by_name, program, make_input, check, sizes[-1], input_rng)
        if problem is None:
            chosen, chosen_value = config, value
            break
        ladder.failures.append((config, sizes[-1], problem))
    else:
        # Every survivor hid a wrong level in a size range the ladder never visited. Fall back to
        # the seeds (the current selectors and each algorithm alone) that pass the same check,
        # timed at the largest size; only if none of them is right is there nothing to choose.
        fallback = _best_verified(seeds, by_name, program, make_input, check, objective, top, input_rng)
        if fallback is None:
            raise ChoiceError(f"tune_sites: every selector failed the final check at some size; "
                              f"last: {problem}")
        chosen, chosen_value = fallback
    # Never keep what was measured slower than the defaults at a tuned size: time the chosen selector
    # (then the next survivors) against them at every tuned size, and keep the defaults if all lose.
    st = settings or LadderSettings()
    notes = list(ladder.notes)
    tries = [chosen]
    wrong = {config for config, _, _ in ladder.failures}
    for config, _ in survivors:
        if len(tries) >= _GUARD_TRIES:
            break
        if config in tries or config == default or config in wrong:
            continue
        if _verify(config, by_name, program, make_input, check, top, input_rng):
            continue
        tries.append(config)
    comparison: list[tuple[int, float, float]] = []
    default_time = ladder.rungs[-1].baseline_value
    default_problem = _verify(default, by_name, program, make_input, check, top, input_rng)
    if default_problem is not None:
        notes.append(f"the declared defaults fail ({default_problem}): the tuned selectors were not compared")
    elif chosen == default:
        notes.append(f"kept the declared defaults: no tuned selector measured faster at size {top}")
    else:
        for config in tries:
            rows, problem = _compare(config, default, objective, list(sizes), st.final_samples)
            if problem is None:
                comparison = rows
                if rows and rows[0][0] == top:
                    chosen_value, default_time = rows[0][1], rows[0][2]
                chosen = config
                break
            notes.append(f"dropped {_describe(config)}: {problem}")
        else:
            chosen = default
            notes.append("kept the declared defaults: no tuned selector was as fast at every tuned size")
    if chosen == default and default_time is not None:
        chosen_value = default_time
    out = ChoicesFile()
    for name in names:
        lv = chosen[name]
        out.set_site(name, *simplify_levels(lv.cutoffs, lv.choices))
    return SiteTuning(choices=out, time_s=chosen_value, ladder=ladder, default_time_s=default_time,
                      comparison=comparison, notes=notes)


#: Most tuned selectors timed against the defaults before the defaults are kept.
_GUARD_TRIES = 3
#: Most samples per program and size in that final timing (small sizes are cheap: they get more).
_GUARD_MAX_SAMPLES = 25


def _describe(config: Any) -> str:
    """``site: [cutoffs] [choices]`` for every site of a configuration."""
    parts = []
    for name, lv in dict(config).items():
        cut, choices = simplify_levels(lv.cutoffs, lv.choices)
        parts.append(f"{name}: {list(cut)} {list(choices)}")
    return ", ".join(parts)


def _compare(
    config: Any,
    default: Any,
    objective: Callable[[Any, int], float],
    sizes: Sequence[int],
    final_samples: int,
) -> tuple[list[tuple[int, float, float]], str | None]:
    """Time ``config`` against ``default`` at every size, largest first, interleaved.

    Sizes where the two run the same program (they differ only in levels above that size) are not
    timed. Returns the ``(size, config_s, default_s)`` medians and the first problem: ``config``
    slower than ``default`` (by the medians) or failing; None if there is none. A size where the
    default itself fails is not compared.
    """
    top = sizes[-1]
    rows: list[tuple[int, float, float]] = []
    for size in sorted(sizes, reverse=True):
        if _trim(config, size) == _trim(default, size):
            continue
        n = min(_GUARD_MAX_SAMPLES, max(final_samples, math.ceil(final_samples * top / size)))
        a: list[float] = []
        b: list[float] = []
        for _ in range(n):
            try:
                a.append(objective(config, size))
            except Exception as e:  # a wrong output, or the program raising: this selector fails here
                return rows, f"failed at size {size}: {type(e).__name__}: {e}"
            try:
                b.append(objective(default, size))
            except Exception:  # the defaults failing here: this size is not compared
                break
        if len(b) < n:
            continue
        ta, tb = statistics.median(a), statistics.median(b)
        rows.append((size, ta, tb))
        if ta > tb:
            return rows, f"measured slower than the defaults at size {size} ({ta:.3g} s against {tb:.3g} s)"
    return rows, None


def _trim(config: Any, top: int) -> Any:
    """Drop levels that start above the largest tuned size: nothing was measured there, so the level
    serving the largest size serves every larger one."""
    from perftune.space import Levels

    out = {}
    for name, lv in dict(config).items():
        keep = sum(1 for c in lv.cutoffs if c <= top)
        cut, ch = simplify_levels(lv.cutoffs[:keep], lv.choices[: keep + 1])
        out[name] = Levels(cutoffs=cut, choices=ch)
    return config.replace(**out)


def _best_verified(
    candidates: Sequence[Any],
    sites: dict[str, AlgorithmSite],
    program: Callable[[Any], Any],
    make_input: Callable[[int, np.random.Generator], Any],
    check: Callable[[Any, Any], bool] | None,
    objective: Callable[[Any, int], float],
    top: int,
    rng: np.random.Generator,
) -> tuple[Any, float] | None:
    """The fastest of ``candidates`` that passes :func:`_verify`, by the median of three timings at
    ``top``; None when none passes."""
    best: tuple[Any, float] | None = None
    seen: list[Any] = []
    for config in candidates:
        config = _trim(config, top)
        if config in seen or _verify(config, sites, program, make_input, check, top, rng) is not None:
            continue
        seen.append(config)
        try:
            value = statistics.median(objective(config, top) for _ in range(3))
        except Exception:  # noqa: BLE001 - a seed failing at the largest size is not a choice
            continue
        if best is None or value < best[1]:
            best = (config, value)
    return best


def _verify(
    config: Any,
    sites: dict[str, AlgorithmSite],
    program: Callable[[Any], Any],
    make_input: Callable[[int, np.random.Generator], Any],
    check: Callable[[Any, Any], bool] | None,
    top: int,
    rng: np.random.Generator,
) -> str | None:
    """Why ``config`` fails at some size of one of its levels (a wrong output by ``check``, or the
    program raising; without ``check`` only raising fails); None when it passes."""
    test_sizes: set[int] = set()
    for name in sites:
        lv = config[name]
        edges = [1, *lv.cutoffs, top + 1]
        for lo, hi in zip(edges, edges[1:], strict=False):
            # Both ends, the middle and one random size inside: an algorithm right only at the sizes
            # the ladder measured must not pass for right on the whole level.
            inside = int(rng.integers(lo, hi)) if hi > lo else lo
            test_sizes.update(n for n in (lo, hi - 1, (lo + hi - 1) // 2, inside) if 1 <= n <= top)
    with contextlib.ExitStack() as stack:
        for name, site in sites.items():
            stack.enter_context(site.use(config[name]))
        for n in sorted(test_sizes):
            try:
                data = make_input(n, rng)
            except Exception:  # noqa: BLE001 - no input of that size exists: nothing can run there
                continue
            reference = input_copy(data) if check is not None else data
            try:
                out = program(data)
                ok = check is None or check(reference, out)
            except Exception as e:  # a crash on an untested size is a wrong selector, not a tuner crash
                return f"{type(e).__name__} at size {n} with {dict(config)}: {e}"
            if not ok:
                return f"wrong output at size {n} with {dict(config)}"
    return None
