"""Discovery of gcc's flags and params from the compiler itself, and the per-version probe cache."""

from __future__ import annotations

import json

import pytest

from perftune.errors import PerftuneError
from perftune.targets.flags import discover
from perftune.targets.flags._discover import cache_path, parse_optimizers, parse_params, parse_target

GCC12_OPTIMIZERS = """The following options control optimizations:
  -O<number>                  \t\t
  -faggressive-loop-optimizations \t[enabled]
  -falign-functions=          \t\t16
  -fprofile-use               \t\t[disabled]
  -funroll-loops              \t\t[disabled]
  -fexceptions                \t\t[available in Modula-2]
  -fvect-cost-model=[unlimited|dynamic|cheap|very-cheap] \tdynamic
  -flifetime-dse=<0,2>        \t\t2
  -fsched-stalled-insns=<number> \t
"""

GCC12_PARAMS = """The following options control parameters:
  --param=align-loop-iterations= \t4
  --param=asan-globals=<0,1>  \t\t1
  --param=max-unroll-times=<0,32> \t8
  --param=max-cse-path-length=<1,65536> \t\t10
  --param=ira-consider-dup-in-all-alts=<0,1> \t0
  --param=vrp1-mode=[vrp|ranger] \tvrp
  --param=case-values-threshold= \t0
"""


def test_parse_optimizers_reads_gcc12_syntax_and_skips_non_speed_flags() -> None:
    flags = {f.flag: f for f in parse_optimizers(GCC12_OPTIMIZERS)}
    assert flags["-funroll-loops"].kind == "bool" and flags["-funroll-loops"].o3_state == "disabled"
    assert flags["-faggressive-loop-optimizations"].o3_state == "enabled"
    assert flags["-fvect-cost-model"].values == ("unlimited", "dynamic", "cheap", "very-cheap")
    assert "-fprofile-use" not in flags  # needs profile data
    assert "-fexceptions" not in flags  # not for C, and an ABI change
    assert "-falign-functions" not in flags and "-fsched-stalled-insns" not in flags


def test_parse_params_keeps_ranges_and_bounds_unranged_params() -> None:
    params = {p.param: p for p in parse_params(GCC12_PARAMS)}
    assert (
        params["max-unroll-times"].lo,
        params["max-unroll-times"].hi,
        params["max-unroll-times"].default,
    ) == (0, 32, 8)
    assert params["max-unroll-times"].range_known
    unranged = params["align-loop-iterations"]
    assert not unranged.range_known and unranged.lo <= 4 <= unranged.hi
    assert "asan-globals" not in params  # sanitizer knob
    assert "vrp1-mode" not in params  # not a number
    assert "case-values-threshold" not in params  # no range and a mode-like default: left out


def test_parse_target_lists_march_values() -> None:
    text = (
        "  -march=  \t\tx86-64\n  -mtune=  \tgeneric\n"
        "  Known valid arguments for -march= option:\n    core2 znver3 native\n"
    )
    march, mtune, default_march, default_tune = parse_target(text)
    assert march == ["core2", "znver3", "native"] and default_march == "x86-64" and default_tune == "generic"


def test_discover_installed_gcc(gcc_info) -> None:  # type: ignore[no-untyped-def]
    info = gcc_info
    names = {f.flag for f in info.flags}
    assert "-funroll-loops" in names and "-ftree-vectorize" in names
    assert len(info.flags) > 50
    unroll = info.param("max-unroll-times")
    assert unroll is not None and unroll.lo <= unroll.default <= unroll.hi
    assert len(info.params) > 50  # GCC 10+ prints params in a syntax older parsers miss
    assert info.march and info.march[0] == "native"
    assert info.flag("-fno-unroll-loops") is info.flag("-funroll-loops")


def test_probe_results_are_cached_per_compiler(gcc_info) -> None:  # type: ignore[no-untyped-def]
    path = cache_path(gcc_info)
    assert path.exists()
    data = json.loads(path.read_text())
    assert data["version"] == gcc_info.version
    again = discover("gcc")
    assert again.flags == gcc_info.flags and again.params == gcc_info.params


def test_missing_compiler_is_one_clear_line(flags_cache) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PerftuneError) as err:
        discover("no-such-compiler-perftune")
    message = str(err.value)
    assert "no-such-compiler-perftune" in message and "not found" in message and "\n" not in message


def test_gxx_is_discovered_in_cxx(flags_cache) -> None:  # type: ignore[no-untyped-def]
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    info = discover("g++")  # its probe file is compiled as C++: the probe is valid C++ too
    assert info.language == "c++" and info.flag("-funroll-loops") is not None
    assert discover("gcc", language="c++").language == "c++"


def test_a_param_a_seed_sets_is_kept_at_any_level(gcc_info) -> None:  # type: ignore[no-untyped-def]
    from perftune.targets.flags import build_space, config_from_flags, render

    space = build_space(gcc_info)
    at_o3 = gcc_info.param("max-inline-insns-auto")
    assert at_o3 is not None and gcc_info.param_default(at_o3, "2") != at_o3.default  # 15 at -O2, 30 at -O3
    value = f"--param=max-inline-insns-auto={at_o3.default}"
    assert value in render(config_from_flags(["-O2", value], gcc_info, space), gcc_info)
    # A level alone is that level with the compiler's own params, as before.
    for level in ("-O2", "-O1", "-Os", "-Ofast"):
        assert render(config_from_flags([level], gcc_info, space), gcc_info) == [level]
    # Params that -march changes: the seed's own value stays, -march alone stays alone.
    if "native" in gcc_info.march:
        assert render(config_from_flags(["-O3", "-march=native"], gcc_info, space), gcc_info) == \
            ["-O3", "-march=native"]
        changed = gcc_info.param_defaults.get("3|native|default", {})
        for name in changed:
            p = gcc_info.param(name)
            assert p is not None
            if p.name in space.params and space.params[p.name].when is None:
                seed = ["-O3", "-march=native", f"--param={name}={p.default}"]
                assert seed[-1] in render(config_from_flags(seed, gcc_info, space), gcc_info)


def test_a_seed_param_without_effect_is_one_line_not_dropped(gcc_info) -> None:  # type: ignore[no-untyped-def]
    from perftune.targets.flags import build_space, config_from_flags

    space = build_space(gcc_info)
    with pytest.raises(PerftuneError) as err:
        config_from_flags(["-O3", "--param=max-unroll-times=4"], gcc_info, space)  # -funroll-loops is off
    assert "-funroll-loops" in str(err.value) and "\n" not in str(err.value)
