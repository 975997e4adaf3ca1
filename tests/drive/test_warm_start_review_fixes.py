"""Warm starts: a whole store skips its runs without a success; ``(store path or URL, run)`` is one run."""

from __future__ import annotations

from pathlib import Path

import pytest

import perftune
from perftune import PerftuneError
from perftune.drive import Prior, Tuner, WarmStart
from perftune.errors import RunWarning
from perftune.space import Config, Int, Space
from perftune.store import open_store

SPACE = Space({"x": Int(0, 20, default=0), "y": Int(0, 20, default=0)})


def cost(c: Config) -> float:
    return (c["x"] - 13) ** 2 + (c["y"] - 4) ** 2 + 1.0


def broken(c: Config) -> float:
    raise RuntimeError("compiler missing")


def add_failed_run(url: str, name: str) -> None:
    with pytest.warns(RunWarning, match="every trial failed"):
        perftune.tune(broken, SPACE, budget=3, seed=1, store=url, name=name)


def add_empty_run(url: str, name: str) -> None:
    """A run created and never measured (killed right after it was created)."""
    Tuner(SPACE, seed=0, store=url, name=name).close()


def seeded(trials: list[perftune.Trial]) -> list[Config]:
    return [t.config for t in trials if t.technique == "seed"]


def best_ranked(result: perftune.Result, n: int) -> list[Config]:
    ranked = [t.config for t in sorted(result.trials, key=lambda t: t.value) if t.config != SPACE.default()]
    return ranked[:n]


# -- a whole store: runs without a successful trial are skipped ------------------------------------------


def test_a_whole_store_skips_its_runs_without_a_success_and_names_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'src.db'}"
    good = perftune.tune(cost, SPACE, budget=20, seed=0, store=url, name="good")
    add_failed_run(url, "broken")
    add_empty_run(url, "empty")
    for source in (url, open_store(url)):
        prior = Prior.from_sources([source], SPACE)
        assert prior.n_sources == 1
        assert [s.split(": ", 1)[1] for s in prior.skipped] == ["run 'broken'", "run 'empty'"]
        assert [c for c in prior.ranked if c != SPACE.default()][:4] == best_ranked(good, 4)
    new = perftune.tune(cost, SPACE, budget=6, seed=1, warm_start=[url])
    assert seeded(new.trials) == best_ranked(good, 4)


def test_a_store_without_any_usable_run_is_refused_in_one_line_naming_its_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'src.db'}"
    add_failed_run(url, "broken")
    add_empty_run(url, "empty")
    with pytest.raises(PerftuneError) as error:
        Prior.from_sources([url], SPACE)
    message = str(error.value)
    assert "\n" not in message and message.startswith("warm_start: ")
    assert "'broken'" in message and "'empty'" in message and "no" in message


def test_one_named_run_without_a_success_is_still_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'src.db'}"
    perftune.tune(cost, SPACE, budget=5, seed=0, store=url, name="good")
    add_failed_run(url, "broken")
    with pytest.raises(PerftuneError, match="run 'broken' has no successful configuration"):
        Prior.from_sources([(open_store(url), "broken")], SPACE)


# -- (store, run) with the store as a path or a URL --------------------------------------------------------


@pytest.mark.parametrize("form", ["path", "pathlib", "url"])
def test_a_pair_of_a_store_path_or_url_and_a_run_is_that_one_run(tmp_path: Path, form: str) -> None:
    db = tmp_path / "store.db"
    url = f"sqlite:///{db}"
    good = perftune.tune(cost, SPACE, budget=20, seed=0, store=url, name="good")
    perftune.tune(lambda c: -cost(c), SPACE, budget=20, seed=0, store=url, name="reversed")
    store: str | Path = {"path": str(db), "pathlib": db, "url": url}[form]
    assert WarmStart.coerce((store, "good")).sources == ((store, "good"),)
    new = perftune.tune(cost, SPACE, budget=6, seed=1, warm_start=(store, "good"))
    assert seeded(new.trials) == best_ranked(good, 4)  # that run only: "reversed" would rank them last
    run_id = open_store(url).get_run("good").id
    assert Prior.from_sources(WarmStart.coerce((store, run_id)).sources, SPACE).n_sources == 1


def test_a_pair_of_two_store_files_is_two_sources(tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    perftune.tune(cost, SPACE, budget=8, seed=0, store=f"sqlite:///{a}", name="on-a")
    perftune.tune(cost, SPACE, budget=8, seed=1, store=f"sqlite:///{b}", name="on-b")
    warm = WarmStart.coerce((str(a), str(b)))
    assert warm is not None and warm.sources == (str(a), str(b))
    assert Prior.from_sources(warm.sources, SPACE).n_sources == 2


def test_a_pair_of_a_missing_store_and_a_run_is_one_line_naming_the_store(tmp_path: Path) -> None:
    missing = str(tmp_path / "nosuch.db")
    with pytest.raises(PerftuneError) as error:
        perftune.tune(cost, SPACE, budget=2, seed=0, warm_start=(missing, "good"))
    assert "\n" not in str(error.value) and "nosuch.db" in str(error.value)
