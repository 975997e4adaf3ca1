"""Build the search space of a compiler's flags and turn configurations into command lines.

Knobs, named as identifiers so that ``when=`` expressions can mention them:

- ``O``: the optimisation level (``"3"`` by default, also ``"2"``, ``"1"``, ``"s"``, ``"fast"``);
- ``march`` / ``mtune``: ``"default"`` (none given) or a value this machine can run;
- one per flag: ``funroll_loops`` is ``"default"`` (not given), ``"on"`` (``-funroll-loops``) or ``"off"``
  (``-fno-unroll-loops``); an enumerated flag (``-fvect-cost-model=``) is ``"default"`` or one of its values;
- one per ``--param``: ``param_max_unroll_times`` is an integer (``Int`` for small ranges, ``Pow2`` when
  the default and the range are powers of two, ``LogInt`` otherwise), its default the compiler's own at
  ``-O3``. A value reaches the command line when it differs from the compiler's default under the
  configuration's own -O level, -march and -mtune (``max-inline-insns-auto`` is 30 at -O3 but 15 at -O2:
  ``-O2 --param=max-inline-insns-auto=30`` keeps its param). A param that only matters when a flag is on
  is active only then (``when="funroll_loops == 'on'"``).

The default configuration renders as plain ``-O3``: the baseline. One constraint keeps ``-Ofast`` from
being paired with ``-fno-fast-math`` (that pair is -O3 under another name).

Example:
    >>> info = discover("gcc")  # doctest: +SKIP
    >>> space = build_space(info)  # doctest: +SKIP
    >>> render(space.default(), info)  # doctest: +SKIP
    ['-O3']
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from perftune.errors import PerftuneError
from perftune.targets.flags._discover import LEVELS, CompilerInfo, FlagInfo, ParamInfo

__all__ = ["LEVELS", "build_space", "config_from_flags", "render"]

# Which flag a family of --params serves (prefix of the param name -> flag, and the states of the flag
# in which the param is active). A param whose flag is absent from the compiler stays unconditional.
_PARAM_FLAG = [
    (r"max-unroll-times|max-unrolled-insns|max-average-unrolled-insns", "-funroll-loops", "on"),
    (r"max-peel|max-peeled-insns|max-completely-peel", "-fpeel-loops", "not-off"),
    (
        r"prefetch-|simultaneous-prefetches|l1-cache-|l2-cache-size|min-insn-to-prefetch-ratio",
        "-fprefetch-loop-arrays",
        "on",
    ),
    (
        r"max-inline-|inline-|early-inlining-insns|large-function-|large-unit-insns|uninlined-|"
        r"min-inline-recursive-probability|partial-inlining-",
        "-finline-functions",
        "not-off",
    ),
    (r"ipa-cp-", "-fipa-cp", "not-off"),
    (r"ipa-sra-", "-fipa-sra", "not-off"),
    (r"vect-", "-ftree-loop-vectorize", "not-off"),
    (r"max-tail-merge-", "-ftree-tail-merge", "not-off"),
    (r"max-gcse-|gcse-", "-fgcse", "not-off"),
    (r"max-sched-|sched-", "-fschedule-insns2", "not-off"),
    (r"tracer-", "-ftracer", "on"),
    (r"unroll-jam-", "-floop-unroll-and-jam", "not-off"),
    (r"loop-interchange-", "-floop-interchange", "not-off"),
    (r"max-unswitch-", "-funswitch-loops", "not-off"),
    (r"loop-versioning-", "-fversion-loops-for-strides", "not-off"),
    (r"max-crossjump-edges|min-crossjump-insns", "-fcrossjumping", "not-off"),
    (r"max-hoist-depth", "-fcode-hoisting", "not-off"),
    (
        r"max-stores-to-merge|store-merging-|max-store-chains-to-track|max-stores-to-track",
        "-fstore-merging",
        "not-off",
    ),
    (r"max-modulo-backtrack-attempts", "-fmodulo-sched", "on"),
    (r"max-rtl-if-conversion-", "-fif-conversion", "not-off"),
    (r"max-tree-if-conversion-", "-ftree-loop-if-convert", "not-off"),
    (r"max-jump-thread-", "-fthread-jumps", "not-off"),
    (r"sra-max-", "-ftree-sra", "not-off"),
    (r"max-slsr-", "-ftree-slsr", "not-off"),
    (r"max-partial-antic-length", "-ftree-pre", "not-off"),
    (r"max-vrp-", "-ftree-vrp", "not-off"),
]

# Tuning a param across a range of 1..65536 mostly explores compile-time blow-ups; the search stays
# within this factor of the compiler's default (and within the printed range).
_PARAM_SPREAD = 8


def _param_kind(p: ParamInfo, defaults: Iterable[int] = ()) -> tuple[str, int, int]:
    """Choose the scale of a param: ``("int"|"pow2"|"logint", lo, hi)``.

    The range also covers ``defaults``, the param's defaults at other -O levels and -march/-mtune
    values, so that a seed such as ``-O1`` or ``-march=native`` can keep the compiler's own values.
    """
    kind, lo, hi = _param_scale(p)
    values = [v for v in defaults if p.lo <= v <= p.hi or not p.range_known]
    if not values or min(values) >= lo and max(values) <= hi:
        return kind, lo, hi
    lo, hi = min(lo, *values), max(hi, *values)
    if kind == "pow2" and any(v < 1 or v & (v - 1) for v in values):
        kind = "logint"
    if kind == "logint" and lo < 1:
        kind = "int"
    return kind, lo, hi


def _param_scale(p: ParamInfo) -> tuple[str, int, int]:
    lo, hi = p.lo, p.hi
    if hi - lo <= 64:
        return "int", lo, hi
    if p.default >= 1:
        lo = max(lo, p.default // _PARAM_SPREAD, 1 if lo <= 1 else lo)
        hi = min(hi, p.default * _PARAM_SPREAD)
    else:
        lo, hi = max(lo, 0), min(hi, 64)
        return "int", lo, hi
    if hi - lo <= 64:
        return "int", lo, hi
    is_pow2 = p.default & (p.default - 1) == 0
    if is_pow2 and p.default >= 16:
        plo = 1 << math.ceil(math.log2(max(lo, 1)))
        phi = 1 << int(math.floor(math.log2(hi)))
        if plo <= p.default <= phi and plo < phi:
            return "pow2", plo, phi
    return "logint", max(lo, 1), hi


def _param_flag(p: ParamInfo, flags_by_flag: Mapping[str, FlagInfo]) -> tuple[FlagInfo, str] | None:
    """The flag a param serves and when the param is active (``"on"``, ``"not-off"``), or None."""
    for pattern, flag, mode in _PARAM_FLAG:
        if re.match(pattern, p.param) and flag in flags_by_flag:
            return flags_by_flag[flag], mode
    return None


def _param_when(p: ParamInfo, flags_by_flag: Mapping[str, FlagInfo]) -> str | None:
    served = _param_flag(p, flags_by_flag)
    if served is None:
        return None
    flag, mode = served
    return f"{flag.name} == 'on'" if mode == "on" else f"{flag.name} != 'off'"


def build_space(
    info: CompilerInfo,
    *,
    include_params: bool = True,
    include_march: bool = True,
    levels: Iterable[str] = LEVELS,
) -> Any:
    """The search space of ``info``'s flags, params, -O levels and -march/-mtune choices.

    Args:
        info: What :func:`discover` found.
        include_params: Add the ``--param`` knobs.
        include_march: Add ``march``/``mtune`` (values this machine can run only).
        levels: The -O levels to offer; the first is the default.

    Returns:
        A :class:`perftune.space.Space` whose default configuration renders as ``-O<first level>``.
    """
    from perftune.space import Choice, Int, LogInt, Pow2, Space

    params: dict[str, Any] = {}
    levels = tuple(levels)
    params["O"] = Choice(list(levels), default=levels[0])
    if include_march and info.march:
        params["march"] = Choice(["default", *info.march], default="default")
    if include_march and info.mtune:
        params["mtune"] = Choice(["default", *info.mtune], default="default")
    by_flag = {f.flag: f for f in info.flags}
    for f in info.flags:
        if f.flag in info.rejected:
            continue
        if f.kind == "bool":
            if "-fno-" + f.flag[2:] in info.rejected:
                continue
            params[f.name] = Choice(["default", "on", "off"], default="default")
        else:
            values = [v for v in f.values if f"{f.flag}={v}" not in info.rejected]
            params[f.name] = Choice(["default", *values], default="default")
    if include_params:
        defaults: dict[str, list[int]] = {}
        for changed in info.param_defaults.values():
            for name, value in changed.items():
                defaults.setdefault(name, []).append(value)
        for p in info.params:
            if f"--param={p.param}" in info.rejected:
                continue
            kind, lo, hi = _param_kind(p, defaults.get(p.param, ()))
            if not lo <= p.default <= hi:
                continue
            when = _param_when(p, by_flag)
            if kind == "int":
                params[p.name] = Int(lo, hi, default=p.default, when=when)
            elif kind == "pow2":
                params[p.name] = Pow2(lo, hi, default=p.default, when=when)
            else:
                params[p.name] = LogInt(lo, hi, default=p.default, when=when)
    constraints = []
    if "fast" in levels and "ffast_math" in params:
        # -Ofast is -O3 -ffast-math: -Ofast -fno-fast-math only duplicates -O3 under another name.
        constraints.append("O != 'fast' or ffast_math != 'off'")
    return Space(params, constraints)


def render(config: Mapping[str, Any], info: CompilerInfo) -> list[str]:
    """The compiler options of a configuration (only what differs from the compiler's defaults).

    A param is left out when its value is the compiler's default under the configuration's -O level,
    -march and -mtune (:meth:`CompilerInfo.param_default`). Order: ``-O``, ``-march``, ``-mtune``, flags,
    params, each group sorted by name so that equal configurations give equal command lines.
    """
    level = str(config.get("O", "3"))
    out = [f"-O{level}"]
    march = config.get("march", "default")
    if march != "default":
        out.append(f"-march={march}")
    mtune = config.get("mtune", "default")
    if mtune != "default":
        out.append(f"-mtune={mtune}")
    for f in sorted(info.flags, key=lambda f: f.flag):
        value = config.get(f.name, "default")
        if value == "default":
            continue
        if f.kind == "bool":
            out.append(f.flag if value == "on" else "-fno-" + f.flag[2:])
        else:
            out.append(f"{f.flag}={value}")
    for p in sorted(info.params, key=lambda p: p.param):
        if p.name in config and int(config[p.name]) != info.param_default(p, level, march, mtune):
            out.append(f"--param={p.param}={int(config[p.name])}")
    return out


def config_from_flags(options: Iterable[str], info: CompilerInfo, space: Any) -> dict[str, Any]:
    """The configuration that renders as ``options`` (a user's seed such as ``-O2 -funroll-loops``).

    A param the options do not set takes the compiler's default under their -O level, -march and
    -mtune (so that ``-O2`` renders as ``-O2``); one they set keeps its value at any level.

    Raises:
        PerftuneError: An option is not a known optimisation flag, param, -O level or -march/-mtune
            value of this compiler (one line naming it).
    """
    config = dict(space.default())
    given: dict[str, tuple[ParamInfo, str]] = {}  # the params the options set, by name
    for opt in options:
        if opt.startswith("-O"):
            level = opt[2:] or "1"
            if level not in space.params["O"].options:
                raise PerftuneError(
                    f"seed: unknown optimisation level {opt!r} (known: -O{', -O'.join(LEVELS)})"
                )
            config["O"] = level
        elif opt.startswith(("-march=", "-mtune=")):
            key, value = opt[1:].split("=", 1)
            if key not in space.params or value not in space.params[key].options:
                known = ", ".join(space.params[key].options[1:]) if key in space.params else "none"
                raise PerftuneError(f"seed: -{key}={value} is not offered on this machine (known: {known})")
            config[key] = value
        elif opt.startswith("--param="):
            body = opt[len("--param=") :]
            name, _, value = body.partition("=")
            p = info.param(name)
            if p is None or p.name not in space.params:
                raise PerftuneError(f"seed: unknown or untunable --param {name!r} for {info.version_line}")
            try:
                number = int(value)
            except ValueError:
                raise PerftuneError(f"seed: --param {name} needs an integer, got {value!r}") from None
            if not space.params[p.name].contains(number):
                raise PerftuneError(f"seed: --param {name}={number} is outside the tuned range")
            config[p.name] = number
            given[p.name] = (p, opt)
        elif opt.startswith("-f"):
            f = info.flag(opt)
            if f is None or f.name not in space.params:
                raise PerftuneError(f"seed: unknown optimisation flag {opt!r} for {info.version_line}")
            if f.kind == "bool":
                if "=" in opt:
                    raise PerftuneError(f"seed: flag {f.flag} takes no value, got {opt!r}")
                config[f.name] = "off" if opt.startswith("-fno-") else "on"
            else:
                value = opt.split("=", 1)[1] if "=" in opt else ""
                if value not in f.values:
                    raise PerftuneError(f"seed: {opt!r}: {f.flag}= takes one of {', '.join(f.values)}")
                config[f.name] = value
        else:
            raise PerftuneError(
                f"seed: {opt!r} is not an optimisation option (-O, -f, --param, -march, -mtune)"
            )
    # Activity follows the flags: drop params whose condition is now false, add ones that became active.
    for name, param in space.params.items():
        if param.when is None:
            continue
        try:
            active = bool(param.when.evaluate(config))
        except KeyError:
            active = False
        if not active:
            if name in given:  # a param the seed sets is said to be without effect, not dropped silently
                p, opt = given[name]
                served = _param_flag(p, {f.flag: f for f in info.flags})
                if served is not None and served[1] == "on":
                    why = f"with {served[0].flag} on: add {served[0].flag} to the seed"
                else:
                    flag = "its flag" if served is None else served[0].flag
                    why = f"unless {flag} is off: drop -fno-{flag[2:]} from the seed"
                raise PerftuneError(f"seed: perftune tunes {opt} only {why}, or leave the param out")
            config.pop(name, None)
        elif name not in config:
            config[name] = param.default_value()
    # The params the options leave alone are the compiler's own under their level and -march/-mtune.
    where = (str(config.get("O", "3")), config.get("march", "default"), config.get("mtune", "default"))
    for p in info.params:
        if p.name in config and p.name not in given:
            default = info.param_default(p, *where)
            if space.params[p.name].contains(default):
                config[p.name] = default
    return config
