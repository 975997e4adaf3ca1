"""``perftune.triton.autotune``: a drop-in for ``triton.autotune`` that searches instead of sweeping.

From the caller's side it behaves like Triton's decorator: ``kernel[grid](*args)`` launches as before
(grids may be lambdas over META), the ``key=`` arguments (and the dtypes of the tensor arguments)
select a tuning, and ``kernel.best_config`` is the chosen ``triton.Config`` after the first call for a
key. Behind it, perftune's Tuner proposes which configurations to measure, workers compile the next
candidates in parallel while a benchmark process measures one at a time, the leaders are compared
interleaved at the end, and every outcome lands in a persistent cache and in the store.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import inspect
import itertools
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from perftune.drive import Budget, Tuner
from perftune.errors import PerftuneError
from perftune.measure import Decision, TimingSettings, compare, measure_adaptively
from perftune.space import Space
from perftune.targets.triton._bench import (
    BenchFailure,
    BenchProcess,
    InProcessBench,
    KernelRef,
    SetupFailure,
    child_env,
    compile_config,
    n_compile_workers,
    picklable,
)
from perftune.targets.triton._cache import CacheEntry, KernelCache, TuningKey
from perftune.targets.triton._space import (
    LAUNCH_OPTIONS,
    config_id,
    space_from_configs,
    to_triton_config,
    triton_config_dict,
)
from perftune.trial import Status

__all__ = ["Autotuner", "TuningReport", "autotune"]

#: Leaders compared interleaved at the end of a search: the :data:`N_LEADERS` fastest, and any other
#: configuration whose median is within :data:`LEADER_MARGIN` of the fastest, up to :data:`MAX_LEADERS`;
#: and the rounds of that comparison. Short kernels (about 10 µs) moved by up to 14% between the search's
#: timing and an interleaved one on the H200 (benchmarks/results/gpu-matmul.md), so a search whose three
#: leaders missed the true best by a few percent could not recover it.
N_LEADERS = 3
MAX_LEADERS = 8
LEADER_MARGIN = 0.05
N_FINAL_ROUNDS = 12
#: Share of a large list (or space) measured without ``budget=``. Replayed on the H200 matmul timings
#: (benchmarks/results/gpu-matmul-replay.md), 15% reached 0.98x of the exhaustive best in 59 of 60 runs
#: against 54 of 60 at 10%, where only 4-5 of 926 configurations lie within 2% of the best.
DEFAULT_SHARE = 0.15


#: Numbers the tunings of this process (their store runs' names must differ).
_RUN_NUMBERS = itertools.count(1)


def default_budget(n_configs: int) -> Budget:
    """The evaluations measured without ``budget=``: all of up to 16 configurations, else
    :data:`DEFAULT_SHARE` of them (at least 16).

    Example:
        >>> default_budget(926).evals, default_budget(12).evals, default_budget(40).evals
        (139, 12, 16)
    """
    return Budget(evals=n_configs if n_configs <= 16 else max(16, math.ceil(DEFAULT_SHARE * n_configs)))
_TIMING = TimingSettings(
    min_runs=3, max_runs=12, warmup_runs=1, tie=0.01, confidence=0.95, first_runs=8, futility_confidence=0.8
)


@dataclass
class TuningReport:
    """What tuning one key did.

    Attributes:
        key: The key values by name (plus ``dtypes``).
        best: The chosen configuration (meta-parameters and launch options).
        best_ms: Its time per launch (median of the final interleaved rounds), ms.
        n_candidates: Configurations in the space (None when too many to count).
        n_measured: Configurations measured in this process (0 when the cache answered).
        failures: ``(config, status, reason)`` of every configuration that failed.
        wall_s: Wall time of the tuning, s.
        from_cache: True when the persistent cache answered without measuring.
        run_name: The run in the store (None without a store).
        times_ms: Median time of each configuration that ran correctly, by config id.
        isolated: Whether the candidates ran in a benchmark process of their own.

    Example:
        >>> report = TuningReport({"n": 4096, "dtypes": ["torch.float32"]}, {"BLOCK": 128}, 0.05, 12, 4)
        >>> report.from_cache, report.n_measured, report.failures
        (False, 4, [])
    """

    key: dict[str, Any]
    best: dict[str, Any]
    best_ms: float | None
    n_candidates: int | None
    n_measured: int
    failures: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)
    wall_s: float = 0.0
    compile_s: float = 0.0
    from_cache: bool = False
    run_name: str | None = None
    times_ms: dict[str, float] = field(default_factory=dict)
    isolated: bool = False


def _wrapped(fn: Any) -> Iterator[Any]:
    """``fn``, then each function it wraps (``triton.heuristics``, an Autotuner: ``.fn``), down to the
    Python function (at most 16 deep)."""
    obj = fn
    for _ in range(16):
        if obj is None:
            return
        yield obj
        if inspect.isfunction(obj):
            return
        obj = getattr(obj, "_perftune_inner", None) or getattr(obj, "fn", None)


def _kernel_hash(fn: Any) -> str:
    """The kernel's identity in the persistent cache: the JITFunction's ``cache_key`` (its source and every
    ``@triton.jit`` function and global it depends on), found under wrappers such as ``triton.heuristics``;
    for a function without one (Triton's interpreter), a hash of its source."""
    for obj in _wrapped(fn):
        try:
            return str(obj.cache_key)
        except Exception:  # noqa: BLE001 - not a JITFunction (a wrapper, the interpreter's function)
            continue
    base = fn
    while not inspect.isfunction(base):
        base = base.fn
    return hashlib.sha256(inspect.getsource(base).encode()).hexdigest()


def _base_function(fn: Any) -> Any:
    base = fn
    while not inspect.isfunction(base):
        base = getattr(base, "fn", None)
        if base is None:
            raise PerftuneError(f"autotune: expected a @triton.jit function, got {type(fn).__name__}")
    return base


def _interpreted(fn: Any) -> bool:
    """Whether ``fn`` (or the Triton function it wraps) is Triton's interpreter's.

    Decided by the kernel, not by ``TRITON_INTERPRET`` now: Triton reads the variable when a kernel is
    decorated, and it may have changed since.
    """
    for obj in _wrapped(fn):
        kind = type(obj).__name__
        if kind == "InterpretedFunction":
            return True
        if kind == "JITFunction":
            return False
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class Autotuner:
    """The object ``@perftune.triton.autotune(...)`` puts in place of the kernel.

    Launch it as the kernel itself (``kernel[grid](*args)``); see :func:`autotune` for the arguments.

    Attributes:
        best_config: The ``triton.Config`` chosen for the last key launched (None before).
        cache: Chosen configuration per key tuple (the key values, then the tensor dtypes).
        reports: The :class:`TuningReport` of each key tuned or loaded in this process.

    Example:
        >>> from perftune.examples.gpu.triton_matmul import tuned_matmul  # an Autotuner
        >>> tuned_matmul.best_config is None, tuned_matmul.keys, len(tuned_matmul.configs) >= 500
        (True, ['M', 'N', 'K'], True)
    """

    def __init__(
        self,
        fn: Any,
        *,
        configs: Sequence[Any] | None,
        space: Space | None,
        key: Sequence[str],
        prune_configs_by: Mapping[str, Any] | None,
        reset_to_zero: Sequence[str] | None,
        restore_value: Sequence[str] | None,
        pre_hook: Callable[..., Any] | None,
        post_hook: Callable[..., Any] | None,
        budget: Budget | int | str | None,
        seed: int,
        reference: Callable[..., Any] | None,
        tolerance: float | None,
        cache_dir: str | os.PathLike[str] | None,
        store: Any,
        compile_workers: int | None,
        timeout_s: float,
        isolate: bool | None,
    ) -> None:
        self.fn = fn
        self._perftune_inner = fn  # how a benchmark child finds the Triton function behind this wrapper
        self.base_fn = _base_function(fn)
        self.kernel_name = self.base_fn.__name__
        self.arg_names: list[str] = list(getattr(fn, "arg_names", inspect.signature(self.base_fn).parameters))
        where = f"autotune({self.kernel_name})"
        if (configs is None) == (space is None):
            raise PerftuneError(f"{where}: give either configs=[triton.Config(...)] or space=Space(...)")
        if isinstance(key, str) or not all(isinstance(k, str) for k in key):
            raise PerftuneError(f"{where}: key must be a list of argument names, like key=['n_elements'], "
                                f"got {key!r}")
        for i, c in enumerate(configs or []):
            if not callable(getattr(c, "all_kwargs", None)):
                raise PerftuneError(f"{where}: configs[{i}] is a {type(c).__name__}, not a triton.Config: "
                                    f"write triton.Config({c!r})"[:300])
        for name in key:
            if name not in self.arg_names:
                raise PerftuneError(
                    f"{where}: key {name!r} is not an argument of the kernel "
                    f"(arguments: {', '.join(self.arg_names)})"
                )
        for name in list(reset_to_zero or []) + list(restore_value or []):
            if name not in self.arg_names:
                raise PerftuneError(f"{where}: {name!r} in reset_to_zero/restore_value is not an argument")
        if space is not None:
            if not isinstance(space, Space):
                raise PerftuneError(
                    f"{where}: space must be a perftune.space.Space, got {type(space).__name__}"
                )
            for name in space.params:
                if name not in self.arg_names and name not in LAUNCH_OPTIONS:
                    raise PerftuneError(
                        f"{where}: space parameter {name!r} is neither an argument of the kernel nor one of "
                        f"{', '.join(LAUNCH_OPTIONS)}"
                    )
        self.configs = list(configs) if configs is not None else None
        if self.configs is not None:
            tuned = space_from_configs(self.configs, where)  # refuse a bad list now, not at the first launch
            #: Names the tuning sets (meta-parameters and launch options): never passed at the call site.
            self.tuned_names = {n for c in self.configs for n in c.all_kwargs()} | set(tuned.names)
        else:
            assert space is not None
            self.tuned_names = set(space.names)
        self.user_space = space
        self.keys = list(key)
        self.prune_configs_by = dict(prune_configs_by or {})
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.budget = Budget.coerce(budget)
        self.seed = seed
        self.reference = reference
        self.tolerance = tolerance
        self.kernel_cache = KernelCache(cache_dir)
        self.store = store
        self.compile_workers = compile_workers
        self.timeout_s = timeout_s
        self.isolate = isolate
        self.cache: dict[tuple[Any, ...], Any] = {}
        self.reports: dict[tuple[Any, ...], TuningReport] = {}
        self.best_config: Any = None
        #: The configuration a chooser (:meth:`choose_with`) picked per key, instead of tuning it.
        self.chosen: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._chooser: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None
        self._hash: str | None = None
        self.__name__ = self.kernel_name
        self.__doc__ = self.base_fn.__doc__

    # ------------------------------------------------------------------ the caller's side

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        """Launch with the configuration of this key, tuning it first if no cache knows it."""
        conflicts = sorted(set(kwargs) & self.tuned_names)
        if conflicts:
            them = "it" if len(conflicts) == 1 else "them"
            raise PerftuneError(f"autotune({self.kernel_name}): {', '.join(conflicts)} passed at the launch, "
                                f"but tuned: leave {them} to the configurations")
        named = dict(zip(self.arg_names, args, strict=False))
        all_args = {**named, **kwargs}
        key = self._key(all_args)
        config = self.cache.get(key)
        if config is None and self.configs is not None and len(self.configs) == 1 and self.reference is None:
            config = self.cache[key] = self.configs[0]  # nothing to choose between: launched, as Triton does
        if config is None and self._chooser is not None:
            values = self._chooser(all_args)
            # A configuration early_config_prune rules out for these arguments is not run: tune instead.
            if values is not None and self.allows(values, named, kwargs):
                self.chosen[key] = dict(values)
                config = self.cache[key] = self._config_of(values)
        if config is None:
            report = self._tune(args, kwargs, grid, all_args)
            self.reports[key] = report
            config = self.cache[key] = self._config_of(report.best)
        self.best_config = config
        meta = config.all_kwargs()
        if config.pre_hook is not None:
            config.pre_hook({**all_args, **meta})
        return self.fn.run(*args, grid=grid, warmup=warmup, **kwargs, **meta)

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> list[Any]:
        """Compile every candidate configuration of a config list for these arguments (no launch)."""
        if self.configs is None:
            raise PerftuneError(f"autotune({self.kernel_name}): warmup() compiles a configs= list; a space= "
                                "kernel compiles its candidates while it tunes")
        return [
            self.fn.warmup(*args, grid=grid, **kwargs, **c.all_kwargs())
            for c in self._candidates(dict(zip(self.arg_names, args, strict=False)), kwargs)
        ]

    def choose_with(self, chooser: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None) -> None:
        """Let ``chooser(arguments) -> configuration or None`` pick the configuration of a key not yet in
        :attr:`cache`, instead of tuning it (None from the chooser: tune as usual).

        ``arguments`` maps the kernel's argument names to the launch's values; the configuration is a
        dict of meta-parameters and launch options (as :func:`triton_config_dict` gives). This is how a
        learned per-input dispatcher (``perftune.adapt.TritonSite``) runs a landmark for a new shape in
        microseconds. ``chooser=None`` removes it (keys chosen so far stay in :attr:`cache`).
        """
        if chooser is not None and not callable(chooser):
            raise PerftuneError(f"autotune({self.kernel_name}): choose_with needs a callable or None, "
                                f"got {type(chooser).__name__}")
        self._chooser = chooser

    @property
    def source_hash(self) -> str:
        """Changes when the kernel's source (or a global it depends on) changes."""
        if self._hash is None:
            self._hash = _kernel_hash(self.fn)
        return self._hash

    def allows(self, config: Mapping[str, Any], named: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
        """Whether ``early_config_prune`` keeps ``config`` for a launch with these arguments (True
        without one): a chosen configuration must be one the kernel may run on them."""
        early = self.prune_configs_by.get("early_config_prune")
        if early is None or self.configs is None:
            return True
        wanted = dict(config)
        # The whole list goes in: a prune may answer differently for a list of one (Triton's fall back to
        # the first configuration when none is kept, say).
        return any(triton_config_dict(c) == wanted for c in early(self.configs, dict(named), **kwargs))

    def space(self) -> Space:
        """The configurations this kernel is tuned over: its ``configs`` list as a Space, or ``space=``."""
        if self.configs is not None:
            return space_from_configs(self.configs, f"autotune({self.kernel_name})")
        assert self.user_space is not None
        return self.user_space

    def benchmark(self, *args: Any, grid: Any, **kwargs: Any) -> KernelBench:
        """A benchmark of chosen configurations on these arguments, measured as tuning measures them.

        The same benchmark process as a tuning (isolated when the kernel is importable, see
        ``isolate=``), the same correctness check against ``reference=`` (default: the first
        configuration that runs), the same timing. Close it (or use it as a context manager) when done.
        """
        named = dict(zip(self.arg_names, args, strict=False))
        all_args = {**named, **kwargs}
        tkey = self._tuning_key(all_args)
        return KernelBench(_Session(self, tkey, args, kwargs, grid, all_args, self.space()))

    @property
    def last_report(self) -> TuningReport | None:
        """The report of the key launched last."""
        for key, config in self.cache.items():
            if config is self.best_config:
                return self.reports.get(key)
        return None

    def _key(self, all_args: Mapping[str, Any]) -> tuple[Any, ...]:
        values = [all_args[k] for k in self.keys if k in all_args]
        dtypes = [str(a.dtype) for n, a in all_args.items() if n in self.arg_names and hasattr(a, "dtype")]
        return (*values, *dtypes)

    def _config_of(self, values: Mapping[str, Any]) -> Any:
        for c in self.configs or ():
            if triton_config_dict(c) == dict(values):
                return c  # the user's own object, with its pre_hook
        return to_triton_config(values)

    def _candidates(self, named: Mapping[str, Any], kwargs: Mapping[str, Any]) -> list[Any]:
        assert self.configs is not None
        pruned = self.configs
        early = self.prune_configs_by.get("early_config_prune")
        if early is not None:
            pruned = list(early(self.configs, dict(named), **kwargs))
            if not pruned:
                raise PerftuneError(f"autotune({self.kernel_name}): early_config_prune left no configuration")
        model = self.prune_configs_by.get("perf_model")
        if model is not None:
            top_k = self.prune_configs_by.get("top_k", 1.0)
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(self.configs) * top_k))
            if len(pruned) > top_k:
                est = [(model(**named, **kwargs, **c.all_kwargs()), i) for i, c in enumerate(pruned)]
                pruned = [pruned[i] for _, i in sorted(est)[:top_k]]
        return list(pruned)

    # ------------------------------------------------------------------ tuning

    def _tuning_key(self, all_args: Mapping[str, Any]) -> TuningKey:
        import triton

        if self._hash is None:
            self._hash = _kernel_hash(self.fn)
        dtypes = tuple(
            str(a.dtype) for n, a in all_args.items() if n in self.arg_names and hasattr(a, "dtype")
        )
        cuda = next((a for a in all_args.values() if getattr(a, "is_cuda", False)), None)
        if cuda is not None:
            import torch

            device = torch.cuda.get_device_name(cuda.device)
        else:
            device = "interpreter" if _interpreted(self.fn) else "cpu"
        key = {k: all_args[k] for k in self.keys if k in all_args}
        return TuningKey(self.kernel_name, self._hash, key, dtypes, device, triton.__version__)

    def _kernel_ref(self) -> KernelRef | None:
        """Where a spawned process finds this kernel, or None when it cannot (defined in a function)."""
        module = sys.modules.get(self.base_fn.__module__)
        if module is None:
            return None
        name = next((n for n, v in vars(module).items() if v is self or v is self.fn), None)
        if name is None:
            return None
        if self.base_fn.__module__ == "__main__" and not getattr(module, "__file__", None):
            return None  # an interactive session: nothing a child could import
        return KernelRef(self.base_fn.__module__, name, _interpreted(self.fn))

    def tune_for(
        self, *args: Any, grid: Any, budget: Budget | int | str | None = None, **kwargs: Any
    ) -> TuningReport:
        """Tune the key of these arguments as their first launch would (the persistent cache first),
        without launching the kernel for the caller and without adding the key to :attr:`cache`.

        ``budget`` (default: the kernel's ``budget=``) limits this search only.
        ``perftune.adapt.TritonSite`` tunes a landmark per shape cluster this way, on its largest launch.
        """
        named = dict(zip(self.arg_names, args, strict=False))
        return self._tune(args, kwargs, grid, {**named, **kwargs}, budget=Budget.coerce(budget))

    def _tune(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], grid: Any, all_args: Mapping[str, Any],
        budget: Budget | None = None,
    ) -> TuningReport:
        t_start = time.perf_counter()
        tkey = self._tuning_key(all_args)
        named = dict(zip(self.arg_names, args, strict=False))
        if self.configs is not None:
            candidates = self._candidates(named, kwargs)
            space = space_from_configs(candidates, f"autotune({self.kernel_name})")
            ids = [config_id(triton_config_dict(c)) for c in candidates]
            marker = None
            # This list searched with this budget: a later call with the same budget reuses the result; a
            # larger budget measures the configurations the smaller one left out.
            listed = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
            list_marker = f"list:{listed}:{budget if budget is not None else self.budget}"
        else:
            assert self.user_space is not None
            space = self.user_space
            ids = []
            marker = f"space:{space.fingerprint()}:{self.budget}"
            list_marker = ""
        entry = self.kernel_cache.load(tkey)
        report_key = {**tkey.key, "dtypes": list(tkey.dtypes)}
        if entry is not None and entry.best is not None:
            covered = (marker in entry.considered if marker
                       else set(ids) <= entry.considered or list_marker in entry.considered)
            times = entry.ok_times()
            if covered and (marker or entry.best in ids):
                best = entry.results[entry.best]["config"]
                return TuningReport(
                    report_key,
                    dict(best),
                    entry.results[entry.best].get("final_ms", times.get(entry.best)),
                    len(ids) or space.cardinality(),
                    0,
                    wall_s=time.perf_counter() - t_start,
                    from_cache=True,
                    times_ms={entry.best: times.get(entry.best, math.nan)},
                )
        session = _Session(self, tkey, args, kwargs, grid, all_args, space)
        session.budget = budget
        if self.configs is not None:
            session.listed = [triton_config_dict(c) for c in candidates]
        try:
            if (
                entry is not None
                and entry.best is not None
                and marker is None
                and entry.best in ids
                and entry.considered & set(ids)
            ):
                new = [c for c, i in zip(candidates, ids, strict=True) if i not in entry.considered]
                result = session.incremental(entry, [triton_config_dict(c) for c in new])
            else:
                result = session.search(entry)
        finally:
            session.close()
        with self.kernel_cache.update(tkey) as stored:
            for cid, record in session.records.items():
                stored.results[cid] = record
            # Only what was measured is considered; the list's marker says which budget searched it.
            stored.considered |= set(session.records) | {list_marker} if marker is None else {marker}
            stored.best = config_id(result)
        times = {cid: r["time_ms"] for cid, r in session.records.items() if r["status"] == "ok"}
        return TuningReport(
            report_key,
            dict(result),
            session.best_ms,
            len(ids) or space.cardinality(),
            session.n_measured,
            failures=session.failures,
            wall_s=time.perf_counter() - t_start,
            compile_s=session.compile_s,
            run_name=session.run_name,
            times_ms=times,
            isolated=session.isolated,
        )


class KernelBench:
    """Measures configurations of one kernel on one set of arguments (:meth:`Autotuner.benchmark`).

    ``measure(config)`` returns the median milliseconds, or raises :class:`PerftuneError` with the
    reason a configuration failed (a compile error, a wrong result, a crash, a timeout).

    Example:
        >>> from perftune.targets.triton import KernelBench
        >>> callable(KernelBench.measure), hasattr(KernelBench, "__enter__")  # kernel.benchmark() makes one
        (True, True)
    """

    def __init__(self, session: _Session) -> None:
        self._session = session

    def measure(self, config: Mapping[str, Any]) -> float:
        values = dict(config)
        session = self._session
        owner = session.owner
        named = dict(zip(owner.arg_names, session.setup[0], strict=False))
        if not owner.allows(values, named, session.kwargs):
            raise PerftuneError(f"autotune({owner.kernel_name}): early_config_prune rules out {values} for "
                                "these arguments")
        samples, _ = session._measure(values, None, None)
        cid = config_id(values)
        if samples is None:
            record = session.records[cid]
            raise PerftuneError(f"autotune({owner.kernel_name}): {record['status']}: {record['reason']}")
        with contextlib.suppress(BenchFailure):
            session.bench.drop(cid)  # each measurement stands alone: no timer (nor its buffers) piles up
        return float(statistics.median(samples))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> KernelBench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Session:
    """One tuning of one key: the benchmark process, the compile pool and the search loop."""

    def __init__(
        self,
        owner: Autotuner,
        tkey: TuningKey,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        grid: Any,
        all_args: Mapping[str, Any],
        space: Space,
    ) -> None:
        import torch

        self.owner = owner
        self.tkey = tkey
        self.space = space
        self.grid = grid
        self.all_args = dict(all_args)
        self.kwargs = dict(kwargs)
        self.records: dict[str, dict[str, Any]] = {}
        self.failures: list[tuple[dict[str, Any], str, str]] = []
        self.samples: dict[str, list[float]] = {}
        self._dropped: set[str] = set()  # timers released in the benchmark process
        self.n_measured = 0
        self.compile_s = 0.0
        self.best_ms: float | None = None
        self.run_name: str | None = None
        self.listed: list[dict[str, Any]] | None = None  # the configuration list, in the user's order
        self.budget: Budget | None = None  # this tuning's own budget (tune_for), else the kernel's
        where = f"autotune({owner.kernel_name})"
        ref = owner._kernel_ref()
        hooks = [owner.pre_hook, owner.post_hook, owner.reference,
                 *(getattr(c, "pre_hook", None) for c in owner.configs or [])]
        isolate = owner.isolate
        if isolate is None:
            isolate = ref is not None and all(h is None or picklable(h) for h in hooks)
        elif isolate and ref is None:
            raise PerftuneError(
                f"{where}: isolate=True needs the kernel defined at module level of an "
                "importable module (a benchmark process imports it)"
            )
        elif isolate and not all(h is None or picklable(h) for h in hooks):
            raise PerftuneError(
                f"{where}: isolate=True needs pre_hook, post_hook, reference and each Config's pre_hook "
                "to be module-level functions (they run in the benchmark process)"
            )
        options = {
            "arg_names": owner.arg_names,
            "reset_to_zero": owner.reset_to_zero,
            "restore_value": owner.restore_value,
            "pre_hook": owner.pre_hook,
            "post_hook": owner.post_hook,
            "reference": owner.reference,
            "tolerance": owner.tolerance,
        }
        setup = (list(args), dict(kwargs), options)
        self.setup = setup
        self.bench: BenchProcess | InProcessBench
        if isolate:
            assert ref is not None
            self.bench = BenchProcess(ref, setup, run_timeout_s=owner.timeout_s)
        else:
            self.bench = InProcessBench(owner.fn, setup)
        self.isolated = isolate
        n_workers = owner.compile_workers if owner.compile_workers is not None else n_compile_workers()
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.ref = ref
        if (
            ref is not None
            and n_workers > 0
            and not _interpreted(owner.fn)
            and any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        ):
            self.pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=n_workers, mp_context=multiprocessing.get_context("spawn")
            )
        self.prefetch = max(2, min(16, n_workers)) if self.pool is not None else 1
        self.arg_spec = [a.dtype if isinstance(a, torch.Tensor) else a for a in args]
        self.compile_kwargs = {k: (v.dtype if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}

    def close(self) -> None:
        self.bench.close()
        self.close_pool()

    # ------------------------------------------------------------------ one candidate

    def _meta(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.owner._config_of(values).all_kwargs())

    def _grid(self, meta: Mapping[str, Any]) -> tuple[int, ...]:
        grid = self.grid({**self.all_args, **meta}) if callable(self.grid) else self.grid
        return tuple(int(g) for g in (grid if isinstance(grid, tuple | list) else (grid,)))

    def _submit(self, values: Mapping[str, Any]) -> Any:
        if self.pool is None:
            return None
        assert self.ref is not None
        meta = self._meta(values)
        try:
            with child_env(self.ref):  # the pool starts its workers on a submit
                return self.pool.submit(
                    compile_config, self.ref, self.arg_spec, self.compile_kwargs, meta, self._grid(meta)
                )
        except Exception as exc:  # a broken pool: the benchmark process compiles instead
            self.pool = None
            return exc

    def _compiled(self, future: Any) -> str | None:
        """The compile failure's reason, or None (compiled, or left to the benchmark process)."""
        if future is None or isinstance(future, Exception):
            return None
        try:
            status, reason, seconds = future.result(timeout=self.bench_compile_timeout())
        except concurrent.futures.TimeoutError:
            self.close_pool()
            return None  # the benchmark process compiles it, under its own timeout
        except Exception:
            self.close_pool()  # a crashed worker breaks the pool; measuring goes on without it
            return None
        self.compile_s += seconds
        return reason if status != "ok" else None

    def bench_compile_timeout(self) -> float:
        return 300.0

    def close_pool(self) -> None:
        if self.pool is not None:
            # Compiles still running when the search ends (or one stuck) must not hold the caller.
            workers = list((getattr(self.pool, "_processes", None) or {}).values())
            self.pool.shutdown(wait=False, cancel_futures=True)
            for proc in workers:
                if proc.is_alive():
                    proc.kill()
            self.pool = None

    def _fail(self, values: Mapping[str, Any], status: str, reason: str) -> None:
        cid = config_id(values)
        self.records[cid] = {"config": dict(values), "status": status, "time_ms": None, "reason": reason}
        self.failures.append((dict(values), status, reason))

    def _measure(
        self, values: Mapping[str, Any], incumbent: list[float] | None, future: Any
    ) -> tuple[list[float] | None, Decision | None]:
        """Samples of one candidate (None after a failure, recorded with its reason)."""
        reason = self._compiled(future)
        if reason is not None:
            self._fail(values, "failed", reason)
            return None, None
        cid = config_id(values)
        meta = self._meta(values)
        self.n_measured += 1
        grid = self._grid(meta)
        hook = self.owner._config_of(values).pre_hook
        try:
            try:
                self.bench.prepare(cid, meta, grid, hook)
            except SetupFailure:
                if not isinstance(self.bench, BenchProcess) or self.owner.isolate:
                    raise
                # The child cannot import what the caller runs (a module with side effects, say):
                # measure in this process rather than fail every candidate.
                self.bench.close()
                self.bench = InProcessBench(self.owner.fn, self.setup)
                self.isolated = False
                self.bench.prepare(cid, meta, grid, hook)
            if self.bench.reference_spec is None and self.owner.reference is None:
                self.bench.reference_spec = (meta, grid, hook)
            result = measure_adaptively(
                lambda: self.bench.sample(cid, 1)[0], incumbent, _TIMING, deterministic=False
            )
        except BenchFailure as exc:
            self._fail(values, exc.status, str(exc))
            return None, None
        self.samples[cid] = result.samples
        self.records[cid] = {
            "config": dict(values),
            "status": "ok",
            "time_ms": statistics.median(result.samples),
            "reason": "",
        }
        return result.samples, result.decision

    # ------------------------------------------------------------------ searches

    def _tuner(self, seeds: list[dict[str, Any]]) -> Tuner:
        owner = self.owner
        budget = self.budget or owner.budget
        if budget is None:
            budget = default_budget(self.space.cardinality() or 1000)
        store = owner.store
        if store == "auto":
            from perftune.store import ENV_VAR

            store = os.environ.get(ENV_VAR) or f"sqlite:///{owner.kernel_cache.folder / 'perftune.db'}"
            owner.kernel_cache.folder.mkdir(parents=True, exist_ok=True)
        keytext = "-".join(f"{k}{v}" for k, v in self.tkey.key.items())
        # The counter: two kernel objects over one kernel may tune one key in the same second.
        stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{next(_RUN_NUMBERS)}"
        name = f"triton-{owner.kernel_name}-{keytext}-{stamp}"
        settings = {
            "target": "triton",
            "kernel": owner.kernel_name,
            "tuning_key": self.tkey.to_dict(),
            "isolated": self.isolated,
        }
        if self.listed is not None and budget.seconds is None and (budget.evals or 0) >= len(self.listed):
            # The budget covers the whole list: measure all of it, in the user's order, as Triton does.
            seeds = seeds + [c for c in self.listed if c not in seeds]
        tuner = Tuner(
            self.space,
            seed=owner.seed,
            store=store,
            budget=budget,
            seeds=seeds,
            lag=self.prefetch - 1 if self.prefetch > 1 else 0,
            name=name if store else None,
            settings=settings,
        )
        self.run_name = tuner.run_name
        return tuner

    def _neighbour_seeds(self) -> list[dict[str, Any]]:
        seeds = []
        for entry in self.owner.kernel_cache.neighbours(self.tkey):
            # The chosen configuration first (it won the final comparison), then the next fastest.
            times = entry.ok_times()
            ranked = [entry.best, *sorted(times, key=lambda c: times[c])]
            for cid in [c for c in dict.fromkeys(ranked) if c in entry.results][:2]:
                values = entry.results[cid]["config"]
                if (
                    set(values) == set(self.space.params)
                    and self.space.is_valid(values)
                    and values not in seeds
                ):
                    seeds.append(values)
        return seeds

    def search(self, entry: CacheEntry | None) -> dict[str, Any]:
        tuner = self._tuner(self._neighbour_seeds())
        pipeline: deque[tuple[Any, Any]] = deque()
        incumbent: list[float] | None = None
        exhausted = False
        try:
            while True:
                while not exhausted and len(pipeline) < self.prefetch:
                    trial = tuner.ask()
                    if trial is None:
                        exhausted = True
                        break
                    pipeline.append((trial, self._submit(dict(trial.config))))
                if not pipeline:
                    break
                trial, future = pipeline.popleft()
                values = dict(trial.config)
                t0 = time.time()
                samples, decision = self._measure(values, incumbent, future)
                if samples is None:
                    record = self.records[config_id(values)]
                    status = Status.TIMEOUT if record["status"] == "timeout" else Status.FAILED
                    tuner.tell(trial, error=record["reason"], status=status, started_at=t0)
                    continue
                tuner.tell(trial, samples=samples, started_at=t0)
                if incumbent is None or decision is Decision.BETTER:
                    incumbent = samples
                self._keep_leaders()
            for trial, future in pipeline:  # the budget ran out with these still compiling
                if future is not None and not isinstance(future, Exception):
                    future.cancel()
                tuner.tell(trial, status=Status.CANCELLED)
        finally:
            tuner.close()
        winner = self._final()
        self._record_answer(tuner, winner)
        return winner

    def _record_answer(self, tuner: Tuner, winner: dict[str, Any]) -> None:
        """Record the final comparison's winner as the run's answer, as the commands record theirs: ``show``,
        ``best``, ``runs`` and the report then name the configuration the kernel launches, with its time
        in the final comparison, even where the search's best trial lost that comparison."""
        from perftune.report import answer_of, record_final_answer

        result = tuner.result()
        trial = next((t for t in result.trials if t.ok and dict(t.config) == winner), None)
        if trial is None:
            return
        note = None
        if result.best is not None and result.best.id != trial.id:
            note = (f"the final interleaved comparison of the leaders ({N_FINAL_ROUNDS} rounds) chose trial "
                    f"{trial.id} over trial {result.best.id}, the best of the search")
        answer = answer_of(trial, result.default, goal=result.goal, note=note)
        record_final_answer(getattr(tuner, "_store", None), result.run_id,
                            replace(answer, value=self.best_ms))

    def incremental(self, entry: CacheEntry, new: list[dict[str, Any]]) -> dict[str, Any]:
        """Measure only configurations the cache has not seen, against the cached best."""
        assert entry.best is not None
        best = dict(entry.results[entry.best]["config"])
        incumbent, _ = self._measure(best, None, self._submit(best))
        futures = [self._submit(v) for v in new]
        for values, future in zip(new, futures, strict=True):
            samples, decision = self._measure(values, incumbent, future)
            if samples is not None and (incumbent is None or decision is Decision.BETTER):
                incumbent = samples
        self.n_measured -= 1  # the cached best was re-measured as the reference, not tuned again
        if incumbent is None:
            return best
        return self._final()

    def _ranked(self) -> list[str]:
        return sorted(self.samples, key=lambda c: statistics.median(self.samples[c]))

    def _leaders(self) -> list[str]:
        """The configurations the final comparison times (see :data:`LEADER_MARGIN`)."""
        ranked = self._ranked()
        if not ranked:
            return []
        limit = statistics.median(self.samples[ranked[0]]) * (1.0 + LEADER_MARGIN)
        close = [c for c in ranked[:MAX_LEADERS] if statistics.median(self.samples[c]) <= limit]
        return ranked[: max(N_LEADERS, len(close))]

    def _keep_leaders(self) -> None:
        # Timers of the leaders stay ready in the benchmark process for the final comparison.
        keep = set(self._leaders())
        for cid in self._ranked():
            if cid not in keep and cid not in self._dropped:
                self._dropped.add(cid)
                with contextlib.suppress(BenchFailure):
                    self.bench.drop(cid)

    def _final(self) -> dict[str, Any]:
        """Compare the leaders interleaved (same power state, same moment) and return the winner."""
        leaders = self._leaders()
        if not leaders:
            raise PerftuneError(
                f"autotune({self.owner.kernel_name}): every configuration failed for key "
                f"{dict(self.tkey.key)}; first failure: {self.failures[0][2] if self.failures else '?'}"
            )
        rounds: dict[str, list[float]] = {cid: [] for cid in leaders}
        if len(leaders) > 1:
            for r in range(N_FINAL_ROUNDS):
                for cid in leaders[r % len(leaders) :] + leaders[: r % len(leaders)]:
                    if cid not in rounds:
                        continue
                    try:
                        rounds[cid].extend(self.bench.sample(cid, 1))
                    except BenchFailure:
                        # The timer is gone (a restarted process): prepare it again, then go on.
                        values = self.records[cid]["config"]
                        try:
                            meta = self._meta(values)
                            hook = self.owner._config_of(values).pre_hook  # as it was first measured
                            self.bench.prepare(cid, meta, self._grid(meta), hook)
                            rounds[cid].extend(self.bench.sample(cid, 1))
                        except BenchFailure:
                            rounds.pop(cid)
        rounds = {c: s for c, s in rounds.items() if s} or {leaders[0]: self.samples[leaders[0]]}
        winner = min(rounds, key=lambda c: statistics.median(rounds[c]))
        others = [c for c in rounds if c != winner]
        if others and compare(rounds[winner], rounds[others[0]]) is Decision.WORSE:
            winner = others[0]  # the medians and the test disagree: trust the test
        self.best_ms = statistics.median(rounds[winner])
        # Beside the search's time (time_ms), which ranks it among the others as it ranked the search.
        self.records[winner]["final_ms"] = self.best_ms
        return dict(self.records[winner]["config"])


def autotune(
    configs: Sequence[Any] | None = None,
    key: Sequence[str] = (),
    prune_configs_by: Mapping[str, Any] | None = None,
    reset_to_zero: Sequence[str] | None = None,
    restore_value: Sequence[str] | None = None,
    pre_hook: Callable[..., Any] | None = None,
    post_hook: Callable[..., Any] | None = None,
    warmup: Any = None,
    rep: Any = None,
    use_cuda_graph: bool = False,
    do_bench: Any = None,
    cache_results: bool = True,
    *,
    space: Space | None = None,
    budget: Budget | int | str | None = None,
    seed: int = 0,
    reference: Callable[..., Any] | None = None,
    tolerance: float | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    store: Any = "auto",
    compile_workers: int | None = None,
    timeout_s: float = 10.0,
    isolate: bool | None = None,
) -> Callable[[Any], Autotuner]:
    """Decorator: tune a ``@triton.jit`` kernel's configuration per key, as ``triton.autotune`` does.

    Args:
        configs: Triton's list of ``triton.Config`` (its space: ordered meta-parameters, membership).
        key: Argument names whose values select a tuning (the tensor dtypes are always part of it).
        prune_configs_by: Triton's ``{"early_config_prune", "perf_model", "top_k"}`` (configs only).
        reset_to_zero: Arguments zeroed before every launch while tuning (atomics, split-K).
        restore_value: Arguments restored to their values at the call before every tuning launch
            (in-place kernels), checked and timed alike.
        pre_hook: ``pre_hook(nargs)`` before every tuning launch (module-level: it runs in the
            benchmark process); post_hook: ``post_hook(nargs, exception)`` after it.
        warmup, rep, use_cuda_graph, do_bench, cache_results: accepted for Triton compatibility;
            perftune's own measurement and persistent cache replace them.
        space: A perftune Space over the kernel's meta-parameters and ``num_warps``, ``num_stages``,
            ``num_ctas``, ``maxnreg`` (instead of ``configs``).
        budget: Evaluations (int), a duration (``"90s"``) or a :class:`perftune.Budget`; default: every
            configuration of up to 16, else :data:`DEFAULT_SHARE` (15%) of them (at least 16).
        seed: Seed of the search.
        reference: ``reference(*args, **kwargs)`` writes the expected outputs into its arguments, as the
            kernel would; default: the first configuration that runs is the reference of the others.
        tolerance: Largest error relative to the reference's largest magnitude (default by dtype).
        cache_dir: Folder of the persistent cache (default ``$PERFTUNE_TRITON_CACHE``).
        store: Store URL for the runs; ``"auto"``: ``$PERFTUNE_STORE`` or ``perftune.db`` in the cache
            folder; None: none.
        compile_workers: Processes compiling ahead of the GPU (default: every CPU core; 0: none).
        timeout_s: Longest one launch or batch of samples may take before the candidate is a timeout.
        isolate: Benchmark in a child process (default when the kernel is importable): a crash or a
            hang costs that process, never the caller.

    Example:
        >>> import perftune.triton
        >>> decorate = perftune.triton.autotune(configs=None, key=["n"])
        >>> callable(decorate)
        True
    """
    del warmup, rep, use_cuda_graph, do_bench, cache_results

    def decorator(fn: Any) -> Autotuner:
        return Autotuner(
            fn,
            configs=configs,
            space=space,
            key=key,
            prune_configs_by=prune_configs_by,
            reset_to_zero=reset_to_zero,
            restore_value=restore_value,
            pre_hook=pre_hook,
            post_hook=post_hook,
            budget=budget,
            seed=seed,
            reference=reference,
            tolerance=tolerance,
            cache_dir=cache_dir,
            store=store,
            compile_workers=compile_workers,
            timeout_s=timeout_s,
            isolate=isolate,
        )

    return decorator
