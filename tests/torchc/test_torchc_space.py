"""The Inductor settings space: keys torch has, torch's own defaults, modes, options dicts."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from perftune.errors import PerftuneError  # noqa: E402
from perftune.torch import KNOBS, compile_space, inductor_default, mode_options, options_of  # noqa: E402


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_parameter_is_an_inductor_key_at_torch_default(device: str) -> None:
    space = compile_space(device)
    assert len(space.params) >= 8
    for name in space.params:
        inductor_default(name)  # raises AttributeError for a key this torch does not have
    default = space.default()
    assert options_of(default) == {}, "the default configuration must be plain torch.compile"
    for name, value in dict(default).items():
        assert value == inductor_default(name)


def test_device_specific_settings() -> None:
    cpu, cuda = compile_space("cpu").params, compile_space("cuda").params
    assert "triton.cudagraphs" in cuda and "triton.cudagraphs" not in cpu
    assert "coordinate_descent_tuning" in cuda and "coordinate_descent_tuning" not in cpu
    assert "cpp_wrapper" in cpu and "cpp_wrapper" not in cuda
    assert cuda["max_autotune_gemm_backends"].options != cpu["max_autotune_gemm_backends"].options


def test_conditional_setting_only_with_its_condition() -> None:
    space = compile_space("cuda")
    assert "max_autotune_gemm_backends" not in space.default()
    for config in space.sample(0, 50):
        assert ("max_autotune_gemm_backends" in config) == bool(config["max_autotune"])


def test_knobs_missing_from_this_torch_are_left_out() -> None:
    from perftune.torch import KnobSpec

    knobs = (*KNOBS, KnobSpec("no_such_inductor_option_anywhere"))
    assert "no_such_inductor_option_anywhere" not in compile_space("cpu", knobs=knobs).params


def test_modes_and_options() -> None:
    assert mode_options("default", "cuda") == {}
    ma = mode_options("max-autotune", "cuda")
    assert ma["max_autotune"] is True and ma["triton.cudagraphs"] is True
    assert "triton.cudagraphs" not in mode_options("max-autotune", "cpu")
    assert options_of({"freezing": True, "epilogue_fusion": inductor_default("epilogue_fusion")}) == {
        "freezing": True
    }
    with pytest.raises(PerftuneError, match="unknown mode 'fastest'"):
        mode_options("fastest", "cpu")
    with pytest.raises(PerftuneError, match="device kind"):
        compile_space("tpu")
