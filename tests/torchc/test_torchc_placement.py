"""Device sites: device-aware alternatives and selectors, CPU fallback of GPU-tuned choices, and
cutoffs placed where a fixed per-call cost (a transfer's latency) stops paying."""

from __future__ import annotations

import time

import numpy as np
import pytest

from perftune.choice import (
    DEVICES_ENV_VAR,
    ChoiceError,
    ChoicesFile,
    DeviceSite,
    available_devices,
    tune_placement,
    use_choices,
)


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI has no GPU anyway; this makes the tests mean the same on a GPU machine.
    monkeypatch.setenv(DEVICES_ENV_VAR, "cpu")
    use_choices(ChoicesFile())


def _site(name: str) -> DeviceSite:
    site = DeviceSite(name, size=len, size_range=(1, 1 << 22))

    @site.alternative("python", device="cpu")
    def _python(xs: np.ndarray) -> float:
        total = 0.0
        for x in xs:
            total += x
        return total

    @site.alternative("offload", device="cpu")
    def _offload(xs: np.ndarray) -> float:
        time.sleep(0.004)  # a fixed per-call latency, like a round trip to an accelerator
        return float(np.sum(xs))

    @site.alternative("gpu", device="cuda")
    def _gpu(xs: np.ndarray) -> float:
        raise AssertionError("a cuda alternative must never run on a machine without one")

    return site


def test_absent_devices_are_not_chosen() -> None:
    site = _site("t-place-devices")
    assert available_devices() == frozenset({"cpu"})
    assert site.alternatives == ("python", "offload")
    assert site.all_alternatives == ("python", "offload", "gpu")
    assert site.devices["gpu"] == "cuda" and site.device_of("offload") == "cpu"
    assert set(site.selector().choices) == {"python", "offload"}


def test_choices_tuned_with_a_gpu_fall_back_to_the_cpu() -> None:
    site = _site("t-place-fallback")
    tuned = ChoicesFile()
    tuned.set_site("t-place-fallback", [1000, 100_000], ["python", "gpu", "offload"])
    use_choices(tuned)
    assert site(np.array([1.0, 2.0])) == 3.0
    assert site.choose(5000) == "python" and site.choose(500_000) == "offload"
    assert "gpu on python (device absent)" in site.source
    assert site.cutoffs == (100_000,)


def test_bad_devices_are_one_line_errors() -> None:
    with pytest.raises(ChoiceError, match="device 'tpu'"):
        DeviceSite("t-place-bad", {"a": sorted}, devices={"a": "tpu"})
    with pytest.raises(ChoiceError, match="unknown alternatives"):
        DeviceSite("t-place-bad2", {"a": sorted}, devices={"b": "cuda"})
    site = DeviceSite("t-place-bad3", {"gpu-only": sorted}, devices={"gpu-only": "cuda"})
    with pytest.raises(ChoiceError, match="no CPU alternative"):
        _ = site.fallback
    with pytest.raises(ChoiceError, match="strictly increasing"):
        tune_placement(_site("t-place-bad4"), lambda n, rng: [1.0] * n, [10, 5])


@pytest.mark.timeout(120)
def test_cutoff_lands_where_the_fixed_cost_stops_paying() -> None:
    site = _site("t-place-tune")
    sizes = [100, 1_000, 10_000, 100_000, 1_000_000]
    result = tune_placement(site, lambda n, rng: rng.random(n), sizes,
                            check=lambda xs, out: abs(out - float(np.sum(xs))) < 1e-9 * len(xs), n_rounds=3)
    assert [row.size for row in result.rows] == sizes
    assert all("gpu" not in row.median_s for row in result.rows)
    # A Python loop over an array costs ~50-150 ns an element: far under the 4 ms latency at 10^3, far over
    # it at 10^6 (~100 ms).
    assert result.rows[0].winner == "python" and result.rows[-1].winner == "offload"
    assert result.choices == ("python", "offload")
    assert 1_000 < result.cutoffs[0] <= 1_000_000
    # The tuned selector runs each end's winner there (sizes near the crossing may be close calls).
    assert result.choose(sizes[0]) == "python" and result.choose(sizes[-1]) == "offload"
    result.apply(site)
    assert site.choose(10) == "python" and site.choose(2_000_000) == "offload"
    assert "| size |" in result.table()
    assert result.choices_file.sites["t-place-tune"] == (result.cutoffs, result.choices)


@pytest.mark.timeout(120)
def test_the_size_ladder_never_tries_an_absent_device() -> None:
    from perftune.choice import LadderSettings, tune_sites

    site = _site("t-place-ladder")
    result = tune_sites(site, [site], make_input=lambda n, rng: rng.random(n), sizes=[64, 4096],
                        settings=LadderSettings(population=6, generations=1, final_samples=2), seed=0)
    assert set(result.choices.sites["t-place-ladder"][1]) <= {"python", "offload"}
    assert not [f for f in result.ladder.failures if "gpu" in str(f)]
