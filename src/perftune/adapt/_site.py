"""Adaptive sites: something to run on an input, its features, and the learned dispatcher in front.

* :class:`AdaptiveSite` wraps a choice site (:class:`perftune.choice.AlgorithmSite`): a landmark is
  a whole selector of the site (cutoffs and algorithms), installed for the top-level call, so the
  recursive calls underneath follow it.
* :class:`AdaptiveObjective` wraps ``run(config, input)`` over a :class:`perftune.space.Space`: a
  landmark is a configuration of the space.

Both register features with :meth:`feature`, are tuned by :func:`perftune.adapt.tune_inputs`, and
dispatch each call through the dispatcher file, read once at the first call (missing, stale or
corrupt: the default configuration, with one warning).

Example:
    >>> from perftune.space import Choice, Space
    >>> def run(config, xs):
    ...     return sorted(xs, reverse=config["order"] == "down")
    >>> site = AdaptiveObjective("doc-order", run, Space({"order": Choice(["up", "down"])}))
    >>> @site.feature(cost="cheap")
    ... def n(xs):
    ...     return len(xs)
    >>> site.columns
    ('n',)
    >>> site.use_dispatcher(site.constant_dispatcher({"order": "down"}))
    >>> site([1, 3, 2])
    [3, 2, 1]
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perftune.adapt._features import CHEAP, MEASURED, AdaptError, Feature
from perftune.adapt._file import _GENERATION, DispatchFileWarning, current_dispatch
from perftune.adapt._growth import GrowthCheck
from perftune.adapt._model import Model, TreeModel, model_from_dict

__all__ = ["AdaptiveObjective", "AdaptiveSite", "Dispatcher"]


class Dispatcher:
    """A loaded dispatcher: columns (feature functions), a model, and the landmarks it picks among.

    Attributes:
        columns: Column names, ``feature`` or ``feature@level``.
        model: The tree, forest or centroid model; its leaves are landmark indices.
        landmarks: The landmarks, in the form the site runs them (Levels, Config).
        trained: Statistics of the training run (plain data, informative only).
        growth: The asymptotic check (:class:`GrowthCheck`) applied to inputs larger than the training
            inputs, or None.
        size: The size of an input, for ``growth`` (None: no check).
    """

    __slots__ = ("_fns", "_warned", "columns", "growth", "landmarks", "model", "size", "trained")

    def __init__(
        self,
        columns: Sequence[str],
        functions: Sequence[Callable[[Any], float]],
        model: Model,
        landmarks: Sequence[Any],
        trained: Mapping[str, Any] | None = None,
        *,
        growth: GrowthCheck | None = None,
        size: Callable[[Any], float | None] | None = None,
    ) -> None:
        self.columns = tuple(columns)
        self._fns = list(functions)
        self.model = model
        self.landmarks = list(landmarks)
        self.trained = dict(trained or {})
        self.growth = growth
        self.size = size
        self._warned = False

    def choose(self, x: Any) -> int:
        """The landmark index for input ``x``; only the features the model reads are computed.

        A feature value that is not finite (NaN, infinite) is out of distribution: the model's robust
        landmark (``fallback``) is chosen when it has one, else :class:`AdaptError` (calls of the site
        run the default configuration then); one warning per dispatcher.
        """
        k = self._pick(x)
        if k is None:
            raise AdaptError("input has a non-finite feature value and the model has no robust landmark")
        return k

    def landmark(self, x: Any) -> Any | None:
        """The landmark input ``x`` runs with (None: the default configuration, see :meth:`choose`)."""
        k = self._pick(x)
        return None if k is None else self.landmarks[k]

    def _pick(self, x: Any) -> int | None:
        fns = self._fns
        cache: dict[int, float] = {}

        def value(column: int) -> float:
            v = cache.get(column)
            if v is None:
                v = cache[column] = fns[column](x)
                if not math.isfinite(v):
                    raise _NonFinite(column, v)
            return v

        try:
            k = self.model.choose(value)
        except _NonFinite as e:
            fallback = getattr(self.model, "fallback", None)
            if not self._warned:
                self._warned = True
                what = f"landmark {fallback}" if fallback is not None else "the default configuration"
                warnings.warn(f"feature {self.columns[e.column]!r} is {e.value!r} on an input: not in the "
                              f"training distribution; running {what} (warned once)", RuntimeWarning,
                              stacklevel=4)
            return fallback if isinstance(fallback, int) else None
        if self.growth is not None and self.size is not None:
            size = self.size(x)
            if size is not None and math.isfinite(size):
                k = self.growth.adjust(k, float(size))
        return k

    def visited(self, x: Any) -> list[str]:
        """Names of the columns computed to dispatch ``x``."""
        values: dict[int, float] = {}

        def value(column: int) -> float:
            if column not in values:
                values[column] = self._fns[column](x)
            return values[column]

        return [self.columns[c] for c in self.model.visited(value)]


class _NonFinite(Exception):
    """A feature value read at dispatch is not finite (internal: the dispatcher falls back)."""

    def __init__(self, column: int, value: float) -> None:
        self.column, self.value = column, value


class _Adaptive:
    """What every adaptive target shares: features, the fingerprint, loading and dispatching."""

    target_kind = "base"
    #: Whether tune_inputs may stop a hopeless in-process run by a timer signal (not for subprocesses,
    #: which keep their own timeouts).
    stoppable = True

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise AdaptError(f"an adaptive site needs a non-empty string name, got {name!r}")
        self.name = name
        self._features: dict[str, Feature] = {}
        #: (generation, dispatcher), replaced as one tuple under ``_lock`` (read without it).
        self._state: tuple[int, Dispatcher | None] = (-1, None)
        self._pinned = False
        self._lock = threading.RLock()
        self.source = "unresolved"

    # ---- features ------------------------------------------------------------------------------

    def feature(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        cost: str = MEASURED,
        levels: Sequence[int] = (),
    ) -> Any:
        """Register a feature; usable as ``@site.feature`` or ``@site.feature(cost="cheap", levels=...)``.

        Args:
            fn: ``fn(input) -> number``, or ``fn(input, level)`` when ``levels`` are given.
            name: Column name (default: the function's name).
            cost: ``"cheap"`` (free) or ``"measured"`` (timed on every training input, default).
            levels: Sampling levels; each becomes a column ``name@level`` the learner may pick.
        """

        def add(f: Callable[..., Any]) -> Callable[..., Any]:
            feature = Feature(name or str(getattr(f, "__name__", "")), f, cost=cost, levels=tuple(levels))
            if feature.name in self._features:
                raise AdaptError(f"site {self.name!r}: feature {feature.name!r} registered twice")
            self._features[feature.name] = feature
            with self._lock:  # resolved again at the next call: the file's entry may read this feature
                self._state = (-1, self._state[1])
            return f

        return add if fn is None else add(fn)

    @property
    def features(self) -> tuple[Feature, ...]:
        """Registered features, in registration order."""
        return tuple(self._features.values())

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column the learner may use."""
        return tuple(c for f in self._features.values() for c in f.columns)

    def column_functions(self) -> list[Callable[[Any], float]]:
        """One function per column, in the order of :attr:`columns`."""
        return [fn for f in self._features.values() for fn in f.column_functions()]

    def column_groups(self) -> list[list[int]]:
        """Per feature, the indices of its columns (its sampling levels), in the order of :attr:`columns`."""
        out: list[list[int]] = []
        i = 0
        for f in self._features.values():
            out.append(list(range(i, i + len(f.columns))))
            i += len(f.columns)
        return out

    def column_resamplers(self) -> list[Callable[[Any, int], float] | None]:
        """Per column, ``f(input, offset)`` reading the same sampling level elsewhere, or None."""
        out: list[Callable[[Any, int], float] | None] = []
        for f in self._features.values():
            fns = f.resample_functions() if f.cost != CHEAP else None
            out.extend(fns if fns is not None else [None] * len(f.columns))
        return out

    def input_size(self, x: Any) -> float | None:
        """The size of input ``x`` for the asymptotic check (None: this target has no size)."""
        return None

    def cheap_columns(self) -> set[int]:
        """Indices of the columns whose feature is declared cheap (counted as free)."""
        return {c for f, columns in zip(self.features, self.column_groups(), strict=True) if f.cost == CHEAP
                for c in columns}

    def fingerprint(self) -> str:
        """Changes when the alternatives, the space or the features change (a dispatcher is then stale)."""
        doc = {
            "target": self.target_kind,
            "name": self.name,
            "domain": self._domain(),
            "features": [[f.name, f.cost, list(f.levels)] for f in self._features.values()],
        }
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    # ---- what subclasses say -------------------------------------------------------------------

    def _domain(self) -> Any:
        raise NotImplementedError

    def landmark_space(self, inputs: Sequence[Any]) -> Any:
        """The space a landmark is searched in, for these training inputs."""
        raise NotImplementedError

    def landmark_from_config(self, config: Any) -> Any:
        """The landmark a tuned configuration of :meth:`landmark_space` stands for."""
        raise NotImplementedError

    def seed_configs(self) -> list[dict[str, Any]]:
        """Configurations of :meth:`landmark_space` every landmark search tries first."""
        return []

    #: Whether :meth:`composed_seeds` can build anything (a choice site with more than one level).
    composes = False

    def composed_seeds(self, below: dict[str, Any], cutoff: int) -> list[dict[str, Any]]:
        """Seeds of two levels: the seed ``below`` for sizes under ``cutoff``, each other seed above.

        A recursive algorithm may be slow alone and fast with another one on its small sub-problems
        (a radix sort whose small buckets go to insertion sort); a search of a few trials started from
        the seeds alone rarely finds that combination.
        """
        return []

    def search_landmark(
        self, inputs: Sequence[Any], budget: Any, seeds: Sequence[Mapping[str, Any]], seed: int
    ) -> tuple[dict[str, Any], int] | None:
        """``(best configuration, configurations measured)`` of a search of this target's own for the
        landmark of a cluster whose representatives are ``inputs`` (largest first), or None: then
        :func:`tune_inputs` runs :func:`perftune.tune` over :meth:`measure` on them."""
        return None

    def landmark_to_json(self, landmark: Any) -> Any:
        raise NotImplementedError

    def landmark_from_json(self, doc: Any) -> Any:
        """Parse a stored landmark; raises :class:`AdaptError` when this site cannot run it."""
        raise NotImplementedError

    def run_default(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def run_with(self, landmark: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one call with ``landmark``."""
        raise NotImplementedError

    #: Whether :func:`tune_inputs` may time runs with a clock of its choice (False: the target has its own).
    clock_choice = True
    #: What runs without a dispatcher, as the fallback warning says it.
    fallback = "running the default configuration"

    def measure(
        self, landmark: Any, x: Any, timer: Callable[[], float] = time.perf_counter
    ) -> tuple[float, Any]:
        """``(seconds, output)`` of one run with ``landmark`` on ``x``, timed by ``timer``."""
        t0 = timer()
        out = self.run_with(landmark, x)
        return timer() - t0, out

    # ---- dispatcher ----------------------------------------------------------------------------

    def dispatcher_from_entry(self, entry: Mapping[str, Any]) -> Dispatcher:
        """Build a dispatcher from a file entry; raises :class:`AdaptError` if it is stale or malformed."""
        if entry.get("target") != self.target_kind:
            raise AdaptError(
                f"dispatcher {self.name!r} is for a {entry.get('target')!r}, not a {self.target_kind}"
            )
        if entry.get("fingerprint") != self.fingerprint():
            raise AdaptError(
                f"dispatcher {self.name!r} is stale (the site's alternatives, space or features changed "
                "since it was tuned)"
            )
        columns = list(entry["columns"])
        if columns != list(self.columns):
            raise AdaptError(
                f"dispatcher {self.name!r} is stale: columns {columns} are not {list(self.columns)}"
            )
        landmarks = [self.landmark_from_json(d) for d in entry["landmarks"]]
        model = model_from_dict(entry["model"], len(columns), len(landmarks))
        trained = entry.get("trained", {})
        trained = trained if isinstance(trained, dict) else {}
        # A file written before the asymptotic check has no "growth": it dispatches as it did.
        growth = entry.get("growth")
        check = None if growth is None else GrowthCheck.from_dict(growth, len(landmarks))
        return Dispatcher(columns, self.column_functions(), model, landmarks, trained, growth=check,
                          size=self.input_size if check is not None else None)

    def constant_dispatcher(self, landmark: Any) -> Dispatcher:
        """A dispatcher that runs ``landmark`` on every input (computes no feature)."""
        if isinstance(landmark, dict):
            landmark = self.landmark_from_json(landmark)
        return Dispatcher(self.columns, self.column_functions(), TreeModel.constant(0), [landmark])

    def resolve(self) -> None:
        """Load this site's dispatcher from the process's dispatcher file, or fall back to the default."""
        self._resolve(force=True)

    def _resolve(self, *, force: bool = False) -> Dispatcher | None:
        """The dispatcher for the current generation, built once under this site's lock.

        It is built in a local and published with the generation as one tuple, so that a thread that
        reads the tuple sees a dispatcher and its generation together, and only the thread that builds
        it warns. A dispatcher installed by :meth:`use_dispatcher` is kept unless the file in use has an
        entry of this site's name.
        """
        with self._lock:
            generation = _GENERATION[0]
            state = self._state
            if state[0] == generation and not force:
                return state[1]
            loaded = current_dispatch()
            entry = loaded.dispatchers.get(self.name)
            unusable = loaded.unusable.get(self.name)
            if self._pinned and entry is None and unusable is None:
                self._state = (generation, state[1])
                return state[1]
            dispatcher: Dispatcher | None = None
            source = "default"
            if entry is not None:
                try:
                    dispatcher = self.dispatcher_from_entry(entry)
                    source = "file"
                except AdaptError as e:
                    if loaded.strict:
                        raise AdaptError(f"{loaded.source}: {_capped(str(e))}") from None
                    warnings.warn(f"{loaded.source}: {_capped(str(e))}; {self.fallback}",
                                  DispatchFileWarning, stacklevel=4)
            elif unusable is not None:
                warnings.warn(f"{_capped(unusable[1])}; {self.fallback}", DispatchFileWarning, stacklevel=4)
            elif loaded.source is not None:
                # The file was read (a missing or corrupt file has warned already): it lacks this site.
                warnings.warn(
                    f"{loaded.source}: no dispatcher for site {self.name!r}; {self.fallback}",
                    DispatchFileWarning,
                    stacklevel=4,
                )
            self._pinned = False
            self.source = source
            self._state = (generation, dispatcher)
            return dispatcher

    def use_dispatcher(self, dispatcher: Dispatcher | None) -> None:
        """Install ``dispatcher`` in this process (None: the default configuration), without a file.

        It stays across saves and loads of dispatcher files that have no entry of this site's name.
        """
        with self._lock:
            self._pinned = True
            self.source = "set" if dispatcher is not None else "default"
            self._state = (_GENERATION[0], dispatcher)

    @property
    def dispatcher(self) -> Dispatcher | None:
        """The dispatcher in use (None: the default configuration runs)."""
        generation, d = self._state
        return d if generation == _GENERATION[0] else self._resolve()

    def landmark_for(self, x: Any) -> Any | None:
        """The landmark that input ``x`` runs with, or None for the default configuration."""
        d = self.dispatcher
        return None if d is None else d.landmark(x)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        generation, d = self._state
        if generation != _GENERATION[0]:
            d = self._resolve()
        landmark = None if d is None else d.landmark(args[0])
        if landmark is None:
            return self.run_default(*args, **kwargs)
        return self.run_with(landmark, *args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        # A pickled site (sent to a worker process) re-resolves there from the dispatcher file; a
        # dispatcher installed with use_dispatcher goes with it. The lock does not travel.
        state = dict(self.__dict__)
        state.pop("_lock", None)
        if not state.get("_pinned"):
            state["_state"] = (-1, None)
            state["source"] = "unresolved"
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()
        if self._pinned:
            self._state = (_GENERATION[0], self._state[1])


def _capped(text: str, limit: int = 400) -> str:
    """``text`` cut to ``limit`` characters (a landmark in a hostile file may be megabytes)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class AdaptiveSite(_Adaptive):
    """A choice site whose selector is picked per input by a learned dispatcher.

    Args:
        site: The :class:`perftune.choice.AlgorithmSite`; its own calls (recursive ones) go on
            through it, with the landmark selector installed for the duration of the top-level call.
        size: The input's size, for the landmark search's cutoff range (None: the wrapped site's
            ``size``, itself ``len`` by default).
        max_levels: Most levels of a landmark selector.

    Example:
        >>> from perftune.choice import AlgorithmSite
        >>> inner = AlgorithmSite("doc-adaptive", {"up": sorted, "down": lambda xs: sorted(xs)[::-1]})
        >>> site = AdaptiveSite(inner)
        >>> site.use_dispatcher(site.constant_dispatcher({"cutoffs": [], "choices": ["down"]}))
        >>> site([1, 2])
        [2, 1]
    """

    target_kind = "site"

    def __init__(self, site: Any, *, size: Callable[[Any], int] | None = None, max_levels: int = 3) -> None:
        if not (hasattr(site, "alternatives") and hasattr(site, "use") and hasattr(site, "selector")):
            raise AdaptError(f"AdaptiveSite needs a perftune.choice.AlgorithmSite, got {site!r}")
        if isinstance(max_levels, bool) or not isinstance(max_levels, int) or max_levels < 1:
            raise AdaptError(f"site {site.name!r}: max_levels must be a positive integer, got {max_levels!r}")
        super().__init__(site.name)
        self.site = site
        # The wrapped site's own size (AlgorithmSite(size=...)) unless one is given here.
        self._size: Callable[[Any], int] = size or getattr(site, "_size", None) or len
        self.max_levels = max_levels

    def _domain(self) -> Any:
        return list(self.site.alternatives)

    def input_size(self, x: Any) -> float | None:
        return float(self._size(x))

    def landmark_space(self, inputs: Sequence[Any]) -> Any:
        from perftune.space import Space

        lo, hi = self.site.size_range
        largest = max(self._size(x) for x in inputs)
        top = max(lo + 1, min(hi, largest + 1))
        return Space({self.name: self.site.selector(max_levels=self.max_levels, size_range=(lo, top))})

    def seed_configs(self) -> list[dict[str, Any]]:
        from perftune.space import Levels

        return [{self.name: Levels((), (alt,))} for alt in self.site.alternatives]

    @property
    def composes(self) -> bool:  # type: ignore[override]
        return self.max_levels >= 2 and len(self.site.alternatives) >= 2

    def composed_seeds(self, below: dict[str, Any], cutoff: int) -> list[dict[str, Any]]:
        from perftune.space import Levels

        lv = below.get(self.name)
        lo, _ = self.site.size_range
        if not self.composes or lv is None or len(lv.choices) != 1 or cutoff <= lo + 1:
            return []
        small = lv.choices[0]
        return [{self.name: Levels((int(cutoff),), (small, alt))}
                for alt in self.site.alternatives if alt != small]

    def landmark_from_config(self, config: Any) -> Any:
        from perftune.space import Levels
        from perftune.targets.choice import simplify_levels

        lv = config[self.name]
        return Levels(*simplify_levels(lv.cutoffs, lv.choices))

    def landmark_to_json(self, landmark: Any) -> Any:
        return {"cutoffs": list(landmark.cutoffs), "choices": list(landmark.choices)}

    def landmark_from_json(self, doc: Any) -> Any:
        from perftune.errors import SpaceError
        from perftune.space import Levels

        try:
            lv = Levels.from_json(doc)
        except SpaceError as e:
            raise AdaptError(f"site {self.name!r}: bad landmark: {e}") from None
        unknown = [c for c in lv.choices if c not in self.site.alternatives]
        if unknown:
            raise AdaptError(f"site {self.name!r}: landmark names unknown alternatives {unknown}")
        return lv

    def run_default(self, *args: Any, **kwargs: Any) -> Any:
        return self.site(*args, **kwargs)

    def run_with(self, landmark: Any, *args: Any, **kwargs: Any) -> Any:
        with self.site.use(landmark):
            return self.site(*args, **kwargs)

    def __repr__(self) -> str:
        return f"AdaptiveSite({self.name!r}, features={list(self.columns)}, {self.source})"


class AdaptiveObjective(_Adaptive):
    """``run(config, input, ...)`` over a space, with the configuration picked per input.

    Args:
        name: The key of the dispatcher in the dispatcher file.
        run: ``run(config, input, *args, **kwargs)``; its result is returned to the caller.
        space: The :class:`perftune.space.Space` of configurations.
        default: The configuration run when there is no dispatcher (default: ``space.default()``).
        size: ``size(input) -> number``, the input's size for the landmark search's representatives and
            the asymptotic check (None: neither; the inputs are then told apart by their features only).

    Example:
        >>> from perftune.space import Int, Space
        >>> power = AdaptiveObjective("doc-pow", lambda c, x: x ** c["k"], Space({"k": Int(1, 3, default=2)}))
        >>> power.use_dispatcher(None)
        >>> power(3)
        9
    """

    target_kind = "objective"

    def __init__(
        self,
        name: str,
        run: Callable[..., Any],
        space: Any,
        *,
        default: Mapping[str, Any] | None = None,
        size: Callable[[Any], float] | None = None,
    ) -> None:
        super().__init__(name)
        if size is not None and not callable(size):
            raise AdaptError(f"site {name!r}: size must be callable, got {size!r}")
        self._size_fn = size
        if not callable(run):
            raise AdaptError(f"site {name!r}: run must be callable, got {run!r}")
        if not (hasattr(space, "is_valid") and hasattr(space, "params")):
            raise AdaptError(f"site {name!r}: space must be a perftune.space.Space, got {space!r}")
        self.run = run
        self.space = space
        self.default = self.landmark_from_json(self.landmark_to_json(default)) if default else space.default()

    def _domain(self) -> Any:
        return self.space.fingerprint()

    def input_size(self, x: Any) -> float | None:
        return None if self._size_fn is None else float(self._size_fn(x))

    def landmark_space(self, inputs: Sequence[Any]) -> Any:
        return self.space

    def seed_configs(self) -> list[dict[str, Any]]:
        return [dict(self.default)]

    def landmark_from_config(self, config: Any) -> Any:
        return config

    def landmark_to_json(self, landmark: Any) -> Any:
        out: dict[str, Any] = {}
        for k, v in dict(landmark).items():
            if hasattr(v, "cutoffs") and hasattr(v, "choices"):
                v = {"cutoffs": list(v.cutoffs), "choices": list(v.choices)}
            elif isinstance(v, tuple):
                v = list(v)
            elif hasattr(v, "item"):
                v = v.item()
            out[k] = v
        return out

    def landmark_from_json(self, doc: Any) -> Any:
        from perftune.errors import SpaceError
        from perftune.space import Config, Levels, Selector

        if not isinstance(doc, dict):
            raise AdaptError(f"site {self.name!r}: a landmark must be an object, got {doc!r}")
        values = dict(doc)
        try:
            for k, param in self.space.params.items():
                if isinstance(param, Selector) and k in values:
                    values[k] = Levels.from_json(values[k])
            config = Config(values)
        except (SpaceError, TypeError) as e:
            raise AdaptError(f"site {self.name!r}: bad landmark {doc!r}: {e}") from None
        why = self.space.why_invalid(config)
        if why is not None:
            raise AdaptError(f"site {self.name!r}: landmark {doc!r} is not valid in the space: {why}")
        return config

    def run_default(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(self.default, *args, **kwargs)

    def run_with(self, landmark: Any, *args: Any, **kwargs: Any) -> Any:
        return self.run(landmark, *args, **kwargs)

    def config_for(self, x: Any) -> Any:
        """The configuration input ``x`` runs with (the default when there is no dispatcher)."""
        lm = self.landmark_for(x)
        return self.default if lm is None else lm

    def __repr__(self) -> str:
        return f"AdaptiveObjective({self.name!r}, features={list(self.columns)}, {self.source})"
