"""The technique protocol and the base class that the built-in techniques share.

A technique proposes configurations (``ask``) and learns from finished trials (``tell``). It never runs
anything, never touches the store and never raises to stop a run. The base class below gives every
built-in technique the same guarantees:

* every proposal is a *valid* configuration (``space.is_valid``), repaired or resampled if needed;
* a technique does not propose a configuration it already knows the result of, nor one it proposed and
  is still waiting for (bounded memory of both);
* state is plain data (numpy generators, dicts, lists, configurations): ``state_dict()`` returns it and
  ``load_state_dict()`` puts it back into a technique built with the same space, seed and settings,
  which is how checkpoints store a technique (as JSON, see ``perftune.drive._checkpoint``);
* an internal error (a bug) never escapes ``ask``/``tell``: it is counted in ``n_errors``, remembered
  in ``last_error``, and ``ask`` falls back to uniform random proposals. The conformance suite asserts
  ``n_errors == 0``, so bugs stay visible in tests.

Example:
    >>> from perftune.space import Int, Space
    >>> from perftune.search import create
    >>> tech = create("random", Space({"x": Int(0, 9)}), seed=1)
    >>> [c["x"] for c in tech.ask(3)]  # doctest: +SKIP
    [4, 5, 1]
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from perftune.errors import PerftuneError
from perftune.space import Config
from perftune.trial import Status

if TYPE_CHECKING:
    from perftune.space import Space
    from perftune.trial import Trial

__all__ = [
    "BaseTechnique",
    "BoundedDict",
    "ClockAware",
    "CountsWork",
    "LabelsProposals",
    "NestedState",
    "NoSettings",
    "ParallelismAware",
    "PreloadsImports",
    "Stateful",
    "Technique",
    "load_state",
    "loss_of",
    "state_of",
]


@runtime_checkable
class Technique(Protocol):
    """What the driver needs from a search technique (see docs/CONTRACTS.md)."""

    name: ClassVar[str]

    def ask(self, n: int) -> list[Config]:
        """Return 0..n valid proposals; ``[]`` means "nothing now"."""
        ...

    def tell(self, trials: Sequence[Trial]) -> None:
        """Learn from finished trials (any proposer, any order, failures included)."""
        ...


# Optional hooks. A technique may implement any of them; the driver calls a hook only on a technique
# that has it (``isinstance`` on these runtime-checkable protocols) and otherwise does without.


@runtime_checkable
class LabelsProposals(Protocol):
    """A technique that can say which of its parts proposed a configuration (ensembles do).

    The driver labels each trial with the answer (``trial.technique``); without the hook, or when it
    answers None, the trial carries the technique's own name.

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune.search import create
        >>> tech = create("bandit", Space({"x": Int(0, 9)}), seed=1)
        >>> isinstance(tech, LabelsProposals), isinstance(create("random", tech.space), LabelsProposals)
        (True, False)
        >>> tech.proposer_of(tech.ask(1)[0]) in tech.names + ["random"]
        True
    """

    def proposer_of(self, config: Config) -> str | None:
        """The name of the part that proposed ``config`` while it is in flight, or None."""
        ...


@runtime_checkable
class ClockAware(Protocol):
    """A technique whose scheduling reads clocks (cost-aware allowances) and can be told not to.

    A deterministic (seeded) driver calls ``set_deterministic(True)`` once, right after creating the
    technique, so that the run does not depend on timings. Without the hook a technique is assumed
    not to read clocks.

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune.search import create
        >>> tech = create("bandit", Space({"x": Int(0, 9)}), seed=1)
        >>> isinstance(tech, ClockAware)
        True
        >>> tech.set_deterministic(True)
    """

    def set_deterministic(self, flag: bool = True) -> None:
        """``True``: make no decision that depends on a clock."""
        ...


@runtime_checkable
class CountsWork(Protocol):
    """A technique that counts its deciding work, so that an ensemble can charge it without a clock.

    ``work_done`` only grows; it counts deterministic work in units of about one candidate
    configuration generated or encoded in Python (a model also counts its fits and the points it scores,
    weighted by what they cost relative to that). A seeded ensemble charges each technique the growth of
    ``work_done`` during its ``ask``; a technique without the attribute is charged one unit per ``ask``.

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune.search import create
        >>> tech = create("model", Space({"x": Int(0, 9)}), seed=1)
        >>> isinstance(tech, CountsWork), tech.work_done
        (True, 0.0)
        >>> _ = tech.ask(1)
        >>> tech.work_done >= 1
        True
    """

    work_done: float


@runtime_checkable
class ParallelismAware(Protocol):
    """A technique that adapts to the number of evaluations in flight.

    The driver calls ``set_parallelism(n)`` when a run starts, with the executor's capacity. Without
    the hook a technique proposes the same way however many evaluations run at once.

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune.search import create
        >>> tech = create("default", Space({"x": Int(0, 9)}), seed=1)
        >>> isinstance(tech, ParallelismAware)
        True
        >>> tech.set_parallelism(4)
    """

    def set_parallelism(self, n_in_flight: int) -> None:
        """``n_in_flight`` evaluations may run at the same time from now on."""
        ...


@runtime_checkable
class PreloadsImports(Protocol):
    """A technique whose first decision imports something slow (the model: scikit-learn, seconds on a
    small machine), which it can import in a background thread while the first trials are measured.

    The driver calls ``preload_imports()`` only when nothing forks this process during the run (its
    in-process executor), since a fork while another thread imports can deadlock the child.

    Example:
        >>> from perftune.space import Int, Space
        >>> from perftune.search import create
        >>> isinstance(create("default", Space({"x": Int(0, 9)}), seed=1), PreloadsImports)
        True
    """

    def preload_imports(self) -> None:
        """Start importing in the background what the first decision will need."""
        ...


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """Settings of a technique that has none."""


_od_setitem = collections.OrderedDict.__setitem__
_od_move_to_end = collections.OrderedDict.move_to_end
_od_popitem = collections.OrderedDict.popitem


class BoundedDict(collections.OrderedDict):  # type: ignore[type-arg]
    """A dict that forgets its oldest entries beyond ``limit`` (insertion order; setting a key again
    makes it the newest).

    Keeps the memory (and the pickled size) of "what have I seen" bounded, while lookups stay O(1).
    An ``OrderedDict``, not a ``dict``: dropping a plain dict's oldest entry (``next(iter(d))``) walks
    over the slots of the entries dropped before it, so a full one cost more the longer a run went
    (about 2 us per insertion at 4,096 entries against 0.5 here).
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: Any, value: Any) -> None:
        # Called several times per trial (every technique's result cache): plain slots, no super().
        if key in self:
            _od_setitem(self, key, value)
            _od_move_to_end(self, key)
        else:
            _od_setitem(self, key, value)
            if len(self) > self.limit:
                _od_popitem(self, False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_bounded, (self.limit, list(self.items())))


def _rebuild_bounded(limit: int, items: list[tuple[Any, Any]]) -> BoundedDict:
    d = BoundedDict(limit)
    for k, v in items:
        _od_setitem(d, k, v)
    return d


class NestedState:
    """The decoded state of a nested stateful object (a sub-technique), to load into the live one.

    Attributes:
        state: What the object's ``state_dict()`` returned when the checkpoint was written.
    """

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state


def _restore(current: Any, value: Any, where: str) -> Any:
    if isinstance(value, NestedState):
        load = getattr(current, "load_state_dict", None)
        if not callable(load):
            raise PerftuneError(f"checkpoint does not fit: {where} holds no technique to load a state into")
        load(value.state)
        return current
    if isinstance(value, list) and any(isinstance(v, NestedState) for v in value):
        if not isinstance(current, list) or len(current) != len(value):
            raise PerftuneError(f"checkpoint does not fit: {where} holds {len(value)} techniques here")
        return [_restore(c, v, f"{where}[{i}]") for i, (c, v) in enumerate(zip(current, value, strict=True))]
    return value


class Stateful:
    """Checkpointing by ``state_dict()``/``load_state_dict()`` (the techniques' default).

    The state is the instance's attributes minus :attr:`state_exclude` (what the constructor rebuilds
    from the space, seed and settings). ``load_state_dict`` is called on an object built by the same
    constructor call as the original, so excluded attributes are already right; nested techniques
    (attributes, or lists of them) have their own state loaded into the objects the constructor built.
    A technique whose state holds something else than plain data (see ``perftune.drive._checkpoint``)
    overrides both methods, or extends :attr:`state_exclude` and rebuilds in :meth:`_after_load`.

    Example:
        >>> import copy
        >>> from perftune.space import Int, Space
        >>> from perftune.search import create
        >>> space = Space({"x": Int(0, 9)})
        >>> a = create("random", space, seed=1)
        >>> _ = a.ask(3)
        >>> b = create("random", space, seed=1)
        >>> b.load_state_dict(copy.deepcopy(a.state_dict()))  # a checkpoint copies it through JSON
        >>> a.ask(2) == b.ask(2)
        True
    """

    #: Attributes left out of the state: inputs of the constructor, and data rebuilt by ``_after_load``.
    state_exclude: ClassVar[frozenset[str]] = frozenset({"space", "settings"})

    def state_dict(self) -> dict[str, Any]:
        """The technique's state as plain data (the values are not copied: encode them at once)."""
        return {k: v for k, v in vars(self).items() if k not in self.state_exclude}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()`` of a technique built the same way)."""
        for key, value in state.items():
            if key in self.state_exclude:
                continue
            setattr(self, key, _restore(getattr(self, key, None), value, key))
        self._after_load()

    def _after_load(self) -> None:
        """Rebuild derived data after ``load_state_dict`` (nothing by default)."""


def state_of(technique: Any) -> dict[str, Any]:
    """``technique.state_dict()``, or for a plug-in without one, its attributes but the space and settings."""
    method = getattr(technique, "state_dict", None)
    if callable(method):
        state = method()
        if not isinstance(state, dict):
            raise PerftuneError(f"{type(technique).__name__}.state_dict() must return a dict")
        return state
    return {k: v for k, v in vars(technique).items() if k not in Stateful.state_exclude}


def load_state(technique: Any, state: dict[str, Any]) -> None:
    """The counterpart of :func:`state_of`: ``technique.load_state_dict(state)`` or set the attributes."""
    method = getattr(technique, "load_state_dict", None)
    if callable(method):
        method(state)
        return
    for key, value in state.items():
        setattr(technique, key, _restore(getattr(technique, key, None), value, key))


def loss_of(trial: Trial) -> float | None:
    """The loss a technique should learn from, or None for a failure (NaN counts as a failure)."""
    loss = trial.loss
    if trial.status is not Status.OK or loss is None:
        return None
    loss = float(loss)
    return None if math.isnan(loss) else loss


def better(a: float | None, b: float | None) -> bool:
    """True when loss ``a`` is strictly better than ``b`` (None is worse than anything)."""
    if a is None:
        return False
    return b is None or a < b


class BaseTechnique(Stateful):
    """Common machinery of the built-in techniques.

    Subclasses set ``name`` and ``Settings`` and implement ``_propose`` (one new configuration, or None
    for "nothing now") and optionally ``_learn`` (called for every finished trial, after the base
    class has recorded it) and ``_on_known`` (called when ``_propose`` returned a configuration whose
    result is already known: the technique may use that result at once).

    Attributes:
        space: The search space.
        settings: The technique's frozen settings dataclass.
        rng: The technique's random generator (seeded).
        best_config: Best configuration told so far (any proposer), or None.
        best_loss: Its loss, or None.
        n_told: Number of finished trials told.
        n_errors: Internal errors caught (a bug if not 0).
        last_error: Text of the last internal error.
    """

    name: ClassVar[str] = ""
    Settings: ClassVar[type] = NoSettings
    #: How many times ``ask`` retries a proposal that is a duplicate before sampling at random.
    max_attempts: ClassVar[int] = 6
    #: Bounds of the result cache and of the pending set.
    known_limit: ClassVar[int] = 4096
    #: Expected deciding time per proposal (seconds), used by a cost-aware ensemble before it has
    #: measured the technique; None for cheap techniques.
    decide_cost_hint_s: ClassVar[float | None] = None

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        if settings is None:
            settings = self.Settings()
        elif not isinstance(settings, self.Settings):
            raise PerftuneError(
                f"technique {self.name!r}: settings must be {self.Settings.__name__}, "
                f"got {type(settings).__name__}"
            )
        self.space = space
        self.settings = settings
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.best_config: Config | None = None
        self.best_loss: float | None = None
        self.n_told = 0
        self.n_asked = 0
        self.n_errors = 0
        self.last_error: str | None = None
        self.improved = False
        self.work_done = 0.0  # counted deciding work (CountsWork): one unit per candidate proposed
        # config -> loss (None = failed) of told trials; config -> ask number of pending proposals.
        self._known: BoundedDict = BoundedDict(self.known_limit)
        self._pending: BoundedDict = BoundedDict(self.known_limit)

    # ------------------------------------------------------------------ public protocol
    def ask(self, n: int) -> list[Config]:
        """Return up to ``n`` new, valid configurations (``[]`` means "nothing now").

        Args:
            n: How many proposals the driver wants.

        Returns:
            Between 0 and ``n`` distinct valid configurations not proposed before by this technique.
        """
        out: list[Config] = []
        now: set[Config] = set()
        for _ in range(max(0, int(n))):
            config = self._ask_one(now)
            if config is None:
                break
            now.add(config)
            out.append(config)
            self._pending[config] = self.n_asked
            self.n_asked += 1
        return out

    def tell(self, trials: Sequence[Trial]) -> None:
        """Learn from finished trials: any proposer, any order, failures included.

        Args:
            trials: Finished trials (status OK, FAILED, TIMEOUT or CANCELLED).
        """
        # Every technique of an ensemble is told every result: the loop is kept lean (locals, no calls
        # that are not needed), it runs several times per trial.
        known, pending, learn = self._known, self._pending, self._learn
        for trial in trials:
            status = trial.status
            if status is Status.PENDING:
                continue
            config = trial.config
            loss = loss_of(trial)
            self.improved = False
            if status is not Status.CANCELLED:
                known[config] = loss
                self.n_told += 1
                if loss is not None and (self.best_loss is None or loss < self.best_loss):
                    self.best_loss = loss
                    self.best_config = config
                    self.improved = True
            try:
                learn(trial, loss)
            except Exception as exc:  # a bug must not stop the run; tests assert n_errors == 0
                self._record_error(exc)
            pending.pop(config, None)

    # ------------------------------------------------------------------ for subclasses
    def _propose(self) -> Config | None:
        """One proposal (may be invalid or a duplicate: the base class handles both)."""
        return self.space.sample(self.rng, 1)[0]

    def _learn(self, trial: Trial, loss: float | None) -> None:
        """React to one finished trial (``loss`` is None for failures and cancellations).

        While it runs, ``self.improved`` says whether the trial just became the best, and
        ``self.is_mine(trial.config)`` whether this technique proposed it.
        """

    def _on_known(self, config: Config, loss: float | None) -> None:
        """``_propose`` returned ``config`` whose result is already known: use it at once."""

    # ------------------------------------------------------------------ helpers
    def _record_error(self, exc: Exception) -> None:
        self.n_errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"

    def _ask_one(self, now: set[Config]) -> Config | None:
        for _ in range(self.max_attempts):
            self.work_done += 1.0
            try:
                config = self._propose()
                if config is None:
                    return None
                config = self.valid(config)
            except PerftuneError:
                raise
            except Exception as exc:
                self._record_error(exc)
                break
            if config in now or config in self._pending:
                continue
            if config in self._known:
                try:
                    self._on_known(config, self._known[config])
                except Exception as exc:
                    self._record_error(exc)
                continue
            return config
        return self._random_fresh(now)

    def _random_fresh(self, now: set[Config], tries: int = 8) -> Config | None:
        for _ in range(tries):
            config = self.space.sample(self.rng, 1)[0]
            if config not in now and config not in self._pending and config not in self._known:
                return config
        return None

    def is_mine(self, config: Config) -> bool:
        """True when this technique proposed ``config`` and has not been told its result before."""
        return config in self._pending

    def is_new(self, config: Config) -> bool:
        """True when this technique neither knows a result for ``config`` nor waits for one."""
        return config not in self._known and config not in self._pending

    def valid(self, config: Mapping[str, Any]) -> Config:
        """``config`` if valid, else a repaired or freshly sampled valid configuration.

        A plain mapping (a plug-in's ``_propose`` may return a dict) comes back as a :class:`Config`.
        """
        space = self.space
        if type(config) is not Config:
            config = Config(config)
        if space.is_valid(config):
            return config
        repaired = space.repair(config, self.rng)
        if repaired is not None and space.is_valid(repaired):
            return repaired
        return space.sample(self.rng, 1)[0]

    def from_vector(self, vec: np.ndarray) -> Config:
        """Decode a point of the unit cube into a valid configuration."""
        return self.valid(self.space.decode(np.clip(vec, 0.0, 1.0)))

    def start_config(self) -> Config:
        """A starting point: the best known, else the default if valid, else a random sample."""
        if self.best_config is not None:
            return self.best_config
        default = self.space.default()
        if self.space.is_valid(default):
            return default
        return self.space.sample(self.rng, 1)[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, settings={self.settings})"


def check_settings(name: str, condition: bool, what: str) -> None:
    """Raise a one-line PerftuneError when a settings value is out of range."""
    if not condition:
        raise PerftuneError(f"{name}: {what}")


def enumerate_within(space: Any, limit: int) -> tuple[list[Config] | None, int]:
    """Every valid configuration of ``space`` if there are at most ``limit`` of them (else None), and how
    many were enumerated to find out: 0 when ``limit`` is not positive or the space's size bound (the
    product of its domains) is above ``10 * limit``, so that huge spaces are never walked.

    Example:
        >>> from perftune.space import Int, Space
        >>> configs, n = enumerate_within(Space({"x": Int(0, 9)}), 100)
        >>> len(configs), n
        (10, 10)
        >>> enumerate_within(Space({"x": Int(0, 9)}), 5)
        (None, 6)
    """
    size = space.cardinality()
    if limit <= 0 or size is None or size > 10 * limit:
        return None, 0
    configs = list(space.enumerate(limit=limit + 1))
    return (configs if len(configs) <= limit else None), len(configs)
