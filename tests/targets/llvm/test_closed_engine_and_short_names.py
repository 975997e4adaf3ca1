"""A closed engine says so in one line; ``DATASET-vN/NAME`` names resolve or say "unknown dataset"."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.targets.llvm import BenchmarkError, HelperEngine, LlvmError, OptEngine, get_benchmark


@pytest.mark.parametrize("make", [HelperEngine, OptEngine], ids=["helper", "opt"])
def test_a_closed_engine_raises_a_one_line_llvm_error(make: type) -> None:
    engine = make()
    engine.close()
    for use in (lambda: engine.apply("function(sroa)"), lambda: engine.count(), lambda: engine.reset()):
        with pytest.raises(LlvmError, match="engine is closed") as caught:
            use()
        assert "\n" not in str(caught.value)
    engine.close()  # closing twice is harmless


def test_a_short_name_of_a_dataset_perftune_lacks_is_an_unknown_dataset() -> None:
    with pytest.raises(BenchmarkError) as full:
        get_benchmark("benchmark://cbench-v1/crc32")
    for short in ("cbench-v1/crc32", "npb-v0/50", "perftune-v1/crc32"):
        with pytest.raises(BenchmarkError) as caught:
            get_benchmark(short)
        message = str(caught.value)
        assert message.startswith(f"{short}: unknown dataset (expected benchmark://perftune-v0/NAME")
        # The same message as the URI form's, after the name.
        assert message.partition(": ")[2] == str(full.value).partition(": ")[2]


def test_short_names_of_perftune_datasets_resolve() -> None:
    assert get_benchmark("perftune-v0/sieve").uri == "benchmark://perftune-v0/sieve"


def test_a_missing_file_under_an_existing_folder_of_that_shape_is_still_a_missing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "build-v2").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchmarkError, match="build-v2/prog.c: no such file"):
        get_benchmark("build-v2/prog.c")


def test_the_cli_says_unknown_dataset_for_a_compilergym_short_name() -> None:
    out = CliRunner().invoke(cli, ["llvm-passes", "cbench-v1/crc32", "--budget", "5"])
    assert out.exit_code != 0
    assert "cbench-v1/crc32: unknown dataset" in out.output and "no such file" not in out.output
    assert out.output.count("\n") == 1
