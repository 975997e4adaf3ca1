"""Learned per-input dispatch for Triton kernels (perftune.adapt.TritonSite), in Triton's interpreter:
landmarks tuned per shape cluster through the kernel's own benchmark, a new key dispatched without
tuning, the dispatcher file (saved, loaded, stale), and wrong configurations never becoming landmarks."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import triton_interp_kernels as kernels  # noqa: E402

import perftune.triton  # noqa: E402
from perftune.adapt import AdaptError, DispatchFileWarning, Launch, TritonSite  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(perftune.triton.CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setenv("PERFTUNE_DISPATCH", str(tmp_path / "none.json"))  # no file: tune per key
    monkeypatch.delenv("PERFTUNE_STORE", raising=False)


def _configs(*blocks_and_modes: tuple[int, int]) -> list:
    return [triton.Config({"BLOCK": b, "MODE": m}, num_warps=4, num_stages=2) for b, m in blocks_and_modes]


def _kernel(configs: list, **options: object) -> perftune.triton.Autotuner:
    return perftune.triton.autotune(configs=configs, key=["n"], **options)(kernels.scale_kernel)


def _launch(n: int, dtype: torch.dtype = torch.float32) -> Launch:
    return Launch(torch.randn(n, dtype=dtype), torch.zeros(n, dtype=dtype), n, grid=kernels.grid_1d(n))


def _run(kernel: perftune.triton.Autotuner, n: int) -> bool:
    x, y = torch.randn(n), torch.zeros(n)
    kernel[kernels.grid_1d(n)](x, y, n)
    return bool(torch.equal(y, 2 * x))


def test_features_are_the_key_values_their_power_of_two_and_the_dtype() -> None:
    site = TritonSite(_kernel(_configs((16, 0), (64, 0))))
    assert site.columns == ("log2_n", "pow2_n", "dtype_bits")
    values = [fn(_launch(96, torch.float64)) for fn in site.column_functions()]
    assert values == pytest.approx([6.599912, 5.0, 64.0])
    # At run time the features read the kernel's named arguments.
    assert [fn({"n": 96, "x_ptr": torch.zeros(1)}) for fn in site.column_functions()][:2] == values[:2]
    assert site.input_size(_launch(96)) == 96.0


def test_a_learned_dispatcher_picks_the_config_of_a_new_key_without_tuning(tmp_path: Path) -> None:
    kernel = _kernel(_configs((16, 0), (64, 0), (256, 0)), isolate=False)
    site = TritonSite(kernel)
    launches = [_launch(n) for n in (40, 90, 200, 400, 700, 1000)]
    tuning = site.tune(launches, budget=9, n_clusters=2, seed=0, save=tmp_path / "dispatch.json")
    assert tuning.time_s.shape == (6, len(tuning.landmarks)) and tuning.ok.all()
    # Each cluster's landmark is the kernel's own tuning of its largest launch (kept in its cache).
    assert tuning.n_trials > 0 and len(list((tmp_path / "cache").glob("*.json"))) == 2
    blocks = {lm["BLOCK"] for lm in tuning.landmarks}
    assert blocks <= {16, 64, 256}
    assert _run(kernel, 555)
    (key, chosen), = kernel.chosen.items()
    assert key[0] == 555 and chosen in [dict(lm) for lm in tuning.landmarks]
    assert chosen == site.choose({"n": 555, "x_ptr": torch.zeros(1), "y_ptr": torch.zeros(1)})
    assert kernel.reports == {}  # nothing was tuned at run time
    assert kernel.best_config.kwargs["BLOCK"] == chosen["BLOCK"]

    # Another process (here: another kernel object) loads the file and dispatches the same way.
    again = _kernel(_configs((16, 0), (64, 0), (256, 0)), isolate=False)
    other = TritonSite(again)
    assert other.load(tmp_path / "dispatch.json")
    assert _run(again, 555) and again.chosen == kernel.chosen and again.reports == {}
    # Without load(): the process's dispatcher file (the one save= wrote and made current) is read.
    third = _kernel(_configs((16, 0), (64, 0), (256, 0)), isolate=False)
    TritonSite(third)
    assert _run(third, 555) and third.chosen == kernel.chosen and third.reports == {}


def test_a_stale_or_missing_dispatcher_warns_once_and_the_kernel_tunes_per_key(tmp_path: Path) -> None:
    kernel = _kernel(_configs((16, 0), (64, 0)), isolate=False)
    site = TritonSite(kernel)
    site.tune([_launch(n) for n in (40, 90, 200, 400)], budget=4, n_clusters=2, seed=0,
              save=tmp_path / "dispatch.json")
    grown = _kernel(_configs((16, 0), (64, 0), (128, 0)), isolate=False)  # a new config: stale
    stale_site = TritonSite(grown)
    with pytest.warns(DispatchFileWarning, match="is stale") as caught:
        assert not stale_site.load(tmp_path / "dispatch.json")
    assert len(caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning at the launch
        assert _run(grown, 300)
    assert grown.chosen == {} and len(grown.reports) == 1  # tuned per key, as without a dispatcher

    other = _kernel(_configs((16, 0), (64, 0)), isolate=False)
    named = TritonSite(other, name="triton:another")
    with pytest.warns(DispatchFileWarning, match="no dispatcher for site 'triton:another'"):
        assert not named.load(tmp_path / "dispatch.json")
    (tmp_path / "corrupt.json").write_text("{not json")
    with pytest.warns(DispatchFileWarning):
        assert not named.load(tmp_path / "corrupt.json")
    assert _run(other, 300) and other.chosen == {}


def test_a_set_dispatcher_runs_its_landmark_and_none_restores_tuning() -> None:
    kernel = _kernel(_configs((16, 0), (64, 0)), isolate=False)
    site = TritonSite(kernel)
    site.use_dispatcher(site.constant_dispatcher({"BLOCK": 64, "MODE": 0, "num_warps": 4, "num_stages": 2}))
    assert _run(kernel, 100)
    assert kernel.best_config.kwargs == {"BLOCK": 64, "MODE": 0} and kernel.reports == {}
    site.use_dispatcher(None)
    assert _run(kernel, 200) and len(kernel.reports) == 1


def test_wrong_configs_never_become_landmarks_in_the_isolated_benchmark() -> None:
    kernel = _kernel(_configs((16, 1), (32, 0), (64, 1), (128, 0)), reference=kernels.expected_scale)
    site = TritonSite(kernel)
    launches = [_launch(n) for n in (50, 120, 300, 600)]
    tuning = site.tune(launches, budget=8, n_clusters=2, seed=1)
    # The default (the first config, wrong) is measured as a seed: a landmark with no answer anywhere.
    wrong = [k for k, lm in enumerate(tuning.landmarks) if lm["MODE"] == 1]
    assert wrong and not tuning.ok[:, wrong].any() and tuning.ok.any(axis=1).all()
    assert all(site.choose(site.arguments(x))["MODE"] == 0 for x in launches)
    assert _run(kernel, 250) and next(iter(kernel.chosen.values()))["MODE"] == 0


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(AdaptError, match="expected a kernel decorated with perftune.triton.autotune"):
        TritonSite(kernels.scale_kernel)
    site = TritonSite(_kernel(_configs((16, 0), (64, 0)), isolate=False))
    with pytest.raises(AdaptError, match="training inputs must be perftune.adapt.Launch objects, got list"):
        site.tune([[1, 2, 3]] * 4, budget=4)
    with pytest.raises(AdaptError, match="key argument 'n' is str, not a number"):
        site.column_functions()[0]({"n": "large"})


def _no_block_64_for_odd_n(configs: list, named_args: dict, **kwargs: object) -> list:
    return [c for c in configs if not (named_args["n"] % 2 and c.kwargs["BLOCK"] == 64)]


def test_a_landmark_that_early_config_prune_rules_out_is_neither_measured_nor_dispatched() -> None:
    kernel = _kernel(_configs((16, 0), (64, 0)), isolate=False,
                     prune_configs_by={"early_config_prune": _no_block_64_for_odd_n})
    site = TritonSite(kernel)
    block_64 = {"BLOCK": 64, "MODE": 0, "num_warps": 4, "num_stages": 2}
    site.use_dispatcher(site.constant_dispatcher(block_64))
    assert _run(kernel, 100) and list(kernel.chosen.values()) == [block_64]
    assert _run(kernel, 101) and len(kernel.chosen) == 1 and len(kernel.reports) == 1  # tuned instead
    assert kernel.best_config.kwargs["BLOCK"] == 16
    odd = _launch(101)
    with kernel.benchmark(*odd.args, grid=odd.grid) as bench:
        assert bench.measure({"BLOCK": 16, "MODE": 0, "num_warps": 4, "num_stages": 2}) > 0
        with pytest.raises(perftune.PerftuneError, match="early_config_prune rules out"):
            bench.measure(block_64)


_HOOK_CALLS: list[dict] = []


def _record(nargs: dict) -> None:
    _HOOK_CALLS.append(dict(nargs))


def test_calling_the_site_runs_the_users_config_with_its_pre_hook() -> None:
    configs = [triton.Config({"BLOCK": b, "MODE": 0}, num_warps=4, num_stages=2, pre_hook=_record)
               for b in (16, 64)]
    kernel = _kernel(configs, isolate=False)
    site = TritonSite(kernel)
    site.use_dispatcher(site.constant_dispatcher({"BLOCK": 64, "MODE": 0, "num_warps": 4, "num_stages": 2}))
    _HOOK_CALLS.clear()
    x = _launch(100)
    site(x)  # the landmark run directly, as a dispatcher's caller does outside the kernel's launch
    assert torch.equal(x.args[1], 2 * x.args[0])
    assert len(_HOOK_CALLS) == 1 and _HOOK_CALLS[0]["n"] == 100 and _HOOK_CALLS[0]["BLOCK"] == 64
