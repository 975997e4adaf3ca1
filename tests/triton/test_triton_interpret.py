"""The decorator end to end on real Triton in interpreter mode (CPU, torch CPU tensors): dispatch,
failures (a wrong result, a crash, a hang), the persistent cache across processes, the space mode,
the store and neighbour seeding. Benchmark processes are real spawned processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import triton_interp_kernels as kernels  # noqa: E402
from click.testing import CliRunner  # noqa: E402

import perftune.triton  # noqa: E402
from perftune.cli import cli  # noqa: E402
from perftune.space import Ordinal, Pow2, Space  # noqa: E402
from perftune.store import open_store  # noqa: E402

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(perftune.triton.CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv("PERFTUNE_STORE", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # for the kernels the tests decorate themselves
    return tmp_path / "cache"


def _scale_configs(*modes_and_blocks: tuple[int, int]) -> list:
    return [triton.Config({"BLOCK": b, "MODE": m}, num_warps=4, num_stages=2) for m, b in modes_and_blocks]


def _launch_scale(kernel, n: int = 100) -> tuple:
    x = torch.randn(n)
    y = torch.zeros(n)
    kernel[kernels.grid_1d(n)](x, y, n)
    return x, y


def _trials(run_name: str, cache: Path) -> list:
    with open_store(f"sqlite:///{cache / 'perftune.db'}") as store:
        run = store.get_run(run_name)
        return store.trials(run.id)


def test_wrong_crashing_and_hanging_configs_are_failures_and_the_launch_still_works(
    _private_cache: Path,
) -> None:
    kernel = perftune.triton.autotune(
        configs=_scale_configs((0, 16), (0, 32), (1, 16), (2, 16), (3, 16)),
        key=["n"],
        timeout_s=3,
    )(kernels.scale_kernel)
    x, y = _launch_scale(kernel)
    assert torch.equal(y, 2 * x)
    assert kernel.best_config.kwargs["MODE"] == 0
    report = kernel.last_report
    assert report.isolated
    by_mode = {cfg["MODE"]: (status, reason) for cfg, status, reason in report.failures}
    assert by_mode[1][0] == "failed"
    assert by_mode[1][1].startswith("wrong result: y_ptr differs from the reference by")
    assert by_mode[2][0] == "failed" and by_mode[2][1].startswith("crashed: the benchmark process died")
    assert by_mode[3] == ("timeout", "timeout: the first launch took more than 3 s (process killed)")
    stored = {t.config["MODE"]: t for t in _trials(report.run_name, _private_cache)}
    assert stored[3].status.value == "timeout" and stored[2].reason.startswith("crashed")
    assert stored[0].status.value == "ok"


def test_a_user_reference_catches_a_wrong_first_config() -> None:
    kernel = perftune.triton.autotune(
        configs=_scale_configs((1, 16), (0, 32)), key=["n"], reference=kernels.expected_scale
    )(kernels.scale_kernel)
    x, y = _launch_scale(kernel)
    assert torch.equal(y, 2 * x)
    assert kernel.best_config.kwargs == {"BLOCK": 32, "MODE": 0}
    assert [f[2][:12] for f in kernel.last_report.failures] == ["wrong result"]


_SECOND_PROCESS = """
import json, time, torch, triton, perftune.triton, triton_interp_kernels as k
configs = [triton.Config({"BLOCK": b, "MODE": 0}, num_warps=4, num_stages=2) for b in (16, 32, 64)]
kernel = perftune.triton.autotune(configs=configs, key=["n"])(k.scale_kernel)
x, y = torch.randn(100), torch.zeros(100)
t0 = time.perf_counter()
kernel[k.grid_1d(100)](x, y, 100)
first_launch_s = time.perf_counter() - t0
r = kernel.last_report
print(json.dumps({"from_cache": r.from_cache, "n_measured": r.n_measured, "ok": bool(torch.equal(y, 2 * x)),
                  "best": kernel.best_config.kwargs, "first_launch_s": first_launch_s}))
"""


def test_a_second_process_launches_from_the_cache_and_a_new_config_is_measured_alone() -> None:
    configs = _scale_configs((0, 16), (0, 32), (0, 64))
    first = perftune.triton.autotune(configs=configs, key=["n"])(kernels.scale_kernel)
    _launch_scale(first)
    assert first.last_report.n_measured == 3 and not first.last_report.from_cache
    out = subprocess.run(
        [sys.executable, "-c", _SECOND_PROCESS],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        check=True,
    ).stdout
    second = json.loads(out.strip().splitlines()[-1])
    assert second["from_cache"] and second["n_measured"] == 0 and second["ok"]
    assert second["best"] == first.best_config.kwargs
    grown = perftune.triton.autotune(configs=configs + _scale_configs((0, 128)), key=["n"])(
        kernels.scale_kernel
    )
    x, y = _launch_scale(grown)
    assert torch.equal(y, 2 * x)
    report = grown.last_report
    assert report.n_measured == 1 and not report.from_cache
    assert '{"BLOCK":128,"MODE":0,"num_stages":2,"num_warps":4}' in report.times_ms
    again = perftune.triton.autotune(configs=configs + _scale_configs((0, 128)), key=["n"])(
        kernels.scale_kernel
    )
    _launch_scale(again)
    assert again.last_report.from_cache


def test_space_mode_keeps_to_its_budget_and_the_run_shows_and_reports(_private_cache: Path) -> None:
    space = Space(
        {"BLOCK": Pow2(16, 512), "num_warps": Ordinal([1, 2, 4, 8])}, constraints=["BLOCK >= 16 * num_warps"]
    )
    kernel = perftune.triton.autotune(space=space, key=["n"], budget=5)(kernels.add_kernel)
    x, y, out = torch.randn(300), torch.randn(300), torch.zeros(300)
    kernel[kernels.grid_1d(300)](x, y, out, 300)
    assert torch.equal(out, x + y)
    report = kernel.last_report
    assert 1 <= report.n_measured <= 5 and report.n_candidates == space.cardinality()
    assert space.is_valid(dict(kernel.best_config.kwargs, num_warps=kernel.best_config.num_warps))
    store_url = f"sqlite:///{_private_cache / 'perftune.db'}"
    shown = CliRunner().invoke(cli, ["show", report.run_name, "--store", store_url, "--json"])
    assert shown.exit_code == 0, shown.output
    assert len(json.loads(shown.output)["trials"]) == report.n_measured
    page = _private_cache / "report.html"
    reported = CliRunner().invoke(cli, ["report", report.run_name, "--store", store_url, "-o", str(page)])
    assert reported.exit_code == 0, reported.output
    assert "BLOCK" in page.read_text()
    out.zero_()
    kernel[kernels.grid_1d(300)](x, y, out, 300)  # the same key again: no tuning, same choice
    assert torch.equal(out, x + y) and len(kernel.reports) == 1


def test_a_neighbouring_key_seeds_the_search(_private_cache: Path) -> None:
    # 144 configurations: more than 3 s of measuring even on a quiet machine (18 took under 3 s).
    space = Space({"BLOCK": Pow2(16, 4096), "num_warps": Ordinal([1, 2, 4, 8]),
                   "num_stages": Ordinal([1, 2, 3, 4])})
    kernel = perftune.triton.autotune(space=space, key=["n"], budget=3)(kernels.add_kernel)
    for n in (200, 260):
        x, y, out = torch.randn(n), torch.randn(n), torch.zeros(n)
        kernel[kernels.grid_1d(n)](x, y, out, n)
        assert torch.equal(out, x + y)
    first, second = kernel.reports.values()
    seeded = [t.config for t in _trials(second.run_name, _private_cache) if t.technique == "seed"]
    assert seeded and seeded[0] == first.best


def test_a_kernel_defined_in_a_function_is_tuned_in_process() -> None:
    @triton.jit
    def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask), mask=mask)

    kernel = perftune.triton.autotune(
        configs=[triton.Config({"BLOCK": b}) for b in (16, 64)], key=["n"], store=None
    )(double)
    x, y = torch.randn(90), torch.zeros(90)
    kernel[kernels.grid_1d(90)](x, y, 90)
    assert torch.equal(y, 2 * x) and kernel.last_report.run_name is None
    assert kernel.best_config.kwargs["BLOCK"] in (16, 64)


@pytest.mark.parametrize("restore", [True, False])
def test_restore_value_gives_every_tuning_launch_the_original_input(restore: bool) -> None:
    # An in-place kernel: without restore_value each timing launch would add to the last one's output.
    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    seen: list[float] = []

    def record(nargs: dict, exc: object) -> None:
        seen.append(float(nargs["x_ptr"][0]))

    kernel = perftune.triton.autotune(
        configs=[triton.Config({"BLOCK": b}) for b in (16, 64)],
        key=["n"],
        store=None,
        restore_value=["x_ptr"] if restore else None,
        post_hook=record,
    )(add_one)
    x = torch.zeros(40)
    kernel[kernels.grid_1d(40)](x, 40)
    assert torch.equal(x, torch.ones(40))  # the user's call runs once, on the user's tensor
    assert len(seen) > 4
    if restore:
        assert set(seen) == {1.0}
    else:
        assert max(seen) > 2.0


def _drop_widest(configs: list, named_args: dict, **kwargs: object) -> list:
    return [c for c in configs if c.kwargs["BLOCK"] < 128]


def _prefer_wide(**meta: object) -> float:
    return 1.0 / float(meta["BLOCK"])  # type: ignore[arg-type]


def test_prune_configs_by_works_as_in_triton() -> None:
    kernel = perftune.triton.autotune(
        configs=_scale_configs((0, 16), (0, 32), (0, 64), (0, 128)), key=["n"],
        prune_configs_by={"early_config_prune": _drop_widest, "perf_model": _prefer_wide, "top_k": 2},
    )(kernels.scale_kernel)
    x, y = _launch_scale(kernel)
    assert torch.equal(y, 2 * x)
    report = kernel.last_report
    assert report.n_candidates == 2 and report.n_measured == 2
    assert {json.loads(cid)["BLOCK"] for cid in report.times_ms} == {32, 64}


def test_a_time_budget_ends_the_search_and_the_launch_still_runs() -> None:
    # 144 configurations: more than 3 s of measuring even on a quiet machine (18 took under 3 s).
    space = Space({"BLOCK": Pow2(16, 4096), "num_warps": Ordinal([1, 2, 4, 8]),
                   "num_stages": Ordinal([1, 2, 3, 4])})
    kernel = perftune.triton.autotune(space=space, key=["n"], budget="3s")(kernels.add_kernel)
    x, y, out = torch.randn(150), torch.randn(150), torch.zeros(150)
    t0 = time.perf_counter()
    kernel[kernels.grid_1d(150)](x, y, out, 150)
    assert torch.equal(out, x + y)
    assert 1 <= kernel.last_report.n_measured < space.cardinality()
    assert time.perf_counter() - t0 < 60


def test_a_kernel_module_a_child_cannot_import_is_measured_in_process() -> None:
    import triton_interp_childless as childless

    x, y = torch.randn(70), torch.zeros(70)
    childless.triple[kernels.grid_1d(70)](x, y, 70)
    assert torch.equal(y, 3 * x)
    report = childless.triple.last_report
    assert not report.isolated and report.n_measured == 2 and report.failures == []


def test_the_benchmark_process_builds_the_kernel_as_the_callers_process_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Triton reads TRITON_INTERPRET when a kernel is decorated; the variable changed after that (a library
    # cleared it, a test restored it) must not give the spawned benchmark process the other kind of kernel.
    monkeypatch.delitem(sys.modules, "triton_interp_plain", raising=False)
    import triton_interp_plain as plain  # decorated here, under the fixture's TRITON_INTERPRET=1

    monkeypatch.delenv("TRITON_INTERPRET")
    kernel = perftune.triton.autotune(
        configs=[triton.Config({"BLOCK": b}) for b in (16, 64)], key=["n"], store=None, timeout_s=20
    )(plain.negate_kernel)
    x, y = torch.randn(100), torch.zeros(100)
    kernel[kernels.grid_1d(100)](x, y, 100)
    assert torch.equal(y, -x)
    report = kernel.last_report
    assert report.isolated and report.failures == [] and report.n_measured == 2
    assert "TRITON_INTERPRET" not in os.environ  # the caller's environment is left as it was
    args = {"x_ptr": x, "y_ptr": y, "n": 100}
    assert kernel._tuning_key(args).device == "interpreter"  # the kernel says so, not the variable


@pytest.mark.parametrize("option", ["reset_to_zero", "restore_value"])
def test_tensors_passed_by_keyword_are_the_kernels_arguments_too(option: str) -> None:
    # The caller's tensors are never written by tuning, whether passed by position or by keyword: an
    # in-place kernel called with out_ptr=out sees exactly one launch (it saw 75 of them).
    kernel = perftune.triton.autotune(
        configs=[triton.Config({"BLOCK": b}) for b in (16, 32, 64)], key=["n"], store=None,
        **{option: ["out_ptr"]},
    )(kernels.accumulate_kernel)
    n = 100
    x, out = torch.ones(n), torch.full((n,), 5.0)
    kernel[kernels.grid_1d(n)](x, out_ptr=out, n=n)
    assert kernel.last_report.isolated and kernel.last_report.n_measured == 3
    assert torch.equal(out, torch.full((n,), 6.0))


def test_an_output_passed_by_keyword_is_checked_against_the_reference() -> None:
    kernel = perftune.triton.autotune(
        configs=_scale_configs((0, 16), (1, 16), (0, 32)), key=["n"], store=None
    )(kernels.scale_kernel)
    n = 100
    x, y = torch.randn(n), torch.zeros(n)
    kernel[kernels.grid_1d(n)](x, y_ptr=y, n=n)
    assert torch.equal(y, 2 * x) and kernel.best_config.kwargs["MODE"] == 0
    [(config, status, reason)] = kernel.last_report.failures
    assert config["MODE"] == 1 and status == "failed" and reason.startswith("wrong result: y_ptr differs")


def test_a_tuned_meta_parameter_passed_at_the_launch_is_refused_at_once() -> None:
    kernel = perftune.triton.autotune(configs=_scale_configs((0, 16), (0, 32)), key=["n"],
                                      store=None)(kernels.scale_kernel)
    x, y = torch.randn(10), torch.zeros(10)
    with pytest.raises(perftune.PerftuneError, match="BLOCK, num_warps passed at the launch, but tuned"):
        kernel[kernels.grid_1d(10)](x, y, 10, BLOCK=64, num_warps=2)
    assert kernel.reports == {}  # nothing was measured


def test_a_single_configuration_is_launched_without_measuring() -> None:
    kernel = perftune.triton.autotune(configs=_scale_configs((0, 32)), key=["n"])(kernels.scale_kernel)
    x, y = _launch_scale(kernel)
    assert torch.equal(y, 2 * x) and kernel.best_config.kwargs == {"BLOCK": 32, "MODE": 0}
    assert kernel.reports == {} and kernel.last_report is None


def test_a_larger_budget_measures_what_a_smaller_one_left_out(_private_cache: Path) -> None:
    configs = _scale_configs(*((0, b) for b in (16, 32, 64, 128, 256, 512)))
    small = perftune.triton.autotune(configs=configs, key=["n"], budget=2)(kernels.scale_kernel)
    _launch_scale(small)
    assert small.last_report.n_measured == 2
    larger = perftune.triton.autotune(configs=configs, key=["n"], budget=6)(kernels.scale_kernel)
    _launch_scale(larger)
    assert not larger.last_report.from_cache and larger.last_report.n_measured == 4
    again = perftune.triton.autotune(configs=configs, key=["n"], budget=6)(kernels.scale_kernel)
    _launch_scale(again)
    assert again.last_report.from_cache
    same = perftune.triton.autotune(configs=configs, key=["n"], budget=2)(kernels.scale_kernel)
    _launch_scale(same)
    assert same.last_report.from_cache  # every configuration is measured now


def test_a_config_pre_hook_that_cannot_travel_runs_in_the_callers_process() -> None:
    seen: list[int] = []
    hook = lambda nargs: seen.append(1)  # noqa: E731 - a lambda, as split-K kernels write it
    configs = [triton.Config({"BLOCK": b, "MODE": 0}, pre_hook=hook) for b in (16, 32)]
    kernel = perftune.triton.autotune(configs=configs, key=["n"], store=None)(kernels.scale_kernel)
    x, y = _launch_scale(kernel)
    assert torch.equal(y, 2 * x)
    assert not kernel.last_report.isolated and kernel.last_report.failures == [] and seen


def test_a_changed_jit_helper_changes_the_cache_key_under_heuristics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # JITFunctions, as on a GPU (nothing is launched)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = (
        "import triton, triton.language as tl, perftune.triton as pt\n"
        "@triton.jit\ndef helper(x):\n    return x * {factor}\n"
        "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, helper(tl.load(x_ptr + offs)))\n"
        "C = [triton.Config({{'BLOCK': 16}})]\n"
        "wrapped = pt.autotune(configs=C, key=['n'])(triton.heuristics({{'EVEN': lambda a: True}})(k))\n"
    )
    hashes = []
    for i, factor in enumerate((2, 3, 2)):
        (tmp_path / f"helper_mod{i}.py").write_text(source.format(factor=factor))
        hashes.append(__import__(f"helper_mod{i}").wrapped.source_hash)
    assert hashes[0] != hashes[1] and hashes[0] == hashes[2]
