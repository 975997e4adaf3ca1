"""The GPU examples' spaces (the examples themselves run on the GPU: benchmarks/results/gpu-matmul.md)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")


def test_matmul_space_holds_hundreds_of_valid_configs_within_hopper_limits() -> None:
    from perftune.examples.gpu.triton_matmul import SHARED_MEMORY_BYTES, matmul_configs, matmul_space

    configs = matmul_configs()
    assert len(configs) >= 500 and len(configs) == matmul_space().cardinality()
    for c in configs:
        k = c.kwargs
        assert c.num_stages * (k["BLOCK_M"] + k["BLOCK_N"]) * k["BLOCK_K"] * 2 <= SHARED_MEMORY_BYTES
        assert k["SPLIT_K"] == 1 or k["BLOCK_M"] <= 64
    tiles = {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in configs}
    assert (128, 256) in tiles and (16, 64) in tiles  # the large tiles and the skinny ones


def test_softmax_space_keeps_every_warp_busy() -> None:
    from perftune.examples.gpu.triton_softmax import softmax_space

    space = softmax_space()
    points = list(space.enumerate())
    assert len(points) > 50
    assert all(p["BLOCK"] >= 32 * p["num_warps"] and p["BLOCK"] * p["ROWS"] <= 16384 for p in points)
