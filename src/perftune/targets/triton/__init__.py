"""Triton kernels: a drop-in ``triton.autotune`` that searches the configurations instead of sweeping.

* :func:`autotune` — the decorator (Triton's arguments, or ``space=`` a perftune Space, ``budget=``).
* :class:`Autotuner` — what it returns: launch it as the kernel; ``best_config``, ``reports``;
  ``benchmark(...)`` (a :class:`KernelBench`) and ``choose_with(...)`` for learned per-input dispatch.
* :class:`KernelCache`, :class:`TuningKey`, :class:`CacheEntry` — the persistent cache
  (``$PERFTUNE_TRITON_CACHE``), one JSON file per key.
* :func:`space_from_configs`, :func:`config_id`, :func:`to_triton_config` — Triton configurations as
  perftune configurations and back.

Triton and torch are imported only when a kernel is tuned or launched.

Example:
    >>> from perftune.targets.triton import config_id
    >>> config_id({"BLOCK_M": 64, "num_warps": 4})
    '{"BLOCK_M":64,"num_warps":4}'
"""

from __future__ import annotations

from perftune.targets.triton._autotuner import (
    Autotuner,
    KernelBench,
    TuningReport,
    autotune,
    default_budget,
)
from perftune.targets.triton._cache import (
    CACHE_ENV_VAR,
    CacheEntry,
    KernelCache,
    TuningKey,
    default_cache_dir,
)
from perftune.targets.triton._space import (
    LAUNCH_OPTIONS,
    config_id,
    space_from_configs,
    to_triton_config,
    triton_config_dict,
)

__all__ = [
    "CACHE_ENV_VAR",
    "LAUNCH_OPTIONS",
    "Autotuner",
    "CacheEntry",
    "KernelBench",
    "KernelCache",
    "TuningKey",
    "TuningReport",
    "autotune",
    "config_id",
    "default_budget",
    "default_cache_dir",
    "space_from_configs",
    "to_triton_config",
    "triton_config_dict",
]
