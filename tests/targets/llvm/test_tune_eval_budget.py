"""``llvm-passes --budget N`` / ``tune_passes(evals=N)``: N caps every evaluation the command makes.

Before, only the ensemble and the local search's walk counted: the removal of useless passes, the
repairs and the greedy extension's rebuilds did not, so ``--budget 5`` made 158 evaluations and
``--budget 30`` 118 (fewer). These tests count evaluations, not time; the budgets are tiny and the
benchmark is the smallest bundled one.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.drive import Countdown
from perftune.targets.llvm import ACTIONS, LlvmError, PassTuneResult, action_index, get_benchmark, tune_passes

SIEVE = "benchmark://perftune-v0/sieve"


def _tune(search: str, evals: int) -> tuple[PassTuneResult, list[int]]:
    """tune_passes with a number budget, and the evaluation counts its callback saw, in order."""
    seen: list[int] = []
    result = tune_passes(SIEVE, seconds=60, evals=evals, search=search, seed=1,
                         on_evaluation=lambda n, best, failed: seen.append(n))
    return result, seen


@pytest.mark.parametrize(("search", "evals"), [
    ("perftune", 1), ("perftune", 5), ("perftune", 30),
    ("random", 5), ("random", 30), ("greedy", 5), ("greedy", 30),
])
def test_a_number_caps_every_evaluation_and_the_reported_count_is_that_one(search: str, evals: int) -> None:
    result, seen = _tune(search, evals)
    # One callback per evaluation, whichever step made it; the count reported is the count made.
    assert seen == list(range(1, len(seen) + 1))
    assert result.n_evaluations == len(seen) == result.to_json()["n_evaluations"]
    # Never more than the budget; these searches (and greedy, whose steps cost 118 evaluations each
    # on sieve) use all of it.
    assert result.n_evaluations == evals
    # The answer is validated and its count is what the opt replay gives.
    assert result.validation.ok, result.validation.errors
    assert result.validation.replayed_instruction_count == result.count_result


def test_a_larger_number_never_gives_fewer_evaluations() -> None:
    counts = [_tune("perftune", evals)[0].n_evaluations for evals in (2, 3, 7, 12)]
    assert counts == sorted(counts) and counts == [2, 3, 7, 12]


def test_the_cli_budget_number_caps_the_sequences_evaluated() -> None:
    runner = CliRunner()
    reported = []
    for budget in ("5", "30"):
        out = runner.invoke(cli, ["llvm-passes", SIEVE, "--budget", budget, "--json", "--seed", "1"])
        assert out.exit_code == 0, out.output
        data = json.loads(out.stdout)
        assert data["validated"] is True
        reported.append(data["n_evaluations"])
    assert reported == [5, 30]
    out = runner.invoke(cli, ["llvm-passes", SIEVE, "--budget", "5", "--seed", "1", "--quiet"])
    assert out.exit_code == 0, out.output
    assert f"{SIEVE}: 5 evaluations" in out.stdout


def test_the_large_module_path_counts_its_extension_and_reduction(monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.targets.llvm import _tune as tune_module

    # sieve as if it were large: the local search extends the ensemble's best greedily first.
    monkeypatch.setattr(tune_module, "_EXTEND_FIRST", 0)
    result, seen = _tune("perftune", 20)
    assert result.n_evaluations == len(seen) == 20
    assert result.validation.ok


def test_a_cut_short_reduction_that_does_not_validate_gives_way_to_its_whole_candidate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The budget runs out while passes are being dropped from the best candidate; the shorter
    sequence "miscompiles". The answer is the same candidate with all its passes, validated, not a
    worse candidate (and never the half-reduced one)."""
    from perftune.targets.llvm import _validate
    from perftune.targets.llvm._tune import DEFAULT_LENGTH, _seed_sequences

    # With 5 evaluations the ensemble gets 2 (the first two seed sequences): its best is one of them.
    seeds = {tuple(s) for s in _seed_sequences(DEFAULT_LENGTH)}
    real = _validate.validate_actions
    validated: list[tuple[str, ...]] = []

    def only_seed_sequences_run_right(bench, actions, count, *, run=True):  # type: ignore[no-untyped-def]
        names = tuple(ACTIONS[a].name for a in actions)
        validated.append(names)
        result = real(bench, actions, count, run=run)
        if names not in seeds:
            result.ok = False
            result.errors = ["output differs from the -O0 build (simulated)"]
        return result

    monkeypatch.setattr(_validate, "validate_actions", only_seed_sequences_run_right)
    result, seen = _tune("perftune", 5)
    assert result.n_evaluations == len(seen) == 5
    # Passes were dropped (the first validation was of a shorter, non-seed sequence) and rejected ...
    assert validated[0] not in seeds and len(validated) == 2
    assert result.n_rejected == 1 and result.n_removed == 0
    # ... and the answer is the best candidate itself: validated, with the best count found.
    assert validated[1] in seeds and tuple(ACTIONS[a].name for a in result.actions) == validated[1]
    assert result.validation.ok
    assert result.count_result == min(c for _, c in result.history)
    assert any("evaluation budget ran out" in note for note in result.notes)


def test_repairs_of_a_failing_winner_stay_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.targets.llvm import _validate

    real = _validate.validate_actions

    def everything_miscompiles(bench, actions, count, *, run=True):  # type: ignore[no-untyped-def]
        result = real(bench, actions, count, run=run)
        if actions:
            result.ok = False
            result.errors = ["output differs from the -O0 build (simulated)"]
        return result

    monkeypatch.setattr(_validate, "validate_actions", everything_miscompiles)
    result, seen = _tune("perftune", 5)
    assert result.n_evaluations == len(seen) == 5
    # Nothing validates but the empty sequence, which is the (validated) answer.
    assert result.actions == [] and result.validation.ok
    assert any("repairs" in note and "evaluation budget" in note for note in result.notes)


def test_evals_must_be_a_positive_integer() -> None:
    for bad in (0, -3):
        with pytest.raises(LlvmError, match="evals must be a positive integer"):
            tune_passes(SIEVE, seconds=10, evals=bad)


def test_the_evaluator_refuses_evaluations_past_its_cap() -> None:
    from perftune.targets.llvm._tune import EvaluationsSpent, SequenceEvaluator

    ev = SequenceEvaluator(get_benchmark(SIEVE))
    try:
        assert ev.left() is None
        ev.max_evaluations = 2
        ev.count([action_index("mem2reg")])
        ev.trial(action_index("instcombine"))
        assert ev.left() == 0 and ev.n_evaluations == 2
        with pytest.raises(EvaluationsSpent):
            ev.count([action_index("mem2reg")])
        assert ev.n_evaluations == 2
    finally:
        ev.close()


def test_a_reduction_cut_short_and_resumed_is_the_whole_reduction() -> None:
    from perftune.targets.llvm._tune import DEFAULT_LENGTH, SequenceEvaluator, _reduce, _seed_sequences

    ev = SequenceEvaluator(get_benchmark(SIEVE))
    try:
        seq = [action_index(n) for n in _seed_sequences(DEFAULT_LENGTH)[3]][:24]
        count = ev.count(seq)
        whole = _reduce(ev, seq, count, Countdown(60))
        assert whole.todo == 0 and whole.count <= count
        before = ev.n_evaluations
        part = _reduce(ev, seq, count, Countdown(60), max_evals=5)
        assert ev.n_evaluations - before == 5 and part.todo == len(seq) - 5
        assert part.count <= count and ev.count(part.actions) == part.count  # a correct count, only longer
        rest = _reduce(ev, seq, count, Countdown(60), resume=part)
        assert ev.n_evaluations - before == len(seq) + 1  # every position once, plus the check above
        assert (rest.actions, rest.count, rest.removed) == (whole.actions, whole.count, whole.removed)
    finally:
        ev.close()
