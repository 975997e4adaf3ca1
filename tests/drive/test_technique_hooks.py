"""The driver calls a technique's optional hooks exactly when the technique declares them."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import perftune.search as search
from perftune.drive import Tuner
from perftune.search import _registry as registry
from perftune.search._base import ClockAware, LabelsProposals, ParallelismAware, PreloadsImports
from perftune.space import Int, Space


class Hooked(search.RandomSearch):
    """Random search with every optional hook, recording the driver's calls."""

    name: ClassVar[str] = "test-hooked"

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self.calls: list[tuple[str, Any]] = []

    def proposer_of(self, config: Any) -> str | None:
        return "hooked-part"

    def set_deterministic(self, flag: bool = True) -> None:
        self.calls.append(("deterministic", flag))

    def set_parallelism(self, n_in_flight: int) -> None:
        self.calls.append(("parallelism", n_in_flight))

    def preload_imports(self) -> None:
        self.calls.append(("preload", None))


class Plain(search.RandomSearch):
    """Random search under another name, without hooks."""

    name: ClassVar[str] = "test-plain"


@pytest.fixture(autouse=True)
def _registered():
    search.register(Hooked)
    search.register(Plain)
    yield
    registry._registered.pop("test-hooked", None)
    registry._registered.pop("test-plain", None)


SPACE = Space({"x": Int(0, 50)})


def test_hooks_are_recognised_by_their_protocols():
    hooked, plain = search.create("test-hooked", SPACE, seed=0), search.create("test-plain", SPACE, seed=0)
    for protocol in (LabelsProposals, ClockAware, ParallelismAware, PreloadsImports):
        assert isinstance(hooked, protocol)
        assert not isinstance(plain, protocol)


def test_a_seeded_run_is_deterministic_and_says_so_to_the_technique():
    tuner = Tuner(SPACE, seed=3, technique="test-hooked", budget=4, include_default=False)
    assert tuner.deterministic
    assert tuner._technique.calls == [("deterministic", True)]
    unseeded = Tuner(SPACE, technique="test-hooked", budget=4, include_default=False)
    assert not unseeded.deterministic and unseeded.lag == 0
    assert unseeded._technique.calls == []


def test_the_driver_labels_trials_and_reports_parallelism_through_the_hooks():
    tuner = Tuner(SPACE, seed=3, technique="test-hooked", budget=4, include_default=False)
    result = tuner.run(lambda c: c["x"])
    assert {t.technique for t in result.trials} == {"hooked-part"}
    assert ("parallelism", 1) in tuner._technique.calls


def test_a_technique_without_hooks_runs_and_trials_carry_its_name():
    tuner = Tuner(SPACE, seed=3, technique="test-plain", budget=4, include_default=False)
    result = tuner.run(lambda c: c["x"])
    assert len(result.trials) == 4
    assert {t.technique for t in result.trials} == {"test-plain"}


def test_imports_are_preloaded_only_when_nothing_forks_this_process():
    # In-process evaluations: the technique may import in a background thread. Worker processes are
    # forked from this one, and a fork while a thread imports can deadlock the child: no preload then.
    inline = Tuner(SPACE, technique="test-hooked", seed=1)
    inline.run(lambda c: float(c["x"]), budget=3)
    assert inline._technique.calls.count(("preload", None)) == 1
    forked = Tuner(SPACE, technique="test-hooked", seed=1)
    forked.run(lambda c: float(c["x"]), budget=3, workers=2)
    assert ("preload", None) not in forked._technique.calls


def test_the_models_surrogate_imports_neither_scikit_learn_nor_scipy():
    # The surrogate's trees are perftune's own (numpy): a short run never waits for a second of imports.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from perftune import Tuner\n"
        "from perftune.space import Choice, Float, Int, Space\n"
        "space = Space({'x': Int(0, 60), 'y': Float(0, 1), 'c': Choice(['a', 'b', 'c'])})\n"
        "t = Tuner(space, technique='model', seed=2, include_default=False)\n"
        "r = t.run(lambda c: (c['x'] - 17) ** 2 + c['y'] + (c['c'] == 'b'), budget=40)\n"
        "assert t._technique.n_fits > 0, 'the model never fitted'\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the model's fits imported {out.stdout.strip()}"

