"""Defects a PetaBricks-literate review found (2026-12-07): inputs changed in place, the accuracy of
re-timed finalists, files that could be written but not read, overlapping use() blocks, site names
taken twice."""

from __future__ import annotations

import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from perftune.space import Int, Space
from perftune.targets.choice import (
    AlgorithmSite,
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    LadderSettings,
    load_choices,
    tune_accuracy,
    tune_sites,
    use_choices,
)


def _good(a: np.ndarray) -> np.ndarray:
    a.sort(kind="mergesort")  # in place, as NumPy users sort
    return a


def _zeroes(a: np.ndarray) -> np.ndarray:
    a[:] = 0  # "sorted", by destroying its input in place
    return a


def test_an_alternative_that_destroys_its_input_in_place_fails_the_check() -> None:
    use_choices(ChoicesFile())
    site = AlgorithmSite("review-np-sort", {"good": _good, "broken": _zeroes}, default="good")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_sites(site, [site], make_input=lambda n, rng: rng.random(n), sizes=[200, 2000],
                            check=lambda data, out: bool(np.array_equal(np.sort(data), out)), seed=0,
                            settings=LadderSettings(population=6, generations=1))
    assert "broken" not in result.choices.sites["review-np-sort"][1]
    assert any("broken" in str(f) or "wrong output" in str(f) for f in result.ladder.failures)


def test_a_finalist_that_misses_its_target_on_a_rerun_is_not_chosen() -> None:
    # k = 1 is fast and right only every other run: its first run may say 1.0, the re-runs say 0.5.
    calls = {"n": 0}

    def program(config: dict, x: int) -> float:
        if config["k"] == 1:
            calls["n"] += 1
            return 1.0 if calls["n"] % 2 == 1 else 0.5
        time.sleep(0.0005 * config["k"])
        return 1.0

    table = tune_accuracy(program, Space({"k": Int(1, 4, default=4)}), accuracy=lambda out, x: out,
                          targets=[0.9], inputs=[0], budget=4, final_repeats=3, seed=0)
    [cell] = table.bins
    assert cell.config is not None and cell.config["k"] != 1


def test_an_infinite_accuracy_is_stored_finite_and_the_file_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "choices.json"
    table = tune_accuracy(lambda c, x: c["k"], Space({"k": Int(1, 3, default=1)}),
                          accuracy=lambda out, x: float("inf") if out == 3 else float(out),
                          targets=[2.5], inputs=[0], budget=3, seed=0, name="acc")
    table.save(path)
    back = ChoicesFile.read(path)
    assert "acc" in back.tables


@pytest.mark.parametrize("targets", [[float("nan")], [float("inf")], [None]])
def test_accuracy_targets_must_be_finite_numbers(targets: list) -> None:
    with pytest.raises(ChoiceError, match="accuracy targets must be finite numbers"):
        tune_accuracy(lambda c, x: 1.0, Space({"k": Int(1, 3)}), accuracy=lambda out, x: out,
                      targets=targets, inputs=[0], budget=3)


def test_a_bad_margin_is_refused_before_any_measurement() -> None:
    ran = []
    with pytest.raises(ChoiceError, match="margin must be a number >= 0"):
        tune_accuracy(lambda c, x: ran.append(1) or 1.0, Space({"k": Int(1, 3)}), accuracy=lambda o, x: 1.0,
                      targets=[0.5], inputs=[0], budget=3, margin=-1)
    assert ran == []


def test_a_file_that_could_not_be_read_back_is_not_written(tmp_path: Path) -> None:
    doc = ChoicesFile()
    doc.set_site("sort", [0], ["insertion", "merge"])  # a cutoff of 0: the reader refuses it
    with pytest.raises(ChoiceError, match="not written"):
        doc.write(tmp_path / "choices.json")
    assert not (tmp_path / "choices.json").exists()


def test_a_save_over_an_unreadable_file_keeps_it_aside_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "choices.json"
    path.write_text('{"version": 1, "sites": {"sort": {"cutoffs": [16], "choices": ["a", "b"]}}, '
                    '"tables": 7}')
    table = tune_accuracy(lambda c, x: float(c["k"]), Space({"k": Int(1, 3, default=1)}),
                          accuracy=lambda out, x: out, targets=[2.0], inputs=[0], budget=3, seed=0,
                          name="acc")
    with pytest.warns(ChoicesFileWarning, match="the old one kept as .*choices.json.unreadable"):
        table.save(path)
    assert "acc" in ChoicesFile.read(path).tables
    assert '"sort"' in (tmp_path / "choices.json.unreadable").read_text()


def test_overlapping_use_blocks_in_two_threads_restore_the_selector() -> None:
    use_choices(ChoicesFile())
    site = AlgorithmSite("review-shared", {"good": sorted, "bad": lambda xs: list(xs)}, default="good")
    seen: dict[str, tuple] = {}

    def run(tag: str, choices: list[str]) -> None:
        with site.use([], choices):
            time.sleep(0.05)
            seen[tag] = site.choices
    threads = [threading.Thread(target=run, args=("a", ["bad"])),
               threading.Thread(target=run, args=("b", ["good"]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": ("bad",), "b": ("good",)}  # each block saw its own selector
    assert site.choices == ("good",) and site.source == "default" and site([3, 1, 2]) == [1, 2, 3]


def test_every_site_of_a_name_taken_twice_follows_a_new_file(tmp_path: Path) -> None:
    use_choices(ChoicesFile())
    first = AlgorithmSite("review-twice", {"merge": sorted, "insertion": sorted}, default="merge")
    # The same module reloaded: a second site of the same name.
    second = AlgorithmSite("review-twice", {"merge": sorted, "insertion": sorted}, default="merge")
    assert first.choose(10) == second.choose(10) == "merge"  # both resolved (no file: the default)
    doc = ChoicesFile()
    doc.set_site("review-twice", [], ["insertion"])
    path = doc.write(tmp_path / "choices.json")
    use_choices(load_choices(path))
    assert first.choose(10) == second.choose(10) == "insertion"


def test_a_level_table_with_a_target_given_twice_has_one_bin_for_it() -> None:
    import math

    from perftune.targets.choice import tune_levels

    def program(level: int, config: dict, x: float, table: object) -> float:
        return x + 10.0 ** -config["it"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = tune_levels(program, lambda level, tb: Space({"it": Int(1, 9)}), levels=[2, 3],
                            accuracy=lambda out, x: -math.log10(abs(out - x) + 1e-300), targets=[1, 3, 3, 5],
                            inputs_for_level=lambda level: [1.0], budget_per_level=15, seed=0)
    assert table.targets == [1.0, 3.0, 5.0]
    assert [b.target for b in table.row(3).bins] == table.targets
    assert table.cell(3, table.targets.index(5.0)) is not None


def test_an_alternative_declared_twice_on_a_device_site_keeps_its_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from perftune.targets.choice import DeviceSite

    monkeypatch.setenv("PERFTUNE_DEVICES", "cpu")
    use_choices(ChoicesFile())
    site = DeviceSite("review-devices")
    site.alternative("fast", device="cuda")(sorted)
    with pytest.raises(ChoiceError, match="declared twice"):
        site.alternative("fast", device="cpu")(sorted)
    assert site.device_of("fast") == "cuda"  # it was rewritten to cpu: a GPU function passed for a CPU one
