"""The technique registry: names, aliases, errors, registration and entry-point plug-ins."""

from __future__ import annotations

import sys
import textwrap
from typing import ClassVar

import pytest

import perftune.search as search
from perftune.errors import PerftuneError
from perftune.search import _registry as registry
from perftune.space import Int, Space

BUILTINS = {
    "random",
    "greedy-uniform",
    "parzen",
    "greedy-normal",
    "de",
    "nelder-mead",
    "pattern-search",
    "pso",
    "ga",
    "annealing",
    "coordinate-descent",
    "model",
    "bandit",
}


def test_every_contract_name_is_registered() -> None:
    assert set(search.names()) >= BUILTINS
    for name in BUILTINS:
        assert search.get(name).name == name


def test_default_is_the_bandit() -> None:
    assert search.get("default") is search.StagedBandit


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(PerftuneError) as info:
        search.get("simulated-anealing")
    text = str(info.value)
    assert "unknown technique 'simulated-anealing'" in text
    assert "annealing" in text and "default" in text
    assert "\n" not in text


def test_register_a_custom_technique_and_create_it() -> None:
    class Fixed(search.BaseTechnique):
        name: ClassVar[str] = "test-fixed"

        def _propose(self):  # type: ignore[no-untyped-def]
            return self.space.default()

    search.register(Fixed)
    try:
        assert "test-fixed" in search.names()
        tech = search.create("test-fixed", Space({"x": Int(0, 3)}), seed=0)
        assert isinstance(tech, Fixed)
        assert tech.ask(1)[0]["x"] == 0
        search.register(Fixed)  # registering the same class again is harmless
    finally:
        registry._registered.pop("test-fixed", None)


@pytest.mark.parametrize(
    ("attrs", "text"),
    [
        ({"name": ""}, "non-empty `name`"),
        ({"name": "random"}, "built-in"),
        ({"name": "default"}, "alias"),
    ],
)
def test_register_rejects_bad_classes(attrs, text) -> None:  # type: ignore[no-untyped-def]
    cls = type("Bad", (search.BaseTechnique,), dict(attrs))
    with pytest.raises(PerftuneError, match=text):
        search.register(cls)


def test_register_rejects_a_class_without_ask() -> None:
    cls = type("NoAsk", (), {"name": "test-no-ask", "tell": lambda self, trials: None})
    with pytest.raises(PerftuneError, match="no ask"):
        search.register(cls)


def test_entry_point_plugins_are_found(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "perftune_test_plugin.py").write_text(
        textwrap.dedent(
            """
            from perftune.search import RandomSearch

            class PluginSearch(RandomSearch):
                name = "test-plugin"
            """
        )
    )
    dist = tmp_path / "perftune_test_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: perftune-test-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[perftune.techniques]\ntest-plugin = perftune_test_plugin:PluginSearch\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points", None)
    try:
        assert "test-plugin" in search.names()
        tech = search.create("test-plugin", Space({"x": Int(0, 3)}), seed=1)
        assert type(tech).__name__ == "PluginSearch"
        assert len(tech.ask(2)) == 2
    finally:
        registry._registered.pop("test-plugin", None)
        registry._entry_points = None
        sys.modules.pop("perftune_test_plugin", None)


def test_broken_plugin_is_a_clear_error(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    dist = tmp_path / "perftune_broken-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: perftune-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[perftune.techniques]\ntest-broken = no_such_module_xyz:Thing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points", None)
    try:
        with pytest.raises(PerftuneError, match="test-broken.*failed to load"):
            search.get("test-broken")
    finally:
        registry._entry_points = None


def test_all_is_complete() -> None:
    public = {n for n in dir(search) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(search, n)).__name__ == "module"}
    assert public - modules - {"annotations"} == set(search.__all__)


def test_wrong_settings_type_is_rejected() -> None:
    with pytest.raises(PerftuneError, match="settings must be DESettings"):
        search.create("de", Space({"x": Int(0, 3)}), seed=0, settings=search.GASettings())


@pytest.mark.parametrize(
    ("factory", "text"),
    [
        (lambda: search.DESettings(population=2), "DESettings.population"),
        (lambda: search.GASettings(mutation_rate=2.0), "GASettings.mutation_rate"),
        (lambda: search.GreedySettings(rate=0.0), "GreedySettings.rate"),
        (lambda: search.ModelSettings(estimator="gp"), "ModelSettings.estimator"),
        (lambda: search.ModelSettings(acquisition="pi"), "ModelSettings.acquisition"),
        (lambda: search.NelderMeadSettings(rho=1.5), "NelderMeadSettings.rho"),
        (lambda: search.PatternSearchSettings(chunk=0), "PatternSearchSettings.chunk"),
        (lambda: search.PSOSettings(particles=0), "PSOSettings.particles"),
        (lambda: search.AnnealingSettings(cooling=1.0), "AnnealingSettings.cooling"),
        (
            lambda: search.CoordinateDescentSettings(max_neighbors=0),
            "CoordinateDescentSettings.max_neighbors",
        ),
    ],
)
def test_bad_technique_settings(factory, text) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PerftuneError, match=text) as info:
        factory()
    assert "\n" not in str(info.value)
