"""PerftuneSampler: an Optuna sampler that runs perftune's default search.

How the sampler maps Optuna's model onto perftune's (docs/optuna.md says the same for users):

* **Search space.** The *relative* search space is an intersection search space: the parameters that
  every completed trial suggested (single-valued ones left out). A pruned trial may have stopped before
  suggesting them all (an objective that rejects an invalid configuration early), so it removes none;
  before the first trial completes, the space is what the pruned trials suggested. A parameter whose
  range was widened (a study resumed with ``suggest_int("n", 1, 128)`` where it had 64) keeps the wider
  distribution, and the earlier trials are learned from; one suggested from distributions neither of
  which holds the other is left out. The space is empty before the first trial finishes, so the first
  trial is sampled independently; then the space holds what the objective suggests every time, and
  parameters that only some trials suggest (define-by-run branches) go to the independent sampler
  (random by default). Whenever the space changes, the perftune space and the technique are rebuilt and
  told every finished trial that fits the new space, in trial order.
* **Learning.** Every finished trial is told to the technique once, as a perftune
  :class:`~perftune.trial.Trial`: completed ones with their value (maximised objectives negated into
  a loss), failed and pruned ones as ``FAILED`` with the reason. A pruned trial's last intermediate
  value is not used: it was measured at a lower fidelity than the others, and perftune learns from
  comparable values only. Trials of this process are told in :meth:`PerftuneSampler.after_trial`;
  trials finished by other processes sharing the storage are found when the next trial starts (the
  study's list of finished trials, checked against a set of those already told), so the technique
  learns incrementally and never re-reads the history (but when the search space changes).
* **Proposals.** ``sample_relative`` asks the technique for one configuration. Like perftune's driver,
  it does not hand out a configuration already measured (it tells the technique the known result and
  asks again) nor one another trial is measuring; after a few attempts it falls back to a random
  configuration not measured yet. ``study.enqueue_trial`` wins over the sampler (Optuna gives fixed
  parameters priority); the technique learns what was actually measured.
* **Several objectives.** A study with several directions runs perftune's multi-objective ensemble
  (``mo-bandit``: NSGA-II, ParEGO and scalarised local searches, docs/multiobjective.md).
* **Constraints.** ``constraints=`` are rules over parameters, honoured before a trial runs, once every
  name they read is in the relative space; a constraint that is not applied after a build (a name no
  finished trial suggested, a typo, or a parameter sampled independently) is warned about once, one
  that reads an objective named by ``study.metric_names`` is refused, and one that no configuration
  satisfies stops the study with one error. Constraints on measured values are Optuna's: the values
  ``constraints_func`` returns, or the objective's ``trial.set_constraint``, stored in the trial's system
  attributes (feasible when every value is <= 0); a completed trial that breaks one is told as
  infeasible (measured, without a loss), as perftune's driver tells a broken metric constraint.
"""

from __future__ import annotations

import difflib
import logging
import math
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from perftune import search
from perftune.errors import PerftuneError, UnsatisfiableError
from perftune.integration.optuna._space import MAX_LISTED_STEPS, Codec, codec_for
from perftune.space import Config, Expression, Space
from perftune.trial import Status, Trial

if TYPE_CHECKING:
    from optuna.study import Study

__all__ = ["PerftuneSampler"]

_LOG = logging.getLogger(__name__)
_FINISHED = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
# Like perftune's driver: proposals asked for before falling back to a random unmeasured configuration.
_MAX_ASK_ATTEMPTS = 8
_MAX_RANDOM_ATTEMPTS = 64
# Where Optuna keeps a trial's constraint values (a list from ``constraints_func``, one key per name from
# ``trial.set_constraint``); optuna.study._constrained_optimization reads both.
_CONSTRAINTS_KEY = "constraints"
# The metric that carries a trial's total constraint violation to perftune's techniques.
_VIOLATION = "optuna.constraint_violation"


@dataclass(frozen=True)
class _Finished:
    """What the sampler keeps of one finished trial (its history, append-only)."""

    number: int
    params: dict[str, Any]
    distributions: dict[str, BaseDistribution]
    state: TrialState
    values: tuple[float, ...] | None
    reason: str | None
    constraints: tuple[float, ...] = ()  # Optuna's constraint values (feasible when all are <= 0)


class _Search:
    """The perftune side for one relative search space: the space, the codecs and the technique."""

    def __init__(self, distributions: Mapping[str, BaseDistribution], technique: Any,
                 codecs: dict[str, Codec], space: Space, constraints: Sequence[str]) -> None:
        self.distributions = dict(distributions)
        self.technique = technique
        self.codecs = codecs
        self.space = space
        self.constraints = list(constraints)  # the sampler's constraints this space applies
        self.measured: dict[Config, Trial] = {}  # config -> the first trial told with it
        self.in_flight: dict[int, Config] = {}  # trial number -> proposal being measured

    def config_of(self, params: Mapping[str, Any],
                  distributions: Mapping[str, BaseDistribution]) -> Config | None:
        """The trial's configuration in this space, or None when it does not fit (a parameter missing,
        suggested from a distribution this space's does not hold, or a declared constraint broken)."""
        values: dict[str, Any] = {}
        for name, codec in self.codecs.items():
            given = distributions.get(name)
            if name not in params or given is None or (
                    given != codec.distribution and not _holds(codec.distribution, given)):
                return None
            value = codec.from_optuna(params[name])
            if value is None:
                return None
            values[name] = value
        config = Config(values)
        return config if self.space.is_valid(config) else None


class PerftuneSampler(BaseSampler):
    """An Optuna sampler backed by perftune's default search (the boundary design and AUC-bandit ensemble).

    Args:
        seed: Makes a sequential study (``n_jobs=1``) reproducible: the same seed, objective and
            budget give the same trials. None: a fresh seed.
        technique: A perftune technique name (``"default"``: perftune's default search; with several
            objectives ``"mo-bandit"``); see ``perftune.search.names()``.
        constraints: perftune constraint expressions over parameter names (``"bx * by <= 1024"``),
            honoured by every proposal once all the names they use are in the relative search space
            (Optuna has no way to declare them; without them, the objective rejects invalid
            configurations by failing or pruning, and the search learns that as a failure). A
            constraint still not applied when the search space is built (it reads a name no finished
            trial suggested, or a parameter sampled independently) gives one ``UserWarning``; one that
            reads an objective named by ``study.metric_names`` raises a PerftuneError (bound measured
            values with ``constraints_func``); one that no configuration satisfies raises an
            :class:`~perftune.errors.UnsatisfiableError`.
        constraints_func: Optuna's constraints on a finished trial, as for ``NSGAIISampler`` and
            ``TPESampler``: called with each completed or pruned trial of this process, it returns a
            sequence of floats, feasible when every one is <= 0 (read what it needs from
            ``trial.user_attrs``: a trial's values are not set yet when samplers are told). The values
            are stored in the trial's system attributes, where Optuna's ``study.best_trial`` and
            ``study.best_trials`` read them. Constraint values set by the objective with
            ``trial.set_constraint`` (Optuna 5) are honoured too, with or without this argument.
        independent_sampler: The sampler of parameters outside the relative search space (default: a
            seeded :class:`optuna.samplers.RandomSampler`).
        ordered_categoricals: Search a categorical whose choices are all numbers in their numeric order.
        warn_independent_sampling: Log a warning (once per parameter) when a parameter is sampled
            independently after the first trial.

    Example:
        >>> import optuna
        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> def objective(trial):
        ...     block = trial.suggest_categorical("block", [16, 32, 64, 128, 256])
        ...     unroll = trial.suggest_int("unroll", 1, 8)
        ...     return abs(block - 64) / 64 + abs(unroll - 4)
        >>> study = optuna.create_study(sampler=PerftuneSampler(seed=1))
        >>> study.optimize(objective, n_trials=30)
        >>> study.best_params
        {'block': 64, 'unroll': 4}
    """

    def __init__(
        self,
        *,
        seed: int | None = None,
        technique: str = "default",
        constraints: Sequence[str] = (),
        constraints_func: Callable[[FrozenTrial], Sequence[float]] | None = None,
        independent_sampler: BaseSampler | None = None,
        ordered_categoricals: bool = True,
        warn_independent_sampling: bool = True,
    ) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise PerftuneError(f"PerftuneSampler: seed must be a non-negative integer, got {seed!r}")
        if not isinstance(technique, str):
            raise PerftuneError(f"PerftuneSampler: technique must be a technique name, got {technique!r}")
        try:
            search.get(technique)
        except PerftuneError as exc:
            raise PerftuneError(f"PerftuneSampler: {exc}") from None
        for flag, given in (("ordered_categoricals", ordered_categoricals),
                            ("warn_independent_sampling", warn_independent_sampling)):
            if not isinstance(given, bool):
                raise PerftuneError(f"PerftuneSampler: {flag} must be True or False, got {given!r}")
        if independent_sampler is not None and not isinstance(independent_sampler, BaseSampler):
            raise PerftuneError("PerftuneSampler: independent_sampler must be an Optuna sampler "
                                "(optuna.samplers.RandomSampler(), TPESampler(), ...), "
                                f"got {independent_sampler!r}")
        if isinstance(constraints, str):
            raise PerftuneError("PerftuneSampler: constraints must be a list of expressions, "
                                f"like [{constraints!r}]")
        self._constraints: list[tuple[str, frozenset[str]]] = []
        for i, text in enumerate(constraints):
            if not isinstance(text, str):
                raise PerftuneError(f"PerftuneSampler: constraints[{i}] must be an expression string, "
                                    f"got {text!r}")
            try:
                names = Expression(text).names
            except PerftuneError as exc:
                raise PerftuneError(f"PerftuneSampler: constraints[{i}]: {exc}") from None
            self._constraints.append((text, names))
        if constraints_func is not None and not callable(constraints_func):
            raise PerftuneError("PerftuneSampler: constraints_func must be a function of a trial that "
                                f"returns a sequence of floats, got {constraints_func!r}")
        self._constraints_func = constraints_func
        self._seed = seed
        self._technique_name = technique
        self._ordered = ordered_categoricals
        self._warn_independent = warn_independent_sampling
        self._independent = independent_sampler if independent_sampler is not None else RandomSampler(
            seed=None if seed is None else self._derived(1))
        self._lock = threading.RLock()
        self._reset(None)

    # ------------------------------------------------------------------ state

    def _derived(self, *stream: int) -> int:
        """A seed of its own for each use (technique, random fallback, independent sampler)."""
        base = self._seed if self._seed is not None else self._fresh_seed
        return int(np.random.SeedSequence([base, *stream]).generate_state(1)[0])

    def _reset(self, study_key: tuple[int, int, str] | None) -> None:
        self._study_key = study_key
        if self._seed is None:
            self._fresh_seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._rng = np.random.default_rng(self._derived(2))
        self._history: list[_Finished] = []
        self._seen: set[int] = set()  # numbers of the finished trials in the history
        self._intersection: dict[str, BaseDistribution] | None = None
        self._completed = False  # whether a completed trial has shaped the intersection
        self._dropped: set[str] = set()  # names suggested from incompatible distributions
        self._search: _Search | None = None
        self._n_builds = 0
        self._objectives: search.Objectives | None = None
        self._metric_names: frozenset[str] = frozenset()  # the study's metric_names, when set
        self._warned: set[str] = set()
        self._warned_constraints: set[str] = set()

    def _attach(self, study: Study) -> None:
        """Start over when the sampler is used for another study (Optuna samplers serve one study)."""
        # The study's id too: a study deleted and created again under its name is another study.
        key = (id(study._storage), study._study_id, study.study_name)
        if key != self._study_key:
            self._reset(key)
            directions = study.directions
            try:
                names = study.metric_names or []
            except AttributeError:  # HyperbandPruner hands samplers a study of one bracket, without it
                names = []
            self._metric_names = frozenset(names)
            names = names or [f"objective{i}" for i in range(len(directions))]
            if len(set(names)) != len(names):
                names = [f"objective{i}" for i in range(len(directions))]
            goals = ["max" if d == StudyDirection.MAXIMIZE else "min" for d in directions]
            self._objectives = search.Objectives(tuple(names), tuple(goals))
            if self._constraints_func is not None:
                self._constrain_objectives()

    def _constrain_objectives(self) -> None:
        """Tell the techniques that trials carry Optuna constraint values (a metric bounded by 0)."""
        objectives = self._objectives
        if objectives is not None and not objectives.constraints:
            self._objectives = replace(objectives, constraints=(search.Constraint(_VIOLATION, "<=", 0.0),))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ history

    def _ingest(self, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None,
                constraints: Sequence[float] | None = None) -> None:
        """Add one finished trial to the history, fold it into the intersection, tell the technique.

        ``constraints``: the values ``constraints_func`` just gave (not in ``trial``'s attributes yet);
        the trial's stored constraint values are read otherwise.
        """
        if trial.number in self._seen:
            return
        self._seen.add(trial.number)
        reason = None
        if state == TrialState.PRUNED:
            step = trial.last_step
            reason = "pruned" if step is None else f"pruned at step {step}"
        elif state == TrialState.FAIL:
            reason = "failed"  # Optuna logs the exception; a sampler is not given it
        stored = _stored_constraints(trial.system_attrs, constraints)
        finished = _Finished(trial.number, dict(trial.params), dict(trial.distributions), state,
                             None if values is None or state != TrialState.COMPLETE
                             else tuple(float(v) for v in values), reason, stored)
        self._history.append(finished)
        if stored and self._objectives is not None and not self._objectives.constraints:
            # The first constrained trial (trial.set_constraint, or another process's constraints_func):
            # the techniques must rank by feasibility, so the search is rebuilt before the next proposal.
            self._constrain_objectives()
            self._search = None
        if state in (TrialState.COMPLETE, TrialState.PRUNED):
            self._fold(finished.distributions, complete=state == TrialState.COMPLETE)
        current = self._search
        if current is not None:
            current.in_flight.pop(trial.number, None)
            told = self._as_trial(current, finished)
            if told is not None:
                current.technique.tell([told])

    def _fold(self, distributions: Mapping[str, BaseDistribution], complete: bool) -> None:
        """Fold one completed or pruned trial's distributions into the intersection.

        A completed trial removes the names it did not suggest. A pruned one removes none: it may have
        stopped before suggesting them (an objective that rejects a configuration early must not leave
        its later parameters to random sampling for good); pruned trials shape the space only until the
        first trial completes, so that an objective that prunes its first configurations is searched.
        A name suggested from another distribution keeps the one that holds the other (a widened
        range); without one, it is dropped for good.
        """
        current = self._intersection
        if current is None or (complete and not self._completed):
            base = {name: d for name, d in distributions.items() if name not in self._dropped}
            for name, d in (current or {}).items():  # the pruned trials' distributions, before this one
                if name in base:
                    self._merge_into(base, name, d)
            if not complete and current is not None:
                for name, d in current.items():
                    base.setdefault(name, d)
            self._intersection = base
            self._completed = self._completed or complete
            return
        for name in list(current):
            if name in distributions:
                self._merge_into(current, name, distributions[name])
            elif complete:
                del current[name]

    def _merge_into(self, space: dict[str, BaseDistribution], name: str, other: BaseDistribution) -> None:
        """Keep, of ``space[name]`` and ``other``, the distribution that holds the other; drop the name
        when neither does."""
        mine = space[name]
        if mine == other or _holds(mine, other):
            return
        if _holds(other, mine):
            space[name] = other
            return
        del space[name]
        self._dropped.add(name)

    def _sync(self, study: Study) -> None:
        """Ingest trials finished by other processes (or before this sampler was created)."""
        for trial in study.get_trials(deepcopy=False, states=_FINISHED):
            if trial.number not in self._seen:
                self._ingest(trial, trial.state, trial.values)

    def _as_trial(self, current: _Search, finished: _Finished) -> Trial | None:
        """The perftune trial of a finished Optuna trial, or None when it does not fit the space."""
        config = current.config_of(finished.params, finished.distributions)
        if config is None:
            return None
        values = finished.values
        objectives = self._objectives
        if values is None or objectives is None or len(values) != len(objectives.names):
            trial = Trial(finished.number, config, Status.FAILED, reason=finished.reason or "no value")
        elif not all(math.isfinite(v) for v in values):
            # inf is the usual way to say "infeasible" to Optuna; perftune's driver fails such a value too.
            trial = Trial(finished.number, config, Status.FAILED,
                          reason=f"value {', '.join(f'{v:g}' for v in values)} is not a finite number")
        else:
            metrics = dict(zip(objectives.names, values, strict=True))
            primary = values[0]
            loss: float | None = primary if objectives.goal == "min" else -primary
            reason = None
            if objectives.constraints:
                # Deb's rule, as Optuna's NSGA-II: the total violation; measured, so OK, but an infeasible
                # trial has no loss (the driver's way for a broken metric constraint).
                violation = sum(math.inf if math.isnan(c) else max(c, 0.0) for c in finished.constraints)
                metrics[_VIOLATION] = violation
                if violation > 0.0:
                    loss = None
                    reason = ("infeasible: Optuna constraint values "
                              f"{', '.join(f'{c:g}' for c in finished.constraints)} (feasible: all <= 0)")
            trial = Trial(finished.number, config, Status.OK, value=primary, loss=loss, metrics=metrics,
                          samples=[primary], reason=reason)
        current.measured.setdefault(config, trial)
        return trial

    # ------------------------------------------------------------------ the perftune side

    def _build(self, distributions: Mapping[str, BaseDistribution]) -> _Search:
        """A space and a fresh technique for ``distributions``, told every finished trial that fits."""
        names = sorted(distributions)
        codecs = {name: codec_for(distributions[name], self._ordered) for name in names}
        params = {name: codecs[name].param for name in names}
        constraints = [text for text, used in self._constraints if used <= set(names)]
        self._check_unapplied(set(names))
        for text, used in self._constraints:
            positional = sorted(n for n in used if n in codecs and codecs[n].by_position)
            if positional:
                raise PerftuneError(f"PerftuneSampler: constraint {text!r} reads {', '.join(positional)}, "
                                    "whose values perftune searches by position (a categorical with None "
                                    f"or NaN, or a grid of more than {MAX_LISTED_STEPS} steps)")
        space = Space(params, constraints)
        objectives = self._objectives
        name = self._technique_name
        if name == "default" and objectives is not None and objectives.is_multi:
            name = "mo-bandit"
        self._n_builds += 1
        technique = search.create(name, space, seed=self._derived(3, self._n_builds))
        if self._seed is not None and isinstance(technique, search.ClockAware):
            technique.set_deterministic(True)  # a seeded study must not depend on timings
        if objectives is not None and isinstance(technique, search.MultiObjectiveAware):
            technique.set_objectives(objectives)
        current = _Search(distributions, technique, codecs, space, constraints)
        fitting = [t for t in (self._as_trial(current, f) for f in self._history) if t is not None]
        if fitting:
            technique.tell(fitting)
        return current

    def _check_unapplied(self, names: set[str]) -> None:
        """Refuse a constraint on an objective; warn once about one that this space cannot apply."""
        suggested = {name for finished in self._history for name in finished.params}
        for text, used in self._constraints:
            if used <= names or text in self._warned_constraints:
                continue
            unknown = sorted(used - suggested)
            metrics = [name for name in unknown if name in self._metric_names]
            if metrics:
                raise PerftuneError(
                    f"PerftuneSampler: constraint {text!r} reads {', '.join(map(repr, metrics))}, an "
                    "objective of the study (study.metric_names), not a parameter: constraints= are rules "
                    "over parameters, checked before a trial runs; bound a measured value with "
                    "trial.set_constraint in the objective (Optuna 5) or with constraints_func reading "
                    "trial.user_attrs (feasible when <= 0)")
            self._warned_constraints.add(text)
            if unknown:
                hints = [f"{name!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(
                    name, sorted(suggested), n=1)) else repr(name) for name in unknown]
                why = (f"no finished trial suggested {', '.join(hints)}: a typo, a parameter of a branch "
                       "not taken yet, or a measured value (bound those with constraints_func)")
            else:
                independent = sorted(used - names)
                why = (f"{', '.join(map(repr, independent))} {'is' if len(independent) == 1 else 'are'} not "
                       "suggested by every completed trial, or from distributions neither of which holds the "
                       "other, so sampled independently")
            warnings.warn(f"PerftuneSampler: constraint {text!r} is not applied: {why}; it applies once "
                          "every name it reads is in the relative search space", UserWarning, stacklevel=2)

    def _unsatisfiable(self, current: _Search, exc: PerftuneError) -> UnsatisfiableError:
        """The one-line error for constraints that no configuration of the space satisfies."""
        params = ", ".join(f"{name}: {codec.param!r}" for name, codec in current.codecs.items())
        return UnsatisfiableError(f"PerftuneSampler: no configuration of the study's parameters ({params}) "
                                  f"satisfies constraints={current.constraints!r}: {exc}")

    def _propose(self, current: _Search) -> Config:
        """One configuration not measured and not in flight: the technique's, else a random one."""
        try:
            return self._propose_from(current)
        except UnsatisfiableError as exc:
            raise self._unsatisfiable(current, exc) from None

    def _propose_from(self, current: _Search) -> Config:
        busy = set(current.in_flight.values())
        for _ in range(_MAX_ASK_ATTEMPTS):
            proposals = current.technique.ask(1)
            if not proposals:
                break
            config: Config = proposals[0]
            if not current.space.is_valid(config) or config in busy:
                continue
            known = current.measured.get(config)
            if known is None:
                return config
            current.technique.tell([known])  # a repeat: answer from what was measured, as the driver does
        sampled: Config | None = None
        for _ in range(_MAX_RANDOM_ATTEMPTS):
            (sampled,) = current.space.sample(self._rng, 1)
            if sampled not in current.measured and sampled not in busy:
                return sampled
        # Every configuration tried is measured or in flight (a small space, nearly exhausted): a repeat,
        # since Optuna expects a value for every parameter of the relative space.
        assert sampled is not None
        return sampled

    # ------------------------------------------------------------------ Optuna's sampler interface

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """The intersection search space of the completed trials (of the pruned ones before a trial
        completes; a widened range counts as its wider distribution), single-valued parameters left out."""
        with self._lock:
            self._attach(study)
            self._sync(study)
            if self._intersection is None:
                return {}
            return {name: d for name, d in sorted(self._intersection.items()) if not d.single()}

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """perftune's proposal for the relative search space (external values)."""
        if not search_space:
            return {}
        with self._lock:
            self._attach(study)
            fixed = trial.system_attrs.get("fixed_params", {})
            if all(name in fixed for name in search_space):
                return {}  # an enqueued trial: Optuna uses its parameters, the technique learns them
            # Single-valued parameters are Optuna's to fill, but they are in the perftune space, so that
            # a constraint that reads one (``KWG % KWI == 0`` with KWG fixed) is honoured.
            wanted = dict(search_space)
            for name, d in (self._intersection or {}).items():
                if d.single() and name not in wanted:
                    wanted[name] = d
            current = self._search
            if current is None or current.distributions != wanted:
                self._sync(study)  # called without infer_relative_search_space (Optuna's tests do)
                current = self._search = self._build(wanted)
            config = self._propose(current)
            current.in_flight[trial.number] = config
            return {name: current.codecs[name].to_optuna(config[name]) for name in search_space}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        """A parameter outside the relative space, from the independent sampler."""
        if self._warn_independent and trial.number > 0 and param_name not in self._warned:
            with self._lock:
                if self._intersection is not None and param_name not in self._warned:
                    self._warned.add(param_name)
                    _LOG.warning("PerftuneSampler: parameter %r of trial %d is sampled independently by "
                                 "%s (it is not suggested by every completed trial, or from distributions "
                                 "neither of which holds the other)", param_name, trial.number,
                                 type(self._independent).__name__)
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        """Passed on to the independent sampler."""
        self._independent.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        """Tell the technique how the trial ended (failed and pruned trials as failures); with
        ``constraints_func``, store the trial's constraint values first, as Optuna's samplers do."""
        constraints = None
        if self._constraints_func is not None and state in (TrialState.COMPLETE, TrialState.PRUNED):
            constraints = self._evaluate_constraints(trial)
            study._storage.set_trial_system_attr(trial._trial_id, _CONSTRAINTS_KEY, constraints)
        with self._lock:
            self._attach(study)
            self._ingest(trial, state, values, constraints)
        self._independent.after_trial(study, trial, state, values)

    def _evaluate_constraints(self, trial: FrozenTrial) -> tuple[float, ...]:
        """``constraints_func(trial)`` as a tuple of floats (one-line errors for anything else)."""
        assert self._constraints_func is not None
        given = self._constraints_func(trial)
        try:
            if isinstance(given, str | bytes):
                raise TypeError
            constraints = tuple(float(c) for c in given)
        except (TypeError, ValueError):
            raise PerftuneError(f"PerftuneSampler: constraints_func must return a sequence of floats, got "
                                f"{given!r} for trial {trial.number}") from None
        if any(math.isnan(c) for c in constraints):
            raise PerftuneError(f"PerftuneSampler: constraints_func returned NaN for trial {trial.number}: "
                                f"{list(constraints)}")
        return constraints

    def reseed_rng(self) -> None:
        """New seeds for the random parts (Optuna calls this in each thread of ``n_jobs > 1``)."""
        with self._lock:
            self._independent.reseed_rng()
            self._rng = np.random.default_rng()


def _holds(wide: BaseDistribution, narrow: BaseDistribution) -> bool:
    """Whether every value of ``narrow`` is a value of ``wide`` of the same kind (a widened range, more
    choices), so that a trial suggested from ``narrow`` is a point of ``wide``'s space."""
    if isinstance(wide, CategoricalDistribution) and isinstance(narrow, CategoricalDistribution):
        return all(any(c == w and type(c) is type(w) for w in wide.choices) for c in narrow.choices)
    if not (isinstance(wide, FloatDistribution | IntDistribution) and type(wide) is type(narrow)):
        return False
    assert isinstance(narrow, FloatDistribution | IntDistribution)
    if wide.log != narrow.log or wide.step != narrow.step:
        return False
    if not wide.low <= narrow.low <= narrow.high <= wide.high:
        return False
    return wide.step is None or wide._contains(narrow.low)


def _stored_constraints(system_attrs: Mapping[str, Any],
                        listed: Sequence[float] | None = None) -> tuple[float, ...]:
    """A trial's constraint values as Optuna stores them: the list of ``constraints_func`` under
    ``"constraints"`` (``listed`` when given: just computed, not stored in ``system_attrs`` yet), then
    each ``trial.set_constraint`` value under ``"constraints:<name>"``."""
    if listed is None:
        listed = system_attrs.get(_CONSTRAINTS_KEY)
    out = [] if listed is None else [float(c) for c in listed]
    prefix = _CONSTRAINTS_KEY + ":"
    out.extend(float(system_attrs[key]) for key in sorted(system_attrs) if key.startswith(prefix))
    return tuple(out)
