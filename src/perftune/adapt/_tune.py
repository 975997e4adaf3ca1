"""Two-level input learning: cluster inputs, tune a landmark per cluster, learn which landmark to run.

:func:`tune_inputs` follows PetaBricks' two-level method (Ding et al., PLDI 2015):

1. compute every feature column on every training input, timing each (its cost);
2. cluster the inputs on the standardised columns (k-means);
3. tune one *landmark* configuration per cluster with the existing search (:func:`perftune.tune`),
   on a few inputs of the cluster (the ones nearest its centre, and its largest);
4. measure every landmark on every training input (interleaved, repeated, medians);
5. fit a cost-aware classifier (:mod:`perftune.adapt._learn`) from columns to the landmark that
   runs fastest, counting the features it reads in the time.

The one-level method (cluster on every column, run the landmark of the nearest cluster, no
classifier) falls out of steps 1-3 and is kept beside it for comparison.

Example:
    >>> from perftune.adapt import AdaptiveObjective
    >>> from perftune.space import Choice, Space
    >>> def run(config, xs):
    ...     return sorted(xs, reverse=config["order"] == "down")
    >>> site = AdaptiveObjective("doc-tune-inputs", run, Space({"order": Choice(["up", "down"])}))
    >>> _ = site.feature(len, name="n", cost="cheap")
    >>> result = tune_inputs(site, [list(range(n)) for n in (5, 50, 500, 5000)] * 2, budget=4, seed=0,
    ...                      n_clusters=2, repeats=1)
    >>> len(result.landmarks) >= 1
    True
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perftune._atomic import locked
from perftune.adapt._features import CHEAP, AdaptError
from perftune.adapt._file import DispatchFile, dispatch_path, use_dispatch
from perftune.adapt._growth import GrowthCheck, fit_growth
from perftune.adapt._learn import DispatchFit, _standardise, fit_dispatch, score_model
from perftune.adapt._limit import run_limited
from perftune.adapt._model import NEAR_TIE_APART, NEAR_TIE_WITHIN, CentroidModel, FamilyModel, Model
from perftune.adapt._site import Dispatcher, _Adaptive

__all__ = ["InputTuning", "tune_inputs"]


_MIN_LIMIT_S = 0.2  # a loaded machine preempts a process for tens of milliseconds


class _WrongOutput(Exception):
    """A landmark candidate gave a wrong or inaccurate output (the trial fails with this reason)."""


@dataclass
class InputTuning:
    """The outcome of :func:`tune_inputs`: landmarks, the learned dispatcher and the training tables.

    Attributes:
        target: The adaptive site or objective that was tuned.
        columns: Column names (``feature`` or ``feature@level``).
        landmarks: One configuration per distinct cluster winner.
        model: The cost-aware two-level model.
        one_level: The one-level baseline (nearest cluster centre over every column).
        fit: Column selection and cross-validated scores.
        values: ``(n_inputs, n_columns)`` feature values of the training inputs.
        cost_s: ``(n_inputs, n_columns)`` measured seconds per feature value (0 for cheap features).
        time_s: ``(n_inputs, n_landmarks)`` median seconds of each landmark on each training input.
        ok: ``(n_inputs, n_landmarks)``: the landmark was correct (and accurate enough) there.
        clusters: Cluster of each training input.
        n_trials: Trials the landmark searches measured.
        stopped: ``(n_inputs, n_landmarks)``: the run was stopped as hopeless (``stop_factor``); its
            time is the time at the cut, and the learner counts it as that slow (``ok`` is False).
        growth: The asymptotic check for inputs beyond the training sizes (None: off, or no size).
        resampled: ``(n_samples, n_inputs, n_columns)``: the columns read on repeated samples.
        accuracy_reached: ``(n_inputs, n_landmarks)``: the accuracy each landmark's output reached
            (with ``accuracy=``; -inf for a wrong output, no answer or a stopped run), else None.
    """

    target: _Adaptive
    columns: list[str]
    landmarks: list[Any]
    model: Model
    one_level: CentroidModel
    fit: DispatchFit
    values: np.ndarray
    cost_s: np.ndarray
    time_s: np.ndarray
    ok: np.ndarray
    clusters: list[int]
    n_trials: int = 0
    notes: list[str] = field(default_factory=list)
    stopped: np.ndarray | None = None
    growth: GrowthCheck | None = None
    resampled: np.ndarray | None = None
    accuracy_reached: np.ndarray | None = None

    def dispatcher(self, *, one_level: bool = False) -> Dispatcher:
        """A :class:`Dispatcher` for this process (the two-level one unless ``one_level``)."""
        model = self.one_level if one_level else self.model
        fns = self.target.column_functions()
        growth = None if one_level else self.growth
        return Dispatcher(self.columns, fns, model, self.landmarks, self._trained(), growth=growth,
                          size=self.target.input_size if growth is not None else None)

    def apply(self) -> None:
        """Install the learned dispatcher in the target, in this process."""
        self.target.use_dispatcher(self.dispatcher())

    def _trained(self) -> dict[str, Any]:
        totals = self.training_totals()
        return {
            "n_inputs": int(self.time_s.shape[0]),
            "n_trials": self.n_trials,
            "selected": [self.columns[c] for c in self.fit.selected],
            "cv_total_s": self.fit.cv_total_s,
            "training_totals_s": totals,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def entry(self) -> dict[str, Any]:
        """The dispatcher file's entry for this target."""
        return {
            "target": self.target.target_kind,
            "fingerprint": self.target.fingerprint(),
            "columns": list(self.columns),
            "landmarks": [self.target.landmark_to_json(lm) for lm in self.landmarks],
            "model": self.model.to_dict(),
            "one_level": self.one_level.to_dict(),
            "trained": self._trained(),
            **({"growth": self.growth.to_dict()} if self.growth is not None else {}),
        }

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Merge this dispatcher into the dispatcher file (default: beside the tuned choices); write it.

        The process then uses the written file (as a program reading it at start would). Two saves into
        one file at once take turns (a lock on NAME.lock beside it), so neither loses the other's entry.
        Other sites' entries are kept, unusable ones verbatim; an existing file that cannot be read at
        all (a newer version, not JSON) is never overwritten: :class:`AdaptError` names it and why.
        """
        p = dispatch_path(path)
        try:
            lock = locked(p)
        except OSError as e:
            raise AdaptError(f"{p}: cannot lock the dispatcher file for saving ({e.strerror or e})") from None
        with lock:  # two saves into one file take turns: neither writes a merge made before the other saved
            if p.exists() or p.is_symlink():
                try:
                    f = DispatchFile.read(p)
                except AdaptError as e:
                    raise AdaptError(f"not saving dispatcher {self.target.name!r}: {e} (the file is left as "
                                     "it is; move it away or fix it)") from None
            else:
                f = DispatchFile()
            f.unusable.pop(self.target.name, None)
            f.dispatchers[self.target.name] = self.entry()
            written = f.write(path)
        use_dispatch(f)
        return written

    def training_totals(self) -> dict[str, float]:
        """Total seconds on the training inputs: best single landmark, oracle, one- and two-level.

        ``best_single_s`` is infinite when no landmark answered every training input.
        """
        n = self.time_s.shape[0]
        rows = range(n)
        # Only a landmark that answered every input can be "the one configuration for all".
        n_landmarks = self.time_s.shape[1]
        complete = [float(self.time_s[:, k].sum()) for k in range(n_landmarks) if self.ok[:, k].all()]
        best_single = min(complete) if complete else math.inf
        oracle = float(np.where(self.ok, self.time_s, np.inf).min(axis=1).sum())
        _, two = score_model(self.model, self.values, self.cost_s, self.time_s, self.ok, rows)
        _, one = score_model(self.one_level, self.values, self.cost_s, self.time_s, self.ok, rows)
        return {"best_single_s": best_single, "oracle_s": oracle, "two_level_s": two, "one_level_s": one}

    def summary(self) -> str:
        """A few lines: landmarks, chosen columns and training totals."""
        t = self.training_totals()
        n_clusters = max(self.clusters) + 1
        lines = [f"{self.target.name}: {len(self.landmarks)} landmarks from {n_clusters} clusters"]
        for k, lm in enumerate(self.landmarks):
            lines.append(f"  landmark {k}: {self.target.landmark_to_json(lm)}")
        lines.append(f"  columns used: {[self.columns[c] for c in sorted(self.model.columns)] or 'none'}")
        lines.append(f"  model: {self.fit.variant or 'tree'}")
        if isinstance(self.model, FamilyModel):
            lines.append(f"  families: {self.model.families}")
            if self.model.bare_at:
                names = [self.columns[c] for c in self.model.sizes]
                lines.append(f"  features not read at the training sizes {names} = {self.model.bare_at}")
            ties = self.model.near_ties()
            if ties:
                lines.append(
                    f"  near ties (within {math.expm1(NEAR_TIE_WITHIN):.0%} on the family's largest inputs, "
                    f"{math.exp(NEAR_TIE_APART):.0f}x apart on others: the "
                    "training inputs cannot say which carries to inputs unlike them; add inputs that span "
                    "the family): "
                    + "; ".join(f"{name}: landmark {ks[0]} ~ {', '.join(map(str, ks[1:]))}"
                                for name, ks in ties.items()))
        lines.append(
            "  training totals: "
            + ", ".join(f"{k[:-2].replace('_', ' ')} {v * 1e3:.1f} ms" for k, v in t.items())
        )
        return "\n".join(lines)


def _finite(value: float, where: str) -> float:
    if not math.isfinite(value):
        raise AdaptError(f"{where}: feature value {value!r} is not a finite number")
    return value


#: Offsets of the repeated samples of a sampled feature (each feature takes them modulo its stride):
#: large and unrelated primes, so that they land at different places whatever the stride.
_RESAMPLE_OFFSETS = (7919, 104_729, 1_299_709)


def _measure_features(
    target: _Adaptive, inputs: Sequence[Any], repeats: int, timer: Callable[[], float] = time.perf_counter,
    n_resamples: int = len(_RESAMPLE_OFFSETS),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, cost, resampled)``: ``resampled[r]`` holds every column read at offset ``r`` (the
    value itself for a column that cannot be resampled)."""
    fns = target.column_functions()
    resamplers = target.column_resamplers()
    cheap = target.cheap_columns()
    names = target.columns
    values = np.zeros((len(inputs), len(fns)))
    cost = np.zeros_like(values)
    offsets = _RESAMPLE_OFFSETS[:n_resamples]
    for i, x in enumerate(inputs):
        for c, fn in enumerate(fns):
            where = f"site {target.name!r}: feature {names[c]!r} on input {i}"
            samples = []
            for _ in range(repeats):
                t0 = timer()
                try:
                    v = fn(x)
                except Exception as e:
                    raise AdaptError(f"{where} raised {type(e).__name__}: {e}") from None
                samples.append(timer() - t0)
            values[i, c] = _finite(v, where)
            cost[i, c] = 0.0 if c in cheap else float(np.median(samples))
    resampled = np.repeat(values[None, :, :], len(offsets), axis=0)
    for c, again in enumerate(resamplers):
        if again is None:
            continue
        for i, x in enumerate(inputs):
            for r, offset in enumerate(offsets):
                where = f"site {target.name!r}: feature {names[c]!r} on input {i} at offset {offset}"
                try:
                    resampled[r, i, c] = _finite(again(x, offset), where)
                except AdaptError:
                    raise
                except Exception as e:
                    raise AdaptError(f"{where} raised {type(e).__name__}: {e}") from None
    return values, cost, resampled


def _checker(
    check: Callable[[Any, Any], bool] | None,
    accuracy: Callable[[Any, Any], float] | None,
    required: Callable[[Any], float] | None,
) -> Callable[[Any, Any], tuple[str | None, float]]:
    """``problem(input, output) -> (why, reached)``: why the output is no answer (None: it is one) and
    the accuracy it reached (-inf for a wrong output, without ``accuracy``, or where the metric is NaN)."""

    def problem(x: Any, out: Any) -> tuple[str | None, float]:
        if check is not None and not check(x, out):
            return "wrong output", -math.inf
        if accuracy is None:
            return None, -math.inf
        got = float(accuracy(out, x))
        need = float(required(x)) if required is not None else -math.inf
        reached = got if not math.isnan(got) else -math.inf
        if not got >= need:
            return f"accuracy {got:.3g} below the required {need:.3g}", reached
        return None, reached

    return problem


def _split_budget(budget: Any, n: int) -> Any:
    from perftune.drive import Budget

    limit = Budget.coerce(budget)
    if limit is None:
        raise AdaptError("tune_inputs: give a budget (trials for all landmark searches, or a duration)")
    return Budget(
        evals=None if limit.evals is None else max(1, limit.evals // n),
        seconds=None if limit.seconds is None else limit.seconds / n,
    )


def _weighted_budgets(budget: Any, weights: Sequence[float], *, floor: int) -> list[Any]:
    """Split ``budget`` over searches in proportion to ``weights``; each search keeps at least ``floor``
    trials (or the even share, when that is less), and a duration keeps half of it even."""
    from perftune.drive import Budget

    n = len(weights)
    even = _split_budget(budget, n)
    w = np.asarray(weights, dtype=float)
    w = np.where(np.isfinite(w) & (w > 0), w, 0.0)
    frac = w / w.sum() if w.sum() > 0 else np.full(n, 1.0 / n)
    evals: list[int | None] = [None] * n
    if even.evals is not None:
        total = even.evals * n
        base = min(floor, even.evals)
        rest = total - base * n
        raw = frac * rest
        extra = np.floor(raw).astype(int)
        # Largest remainders first, so that the shares add up to the budget.
        for k in np.argsort(-(raw - extra))[: rest - int(extra.sum())]:
            extra[k] += 1
        evals = [base + int(e) for e in extra]
    seconds: list[float | None] = [None] * n
    if even.seconds is not None:
        total_s = even.seconds * n
        seconds = [0.5 * total_s / n + 0.5 * total_s * float(f) for f in frac]
    return [Budget(evals=e, seconds=t) for e, t in zip(evals, seconds, strict=True)]


def default_clusters(n_inputs: int) -> int:
    """Clusters (hence landmark searches) :func:`tune_inputs` makes of ``n_inputs`` training inputs by
    default: about one per 6 inputs, 2 to 8."""
    return min(8, max(2, n_inputs // 6))


def tune_inputs(
    site_or_objective: _Adaptive,
    inputs: Sequence[Any],
    *,
    budget: Any,
    n_clusters: int | None = None,
    seed: int | None = None,
    repeats: int = 3,
    check: Callable[[Any, Any], bool] | None = None,
    accuracy: Callable[[Any, Any], float] | None = None,
    required: Callable[[Any], float] | None = None,
    classifier: str = "auto",
    max_depth: int = 4,
    max_columns: int = 4,
    n_representatives: int = 3,
    technique: str = "default",
    stop_factor: float = 20.0,
    search_repeats: int | None = 3,
    seed_landmarks: bool = True,
    compose_seeds: bool = True,
    groups: Sequence[Any] | None = None,
    guard: bool = True,
    clock: str = "wall",
    overall_landmark: bool | None = None,
    asymptotic: bool = True,
    resample_features: bool = True,
    on_progress: Callable[[str, int, int | None, float | None], None] | None = None,
    required_levels: Sequence[float] | None = None,
) -> InputTuning:
    """Learn a per-input dispatcher for ``site_or_objective`` from training ``inputs``.

    Args:
        site_or_objective: An :class:`AdaptiveSite` or :class:`AdaptiveObjective` with its features.
        inputs: Training inputs (the first argument of a call); not modified.
        budget: Trials for all landmark searches together (split evenly over the clusters), a
            duration such as ``"2m"`` (split likewise) or a :class:`perftune.Budget`.
        n_clusters: Clusters, hence at most this many landmarks (default: about one per 6 inputs, 2..8).
        seed: Makes clustering, search and learning reproducible.
        repeats: Timings of each landmark on each input (and of each feature); medians are kept.
        check: ``check(input, output) -> bool``; a wrong output fails the candidate or landmark.
        accuracy: ``accuracy(output, input) -> float`` (higher is better), for variable accuracy.
        required: ``required(input) -> float``: the accuracy that input needs (with ``accuracy``).
        classifier: ``"auto"`` (default: with ``groups`` naming at least three families, least regret
            on the nearest family, :class:`~perftune.adapt.FamilyModel`; otherwise a cost-aware tree,
            the least-regret-of-nearest rule, the linear slowdown model and the family model all tried,
            the best by cross-validation), ``"tree"``, ``"forest"`` (a small random forest),
            ``"neighbours"``, ``"linear"`` or ``"families"``.
        max_depth: Depth limit of the trees.
        max_columns: Most feature columns the dispatcher may read.
        n_representatives: Inputs of a cluster its landmark search measures on.
        technique: Search technique of the landmark searches.
        search_repeats: Calls per configuration in the landmark searches (their median counts), so that
            noise does not pick a landmark; None: once.
        seed_landmarks: Also measure the searches' seeds (each algorithm of a choice site alone, an
            objective's default) as landmarks, so the classifier may pick them.
        compose_seeds: With ``seed_landmarks``, for a choice site of more than one level: also measure
            the two-level seeds made of the seed fastest on the smallest quarter of the inputs (below
            the largest size ``m`` among them, and below ``isqrt(m) + 1``) and each other algorithm
            above it, and let the searches start from them (a radix sort is slow alone and fast with
            insertion sort on its small buckets; a search of a few trials seldom finds the pair).
        stop_factor: A run already this many times slower than the fastest one on the same input is
            stopped (in the main thread): a failed trial in a search, "no answer" in the table.
        groups: The family of each training input (any labels: the generator that made it, the
            tenant, the dataset): the families the family model compares an input with, and the
            leave-one-family-out cross-validation; None: the k-means clusters stand for families.
        guard: Let the learner put the model behind an out-of-distribution guard (kept only when
            cross-validation says it pays): an input far from every training input runs the landmark
            with the best worst case on the training inputs.
        overall_landmark: After the cluster searches, tune one more landmark on the largest input of
            every cluster together, from the clusters' winners (None: when the budget, split one way
            more, still covers each search's seeds).
        asymptotic: Fit each landmark's growth with the input size (:mod:`perftune.adapt._growth`) and,
            for an input larger than the training inputs, never run a landmark predicted to grow past
            another one to more than 1.5x its time (needs the target's size: ``AdaptiveSite`` has it, an
            ``AdaptiveObjective`` when given ``size=``). With it off, a family model matches sizes no
            more (it then reads a family's inputs of every size).
        resample_features: Read every resampleable sampled column again at other offsets and score
            each candidate dispatcher on those repeated samples too (a noisy level is then not read).
        clock: ``"wall"`` (``time.perf_counter``) or ``"cpu"`` (``time.thread_time``: the CPU time of
            the calling thread, which other programs on a shared machine disturb less; single-threaded
            work only, since work in other threads is not counted). Used for landmark runs and feature
            costs alike.
        required_levels: Accuracy requirements at which every training input is learned from as well
            as at its own (variable accuracy, with ``accuracy`` and ``required``). A landmark's time on
            an input does not depend on what the caller needs, and the accuracy it reached was measured,
            so each input counts once more per level: same features and times, the requirement column
            set to the level, and a landmark correct there when its measured accuracy reaches the level.
            The dispatcher then learns how each landmark's accuracy bounds the requirements it serves,
            instead of only the few requirements the training inputs happened to carry. The requirement
            column is the cheap feature whose function is ``required`` itself (register it with
            ``site.feature(required, name=..., cost="cheap")``).
        on_progress: Called in this thread as work goes on, for a progress line, as
            ``on_progress(event, done, total, best)``: ``("landmark", searches done, searches, None)``
            before the first landmark search and after each; ``("trial", trials done in all searches,
            their budget or None, best value of this search or None)`` after each trial; and
            ``("input", inputs timed, inputs x repeats, None)`` as every landmark is timed on every input.

    Returns:
        An :class:`InputTuning`; ``.save()`` writes the dispatcher file, ``.apply()`` installs it here.

    Raises:
        AdaptError: One line naming the problem: no features, too few inputs, a failing feature, a
            cluster where no configuration ran correctly.
    """
    import perftune
    from perftune.space import Config

    target = site_or_objective
    if not isinstance(target, _Adaptive):
        raise AdaptError(
            f"tune_inputs: expected an AdaptiveSite or AdaptiveObjective, got {type(target).__name__} "
            "(wrap a choice site with perftune.adapt.AdaptiveSite(site) and register its features)"
        )
    if not target.features:
        raise AdaptError(f"tune_inputs: site {target.name!r} has no features: add one with @site.feature")
    inputs = list(inputs)
    if len(inputs) < 4:
        raise AdaptError(f"tune_inputs: need at least 4 training inputs, got {len(inputs)}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise AdaptError(f"tune_inputs: repeats must be a positive integer, got {repeats!r}")
    if required is not None and accuracy is None:
        raise AdaptError("tune_inputs: required= needs accuracy= (the metric it is a target for)")
    if n_clusters is None:
        n_clusters = default_clusters(len(inputs))
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or not 1 <= n_clusters <= len(inputs):
        raise AdaptError(
            f"tune_inputs: n_clusters must be an integer in 1..{len(inputs)}, got {n_clusters!r}"
        )
    if not (isinstance(stop_factor, int | float) and stop_factor > 1):
        raise AdaptError(f"tune_inputs: stop_factor must be a number above 1, got {stop_factor!r}")
    if clock not in ("wall", "cpu"):
        raise AdaptError(f"tune_inputs: clock must be 'wall' or 'cpu', got {clock!r}")
    if clock == "cpu" and not target.clock_choice:
        raise AdaptError(f"tune_inputs: site {target.name!r} measures with its own metric: clock='cpu' "
                         "does not apply")
    if groups is not None:
        groups = list(groups)
        if len(groups) != len(inputs):
            raise AdaptError(f"tune_inputs: groups has {len(groups)} labels for {len(inputs)} inputs")
    # Checked before anything is measured (the learner checks classifier= again, after hours of it).
    if classifier not in ("auto", "tree", "forest", "neighbours", "linear", "families"):
        raise AdaptError("tune_inputs: classifier must be 'auto', 'tree', 'forest', 'neighbours', 'linear' "
                         f"or 'families', got {classifier!r}")
    for name, value in (("n_representatives", n_representatives), ("max_depth", max_depth),
                        ("max_columns", max_columns)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise AdaptError(f"tune_inputs: {name} must be a positive integer, got {value!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise AdaptError(f"tune_inputs: seed must be a non-negative integer, got {seed!r}")
    seed = 0 if seed is None else seed
    required_column = _required_column(target, required, required_levels, accuracy)
    problem = _checker(check, accuracy, required)
    # The thread's CPU clock, not the process's: under the CPU-time limit of run_limited the process
    # clock is only updated at scheduler ticks (see perftune.adapt._limit).
    timer = time.thread_time if clock == "cpu" else time.perf_counter
    # input index -> fastest correct run seen on it: a fast wrong (inaccurate) run sets no limit.
    fastest: dict[int, float] = {}

    def limited(landmark: Any, i: int) -> tuple[float, Any, bool]:
        limit = max(stop_factor * fastest[i], _MIN_LIMIT_S) if i in fastest and target.stoppable else math.inf
        seconds, out, stopped = run_limited(lambda: target.measure(landmark, inputs[i], timer), limit, timer)
        if stopped:
            return seconds, None, True
        measured, out = out
        return measured, out, False

    def correct(i: int, seconds: float) -> None:
        fastest[i] = min(fastest.get(i, math.inf), seconds)

    values, cost, resampled = _measure_features(target, inputs, repeats, timer)
    sizes = [target.input_size(x) for x in inputs]
    has_size = all(v is not None and v > 0 for v in sizes)
    z, center, scale = _standardise(values)
    n_distinct = len({tuple(row) for row in np.round(z, 9)})
    n_clusters = min(n_clusters, n_distinct)
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=n_clusters, n_init=4, random_state=seed).fit(z)
    clusters = [int(c) for c in km.labels_]

    # ---- the table: landmark -> (repeats, n) seconds and (n,) correct; filled as landmarks appear
    space = target.landmark_space(inputs)
    n = len(inputs)
    landmarks: list[Any] = []
    keys: list[str] = []
    table_s: dict[int, np.ndarray] = {}
    table_ok: dict[int, np.ndarray] = {}
    # Stopped runs: hopelessly slow, not wrong. The learner sees their time at the cut (a lower bound),
    # so a landmark 20x too slow on one input counts as that, and is not taken for a wrong one.
    table_stop: dict[int, np.ndarray] = {}
    # The accuracy each landmark reached on each input (with accuracy=; -inf: wrong or no answer).
    table_acc: dict[int, np.ndarray] = {}
    rng = np.random.default_rng(seed)
    progress_total = [0]

    def add_landmark(landmark: Any) -> int:
        key = repr(sorted(target.landmark_to_json(landmark).items()))
        if key not in keys:
            keys.append(key)
            landmarks.append(landmark)
        return keys.index(key)

    def measure_table(ks: list[int], first: Callable[[int], int | None]) -> None:
        """Every landmark of ``ks`` on every input, ``repeats`` rounds in random order (medians later)."""
        if not ks:  # nothing new to time (the searches found only seeds): this table is done at once
            if on_progress is not None:
                progress_total[0] += repeats * n
                on_progress("input", progress_total[0], repeats * n * n_tables, None)
            return
        for k in ks:
            table_s[k] = np.zeros((repeats, n))
            table_ok[k] = np.ones(n, dtype=bool)
            table_acc[k] = np.full(n, -math.inf)
            table_stop[k] = np.zeros(n, dtype=bool)
        for r in range(repeats):
            for i in rng.permutation(n):
                x = inputs[i]
                # One landmark likely to be good first: a time to stop the hopeless ones against.
                lead = first(int(i))
                order = [k for k in rng.permutation(ks).tolist() if k != lead]
                order = [lead, *order] if lead in ks else order
                for k in order:
                    if not table_ok[k][i] or table_stop[k][i]:
                        continue
                    try:
                        seconds, out, stopped = limited(landmarks[k], int(i))
                    except Exception:  # a landmark that crashes on an input is no answer for it
                        table_ok[k][i] = False
                        continue
                    if stopped:
                        table_s[k][:, i] = seconds
                        table_stop[k][i] = True
                        continue
                    table_s[k][r, i] = seconds
                    why = None
                    if r == 0:
                        why, table_acc[k][i] = problem(x, out)
                    if why is not None:
                        table_ok[k][i] = False
                    else:
                        correct(int(i), float(seconds))
                if on_progress is not None:
                    progress_total[0] += 1
                    on_progress("input", progress_total[0], repeats * n * n_tables, None)

    def medians(ks: list[int], rows: list[int]) -> np.ndarray:
        """``(len(rows), len(ks))`` median seconds, inf where the landmark gave no answer."""
        return np.array([[float(np.median(table_s[k][:, i])) if table_ok[k][i] else math.inf for k in ks]
                         for i in rows])

    seeds = target.seed_configs()
    seed_ks: list[int] = []
    seed_raw: dict[int, dict[str, Any]] = {}
    n_tables = 1
    composing = seed_landmarks and compose_seeds and has_size and target.composes

    def new_seeds(raws: list[dict[str, Any]]) -> list[int]:
        """The landmarks of the valid configurations in ``raws`` that are not seeds yet (in order)."""
        added: list[int] = []
        for raw in raws:
            if space.is_valid(Config(raw)):
                k = add_landmark(target.landmark_from_config(Config(raw)))
                if k not in seed_ks and k not in added:
                    added.append(k)
                    seed_raw[k] = raw
        return added

    if seed_landmarks:
        # The seeds (each algorithm alone, the default) are landmarks of their own, measured on every
        # input before any search: a cluster whose representatives favour one algorithm must not leave
        # its other members without their best one, and each search then starts from its cluster's
        # best two seeds instead of spending its budget on all of them again.
        seed_ks.extend(new_seeds(seeds))
        n_tables = 3 if composing else 2
        seen: list[int] = []

        def steadiest_seed(i: int) -> int | None:
            # The seed with the smallest mean ratio to the fastest seed on the inputs timed so far.
            if not seen:
                seen.append(i)
                return None
            times = medians(seed_ks, seen[-32:])
            # inf where a seed gave no answer (a wrong default, say): an input no seed answered has no ratio.
            fastest = times.min(axis=1, keepdims=True)
            with np.errstate(invalid="ignore"):
                ratio = np.where(np.isfinite(fastest), times / np.maximum(fastest, 1e-12), np.inf)
            seen.append(i)
            return seed_ks[int(np.argmin(np.where(np.isfinite(ratio), ratio, 1e3).mean(axis=0)))]

        measure_table(seed_ks, steadiest_seed)
        if composing:
            # Two-level seeds: the seed fastest on the smallest inputs below their size, each other seed
            # above it; measured on every input like the seeds, so a search can start from one.
            known = [float(v or 0.0) for v in sizes]  # composing needs every size (has_size)
            small_rows = sorted(range(n), key=lambda i: (known[i], i))[: max(1, n // 4)]
            on_small = medians(seed_ks, small_rows)
            below = seed_ks[int(np.argmin(on_small.sum(axis=0)))]  # inf: a seed without an answer
            top = int(max(known[i] for i in small_rows))
            # Below that size, and below its geometric midpoint with 1: where the algorithm below takes
            # over matters (a radix sort's buckets of a few dozen elements are best sorted by itself).
            cutoffs = sorted({int(math.isqrt(top)) + 1, top + 1})
            composed = new_seeds([r for c in cutoffs for r in target.composed_seeds(seed_raw[below], c)])
            measure_table(composed, steadiest_seed)
            seed_ks.extend(composed)
    # ---- one landmark per cluster, by the existing search
    n_search_seeds = min(2, len(seed_ks)) if seed_landmarks else len(seeds)
    if overall_landmark is None:
        # When the budget allows a search more: one split n_clusters + 1 ways still covers the seeds.
        share = _split_budget(budget, n_clusters + 1)
        overall_landmark = n_clusters > 1 and (share.evals is None or share.evals >= n_search_seeds + 2)
    n_searches = n_clusters + (1 if overall_landmark else 0)
    even = _split_budget(budget, n_searches)
    if even.evals is not None and even.evals < n_search_seeds + 1:
        raise AdaptError(
            f"tune_inputs: budget {budget!r} is too small: each of the {n_searches} landmark searches "
            f"needs more than its {n_search_seeds} seed configurations (give at least "
            f"{n_searches * (n_search_seeds + 1)} trials)"
        )
    cluster_landmark: list[int] = []
    winners: list[dict[str, Any]] = []
    n_trials = 0
    family = [str(g) for g in groups] if groups is not None else [str(c) for c in clusters]

    def bigness(i: int) -> tuple[Any, ...]:
        # The size when the target knows it, else the feature values (the first column is usually one).
        return (sizes[i], -i) if has_size else (values[i].tolist(), -i)

    largest_of = [max((i for i, c in enumerate(clusters) if c == j), key=bigness) for j in range(n_clusters)]
    # Where the time goes: a cluster's weight is the time its inputs take with their best seed (the
    # seeds were measured on every input), so the searches whose inputs dominate the total get the trials.
    weights = np.ones(n_clusters)
    if seed_landmarks and seed_ks:
        per_input = medians(seed_ks, list(range(n))).min(axis=1)  # inf: no seed answered
        per_input = np.where(np.isfinite(per_input), per_input, 0.0)
        weights = np.array([per_input[[i for i, c in enumerate(clusters) if c == j]].sum()
                            for j in range(n_clusters)])
    shares = _weighted_budgets(budget, [*weights.tolist(), *([float(weights.mean())] if overall_landmark
                                                              else [])], floor=n_search_seeds + 2)
    total_trials = None if shares[0].evals is None else sum(b.evals or 0 for b in shares)
    if on_progress is not None:
        on_progress("landmark", 0, n_searches, None)
    for j in range(n_searches):
        share = shares[j]
        # A configuration that answered representatives before the search (the seed that answered most of
        # them when the seeds were timed on every input, or a cluster's winner): the landmark when the
        # search itself gets no answer (on a loaded machine, a time limit can stop every run of a search).
        # The table below times it on every input, and the dispatcher sends it only inputs it answers.
        answered_before: dict[str, Any] | None = None
        if j == n_clusters:
            # The overall landmark: one configuration for the largest input of every cluster together,
            # started from the clusters' winners. It is the strongest one-for-all candidate, and often the
            # robust fallback for inputs unlike any training family.
            reps = list(dict.fromkeys(largest_of))
            cap = None if share.evals is None else share.evals - 1
            search_seeds = [dict(w) for w in winners][:cap]
            answered_before = dict(winners[0]) if winners else None
        else:
            members = [i for i, c in enumerate(clusters) if c == j]
            # The cluster's largest inputs, the largest of each family in it first: their times are most
            # of the total, and the landmark is tuned where it matters; then the inputs nearest the centre.
            tops: dict[str, int] = {}
            for i in sorted(members, key=bigness, reverse=True):
                tops.setdefault(family[i], i)
            reps = sorted(tops.values(), key=bigness, reverse=True)[:n_representatives]
            dist = ((z[members] - km.cluster_centers_[j]) ** 2).sum(axis=1)
            for m in np.argsort(dist):
                if len(reps) >= n_representatives:
                    break
                if members[m] not in reps:
                    reps.append(members[m])
            search_seeds = seeds
            if seed_landmarks and seed_ks:
                # The cluster's two best seeds on its representatives: fewest no-answers, then least time.
                on_reps = medians(seed_ks, reps)
                missing = np.isinf(on_reps)
                spent = np.where(missing, 0.0, on_reps).sum(axis=0)
                ranked = sorted(range(len(seed_ks)), key=lambda k: (int(missing[:, k].sum()), spent[k]))
                search_seeds = [seed_raw[seed_ks[k]] for k in ranked[:n_search_seeds]]
                if ranked and not missing[:, ranked[0]].all():
                    answered_before = dict(seed_raw[seed_ks[ranked[0]]])

        def objective(config: Any, reps: list[int] = reps) -> float:
            landmark = target.landmark_from_config(config)
            times = []
            for i in reps:
                seconds, out, stopped = limited(landmark, i)
                if stopped:
                    raise _WrongOutput(f"stopped: over {stop_factor:g}x the fastest run on input {i}")
                why, _ = problem(inputs[i], out)
                if why is not None:
                    raise _WrongOutput(why)
                times.append(seconds)
            # Only a configuration that answered every representative sets the limits: one that is fast
            # on one input and wrong on another must not get the right configurations stopped.
            for i, seconds in zip(reps, times, strict=True):
                correct(i, seconds)
            return sum(times)

        hooks = []
        if on_progress is not None:
            done = [n_trials]

            def tick(tuner: Any, trial: Any, done: list[int] = done) -> None:
                done[0] += 1
                best = tuner.best
                on_progress("trial", done[0], total_trials, None if best is None else best.value)
            hooks.append(tick)
        # A target with a search of its own (a Triton kernel's tuning: parallel compiles, its cache) tunes
        # the landmark on the representatives itself; otherwise perftune.tune over the objective above.
        own = target.search_landmark([inputs[i] for i in reps], share, search_seeds, seed + j)
        if own is not None:
            best_config, n_measured = own
            n_trials += n_measured
        else:
            result = perftune.tune(
                objective, space, budget=share, seed=seed + j, seeds=search_seeds,
                technique=technique, repeats=search_repeats, callbacks=hooks,
            )
            n_trials += len(result.trials)
            if result.best is None and answered_before is not None:
                import warnings

                from perftune.errors import RunWarning

                reasons = {t.reason for t in result.trials if t.reason}
                warnings.warn(
                    f"tune_inputs: the landmark search of cluster {j} of site {target.name!r} measured no "
                    f"configuration correctly ({'; '.join(sorted(reasons))[:200] or 'no trial finished'}); "
                    "its landmark is the configuration that answered most of its representatives before",
                    RunWarning, stacklevel=2)
                best_config = answered_before
            elif result.best is None:
                reasons = {t.reason for t in result.trials if t.reason}
                raise AdaptError(
                    f"tune_inputs: no configuration ran correctly on cluster {j} of site {target.name!r} "
                    f"({'; '.join(sorted(reasons))[:200] or 'no trial finished'})"
                )
            else:
                best_config = dict(result.best.config)
        found = add_landmark(target.landmark_from_config(Config(best_config)))
        if j < n_clusters:
            cluster_landmark.append(found)
            winners.append(dict(best_config))
        if on_progress is not None:
            on_progress("landmark", j + 1, n_searches, None)

    # ---- every new landmark on every input: interleaved, repeated, medians
    fresh = [k for k in range(len(landmarks)) if k not in table_s]
    measure_table(fresh, lambda i: cluster_landmark[clusters[i]])
    k_count = len(landmarks)
    samples = np.stack([table_s[k] for k in range(k_count)], axis=2)
    answered = np.stack([table_ok[k] for k in range(k_count)], axis=1)
    stopped_runs = np.stack([table_stop[k] for k in range(k_count)], axis=1)
    ok = answered & ~stopped_runs
    time_s = np.median(samples, axis=0)
    fit_groups = list(clusters if groups is None else groups)
    fit_values, fit_cost, fit_time, fit_answered, fit_resampled = values, cost, time_s, answered, resampled
    achieved = np.stack([table_acc[k] for k in range(k_count)], axis=1) if accuracy is not None else None
    if required_levels is not None and achieved is not None:
        fit_values, fit_cost, fit_time, fit_answered, fit_resampled, fit_groups = _relabel(
            required_column, [float(v) for v in required_levels], values, cost, time_s, answered,
            stopped_runs, achieved, resampled, fit_groups)
    fit = fit_dispatch(fit_values, fit_cost, fit_time, fit_answered,
                       max_depth=max_depth, max_columns=max_columns, seed=seed, groups=fit_groups,
                       guard=guard, resampled=fit_resampled if resample_features else None,
                       required_column=required_column if required_column >= 0 and achieved is not None
                       else None,
                       **fit_options(classifier, groups, values, sizes if asymptotic and has_size else None,
                                     target.column_groups()))
    growth = None
    if asymptotic and has_size:
        chosen = [fit.model.choose(functools.partial(_cell, values, i)) for i in range(n)]
        growth = fit_growth(chosen, [float(v) for v in sizes if v is not None], time_s, ok, family,
                            bound=answered & stopped_runs)
    one_level = CentroidModel(
        center=center.tolist(),
        scale=scale.tolist(),
        centroids=km.cluster_centers_.tolist(),
        landmark=cluster_landmark,
    )
    return InputTuning(
        target=target,
        columns=list(target.columns),
        landmarks=landmarks,
        model=fit.model,
        one_level=one_level,
        fit=fit,
        values=values,
        cost_s=cost,
        time_s=time_s,
        ok=ok,
        stopped=stopped_runs,
        clusters=clusters,
        n_trials=n_trials,
        growth=growth,
        resampled=resampled,
        accuracy_reached=achieved,
    )


def _cell(values: np.ndarray, i: int, c: int) -> float:
    return float(values[i, c])


#: ``classifier="auto"`` reads inputs labelled with at least this many families by the family model.
FAMILIES_FOR_AUTO = 3


def model_kind(classifier: str, groups: Sequence[Any] | None) -> str:
    """The classifier ``fit_dispatch`` gets for ``tune_inputs(classifier=..., groups=...)``: ``"auto"``
    with inputs labelled by at least :data:`FAMILIES_FOR_AUTO` families is the family model.

    Cross-validation on the training families cannot choose for families it has not seen: models that
    separate the training families with a threshold or two score best there, and send an input between
    two of them to either side (benchmarks/results/adapt-replay-family.md: 32 recorded runs). Where the
    user named the families, the model that places an input by its resemblance to each of them is the
    default."""
    if classifier == "auto" and groups is not None and len({str(g) for g in groups}) >= FAMILIES_FOR_AUTO:
        return "families"
    return classifier


def fit_options(classifier: str, groups: Sequence[Any] | None, values: np.ndarray,
                sizes: Sequence[Any] | None, column_groups: list[list[int]] | None) -> dict[str, Any]:
    """The keyword arguments that ``tune_inputs`` gives ``fit_dispatch`` besides the tables, the seed
    and the groups it fits on: the model kind (:func:`model_kind` of the user's ``classifier`` and
    family labels, ``groups``, None where none were given), the size columns (read from the training
    ``values`` and ``sizes``, one per input; none without ``sizes``) and the feature's column groups.
    The benchmarks that refit recorded training tables call it too, so that they fit what
    ``tune_inputs`` ships."""
    return {
        "classifier": model_kind(classifier, groups),
        "size_columns": _size_columns(values, sizes) if sizes is not None else None,
        "column_groups": column_groups,
    }


def _size_columns(values: np.ndarray, sizes: Sequence[Any]) -> list[int]:
    """Columns that are an increasing function of the input size over the training inputs (equal for
    equal sizes, larger for larger ones): what the guards read as size (see ``fit_dispatch``)."""
    size_a = np.asarray([float(v) for v in sizes])
    distinct = np.unique(size_a)
    if distinct.size < 2:
        return []
    out = []
    for c in range(values.shape[1]):
        per_size = [np.unique(values[size_a == v, c]) for v in distinct]
        if all(p.size == 1 for p in per_size) and bool(np.all(np.diff([p[0] for p in per_size]) > 0)):
            out.append(c)
    return out


def _required_column(
    target: _Adaptive, required: Callable[[Any], float] | None, levels: Sequence[float] | None,
    accuracy: Callable[[Any, Any], float] | None,
) -> int:
    """The column of ``target`` that holds each input's requirement (-1 without ``levels``)."""
    if levels is None:
        return -1
    if accuracy is None or required is None:
        raise AdaptError("tune_inputs: required_levels= needs accuracy= and required=")
    try:
        points = [float(v) for v in levels]
    except (TypeError, ValueError):
        raise AdaptError(f"tune_inputs: required_levels must be numbers, got {levels!r}") from None
    if not points or not all(math.isfinite(v) for v in points):
        raise AdaptError(f"tune_inputs: required_levels must be one or more finite numbers, got {levels!r}")
    for f, columns in zip(target.features, target.column_groups(), strict=True):
        if f.fn is required and not f.levels:
            if f.cost != CHEAP:
                raise AdaptError(f"tune_inputs: the requirement feature {f.name!r} must be cheap "
                                 "(cost='cheap'): a relabelled input's requirement costs nothing to read")
            return columns[0]
    raise AdaptError(
        f"tune_inputs: required_levels= needs a feature of site {target.name!r} computed by required "
        f"itself (add site.feature({getattr(required, '__name__', 'required')}, name=..., cost='cheap'))"
    )


def _relabel(
    column: int, levels: list[float], values: np.ndarray, cost: np.ndarray, time_s: np.ndarray,
    answered: np.ndarray, stopped: np.ndarray, achieved: np.ndarray, resampled: np.ndarray,
    groups: list[Any],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    """The training table with every input once more per requirement level (see ``required_levels``).

    A copy keeps its input's group, so leave-one-family-out still holds a family out whole. At a level, a
    landmark answers where the accuracy it reached meets the level, whatever the input's own requirement
    said (``answered`` holds only for that one); a stopped run (hopelessly slow, its accuracy unknown)
    stays what it was: an answer at the cut's time."""
    blocks_x, blocks_ok, blocks_r = [values], [answered], [resampled]
    for level in levels:
        x = values.copy()
        x[:, column] = level
        r = resampled.copy()
        r[:, :, column] = level
        blocks_x.append(x)
        blocks_r.append(r)
        blocks_ok.append((achieved >= level) | (stopped & answered))
    copies = len(levels) + 1
    return (np.vstack(blocks_x), np.vstack([cost] * copies), np.vstack([time_s] * copies),
            np.vstack(blocks_ok), np.concatenate(blocks_r, axis=1), list(groups) * copies)
