"""Triton configurations as points of a perftune :class:`~perftune.space.Space`, and back.

A list of ``triton.Config`` becomes a space with one ordered parameter per meta-parameter (its values
sorted) and one constraint, membership in the list, so that the search can move between neighbouring
tiles instead of treating the list as unordered labels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from perftune.errors import PerftuneError
from perftune.space import Ordinal, Space

__all__ = ["LAUNCH_OPTIONS", "config_id", "space_from_configs", "to_triton_config", "triton_config_dict"]

#: Names of a Triton launch option rather than a kernel meta-parameter (passed to ``triton.Config``'s
#: own arguments); a space may use any of them as a parameter.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def triton_config_dict(config: Any) -> dict[str, Any]:
    """The meta-parameters and launch options of a ``triton.Config`` as one flat dict.

    ``num_ctas`` is left out at its default (1) and ``maxnreg`` when unset, so that configurations
    written with or without them name the same point.

    Example:
        >>> class FakeConfig:  # the attributes of triton.Config
        ...     kwargs, num_warps, num_stages, num_ctas, maxnreg = {"BLOCK": 64}, 4, 2, 1, None
        >>> triton_config_dict(FakeConfig())
        {'BLOCK': 64, 'num_warps': 4, 'num_stages': 2}
    """
    out = dict(config.kwargs)
    out["num_warps"] = config.num_warps
    out["num_stages"] = config.num_stages
    if getattr(config, "num_ctas", 1) not in (None, 1):
        out["num_ctas"] = config.num_ctas
    if getattr(config, "maxnreg", None) is not None:
        out["maxnreg"] = config.maxnreg
    return out


def config_id(values: Mapping[str, Any]) -> str:
    """Canonical text of a configuration (sorted keys, compact JSON): the key of the persistent cache.

    Example:
        >>> config_id({"num_warps": 4, "BLOCK": 64})
        '{"BLOCK":64,"num_warps":4}'
    """
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"), default=str)


def to_triton_config(values: Mapping[str, Any], pre_hook: Any = None) -> Any:
    """Build the ``triton.Config`` of a flat dict of meta-parameters and launch options."""
    import triton

    kwargs = {k: v for k, v in values.items() if k not in LAUNCH_OPTIONS}
    options = {k: values[k] for k in LAUNCH_OPTIONS if k in values}
    options.setdefault("num_warps", 4)
    options.setdefault("num_stages", 3)
    return triton.Config(kwargs, pre_hook=pre_hook, **options)


def _sort_key(value: Any) -> tuple[int, Any]:
    # Numbers in numeric order, anything else after them in text order: Ordinal needs one order.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return (1, str(value))
    return (0, value)


_NONE = object()


def space_from_configs(configs: Sequence[Any], where: str = "autotune") -> Space:
    """The space of a list of ``triton.Config``: ordered parameters and membership in the list.

    The first configuration is the space's default (Triton users put their favourite first).

    Raises:
        PerftuneError: The list is empty, mixes configurations with different parameter names, or has a
            value that is not an int, float, str or bool (``None``, a ``tl.dtype``).

    Example:
        >>> class C:
        ...     def __init__(self, block, warps):
        ...         self.kwargs, self.num_warps, self.num_stages = {"BLOCK": block}, warps, 2
        >>> space = space_from_configs([C(128, 4), C(64, 4), C(64, 8)])
        >>> space.default()["BLOCK"], space.is_valid({"BLOCK": 128, "num_warps": 8, "num_stages": 2})
        (128, False)
    """
    if not configs:
        raise PerftuneError(f"{where}: configs is empty; give at least one triton.Config")
    dicts = [triton_config_dict(c) for c in configs]
    names = list(dicts[0])
    for i, d in enumerate(dicts):
        if set(d) != set(names):
            raise PerftuneError(
                f"{where}: configs[{i}] has parameters {sorted(d)}, configs[0] has {sorted(names)}; "
                "every config must set the same meta-parameters"
            )
    params = {}
    for name in names:
        odd = next((d[name] for d in dicts if not isinstance(d[name], str | int | float | bool)), _NONE)
        if odd is not _NONE:
            raise PerftuneError(
                f"{where}: meta-parameter {name!r} has the value {odd!r} ({type(odd).__name__}); perftune "
                "tunes int, float, str and bool values: pass a name (e.g. 'float16') and map it in the kernel"
            )
        values = sorted({d[name] for d in dicts}, key=_sort_key)
        params[name] = Ordinal(values, default=dicts[0][name])
    points = sorted({tuple(d[n] for n in names) for d in dicts}, key=lambda t: [_sort_key(v) for v in t])
    if len(points) == _n_product(params):
        return Space(params)
    # An expression, not a Python callable, so that the store can rebuild the space of a run.
    membership = f"({', '.join(names)},) in {{{', '.join(repr(p) for p in points)}}}"
    return Space(params, constraints=[membership])


def _n_product(params: Mapping[str, Ordinal]) -> int:
    n = 1
    for p in params.values():
        n *= len(p.options)
    return n
