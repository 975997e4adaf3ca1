"""Variable accuracy: the fastest configuration per accuracy target, in one shared run.

The user gives a program ``program(config, input) -> output`` whose configuration holds algorithm
choices and accuracy knobs (iterations, tolerances, sample sizes), and a metric
``accuracy(output, input) -> float``. For a list of targets ("bins"), :func:`tune_accuracy` finds,
for each bin, the fastest configuration whose accuracy reaches the target on every training input.
All bins share one population: every measurement is scored against every bin. Each winner is then
verified on held-back inputs (a winner that misses there is replaced by the next candidate), and the
table is made monotone: a tighter bin is never faster than a looser one; if it were, the looser bin
takes its configuration too.

Example:
    >>> from perftune.space import Int, Space
    >>> space = Space({"terms": Int(1, 40)})
    >>> def approx_e(config, x):  # partial sums of exp(x)
    ...     return sum(x ** k / math.factorial(k) for k in range(config["terms"]))
    >>> def digits(out, x):
    ...     return -math.log10(abs(out - math.exp(x)) / math.exp(x) + 1e-17)
    >>> table = tune_accuracy(approx_e, space, accuracy=digits, targets=[3, 6, 9], inputs=[1.0, 2.0],
    ...                       held_out=[1.5], budget=60, seed=0, name="doc-e")
    >>> [b.config["terms"] >= 5 for b in table.bins]
    [True, True, True]
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perftune.targets.choice._file import ChoiceError, merge_into_file, user_stacklevel
from perftune.targets.choice._ladder import as_configs, as_list, check_callable, check_int
from perftune.targets.choice._site import current_choices
from perftune.targets.choice._tune import input_copy

__all__ = [
    "AccuracyBin",
    "AccuracyMetricWarning",
    "AccuracyTable",
    "UnreachableTargetWarning",
    "accuracy_config",
    "tune_accuracy",
]


class AccuracyMetricWarning(UserWarning):
    """The user's accuracy metric raised; the candidate was dropped and tuning went on."""


class UnreachableTargetWarning(UserWarning):
    """No configuration reached an accuracy target; the table records the best accuracy found."""


def _plain(value: Any) -> Any:
    """JSON-friendly form of a configuration value (Levels -> dict, tuples -> lists)."""
    if hasattr(value, "cutoffs") and hasattr(value, "choices"):
        return {"cutoffs": list(value.cutoffs), "choices": list(value.choices)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def config_to_dict(config: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration as a plain JSON-ready dict."""
    return {k: _plain(v) for k, v in sorted(dict(config).items())}


def config_in_space(config: Mapping[str, Any], space: Any, where: str) -> Any:
    """A stored (plain) configuration as a :class:`perftune.space.Config` of ``space``, a selector back as
    its ``Levels``: what the program was tuned with. ChoiceError if it is not a configuration of ``space``.

    Example:
        >>> from perftune.space import Int, Space
        >>> config_in_space({"it": 3}, Space({"it": Int(1, 9)}), "doc")
        Config({'it': 3})
    """
    from perftune.errors import PerftuneError
    from perftune.space import Config

    try:
        out = Config.from_json(dict(config), space)
        why = space.why_invalid(out)
    except (PerftuneError, TypeError, ValueError) as e:
        why = str(e)
    if why is not None:
        raise ChoiceError(f"{where}: configuration {dict(config)} is not one of the given space ({why})")
    return out


def requested_accuracy(accuracy: Any, where: str) -> float:
    """A requested accuracy as a float; a numeric string (read from argv or the environment) is converted,
    anything else is one ChoiceError line."""
    value = math.nan
    if isinstance(accuracy, str):
        with contextlib.suppress(ValueError):
            value = float(accuracy)
    elif isinstance(accuracy, numbers.Real) and not isinstance(accuracy, bool):
        value = float(accuracy)
    if math.isnan(value):
        raise ChoiceError(f"{where}: accuracy must be a number, got {accuracy!r} ({type(accuracy).__name__})")
    return value


@dataclass
class AccuracyBin:
    """One cell of an accuracy table.

    Attributes:
        target: The accuracy the configuration must reach.
        config: The fastest configuration found that reaches it (plain dict), or None if unreachable.
        time_s: Its time per input on the training inputs (median over inputs, least disturbed repeat).
        accuracy: Its worst accuracy on the training inputs.
        verified_accuracy: Its worst accuracy on the held-back inputs (None if none were given).
        best_accuracy: Best worst-case accuracy seen over all candidates (how far an unreachable
            target is).
    """

    target: float
    config: dict[str, Any] | None
    time_s: float | None = None
    accuracy: float | None = None
    verified_accuracy: float | None = None
    best_accuracy: float | None = None

    @property
    def reached(self) -> bool:
        """True if a configuration reaches this target."""
        return self.config is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "config": self.config,
            "time_s": self.time_s,
            "accuracy": self.accuracy,
            "verified_accuracy": self.verified_accuracy,
            "best_accuracy": self.best_accuracy,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AccuracyBin:
        return cls(
            target=float(d["target"]),
            config=d.get("config"),
            time_s=d.get("time_s"),
            accuracy=d.get("accuracy"),
            verified_accuracy=d.get("verified_accuracy"),
            best_accuracy=d.get("best_accuracy"),
        )


@dataclass
class AccuracyTable:
    """Configurations per accuracy target, loosest target first; monotone in time.

    The bins (and the file) hold each configuration in its plain JSON form (a selector as
    ``{"cutoffs": [...], "choices": [...]}``). :meth:`config_for` hands back the configuration the program
    was tuned with (a :class:`perftune.space.Config`, selectors as ``Levels``) when it knows the space: the
    table :func:`tune_accuracy` returns keeps its space (``.space``, not saved); for a table read from the
    file, pass ``space=``. Without a space it returns the plain dict.

    Example:
        >>> t = AccuracyTable("doc", [AccuracyBin(1.0, {"it": 1}), AccuracyBin(3.0, {"it": 5})])
        >>> t.config_for(2.0)
        {'it': 5}
    """

    name: str
    bins: list[AccuracyBin]
    metric: str = "accuracy"
    higher_is_better: bool = True
    n_measurements: int = 0
    failures: list[str] = field(default_factory=list)
    n_candidates: int = 0
    #: The space the configurations belong to (set by :func:`tune_accuracy`; not saved in the file).
    space: Any = field(default=None, repr=False, compare=False)

    def _meets(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target

    @property
    def unreachable(self) -> list[AccuracyBin]:
        """Bins that no configuration reached."""
        return [b for b in self.bins if not b.reached]

    def bin_for(self, accuracy: float) -> AccuracyBin:
        """The loosest reached bin whose target is at least as strict as ``accuracy`` (a number, or a
        numeric string as read from argv)."""
        accuracy = requested_accuracy(accuracy, f"table {self.name!r}")
        for b in self.bins:
            if self._meets(b.target, accuracy) and b.reached:
                return b
        reached = [b.target for b in self.bins if b.reached]
        best = (
            max((b.best_accuracy for b in self.bins if b.best_accuracy is not None), default=None)
            if self.higher_is_better
            else min((b.best_accuracy for b in self.bins if b.best_accuracy is not None), default=None)
        )
        raise ChoiceError(
            f"table {self.name!r}: no tuned configuration reaches {self.metric} {accuracy:g} "
            f"(tuned targets reached: {reached}; best {self.metric} found: {best})"
        )

    def config_for(self, accuracy: float, space: Any = None) -> Mapping[str, Any]:
        """The configuration to run for a requested accuracy: a ``Config`` of ``space`` (default: the
        table's own, when it has one), else the plain dict the file stores."""
        cfg = self.bin_for(accuracy).config
        assert cfg is not None
        return self.as_config(cfg, space)

    def as_config(self, config: Mapping[str, Any], space: Any = None) -> Mapping[str, Any]:
        """``config`` (plain, as stored) as a ``Config`` of ``space`` or of the table's space; unchanged
        when there is neither."""
        space = self.space if space is None else space
        return config if space is None else config_in_space(config, space, f"table {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "accuracy",
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "n_measurements": self.n_measurements,
            "bins": [b.to_dict() for b in self.bins],
        }

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> AccuracyTable:
        if d.get("kind") != "accuracy":
            raise ChoiceError(f"table {name!r}: kind {d.get('kind')!r} is not 'accuracy'")
        try:
            bins = [AccuracyBin.from_dict(b) for b in d["bins"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ChoiceError(f"table {name!r}: malformed bins ({e})") from None
        return cls(
            name=name,
            bins=bins,
            metric=str(d.get("metric", "accuracy")),
            higher_is_better=bool(d.get("higher_is_better", True)),
            n_measurements=int(d.get("n_measurements", 0)),
        )

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Merge this table into the tuned-choices file and write it."""
        return merge_into_file(path, lambda f: f.set_table(self.name, self.to_dict()))

    def format(self) -> str:
        """A small text table."""
        lines = [f"{'target':>10} {'time_s':>10} {self.metric:>10} {'held-out':>10}  config"]
        for b in self.bins:
            if b.reached:
                va = "-" if b.verified_accuracy is None else f"{b.verified_accuracy:.4g}"
                lines.append(f"{b.target:>10.4g} {b.time_s:>10.4g} {b.accuracy:>10.4g} {va:>10}  {b.config}")
            else:
                lines.append(
                    f"{b.target:>10.4g} {'-':>10} {'-':>10} {'-':>10}  unreachable "
                    f"(best found {b.best_accuracy})"
                )
        return "\n".join(lines)


def accuracy_config(
    name: str, accuracy: float, default: Mapping[str, Any] | None = None, *, space: Any = None
) -> Mapping[str, Any]:
    """At run time: the tuned configuration of table ``name`` for ``accuracy`` (a number, or a numeric
    string as read from argv).

    Falls back to ``default`` when the tuned-choices file has no such table (a missing/corrupt file
    has already warned once). Raises :class:`ChoiceError` if there is neither. With ``space``, the
    configuration comes back as a ``Config`` of it (selectors as ``Levels``), as the program was tuned with.
    """
    requested_accuracy(accuracy, f"table {name!r}")
    doc = current_choices().tables.get(name)
    if doc is None:
        if default is None:
            raise ChoiceError(f"table {name!r} is not in the tuned-choices file and no default was given")
        if space is None:
            return dict(default)
        return config_in_space(default, space, f"default of table {name!r}")
    return AccuracyTable.from_dict(name, doc).config_for(accuracy, space)


@dataclass
class _Cand:
    config: Any
    time_s: float = math.nan
    accuracy: float = math.nan  # worst case over training inputs, in "higher is better" sign
    ok: bool = False


class _AccuracySearch:
    """Shared population over all bins; the ranking of a candidate depends on the bin."""

    def __init__(
        self,
        program: Callable[[Any, Any], Any],
        metric: Callable[[Any, Any], float],
        inputs: Sequence[Any],
        sign: float,
        metric_name: str,
    ) -> None:
        self.program, self.metric, self.inputs, self.sign = program, metric, inputs, sign
        self.metric_name = metric_name
        self.cands: dict[Any, _Cand] = {}
        self.failures: list[str] = []
        self.n_measurements = 0
        self._warned = False

    def run_one(self, config: Any, inputs: Sequence[Any]) -> tuple[float, float]:
        """Median time and worst (signed) accuracy over ``inputs``; raises on failure.

        The median, not the mean, so that one load spike on a shared machine does not decide."""
        times, accs = [], []
        for x in inputs:
            # The program gets a copy made before the clock starts (it may work on its input in place,
            # as a partial sort does); the metric and every later candidate see the input as it was.
            data = input_copy(x)
            t0 = time.perf_counter()
            out = self.program(config, data)
            times.append(time.perf_counter() - t0)
            self.n_measurements += 1
            try:
                acc = float(self.metric(out, x))
            except Exception as e:
                raise _MetricFailed(f"{type(e).__name__}: {e}") from e
            if math.isnan(acc):
                raise _MetricFailed("returned NaN")
            # An exact result scored as infinite (digits of precision, say): the largest finite number, so
            # that every file and report holds it (JSON has no infinity).
            acc = max(-sys.float_info.max, min(sys.float_info.max, acc))
            accs.append(self.sign * acc)
        return float(np.median(times)), float(min(accs))

    def evaluate(self, config: Any) -> _Cand:
        if config in self.cands:
            return self.cands[config]
        cand = _Cand(config)
        self.cands[config] = cand
        try:
            cand.time_s, cand.accuracy = self.run_one(config, self.inputs)
            cand.ok = True
        except _MetricFailed as e:
            msg = f"accuracy metric {self.metric_name!r} raised on {dict(config)}: {e}"
            self.failures.append(msg)
            if not self._warned:
                warnings.warn(
                    msg + "; dropping such candidates and going on", AccuracyMetricWarning,
                    stacklevel=user_stacklevel(),
                )
                self._warned = True
        except Exception as e:  # the program failing for a configuration is an outcome
            self.failures.append(f"program raised on {dict(config)}: {type(e).__name__}: {e}")
        return cand

    def ranked(self, target: float) -> list[_Cand]:
        ok = [c for c in self.cands.values() if c.ok]
        # Feasible first by time; infeasible after, closest to the target first.
        return sorted(ok, key=lambda c: (0, c.time_s) if c.accuracy >= target else (1, target - c.accuracy))


class _MetricFailed(Exception):
    pass


def check_targets(targets: Any, where: str) -> list[float]:
    """Accuracy targets as a non-empty list of finite numbers; one ChoiceError line otherwise."""
    targets = as_list(targets, f"{where}: targets")
    if not targets:
        raise ChoiceError(f"{where}: no accuracy targets given")
    bad = [t for t in targets
           if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t)]
    if bad:
        raise ChoiceError(f"{where}: accuracy targets must be finite numbers, got {bad[0]!r}")
    return [float(t) for t in targets]


def tune_accuracy(
    program: Callable[[Any, Any], Any],
    space: Any,
    *,
    accuracy: Callable[[Any, Any], float],
    targets: Sequence[float],
    inputs: Sequence[Any],
    held_out: Sequence[Any] = (),
    budget: int = 100,
    higher_is_better: bool = True,
    seed: int | None = None,
    seeds: Sequence[Any] = (),
    name: str = "accuracy",
    metric_name: str | None = None,
    final_repeats: int = 5,
    n_finalists: int = 5,
    margin: float = 0.0,
    max_verify: int = 10,
) -> AccuracyTable:
    """Minimise time subject to accuracy >= target, for every target at once.

    Args:
        program: ``program(config, input) -> output``; timed.
        space: A :class:`perftune.space.Space` of algorithm choices and accuracy knobs.
        accuracy: ``accuracy(output, input) -> float`` (not timed). Raising drops that candidate with
            one :class:`AccuracyMetricWarning`; tuning goes on.
        targets: Accuracy targets (bins), any order.
        inputs: Training inputs; a candidate's accuracy is its worst over them, its time the median.
            Each run gets a copy of its input (``copy.deepcopy``, made before the clock starts), so a
            program that changes its input in place changes no other run's; the metric gets the input
            as it was.
        held_out: Inputs used only to verify each bin's winner (copied the same way).
        budget: Candidate configurations to measure (each on all training inputs).
        higher_is_better: False for error-like metrics (then "reaches" means ``<= target``).
        seed: Random seed.
        seeds: Configurations to measure first: ``Config`` objects or plain dicts (as a saved table
            holds them); one that is not valid in ``space`` is a ChoiceError.
        name: Table name (its key in the tuned-choices file).
        metric_name: Name of the metric in messages (default: the function's name).
        final_repeats: Before choosing, the fastest ``n_finalists`` candidates of every bin are timed
            again this many times (the fastest repeat counts), so that one disturbed measurement does
            not decide a cell.
        n_finalists: How many candidates per bin are re-timed.
        margin: Safety margin in metric units: a cell's winner must reach ``target + margin``
            (``target - margin`` for error metrics) on every training and held-back input.
        max_verify: At most this many of the fastest candidates of a bin are checked on the held-back
            inputs; if none of them passes, at most this many more, the most accurate on the training
            inputs (they are the likeliest to pass), and the fastest of those that pass is chosen.

    Returns:
        An :class:`AccuracyTable` with one bin per target, loosest first; unreachable bins have
        ``config=None`` and ``best_accuracy`` set (one :class:`UnreachableTargetWarning` names them).
    """
    at = f"tune_accuracy({name!r})"
    check_callable(program, f"{at}: program")
    check_callable(accuracy, f"{at}: accuracy")
    # Every sequence read once, here: a generator of held-out inputs serves every candidate's check.
    targets = check_targets(targets, at)
    inputs = as_list(inputs, f"{at}: inputs")
    held_out = as_list(held_out, f"{at}: held_out")
    if not inputs:
        raise ChoiceError(f"{at}: no training inputs given")
    budget = check_int(budget, f"{at}: budget", 1)
    final_repeats = check_int(final_repeats, f"{at}: final_repeats", 1)
    n_finalists = check_int(n_finalists, f"{at}: n_finalists", 1)
    max_verify = check_int(max_verify, f"{at}: max_verify", 1)
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < math.inf:
        raise ChoiceError(f"{at}: margin must be a number >= 0, got {margin!r}")
    initial, problems = as_configs(as_list(seeds, f"{at}: seeds"), space)
    if problems:
        raise ChoiceError(f"{at}: {problems[0]}")
    sign = 1.0 if higher_is_better else -1.0
    mname = str(metric_name or getattr(accuracy, "__name__", "accuracy"))
    # Work in "higher is better" internally; sort bins loosest first.
    signed = sorted({sign * float(t) for t in targets})
    rng = np.random.default_rng(seed)
    search = _AccuracySearch(program, accuracy, inputs, sign, mname)

    d = space.default()
    if space.is_valid(d):
        initial.append(d)
    n_init = max(len(initial), min(budget, max(8, budget // 4)))
    initial += space.sample(rng, n=max(0, n_init - len(initial)))
    for c in initial[:budget]:
        search.evaluate(c)
    # Round-robin over the bins: mutate the leaders of one bin at a time; every result serves all bins.
    stall = 0
    while len(search.cands) < budget and stall < 50:
        before = len(search.cands)
        for t in signed:
            if len(search.cands) >= budget:
                break
            leaders = search.ranked(t)[:4]
            if not leaders:
                cfg = space.sample(rng, n=1)[0]
            else:
                parent = leaders[min(int(rng.exponential(1.2)), len(leaders) - 1)].config
                cfg = space.mutate(parent, rng)
            search.evaluate(cfg)
        stall = stall + 1 if len(search.cands) == before else 0

    if not any(c.ok for c in search.cands.values()):
        reason = search.failures[0] if search.failures else "nothing was measured"
        raise ChoiceError(f"tune_accuracy({name!r}): every candidate failed; first failure: {reason}")

    measured_best = max(c.accuracy for c in search.cands.values() if c.ok)
    # Resolve timing noise where it matters: re-time each bin's finalists (shared between bins).
    if final_repeats > 1:
        retimed: set[Any] = set()
        for t in signed:
            for cand in [c for c in search.ranked(t + margin) if c.accuracy >= t + margin][:n_finalists]:
                if cand.config in retimed:
                    continue
                retimed.add(cand.config)
                times = [cand.time_s]
                try:
                    for _ in range(final_repeats - 1):
                        took, worst = search.run_one(cand.config, search.inputs)
                        times.append(took)
                        # Its accuracy is its worst over every run: a re-run that misses counts too.
                        cand.accuracy = min(cand.accuracy, worst)
                except Exception as e:  # a flaky candidate is dropped, not fatal
                    cand.ok = False
                    search.failures.append(f"re-timing {dict(cand.config)} failed: {e}")
                    continue
                # The least disturbed repeat: timing noise on a busy machine only ever adds time.
                cand.time_s = float(min(times))
    # The best accuracy found, after the re-runs above lowered the finalists' to their worst run.
    best_acc = max((c.accuracy for c in search.cands.values() if c.ok), default=measured_best)
    bins: list[AccuracyBin] = []
    checked: dict[Any, float | None] = {}  # held-out worst accuracy per candidate (None: failed)

    def first_verified(cands: Sequence[_Cand], need: float) -> tuple[_Cand | None, float | None, bool]:
        """The first of ``cands`` whose held-out worst accuracy reaches ``need``, with it; the last item
        says whether the ``max_verify`` new checks ran out before one did."""
        n_tries = 0
        for cand in cands:
            if cand.config not in checked:
                if n_tries >= max_verify:
                    return None, None, True
                n_tries += 1
                try:
                    checked[cand.config] = search.run_one(cand.config, held_out)[1]
                except Exception as e:
                    checked[cand.config] = None
                    search.failures.append(f"held-out check of {dict(cand.config)} failed: {e}")
            verified = checked[cand.config]
            if verified is not None and verified >= need:
                return cand, verified, False
        return None, None, False

    limited: list[float] = []  # targets whose held-out checks ran out before any candidate passed
    for t in signed:
        cell = AccuracyBin(target=sign * t, config=None, best_accuracy=sign * best_acc)
        feasible = [c for c in search.ranked(t + margin) if c.accuracy >= t + margin]  # fastest first
        chosen: _Cand | None = feasible[0] if feasible else None
        verified = None
        if held_out and feasible:
            chosen, verified, ran_out = first_verified(feasible, t + margin)
            if ran_out:
                # The fastest all missed on the held-back inputs: try the most accurate on the training
                # inputs (ties: the slowest, which did the most work), fastest of them first.
                rest = [c for c in feasible if c.config not in checked]
                likely = sorted(rest, key=lambda c: (c.accuracy, c.time_s), reverse=True)[:max_verify]
                chosen, verified, _ = first_verified(sorted(likely, key=lambda c: c.time_s), t + margin)
                if chosen is None and len(rest) > max_verify:
                    limited.append(sign * t)  # the limit, not the candidates, ended the search
        if chosen is not None:
            cell.config = config_to_dict(chosen.config)
            cell.time_s, cell.accuracy = chosen.time_s, sign * chosen.accuracy
            cell.verified_accuracy = None if verified is None else sign * verified
        bins.append(cell)
    # Monotone: walking from the tightest bin down, a looser bin never keeps a slower configuration.
    for i in range(len(bins) - 2, -1, -1):
        tight, loose = bins[i + 1], bins[i]
        if tight.reached and (not loose.reached or (tight.time_s or 0) < (loose.time_s or 0)):
            keep_best = loose.best_accuracy
            bins[i] = AccuracyBin(
                target=loose.target,
                config=tight.config,
                time_s=tight.time_s,
                accuracy=tight.accuracy,
                verified_accuracy=tight.verified_accuracy,
                best_accuracy=keep_best,
            )
    table = AccuracyTable(
        name=name,
        bins=bins,
        metric=mname,
        higher_is_better=higher_is_better,
        n_measurements=search.n_measurements,
        failures=search.failures,
        n_candidates=len(search.cands),
        space=space,
    )
    if table.unreachable:
        held_vals = [v for v in checked.values() if v is not None]
        held_note = f"; best on the held-back inputs: {sign * max(held_vals):g}" if held_vals else ""
        if limited:
            held_note += (
                f"; for {limited}, the candidates checked on the held-back inputs (the {max_verify} fastest "
                f"that reached it on the training inputs, then the {max_verify} most accurate) all missed "
                f"there, and more that reached it were not checked: raise max_verify or use more "
                f"representative training inputs"
            )
        warnings.warn(
            f"tune_accuracy({name!r}): no configuration reached {mname} "
            f"{[b.target for b in table.unreachable]} (best {mname} found: {sign * best_acc:g} "
            f"on the training inputs{held_note})",
            UnreachableTargetWarning,
            stacklevel=2,
        )
    return table
