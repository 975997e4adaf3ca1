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

import math
import numbers
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perftune.targets.choice._file import ChoiceError, load_for_merge
from perftune.targets.choice._site import current_choices

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

    def _meets(self, value: float, target: float) -> bool:
        return value >= target if self.higher_is_better else value <= target

    @property
    def unreachable(self) -> list[AccuracyBin]:
        """Bins that no configuration reached."""
        return [b for b in self.bins if not b.reached]

    def bin_for(self, accuracy: float) -> AccuracyBin:
        """The loosest reached bin whose target is at least as strict as ``accuracy``."""
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

    def config_for(self, accuracy: float) -> dict[str, Any]:
        """The configuration to run for a requested accuracy."""
        cfg = self.bin_for(accuracy).config
        assert cfg is not None
        return cfg

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

    def save(self, path: str | Path | None = None) -> Path:
        """Merge this table into the tuned-choices file and write it."""
        f = load_for_merge(path)
        f.set_table(self.name, self.to_dict())
        return f.write(path)

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


def accuracy_config(name: str, accuracy: float, default: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """At run time: the tuned configuration of table ``name`` for ``accuracy``.

    Falls back to ``default`` when the tuned-choices file has no such table (a missing/corrupt file
    has already warned once). Raises :class:`ChoiceError` if there is neither.
    """
    doc = current_choices().tables.get(name)
    if doc is None:
        if default is None:
            raise ChoiceError(f"table {name!r} is not in the tuned-choices file and no default was given")
        return dict(default)
    return AccuracyTable.from_dict(name, doc).config_for(accuracy)


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
            t0 = time.perf_counter()
            out = self.program(config, x)
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
                    msg + "; dropping such candidates and going on", AccuracyMetricWarning, stacklevel=4
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
        held_out: Inputs used only to verify each bin's winner.
        budget: Candidate configurations to measure (each on all training inputs).
        higher_is_better: False for error-like metrics (then "reaches" means ``<= target``).
        seed: Random seed.
        seeds: Configurations to measure first.
        name: Table name (its key in the tuned-choices file).
        metric_name: Name of the metric in messages (default: the function's name).
        final_repeats: Before choosing, the fastest ``n_finalists`` candidates of every bin are timed
            again this many times (the fastest repeat counts), so that one disturbed measurement does
            not decide a cell.
        n_finalists: How many candidates per bin are re-timed.
        margin: Safety margin in metric units: a cell's winner must reach ``target + margin``
            (``target - margin`` for error metrics) on every training and held-back input.
        max_verify: At most this many candidates per bin are checked on the held-back inputs.

    Returns:
        An :class:`AccuracyTable` with one bin per target, loosest first; unreachable bins have
        ``config=None`` and ``best_accuracy`` set (one :class:`UnreachableTargetWarning` names them).
    """
    if not targets:
        raise ChoiceError(f"tune_accuracy({name!r}): no accuracy targets given")
    if not inputs:
        raise ChoiceError(f"tune_accuracy({name!r}): no training inputs given")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ChoiceError(f"tune_accuracy({name!r}): budget must be an integer >= 1, got {budget!r}")
    bad = [t for t in targets
           if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t)]
    if bad:
        raise ChoiceError(f"tune_accuracy({name!r}): accuracy targets must be finite numbers, got {bad[0]!r}")
    if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 <= margin < math.inf:
        raise ChoiceError(f"tune_accuracy({name!r}): margin must be a number >= 0, got {margin!r}")
    sign = 1.0 if higher_is_better else -1.0
    mname = str(metric_name or getattr(accuracy, "__name__", "accuracy"))
    # Work in "higher is better" internally; sort bins loosest first.
    signed = sorted({sign * float(t) for t in targets})
    rng = np.random.default_rng(seed)
    search = _AccuracySearch(program, accuracy, list(inputs), sign, mname)

    initial = [c for c in seeds if space.is_valid(c)]
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

    best_acc = max(c.accuracy for c in search.cands.values() if c.ok)
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
    bins: list[AccuracyBin] = []
    checked: dict[Any, float | None] = {}  # held-out worst accuracy per candidate (None: failed)
    for t in signed:
        cell = AccuracyBin(target=sign * t, config=None, best_accuracy=sign * best_acc)
        n_tries = 0
        for cand in search.ranked(t + margin):
            if cand.accuracy < t + margin or n_tries >= max_verify:
                break
            verified = None
            if held_out:
                if cand.config not in checked:
                    n_tries += 1
                    try:
                        checked[cand.config] = search.run_one(cand.config, list(held_out))[1]
                    except Exception as e:
                        checked[cand.config] = None
                        search.failures.append(f"held-out check of {dict(cand.config)} failed: {e}")
                verified = checked[cand.config]
                if verified is None or verified < t + margin:
                    continue
            cell.config = config_to_dict(cand.config)
            cell.time_s, cell.accuracy = cand.time_s, sign * cand.accuracy
            cell.verified_accuracy = None if verified is None else sign * verified
            break
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
    )
    if table.unreachable:
        held_vals = [v for v in checked.values() if v is not None]
        held_note = f"; best on the held-back inputs: {sign * max(held_vals):g}" if held_vals else ""
        warnings.warn(
            f"tune_accuracy({name!r}): no configuration reached {mname} "
            f"{[b.target for b in table.unreachable]} (best {mname} found: {sign * best_acc:g} "
            f"on the training inputs{held_note})",
            UnreachableTargetWarning,
            stacklevel=2,
        )
    return table
