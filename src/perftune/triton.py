"""Triton kernels: ``perftune.triton`` is :mod:`perftune.targets.triton` (extra ``perftune[triton]``).

Example:
    >>> import perftune.triton
    >>> perftune.triton.CACHE_ENV_VAR
    'PERFTUNE_TRITON_CACHE'
"""

from __future__ import annotations

from perftune.targets.triton import (
    CACHE_ENV_VAR,
    LAUNCH_OPTIONS,
    Autotuner,
    CacheEntry,
    KernelBench,
    KernelCache,
    TuningKey,
    TuningReport,
    autotune,
    config_id,
    default_cache_dir,
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
    "default_cache_dir",
    "space_from_configs",
    "to_triton_config",
    "triton_config_dict",
]
