"""The space of torch.compile/Inductor settings, per device kind, read against the installed torch.

Each parameter is an Inductor config key (``torch._inductor.config``, dotted for sub-configs such as
``triton.cudagraphs``), so a configuration is exactly the ``options=`` dict of ``torch.compile``. The
default value of every parameter is its value in this process (torch's own default unless the caller
changed it; the fresh processes that compile the candidates start from the same values), so the space's
default configuration is plain ``torch.compile``. Keys that the installed torch does not have are left
out (torch moves its options between releases), as are those that only matter on the other device kind.

Example:
    >>> space = compile_space("cpu")  # doctest: +SKIP
    >>> dict(space.default())["freezing"]  # doctest: +SKIP
    False
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perftune.errors import PerftuneError
from perftune.space import Bool, Choice, Space

__all__ = [
    "DEVICE_KINDS", "KNOBS", "KnobSpec", "check_space", "compile_space", "inductor_default", "mode_options",
    "options_of",
]

DEVICE_KINDS = ("cpu", "cuda")


@dataclass(frozen=True)
class KnobSpec:
    """One Inductor setting worth tuning.

    Attributes:
        key: The Inductor config key (``"triton.cudagraphs"``).
        values: The values tried (None: a boolean, both values).
        devices: Device kinds where the setting has an effect.
        when: Condition on other knobs (a :class:`perftune.space.Space` ``when=`` expression).
        why: What the setting trades (for the docs).

    Example:
        >>> KnobSpec("triton.cudagraphs", devices=("cuda",)).values is None  # a boolean: both values
        True
    """

    key: str
    values: tuple[Any, ...] | None = None
    devices: tuple[str, ...] = DEVICE_KINDS
    when: str | None = None
    why: str = ""


# Chosen from torch/_inductor/config.py (torch 2.11-2.13): settings that change the generated code or
# how it is launched, and that a model's speed depends on. Debug, cache and correctness-relaxing knobs
# (e.g. fallback_random, emulate_precision_casts) are not tuned: they are not speed trade-offs.
KNOBS: tuple[KnobSpec, ...] = (
    KnobSpec("max_autotune", why="benchmark GEMM/conv templates and pointwise configs at compile time"),
    KnobSpec("max_autotune_gemm_backends", ("ATEN,TRITON", "TRITON", "ATEN"), ("cuda",), "max_autotune",
             "which GEMM implementations max-autotune chooses among (cuBLAS, Triton templates)"),
    KnobSpec("max_autotune_gemm_backends", ("CPP,ATEN", "ATEN"), ("cpu",), "max_autotune",
             "which GEMM implementations max-autotune chooses among (C++ templates, oneDNN/MKL)"),
    KnobSpec("coordinate_descent_tuning", devices=("cuda",),
             why="coordinate descent over each generated Triton kernel's block sizes and warps"),
    KnobSpec("coordinate_descent_check_all_directions", devices=("cuda",), when="coordinate_descent_tuning",
             why="coordinate descent also tries moving two parameters at once"),
    KnobSpec("triton.cudagraphs", devices=("cuda",),
             why="replay the whole graph as a CUDA graph: removes launch overhead, costs memory"),
    KnobSpec("epilogue_fusion", why="fuse pointwise epilogues into matmul templates"),
    KnobSpec("aggressive_fusion", why="fuse nodes without shared memory reads too (fewer, larger kernels)"),
    KnobSpec("max_fusion_size", (64, 16, 256), why="most nodes fused into one kernel"),
    KnobSpec("layout_optimization", why="channels-last layouts for convolutions"),
    KnobSpec("freezing", why="fold weights as constants (inference): constant folding, prepacked weights"),
    KnobSpec("shape_padding", devices=("cuda",), why="pad matmul shapes to aligned sizes"),
    KnobSpec("permute_fusion", why="fuse permutes into matmuls"),
    KnobSpec("split_reductions", devices=("cuda",), why="split large reductions over several blocks"),
    KnobSpec("triton.persistent_reductions", devices=("cuda",), why="one block per reduction row"),
    KnobSpec("benchmark_fusion", devices=("cuda",), when="max_autotune",
             why="benchmark a fusion against its unfused kernels before keeping it"),
    KnobSpec("cpp_wrapper", devices=("cpu",), why="C++ instead of Python wrapper code (less host overhead)"),
    KnobSpec("cpp.enable_tiling_heuristics", devices=("cpu",), why="heuristics that pick C++ loop tiling"),
    KnobSpec("reorder_for_locality", why="reorder nodes so consumers follow producers"),
)


def require_torch() -> Any:
    """The ``torch`` module, or a one-line :class:`PerftuneError` naming the extra to install."""
    try:
        import torch
    except ImportError:
        raise PerftuneError("perftune.torch needs PyTorch: pip install 'perftune[torch]'") from None
    return torch


def _config_module() -> Any:
    require_torch()
    import torch._inductor.config as inductor_config

    return inductor_config


def inductor_default(key: str) -> Any:
    """The value of an Inductor config key in this process (``AttributeError`` when torch has no such key).

    It is torch's own default unless this process changed it; :func:`perftune.torch.run_job` starts its
    fresh processes from this process's values (:func:`perftune.torch.caller_state`), so a candidate that
    leaves the key out is compiled with this value.
    """
    obj: Any = _config_module()
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def _has(key: str) -> bool:
    try:
        inductor_default(key)
    except AttributeError:
        return False
    return True


def _check_device(device: str) -> str:
    if device not in DEVICE_KINDS:
        raise PerftuneError(f"torch_compile: device kind must be one of {list(DEVICE_KINDS)}, got {device!r}")
    return device


def compile_space(device: str, *, knobs: tuple[KnobSpec, ...] | None = None) -> Space:
    """The space of Inductor settings for ``device`` (``"cpu"`` or ``"cuda"``) on the installed torch.

    Every parameter's default is torch's own default, so the default configuration is plain
    ``torch.compile``.

    Args:
        device: ``"cpu"`` or ``"cuda"``.
        knobs: The settings to consider (default :data:`KNOBS`); those this torch lacks are left out.
    """
    _check_device(device)
    knobs = KNOBS if knobs is None else knobs
    params: dict[str, Any] = {}
    for knob in knobs:
        if device not in knob.devices or knob.key in params or not _has(knob.key):
            continue
        if knob.when is not None and knob.when.split()[0] not in params:
            continue  # the knob it depends on is not in this torch
        default = inductor_default(knob.key)
        if knob.values is None:
            params[knob.key] = Bool(default=bool(default), when=knob.when)
            continue
        values = list(knob.values)
        if default not in values and knob.when is None:
            values.insert(0, default)
        # A conditional knob's default only matters when its condition holds: the first listed value.
        params[knob.key] = Choice(values, default=default if default in values else values[0], when=knob.when)
    return Space(params)


def mode_options(mode: str, device: str) -> dict[str, Any]:
    """The Inductor options of a ``torch.compile`` mode on ``device`` (settings with no effect there dropped).

    Example:
        >>> mode_options("max-autotune", "cpu")  # doctest: +SKIP
        {'max_autotune': True, 'coordinate_descent_tuning': True}
    """
    require_torch()
    import torch._inductor

    _check_device(device)
    modes = torch._inductor.list_mode_options()
    if mode not in modes:
        raise PerftuneError(f"torch_compile: unknown mode {mode!r}; torch has {sorted(modes)}")
    out = dict(modes[mode])
    if device == "cpu":
        out.pop("triton.cudagraphs", None)
    return out


def _type_problem(value: Any, default: Any) -> str | None:
    """Why ``value`` cannot be an Inductor setting whose default is ``default`` (None when it can)."""
    if default is None or type(value) is type(default):
        return None
    if isinstance(default, bool) or isinstance(value, bool):
        return f"{value!r} is not a bool" if isinstance(default, bool) else f"{value!r} is a bool"
    if isinstance(default, float) and isinstance(value, int):
        return None
    if isinstance(default, int | float | str):
        return f"{value!r} is a {type(value).__name__}, not a {type(default).__name__}"
    return None


def check_space(space: Space) -> None:
    """Refuse a space whose parameters are not Inductor config keys of this torch, or whose values are of
    another type than the key's (one line; before any process starts).

    Raises:
        PerftuneError: The first unknown key or wrongly typed value.
    """
    for name, param in space.params.items():
        try:
            default = inductor_default(name)
        except AttributeError:
            import torch

            raise PerftuneError(
                f"tune_compile: space parameter {name!r} is not an Inductor config key of torch "
                f"{torch.__version__} (see torch._inductor.config)"
            ) from None
        card = param.cardinality()
        listed = param.values() if card is not None and card <= 10_000 else None
        values = listed if listed is not None else [param.default_value()]
        for value in values:
            problem = _type_problem(value, default)
            if problem is not None:
                raise PerftuneError(
                    f"tune_compile: space parameter {name!r}: {problem} (torch's value is {default!r})"
                )


def options_of(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``options=`` dict of ``torch.compile`` for a configuration: only the settings that differ from
    their value in this process (:func:`inductor_default`; so the dict reads as what was changed)."""
    out: dict[str, Any] = {}
    for key, value in dict(config).items():
        try:
            default = inductor_default(key)
        except AttributeError:
            out[key] = value  # a user's knob this torch does not know: compiling will say so
            continue
        if value != default:
            out[key] = value
    return out
