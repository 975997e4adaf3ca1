"""Learned per-input dispatch for Triton kernels: landmarks per shape cluster instead of one per key.

``perftune.triton.autotune`` tunes one configuration per exact key (Triton's way: every new ``M, N, K``
is a new tuning). :class:`TritonSite` learns a dispatcher instead: the training launches are clustered
by the key's values and the tensors' dtypes (cheap features: ``log2_<key>``, ``pow2_<key>`` (the
power of two dividing it, as :func:`perftune.adapt.divisibility`) and ``dtype_bits``), a landmark is
tuned per cluster (the kernel's own tuning of the cluster's largest launch: parallel compiles, the
persistent cache), every landmark is measured on every training launch, and a cost-aware classifier
maps a new launch's features to a landmark. Installed on the kernel (:meth:`Autotuner.choose_with`), it
picks the configuration of a key never seen in microseconds, without tuning at run time.

Measurements go through the kernel's own benchmark (:meth:`Autotuner.benchmark`): the same benchmark
process as a tuning (a crash or hang costs that process), the same check against ``reference=`` and the
same timing (CUDA events on a GPU; the wall clock in Triton's interpreter).

Example:
    >>> from perftune.adapt import Launch
    >>> launch = Launch(1, 2, grid=(4,), n=3)
    >>> launch.args, launch.kwargs, launch.grid
    ((1, 2), {'n': 3}, (4,))
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perftune.adapt._features import CHEAP, AdaptError, divisibility
from perftune.adapt._file import DispatchFile, DispatchFileWarning
from perftune.adapt._site import AdaptiveObjective
from perftune.adapt._tune import InputTuning, default_clusters, tune_inputs

__all__ = ["Launch", "TritonSite"]


class Launch:
    """A launch ``kernel[grid](*args, **kwargs)``: one training input of :class:`TritonSite`."""

    __slots__ = ("args", "grid", "kwargs")

    def __init__(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.grid = grid

    def __repr__(self) -> str:
        return f"Launch({len(self.args)} args, grid={self.grid!r}, kwargs={sorted(self.kwargs)})"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    item = getattr(value, "item", None)  # a 0-d tensor or numpy scalar
    if callable(item) and getattr(value, "ndim", None) == 0:
        return float(item())
    return None


class TritonSite(AdaptiveObjective):
    """A Triton kernel of ``perftune.triton.autotune`` with a learned per-input dispatcher.

    Args:
        kernel: The :class:`perftune.triton.Autotuner` (what ``@perftune.triton.autotune`` returns).
        name: The dispatcher's key in the dispatcher file (default ``triton:<kernel name>``).
        install: Let the dispatcher pick the configuration of every key the kernel has not tuned in this
            process (:meth:`Autotuner.choose_with`). Without a dispatcher (none learned, no file, a stale
            entry: one warning), the kernel tunes each new key as before.

    Features (all cheap; add your own with :meth:`feature`): per key argument ``k``, ``log2_k``
    (log2 of 1 + its value) and ``pow2_k`` (the largest power of two dividing it); ``dtype_bits``, the
    widest element size of the tensor arguments, in bits. The size of a launch (for the asymptotic
    check) is the product of its key values.

    Example:
        >>> TritonSite.target_kind  # site = TritonSite(kernel); site.tune([Launch(...), ...], budget=64)
        'triton'
    """

    target_kind = "triton"
    clock_choice = False  # the kernel's benchmark times it (CUDA events), not the caller's clock
    stoppable = False  # the benchmark process has its own timeout
    fallback = "tuning per key"

    def __init__(self, kernel: Any, *, name: str | None = None, install: bool = True) -> None:
        from perftune.targets.triton import Autotuner, triton_config_dict

        if not isinstance(kernel, Autotuner):
            raise AdaptError(f"TritonSite: expected a kernel decorated with perftune.triton.autotune, got "
                             f"{type(kernel).__name__}")
        self.kernel = kernel
        space = kernel.space()
        default = triton_config_dict(kernel.configs[0]) if kernel.configs else None
        super().__init__(name or f"triton:{kernel.kernel_name}", self._launch, space, default=default,
                         size=self._size)
        self._benches: dict[int, Any] = {}
        for key in kernel.keys:
            self.feature(lambda x, key=key: math.log2(1.0 + abs(self._key_value(x, key))),
                         name=f"log2_{key}", cost=CHEAP)
            self.feature(lambda x, key=key: float(divisibility(int(self._key_value(x, key)))),
                         name=f"pow2_{key}", cost=CHEAP)
        self.feature(self._dtype_bits, name="dtype_bits", cost=CHEAP)
        if install:
            kernel.choose_with(self.choose)

    # ---- inputs ---------------------------------------------------------------------------------

    def arguments(self, x: Launch | Mapping[str, Any]) -> Mapping[str, Any]:
        """The named arguments of a launch (a :class:`Launch`, or the mapping the kernel passes)."""
        if isinstance(x, Launch):
            return {**dict(zip(self.kernel.arg_names, x.args, strict=False)), **x.kwargs}
        return x

    def _require_launch(self, x: Any) -> None:
        if not isinstance(x, Launch):
            raise AdaptError(f"site {self.name!r}: training inputs must be perftune.adapt.Launch objects, "
                             f"got {type(x).__name__}")

    def _key_value(self, x: Any, key: str) -> float:
        args = self.arguments(x)
        if key not in args:
            raise AdaptError(f"site {self.name!r}: the launch has no argument {key!r} (a key of the kernel)")
        value = _number(args[key])
        if value is None:
            raise AdaptError(f"site {self.name!r}: key argument {key!r} is {type(args[key]).__name__}, not a "
                             "number: learned dispatch reads numeric keys (add your own feature for it)")
        return value

    def _dtype_bits(self, x: Any) -> float:
        bits = [8 * int(a.element_size()) for a in self.arguments(x).values() if hasattr(a, "element_size")]
        return float(max(bits, default=0))

    def _size(self, x: Any) -> float:
        size = 1.0
        for key in self.kernel.keys:
            size *= max(1.0, abs(self._key_value(x, key)))
        return size

    def _domain(self) -> Any:
        return [self.kernel.kernel_name, self.kernel.source_hash, self.space.fingerprint()]

    # ---- running and measuring ------------------------------------------------------------------

    def _launch(self, config: Mapping[str, Any], x: Launch) -> Any:
        # Runs the configuration in this process as the kernel's own launch does: the user's Config
        # object where the configuration is one of theirs, its pre_hook first (it may zero an output).
        chosen = self.kernel._config_of(dict(config))
        meta = chosen.all_kwargs()
        if chosen.pre_hook is not None:
            chosen.pre_hook({**self.arguments(x), **meta})
        return self.kernel.fn.run(*x.args, grid=x.grid, warmup=False, **x.kwargs, **meta)

    def measure(self, landmark: Any, x: Any, timer: Any = None) -> tuple[float, Any]:
        """Seconds of ``landmark`` on launch ``x``, from the kernel's benchmark (raises when it fails)."""
        self._require_launch(x)
        bench = self._benches.get(id(x))
        if bench is None:
            bench = self._benches[id(x)] = self.kernel.benchmark(*x.args, grid=x.grid, **x.kwargs)
        return bench.measure(dict(landmark)) / 1000.0, None

    def search_landmark(
        self, inputs: Sequence[Any], budget: Any, seeds: Sequence[Mapping[str, Any]], seed: int
    ) -> tuple[dict[str, Any], int]:
        """The kernel's own tuning (parallel compiles, its cache) on the cluster's largest launch."""
        x = inputs[0]
        report = self.kernel.tune_for(*x.args, grid=x.grid, budget=budget, **x.kwargs)
        return dict(report.best), int(report.n_measured)

    def close(self) -> None:
        """Close the benchmarks a tuning opened (one per training launch)."""
        benches, self._benches = list(self._benches.values()), {}
        for bench in benches:
            bench.close()

    # ---- learning and dispatching ---------------------------------------------------------------

    def tune(self, launches: Sequence[Launch], *, budget: Any = None, n_clusters: int | None = None,
             seed: int | None = None, save: str | Path | None = None, **options: Any) -> InputTuning:
        """Learn the dispatcher from training ``launches`` (:func:`perftune.adapt.tune_inputs`).

        Args:
            launches: Training launches, one per shape (and dtype) the program meets; at least 4.
            budget: Trials of all landmark searches together (default: what the kernel tunes one key
                with, per cluster: its ``budget=``, else 15% of its configurations, at least 16).
            n_clusters: Clusters, hence landmarks (default: about one per 6 launches, 2..8).
            seed: Makes clustering, searches and learning reproducible (default: the kernel's seed).
            save: Write the dispatcher into this dispatcher file (and use it in this process).
            options: Further arguments of :func:`perftune.adapt.tune_inputs` (``classifier``, ...).

        The learned dispatcher is installed in this process either way.
        """
        launches = list(launches)
        for x in launches:  # before any feature reads a launch's arguments
            self._require_launch(x)
        clusters = n_clusters if n_clusters is not None else default_clusters(len(launches))
        if budget is None:
            from perftune.targets.triton import default_budget

            per = self.kernel.budget.evals if self.kernel.budget is not None else None
            budget = (per or default_budget(self.space.cardinality() or 1000).evals or 16) * clusters
        options.setdefault("repeats", 1)  # the benchmark samples each measurement until it is steady
        # Each cluster's landmark is the kernel's tuning of its largest launch: an overall one would be
        # the largest cluster's again.
        options.setdefault("overall_landmark", False)
        try:
            tuning = tune_inputs(self, launches, budget=budget, n_clusters=n_clusters,
                                 seed=self.kernel.seed if seed is None else seed, **options)
        finally:
            self.close()
        if save is not None:
            tuning.save(save)
        tuning.apply()
        return tuning

    def load(self, path: str | Path | None = None) -> bool:
        """Use this site's dispatcher from the dispatcher file ``path`` (default: the process's file).

        Returns whether one was installed; a missing file, a missing entry or a stale one (the kernel,
        its configurations or the features changed) warns once and leaves the kernel tuning per key.
        """
        try:
            loaded = DispatchFile.read(path)
        except AdaptError as e:  # missing or corrupt: say what runs here (per-key tuning), not the default
            warnings.warn(f"{e}; {self.fallback}", DispatchFileWarning, stacklevel=2)
            self.use_dispatcher(None)
            return False
        entry = loaded.dispatchers.get(self.name)
        if entry is None:
            if self.name in loaded.unusable:
                warnings.warn(f"{loaded.unusable[self.name][1][:400]}; {self.fallback}", DispatchFileWarning,
                              stacklevel=2)
            elif loaded.source is not None:
                warnings.warn(f"{loaded.source}: no dispatcher for site {self.name!r}; {self.fallback}",
                              DispatchFileWarning, stacklevel=2)
            self.use_dispatcher(None)
            return False
        try:
            self.use_dispatcher(self.dispatcher_from_entry(entry))
        except AdaptError as e:
            warnings.warn(f"{loaded.source}: {e}; {self.fallback}", DispatchFileWarning, stacklevel=2)
            self.use_dispatcher(None)
            return False
        return True

    def choose(self, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """The landmark configuration for a launch's named arguments, or None without a dispatcher."""
        d = self.dispatcher
        if d is None:
            return None
        landmark = d.landmark(arguments)
        return None if landmark is None else dict(landmark)

    def __repr__(self) -> str:
        return f"TritonSite({self.name!r}, features={list(self.columns)}, {self.source})"
