"""The Triton drop-in's run in the store answers the configuration the kernel launches: the winner of the
final interleaved comparison, even where the search's best trial lost it (interpreter mode, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import triton_interp_kernels as kernels  # noqa: E402
from click.testing import CliRunner  # noqa: E402

import perftune.triton  # noqa: E402
from perftune.cli import cli  # noqa: E402
from perftune.store import open_store  # noqa: E402
from perftune.targets.triton import _autotuner, _bench  # noqa: E402

#: Milliseconds per launch by BLOCK: in the search, 16 is the fastest; in the final comparison, 32 wins.
SEARCH_MS = {16: 1.0, 32: 2.0, 64: 3.0}
FINAL_MS = {16: 3.0, 32: 1.0, 64: 2.0}


def test_the_store_answers_the_final_comparisons_winner(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setenv(perftune.triton.CACHE_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv("PERFTUNE_STORE", raising=False)
    in_final: list[bool] = []
    final = _autotuner._Session._final

    def final_phase(self: object) -> object:
        in_final.append(True)
        return final(self)  # type: ignore[arg-type]

    calls = [0]

    def sample(self: object, cid: str, n: int) -> list[float]:
        calls[0] += 1
        times = FINAL_MS if in_final else SEARCH_MS
        return [times[json.loads(cid)["BLOCK"]] * (1.0 + 0.001 * ((calls[0] + i) % 3)) for i in range(n)]

    monkeypatch.setattr(_autotuner._Session, "_final", final_phase)
    monkeypatch.setattr(_bench.InProcessBench, "sample", sample)
    configs = [triton.Config({"BLOCK": b, "MODE": 0}, num_warps=4, num_stages=2) for b in (16, 32, 64)]
    kernel = perftune.triton.autotune(configs=configs, key=["n"], isolate=False)(kernels.scale_kernel)
    x, y = torch.randn(100), torch.zeros(100)
    kernel[kernels.grid_1d(100)](x, y, 100)
    assert torch.equal(y, 2 * x)
    launched = kernel.best_config.kwargs["BLOCK"]
    assert launched == 32
    report = kernel.last_report
    db = f"sqlite:///{tmp_path / 'cache' / 'perftune.db'}"
    with open_store(db) as store:
        info = store.get_run(report.run_name)
        assert store.best(info.id).config["BLOCK"] == 16  # the search's best trial lost the final comparison
        answer = info.settings["result"]
    assert answer["config"]["BLOCK"] == launched and answer["value"] == report.best_ms
    assert "final interleaved comparison" in answer["note"]
    best = CliRunner().invoke(cli, ["--store", db, "best", report.run_name])
    assert best.exit_code == 0 and json.loads(best.output)["BLOCK"] == launched
    shown = CliRunner().invoke(cli, ["--store", db, "show", report.run_name]).output
    assert "best trial of the search:" in shown and f"final answer: {report.best_ms:.6g} (trial" in shown
    runs = json.loads(CliRunner().invoke(cli, ["--store", db, "runs", "--json"]).output)["runs"]
    assert [r["best"] for r in runs] == [report.best_ms]
    # The cache keeps the search's times and the final comparison's apart: a later process reads the latter.
    [cache_file] = (tmp_path / "cache").glob("*.json")
    entry = json.loads(cache_file.read_text())
    chosen = entry["results"][entry["best"]]
    assert chosen["final_ms"] == report.best_ms and chosen["time_ms"] == pytest.approx(2.0, rel=0.01)
    again = perftune.triton.autotune(configs=configs, key=["n"], isolate=False)(kernels.scale_kernel)
    again[kernels.grid_1d(100)](x, y, 100)
    assert again.last_report.from_cache and again.last_report.best_ms == report.best_ms
