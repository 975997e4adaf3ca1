"""Conformance suite for targets: every registered target passes it on its own small example.

A target's tests subclass :class:`TargetConformance` and name the target's kind::

    from perftune.testing.targets import TargetConformance

    class TestMyTarget(TargetConformance):
        target_kind = "my-target"        # as registered (perftune.targets.register or entry point)

The target class provides ``example(workdir)`` (see :class:`perftune.targets.Example`): a quick instance,
and where it can, a configuration that fails and one slow enough to be cut by a time budget. To run the
suite over several targets, override the ``conformance_kind`` fixture with ``params=[...]`` (perftune's
own tests do that over ``perftune.targets.names()``).

What the suite checks: the class is registered under its kind with every method of the shape; the
space is built once and its default is valid; outcomes are :class:`perftune.drive.Outcome` objects with
a terminal status, a finite value when OK and no value otherwise, and ordered times; a failing
configuration gives a FAILED or TIMEOUT outcome with a reason (never an exception, never a number), and
the driver records it so; a time budget ends the run within one evaluation, and what it cut short is
CANCELLED with a reason; a target that promises determinism gives the same value twice; ``explain``
gives a line and ``verify`` None or a reason; and the driver runs the target end to end.
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

import pytest

from perftune.space import Config
from perftune.trial import Status

__all__ = ["TargetConformance", "assert_valid_outcome"]

_TERMINAL = (Status.OK, Status.FAILED, Status.TIMEOUT, Status.CANCELLED)


def assert_valid_outcome(outcome: Any) -> None:
    """Fail unless ``outcome`` is an Outcome a trial can be made of (see the module docstring)."""
    from perftune.drive import Outcome

    assert isinstance(outcome, Outcome), f"evaluate() returned {type(outcome).__name__}, not an Outcome"
    assert outcome.status in _TERMINAL, f"status {outcome.status} is not how a trial ends"
    if outcome.status is Status.OK:
        assert outcome.value is not None and math.isfinite(outcome.value), f"OK with value {outcome.value}"
        assert all(math.isfinite(s) for s in outcome.samples)
    else:
        assert outcome.value is None, f"a {outcome.status.value} outcome carries the value {outcome.value}"
        assert isinstance(outcome.reason, str) and outcome.reason.strip(), "a failure needs a reason"
    if outcome.started_at and outcome.finished_at:
        assert outcome.started_at <= outcome.finished_at


class TargetConformance:
    """Base class of a target's conformance tests (see the module docstring).

    Attributes:
        target_kind: Registered kind of the target under test.
        time_budget_s: The time budget of the cancellation check.
        slack_s: What the run may take past the budget besides one evaluation (process start, shutdown).
    """

    target_kind: ClassVar[str] = ""
    time_budget_s: ClassVar[float] = 1.0
    slack_s: ClassVar[float] = 8.0

    @pytest.fixture
    def conformance_kind(self) -> str:
        """The kind under test (override with ``params=`` to test several)."""
        if not self.target_kind:
            pytest.skip("set target_kind on the TargetConformance subclass")
        return self.target_kind

    @pytest.fixture
    def example(self, conformance_kind: str, tmp_path: Any) -> Any:
        """A fresh example instance of the target, skipped where the machine lacks what it needs."""
        from perftune.targets import get

        workdir = tmp_path / "example"
        workdir.mkdir()
        ex = get(conformance_kind).example(str(workdir))  # type: ignore[attr-defined]
        if ex.skip:
            pytest.skip(f"{conformance_kind}: {ex.skip}")
        return ex

    # -------------------------------------------------------------------------------- helpers
    @staticmethod
    def tune(target: Any, budget: Any, seeds: list[Config], workers: int = 1) -> Any:
        """A run of the driver over ``target`` (no store), as ``perftune run`` does it."""
        from perftune.drive import tune
        from perftune.targets import TargetObjective

        return tune(TargetObjective(target), target.space(), budget=budget, seed=0, goal=target.goal,
                    seeds=[dict(c) for c in seeds], workers=workers)

    # -------------------------------------------------------------------------------- tests
    def test_registered_with_the_whole_shape(self, conformance_kind: str) -> None:
        from perftune.targets import get, names

        cls = get(conformance_kind)
        assert conformance_kind in names() and cls.kind == conformance_kind  # type: ignore[attr-defined]
        for method in ("space", "evaluate", "verify", "explain", "example", "from_task"):
            assert callable(getattr(cls, method, None)), f"{cls.__name__} has no {method}()"

    def test_space_is_built_once_and_its_default_is_valid(self, example: Any) -> None:
        from perftune.targets import Target

        target = example.target
        assert isinstance(target, Target)
        assert target.goal in ("min", "max")
        assert isinstance(target.deterministic, bool)
        space = target.space()
        assert target.space() is space
        assert space.is_valid(space.default())

    def test_outcomes_are_valid(self, example: Any) -> None:
        target = example.target
        space = target.space()
        default = target.evaluate(space.default())
        assert_valid_outcome(default)
        assert default.status is Status.OK, f"the example's default configuration failed: {default.reason}"
        for config in space.sample(0, n=2):
            if example.slow is None or config != example.slow:
                assert_valid_outcome(target.evaluate(config))

    def test_failure_is_a_status_with_a_reason(self, example: Any) -> None:
        if example.failing is None:
            pytest.skip("the example has no failing configuration")
        target = example.target
        assert target.space().is_valid(example.failing), "the failing configuration must be valid"
        outcome = target.evaluate(example.failing)
        assert_valid_outcome(outcome)
        assert outcome.status in (Status.FAILED, Status.TIMEOUT)

    def test_the_driver_records_a_failure_with_its_reason(self, example: Any) -> None:
        if example.failing is None:
            pytest.skip("the example has no failing configuration")
        result = self.tune(example.target, 2, [example.failing])
        failed = [t for t in result.trials if t.config == example.failing]
        assert failed and failed[0].status in (Status.FAILED, Status.TIMEOUT)
        assert failed[0].reason and failed[0].value is None

    def test_a_time_budget_ends_within_one_evaluation(self, example: Any) -> None:
        seeds = [] if example.slow is None else [example.slow]
        t0 = time.monotonic()
        result = self.tune(example.target, f"{self.time_budget_s}s", seeds)
        elapsed = time.monotonic() - t0
        longest = max((t.duration_s or 0.0 for t in result.trials if t.status is not Status.CANCELLED),
                      default=0.0)
        assert elapsed <= self.time_budget_s + longest + self.slack_s, (
            f"a {self.time_budget_s} s budget took {elapsed:.1f} s (longest evaluation {longest:.1f} s)")
        for trial in result.trials:
            assert trial.status in _TERMINAL
            if trial.status is not Status.OK:
                assert trial.reason, f"trial {trial.id} ({trial.status.value}) has no reason"
        if example.slow is not None:
            slow = [t for t in result.trials if t.config == example.slow]
            assert slow, "the slow configuration was never started"
            assert slow[0].status is Status.CANCELLED, f"the slow evaluation ended {slow[0].status.value}"

    def test_deterministic_when_it_says_so(self, example: Any) -> None:
        target = example.target
        if not target.deterministic:
            pytest.skip("the target does not promise determinism")
        config = target.space().default()
        first, second = target.evaluate(config), target.evaluate(config)
        assert first.status is second.status is Status.OK
        assert first.value == second.value

    def test_explain_and_verify(self, example: Any) -> None:
        target = example.target
        config = target.space().default()
        line = target.explain(config)
        assert isinstance(line, str) and line.strip()
        problem = target.verify(config)
        assert problem is None or (isinstance(problem, str) and problem.strip())

    def test_runs_through_the_driver(self, example: Any) -> None:
        result = self.tune(example.target, 4, [])
        assert 1 <= len(result.trials) <= 4
        assert result.best is not None and result.best.ok
