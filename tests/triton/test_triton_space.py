"""Triton configurations as perftune spaces, and the decorator's refusals of bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from perftune.errors import PerftuneError  # noqa: E402
from perftune.space import Int, Pow2, Space  # noqa: E402
from perftune.triton import (  # noqa: E402
    autotune,
    config_id,
    space_from_configs,
    to_triton_config,
    triton_config_dict,
)


def _grid_configs() -> list:
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=3)
        for m in (128, 32, 64)
        for n in (64, 32)
        for w in (4, 8)
        if not (m == 128 and w == 4)
    ]


def test_space_of_a_config_list_orders_values_and_allows_only_listed_points() -> None:
    configs = _grid_configs()
    space = space_from_configs(configs)
    assert list(space.params["BLOCK_M"].options) == [32, 64, 128]
    assert space.default() == triton_config_dict(configs[0])
    listed = {config_id(triton_config_dict(c)) for c in configs}
    enumerated = {config_id(dict(c)) for c in space.enumerate()}
    assert enumerated == listed
    assert not space.is_valid({"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3})


def test_config_round_trip_keeps_launch_options() -> None:
    config = triton.Config({"BLOCK": 64}, num_warps=8, num_stages=4, num_ctas=2, maxnreg=128)
    flat = triton_config_dict(config)
    assert flat == {"BLOCK": 64, "num_warps": 8, "num_stages": 4, "num_ctas": 2, "maxnreg": 128}
    back = to_triton_config(flat)
    assert back.all_kwargs() == config.all_kwargs()
    assert config_id(flat) == config_id(dict(reversed(list(flat.items()))))


def test_mixed_config_lists_are_refused_with_a_one_line_reason() -> None:
    configs = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 64, "SPLIT": 2})]
    with pytest.raises(PerftuneError, match=r"configs\[1\] has parameters") as info:
        space_from_configs(configs)
    assert "\n" not in str(info.value)
    with pytest.raises(PerftuneError, match="configs is empty"):
        space_from_configs([])


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"configs": [triton.Config({"BLOCK": 16})], "key": ["m"]}, "key 'm' is not an argument"),
        (
            {"configs": [triton.Config({"BLOCK": 16})], "key": ["n"], "reset_to_zero": ["z"]},
            "'z' in reset_to_zero",
        ),
        ({"key": ["n"]}, "give either configs="),
        (
            {
                "configs": [triton.Config({"BLOCK": 16})],
                "space": Space({"BLOCK": Pow2(16, 64)}),
                "key": ["n"],
            },
            "give either configs=",
        ),
        ({"space": Space({"BLOK": Pow2(16, 64)}), "key": ["n"]}, "space parameter 'BLOK' is neither"),
        ({"space": {"BLOCK": Int(1, 2)}, "key": ["n"]}, "space must be a perftune.space.Space"),
        ({"configs": [triton.Config({"BLOCK": 16})], "key": "n"}, "key must be a list of argument names"),
        ({"configs": [{"BLOCK": 16}], "key": ["n"]}, r"configs\[0\] is a dict, not a triton.Config"),
        ({"configs": [triton.Config({"BLOCK": 16, "G": None})], "key": ["n"]},
         "meta-parameter 'G' has the value None"),
        ({"configs": [triton.Config({"BLOCK": 16, "D": tl.float16})], "key": ["n"]},
         "meta-parameter 'D' has the value"),
    ],
)
def test_bad_decorator_arguments_fail_at_decoration(kwargs: dict, message: str) -> None:
    with pytest.raises(PerftuneError, match=message):
        autotune(**kwargs)(_copy)


def test_space_mode_accepts_meta_parameters_and_launch_options() -> None:
    space = Space(
        {"BLOCK": Pow2(16, 1024), "num_warps": Pow2(1, 8), "num_stages": Int(1, 4)},
        constraints=["BLOCK >= 32 * num_warps"],
    )
    kernel = autotune(space=space, key=["n"], budget=5)(_copy)
    assert kernel.best_config is None and kernel.arg_names == ["x_ptr", "y_ptr", "n", "BLOCK"]


def test_import_is_lazy() -> None:
    code = "import sys, perftune.triton; print('triton' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_the_default_budget_measures_a_small_list_whole_and_a_large_one_in_part() -> None:
    from perftune.targets.triton._autotuner import DEFAULT_SHARE, default_budget

    assert [default_budget(n).evals for n in (1, 16, 17, 100, 926)] == [1, 16, 16, 16, 139]
    assert default_budget(10_000).evals == 1500 and DEFAULT_SHARE == 0.15


def _session_with(times: dict[str, float]):
    from perftune.targets.triton._autotuner import _Session

    session = _Session.__new__(_Session)  # only the recorded samples matter to the leader choice
    session.samples = {cid: [t, t * 1.001, t * 0.999] for cid, t in times.items()}
    return session


def test_final_comparison_takes_every_close_configuration_up_to_the_cap() -> None:
    from perftune.targets.triton._autotuner import LEADER_MARGIN, MAX_LEADERS, N_LEADERS

    # Far apart: the three fastest, whatever their distance.
    assert _session_with({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0})._leaders() == ["a", "b", "c"]
    # Close ones beyond the third are compared too; one just outside the margin is not.
    close = {"a": 1.0, "b": 1.01, "c": 1.02, "d": 1.03, "e": 1.0 + LEADER_MARGIN * 0.9,
             "f": 1.0 + LEADER_MARGIN * 1.2}
    assert _session_with(close)._leaders() == ["a", "b", "c", "d", "e"]
    # Never more than the cap, fastest first.
    many = {f"c{i:02d}": 1.0 + i * 1e-3 for i in range(20)}
    leaders = _session_with(many)._leaders()
    assert leaders == [f"c{i:02d}" for i in range(MAX_LEADERS)]
    assert N_LEADERS <= MAX_LEADERS
    assert _session_with({})._leaders() == []
