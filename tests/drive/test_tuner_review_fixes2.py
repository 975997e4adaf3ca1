"""Fixes from the search-side review (/tmp/review_search/report.md): a run uses its budget on a divisibility
constraint, measures every configuration of a small space before it says "space exhausted", and takes a
technique's settings with its name (kept by a resumed run)."""

from __future__ import annotations

import dataclasses

import pytest

import perftune
from perftune.drive import Tuner
from perftune.errors import PerftuneError
from perftune.search import BanditSettings, GASettings, ModelSettings
from perftune.space import Float, Int, Space

# ---- item 1 -------------------------------------------------------------------------------------------


def test_a_divisibility_constraint_on_a_wide_int_uses_the_whole_budget() -> None:
    space = Space({"n": Int(1, 2**20), "unroll": Int(1, 8)}, constraints=["n % 4096 == 0"])
    result = perftune.tune(lambda c: abs(c["n"] - 300_000) / 4096 + c["unroll"], space, budget=100, seed=0)
    assert len(result.trials) == 100 and result.stop_reason == "budget"
    assert len({t.config["n"] for t in result.trials}) > 20


# ---- item 2 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("technique", ["default", "random"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_small_space_is_measured_whole_before_it_is_exhausted(technique: str, seed: int) -> None:
    space = Space({"x": Int(0, 14), "y": Int(0, 19)})
    result = perftune.tune(lambda c: 1.0, space, budget=400, seed=seed, technique=technique)
    assert len(result.trials) == 300
    assert len({t.config for t in result.trials}) == 300
    assert result.stop_reason == "space exhausted"


def test_a_space_too_large_to_list_is_not_called_exhausted() -> None:
    # Three valid values among a million: the search finds no fourth, and cannot know there is none.
    space = Space({"x": Int(0, 2 * 10**6)}, constraints=["x in (5, 900000, 123456)"])
    result = perftune.tune(lambda c: float(c["x"]), space, budget=20, seed=0)
    assert {t.config["x"] for t in result.trials} == {5, 900000, 123456}
    assert result.stop_reason == "no new configuration found"


def test_a_continuous_space_that_repeats_is_not_called_exhausted() -> None:
    space = Space({"x": Float(1.0, 1.0), "n": Int(0, 2)})
    result = perftune.tune(lambda c: float(c["n"]), space, budget=10, seed=0)
    assert len(result.trials) == 3 and result.stop_reason == "space exhausted"  # finite: listed


# ---- item 9 -------------------------------------------------------------------------------------------


def _space() -> Space:
    return Space({"x": Int(0, 40), "y": Int(0, 40)})


def _objective(config: perftune.Config) -> float:
    return float((config["x"] - 31) ** 2 + (config["y"] - 7) ** 2)


def test_tune_takes_a_technique_with_its_settings() -> None:
    settings = BanditSettings(techniques=("random", "ga"), exploration=0.2,
                              technique_settings={"ga": GASettings(population=6)})
    tuner = Tuner(_space(), seed=3, technique=("bandit", settings), budget=25)
    tuner.run(_objective)
    assert tuner.technique.settings == settings
    assert [t.name for t in tuner.technique.techniques] == ["random", "ga"]
    assert tuner.technique.techniques[1].settings == GASettings(population=6)
    result = perftune.tune(_objective, _space(), budget=25, seed=3, technique=("bandit", settings))
    assert [t.config for t in result.trials] == [t.config for t in tuner.result().trials]


@pytest.mark.parametrize(
    ("technique", "message"),
    [
        (("bandit", BanditSettings), "must be an instance of the technique's settings dataclass"),
        (("bandit", {"exploration": 0.1}), "must be an instance of the technique's settings dataclass"),
        (("random", BanditSettings()), "technique 'random': its settings are NoSettings, got BanditSettings"),
        (("bandit", BanditSettings(techniques=("nope",))), "unknown technique 'nope'"),
        (("bandit",), "a pair (name, settings)"),
        (3, "a pair (name, settings)"),
    ],
)
def test_bad_technique_settings_are_one_line_errors(technique: object, message: str) -> None:
    with pytest.raises(PerftuneError) as caught:
        perftune.tune(_objective, _space(), budget=2, technique=technique)  # type: ignore[arg-type]
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_settings_are_checked_by_their_dataclass() -> None:
    with pytest.raises(PerftuneError, match="exploration"):
        BanditSettings(exploration=-1.0)


def test_a_resumed_run_keeps_the_technique_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    settings = BanditSettings(techniques=("random", "ga", "model"), window=77,
                              technique_settings={"ga": GASettings(population=6),
                                                  "model": ModelSettings()})
    tuner = Tuner(_space(), seed=1, store=store, technique=("bandit", settings), budget=12, name="r")
    tuner.run(_objective)
    resumed = Tuner.resume("r", store)
    assert resumed.technique.settings == settings
    assert resumed.technique.techniques[1].settings == GASettings(population=6)
    assert len(resumed.run(_objective, 18).trials) == 18


def test_a_checkpoint_cannot_name_a_class_that_is_no_technique_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from perftune.drive import _tuner

    data = _tuner._settings_data(BanditSettings(window=9))
    assert _tuner._settings_from(data, "bandit") == BanditSettings(window=9)
    data["settings_of"] = "os:system"
    with pytest.raises(ValueError, match="not the settings class of a registered technique"):
        _tuner._settings_from(data, "bandit")


def test_settings_data_is_plain() -> None:
    from perftune.drive import _tuner

    data = _tuner._settings_data(BanditSettings(technique_settings={"ga": GASettings(population=6)}))
    fields = data["fields"]
    assert fields["technique_settings"] == (("ga", {"settings_of": "perftune.search._ga:GASettings",
                                                    "fields": dataclasses.asdict(GASettings(population=6))}),)
