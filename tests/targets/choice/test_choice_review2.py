"""Defects a second review of perftune.choice found (/tmp/r2_choice/report.md, items 1-15): inputs changed
in place by tune_accuracy's candidates, saves that moved a folder away or replaced a kept-aside file,
concurrent saves, crashes below the smallest tuned size, placement failures in the timed rounds, level
tables whose rows lost the table's direction, configurations handed back in another form than tuned with,
sequences read once, the held-out verification limit, a stale best accuracy, tune_levels checkpoints, run-time
lookups from argv, keyword calls of a site, and user mistakes that gave tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from perftune.space import Config, Int, Levels, Selector, Space
from perftune.targets.choice import (
    AccuracyTable,
    AlgorithmSite,
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    DeviceSite,
    LadderSettings,
    LevelTable,
    UnreachableTargetWarning,
    accuracy_config,
    increa,
    level_config,
    tune_accuracy,
    tune_levels,
    tune_placement,
    tune_sites,
    use_choices,
)
from perftune.targets.choice import _site as site_module
from perftune.targets.choice._target import ChoiceTarget
from perftune.trial import Status

# ---- 1. tune_accuracy copies its inputs -------------------------------------------------------------


def _bubble_passes_in_place(config, x):
    for _ in range(config["passes"]):
        for i in range(len(x) - 1):
            if x[i] > x[i + 1]:
                x[i], x[i + 1] = x[i + 1], x[i]
    return x


def _sortedness(out, x):
    return float(np.mean(np.diff(out) >= 0))


def test_tune_accuracy_gives_every_run_its_own_copy_of_an_input_changed_in_place() -> None:
    rng = np.random.default_rng(0)
    train = [rng.random(80) for _ in range(3)]
    before = [a.copy() for a in train]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreachableTargetWarning)
        table = tune_accuracy(_bubble_passes_in_place, Space({"passes": Int(1, 80)}), accuracy=_sortedness,
                              targets=[0.99], inputs=train, budget=30, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(train, before, strict=True))  # not sorted by a candidate
    [cell] = table.bins
    assert cell.reached
    # The configuration reaches its target on the training inputs as they were, not only on sorted ones.
    assert min(_sortedness(_bubble_passes_in_place(cell.config, a.copy()), a) for a in before) >= 0.99


# ---- 2. save() refuses a folder, never replaces a kept-aside file ----------------------------------------


def test_a_save_to_a_folder_refuses_and_moves_nothing(tmp_path: Path) -> None:
    project = tmp_path / "home" / "myproject"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('my code')\n")
    table = AccuracyTable("t", [])
    with pytest.raises(ChoiceError, match="is a folder"):
        table.save(project)
    assert (project / "src" / "main.py").read_text() == "print('my code')\n"
    assert list(project.parent.iterdir()) == [project]  # nothing moved aside, no lock file made beside it


def test_two_corrupt_files_saved_over_are_both_kept_aside(tmp_path: Path) -> None:
    path = tmp_path / "choices.json"
    kept = []
    for i in range(2):
        # A file cut short in the middle of a tuned selector.
        path.write_text(f'{{"sites": {{"sort{i}": {{"cutoffs": [24], "choices": ["insertion" ...')
        with pytest.warns(ChoicesFileWarning, match="kept as"):
            AccuracyTable(f"t{i}", []).save(path)
        kept.append(f'"sort{i}"')
    asides = sorted(tmp_path.glob("choices.json.unreadable*"))
    assert len(asides) == 2
    texts = " ".join(p.read_text() for p in asides)
    assert all(k in texts for k in kept)
    assert set(ChoicesFile.read(path).tables) == {"t1"}


# ---- 3. concurrent saves into one file keep every entry --------------------------------------------------

_SAVER = r"""
import sys
from perftune.targets.choice import AccuracyBin, AccuracyTable
who, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    AccuracyTable(f"{who}{i}", [AccuracyBin(1.0, {"it": i}, time_s=0.1, accuracy=1.0)]).save(path)
"""


def test_two_processes_saving_into_one_file_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "choices.json"
    n = 120
    procs = [subprocess.Popen([sys.executable, "-c", _SAVER, who, str(path), str(n)]) for who in "ab"]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    assert len(ChoicesFile.read(path).tables) == 2 * n


# ---- 4. tune_sites without check: no crash in the final timing, no level that raises below the sizes --


def _slow(xs):
    for _ in range(30):
        out = sorted(xs)
    return out


def _big_only(xs):  # a blocked algorithm that needs n >= 150
    if len(xs) < 150:
        raise ValueError(f"big_only needs n >= 150, got {len(xs)}")
    return sorted(xs)


@pytest.mark.parametrize("seed", range(8))
def test_tune_sites_without_check_never_saves_a_selector_that_raises(seed: int) -> None:
    use_choices(ChoicesFile())
    site = AlgorithmSite(f"r2-big-only-{seed}", {"slow": _slow, "big_only": _big_only}, default="slow")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_sites(lambda xs: site(xs), [site], sizes=[100, 200, 400], seed=seed,
                            make_input=lambda n, rng: rng.integers(0, 999, n).tolist())
    result.apply([site])
    for n in range(1, 401):
        site(list(range(n)))  # raises if a level runs big_only below 150


# ---- 5. tune_placement: a failure in the timed rounds is a failure at that size -------------------------


def test_an_alternative_failing_in_the_timed_rounds_is_recorded_not_raised() -> None:
    calls: dict[int, int] = {}

    def flaky(xs):
        calls[len(xs)] = calls.get(len(xs), 0) + 1
        if len(xs) == 1000 and calls[len(xs)] > 2:  # the warm-up and its timing pass, then it fails
            raise MemoryError("out of memory (simulated)")
        return sorted(xs)

    site = DeviceSite("r2-place-flaky", {"builtin": sorted, "flaky": flaky})
    tuning = tune_placement(site, lambda n, rng: rng.integers(0, 99, n).tolist(), [10, 100, 1000],
                            n_rounds=3, min_sample_s=1e-4)
    row = tuning.rows[-1]
    assert "flaky" in row.failures and "MemoryError" in row.failures["flaky"]
    assert set(row.median_s) == {"builtin"} and row.winner == "builtin"
    assert tuning.choose(1000) == "builtin"


# ---- 6. level tables: rows inherit the direction; level keys are canonical; bins ordered ----------------


def _use_doc(tmp_path: Path, tables: dict) -> Path:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps({"format": "perftune-choices", "version": 1, "sites": {}, "tables": tables}))
    return path


def test_a_level_row_inherits_the_tables_direction(tmp_path: Path) -> None:
    solver = {"kind": "levels", "metric": "residual", "higher_is_better": False, "targets": [1e-2, 1e-8],
              "rows": {"5": {"kind": "accuracy", "metric": "residual", "bins": [
                  {"target": 1e-2, "config": {"iters": 2}, "accuracy": 5e-3},
                  {"target": 1e-8, "config": {"iters": 40}, "accuracy": 3e-9}]}}}
    use_choices(_use_doc(tmp_path, {"solver": solver}), strict=True)
    assert level_config("solver", 5, 1e-8) == {"iters": 40}
    assert level_config("solver", 5, 1e-3) == {"iters": 40}
    assert level_config("solver", 5, 1e-2) == {"iters": 2}


@pytest.mark.parametrize("table, match", [
    ({"kind": "levels", "targets": [5], "rows": {
        "3": {"kind": "accuracy", "bins": [{"target": 5, "config": {"iters": 40}}]},
        "03": {"kind": "accuracy", "bins": [{"target": 5, "config": {"iters": 1}}]}}}, "not a level"),
    ({"kind": "levels", "higher_is_better": False, "targets": [5], "rows": {
        "3": {"kind": "accuracy", "higher_is_better": True, "bins": [{"target": 5, "config": {}}]}}},
     "'higher_is_better' is true but the table's is false"),
    ({"kind": "accuracy", "bins": [{"target": 9, "config": {"it": 9}}, {"target": 1, "config": {"it": 1}}]},
     "not strictly increasing"),
    ({"kind": "accuracy", "higher_is_better": False,
      "bins": [{"target": 1e-8, "config": {"it": 9}}, {"target": 1e-2, "config": {"it": 1}}]},
     "not strictly decreasing"),
])
def test_a_table_the_lookups_would_misread_is_refused(tmp_path: Path, table: dict, match: str) -> None:
    path = _use_doc(tmp_path, {"p": table})
    with pytest.raises(ChoiceError, match=match):
        ChoicesFile.read(path)


# ---- 7. the configuration handed back is the one tuned with ----------------------------------------------

_SEL_SPACE = Space({"it": Int(1, 20), "sel": Selector(["a", "b"], max_levels=2, size_range=(1, 100))})


def _sel_program(config, x):
    return config["it"] + len(config["sel"].choices)  # a Levels, as during tuning


def test_config_for_returns_what_the_program_was_tuned_with(tmp_path: Path) -> None:
    table = tune_accuracy(_sel_program, _SEL_SPACE, accuracy=lambda out, x: out, targets=[5], inputs=[0],
                          budget=20, seed=0, name="r2-sel")
    cfg = table.config_for(5)
    assert _sel_program(cfg, 0) >= 5 and _SEL_SPACE.is_valid(cfg)
    assert isinstance(table.bins[0].config["sel"], dict)  # the file's form: plain JSON
    use_choices(table.save(tmp_path / "c.json"), strict=True)
    back = accuracy_config("r2-sel", 5, space=_SEL_SPACE)
    assert back == cfg and isinstance(back["sel"], Levels)
    assert isinstance(accuracy_config("r2-sel", 5)["sel"], dict)  # no space: the plain form
    with pytest.raises(ChoiceError, match="not one of the given space"):
        accuracy_config("r2-sel", 5, space=Space({"other": Int(1, 2)}))


def test_tune_levels_hands_lower_cells_as_configs() -> None:
    seen = []

    def program(level, config, x, table):
        if level > 1:
            lower = table.cell(level - 1, 0)
            seen.append(type(lower["sel"]))
        return config["it"] + len(config["sel"].choices)

    tune_levels(program, lambda level, table: _SEL_SPACE, levels=[1, 2], accuracy=lambda out, x: out,
                targets=[5], inputs_for_level=lambda level: [0], budget_per_level=8, seed=0)
    assert seen and set(seen) == {Levels}


# ---- 8. sequences read once; plain dict seeds ------------------------------------------------------------


def _terms(config, x):
    return sum(x ** k / np.prod(np.arange(1, k + 1)) for k in range(config["terms"]))


def _digits(out, x):
    return float(-np.log10(abs(out - np.exp(x)) / np.exp(x) + 1e-17))


def test_held_out_inputs_given_as_a_generator_serve_every_check() -> None:
    space = Space({"terms": Int(1, 40)})
    table = tune_accuracy(_terms, space, accuracy=_digits, targets=[3, 6, 9], inputs=[1.0, 2.0],
                          held_out=(x for x in [1.5, 2.5]), budget=40, seed=0)
    assert all(b.reached and b.verified_accuracy >= b.target for b in table.bins), table.format()


def test_seeds_may_be_plain_dicts_and_a_bad_one_is_named() -> None:
    space = Space({"terms": Int(1, 40)})
    table = tune_accuracy(_terms, space, accuracy=_digits, targets=[3], inputs=[1.0], budget=4, seed=0,
                          seeds=[{"terms": 30}])
    assert table.bins[0].reached
    with pytest.raises(ChoiceError, match="seed .*'terms': 99.* not valid"):
        tune_accuracy(_terms, space, accuracy=_digits, targets=[3], inputs=[1.0], budget=4,
                      seeds=[{"terms": 99}])
    result = increa(lambda c, n: (c["x"] - 40) ** 2 + n, Space({"x": Int(0, 100)}), [1, 10], seed=1,
                    seeds=[{"x": 40}, {"x": 400}])
    assert result.best == {"x": 40}
    assert any("'x': 400" in note for note in result.notes)


# ---- 9. the held-out verification limit --------------------------------------------------------------


def test_a_bin_is_reached_when_only_the_fastest_candidates_miss_on_held_out_inputs() -> None:
    def program(config, x):
        time.sleep(config["k"] * 1e-4)  # more work, more accuracy
        return config["k"]

    table = tune_accuracy(program, Space({"k": Int(1, 100)}), accuracy=lambda out, x: min(1.0, out / x),
                          targets=[1.0], inputs=[20], held_out=[60], budget=60, seed=0)
    [cell] = table.bins
    assert cell.reached and cell.config["k"] >= 60, table.format()


# ---- 10. best_accuracy after the re-runs -----------------------------------------------------------------


def test_an_unreachable_bin_reports_a_best_accuracy_below_its_target() -> None:
    runs: dict[int, int] = {}

    def program(config, x):
        q = config["q"]
        runs[q] = runs.get(q, 0) + 1
        return q / 20 - (0.0 if runs[q] == 1 else 0.2)  # the first run is lucky

    with pytest.warns(UnreachableTargetWarning):
        table = tune_accuracy(program, Space({"q": Int(0, 20)}), accuracy=lambda out, x: out, targets=[0.9],
                              inputs=[0], budget=30, seed=0)
    [cell] = table.bins
    assert not cell.reached and cell.best_accuracy < 0.9


# ---- 11. tune_levels checkpoints -------------------------------------------------------------------------


def test_tune_levels_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "levels.json"
    ran: list[int] = []
    space = Space({"it": Int(1, 50)})

    def program(level, config, x, table):
        ran.append(level)
        return config["it"] * level

    def inputs(stop_at):
        def inputs_for_level(level):
            if level == stop_at:
                raise KeyboardInterrupt  # Ctrl-C during that level
            return [1, 2]
        return inputs_for_level

    kwargs = dict(levels=[2, 3, 4], accuracy=lambda out, x: out / 10, targets=[1, 5], budget_per_level=10,
                  seed=0, name="lv", checkpoint=path)
    with pytest.raises(KeyboardInterrupt):
        tune_levels(program, lambda level, table: space, inputs_for_level=inputs(4), **kwargs)
    assert set(ran) == {2, 3}
    first = LevelTable.from_dict("lv", ChoicesFile.read(path).tables["lv"])
    assert first.levels == [2, 3]
    ran.clear()
    table = tune_levels(program, lambda level, table: space, inputs_for_level=inputs(None), **kwargs)
    assert set(ran) == {4}  # levels 2 and 3 were not tuned again
    assert table.levels == [2, 3, 4]
    assert table.rows[3].bins == first.rows[3].bins
    assert LevelTable.from_dict("lv", ChoicesFile.read(path).tables["lv"]).levels == [2, 3, 4]
    with pytest.raises(ChoiceError, match="tuned for targets"):
        tune_levels(program, lambda level, table: space, inputs_for_level=inputs(None),
                    **{**kwargs, "targets": [2]})


# ---- 12. run-time lookups with strings from argv ---------------------------------------------------------


def test_runtime_lookups_take_numbers_as_strings_and_refuse_the_rest(tmp_path: Path) -> None:
    km = {"kind": "accuracy",
          "bins": [{"target": 0.9, "config": {"it": 3}}, {"target": 0.99, "config": {"it": 9}}]}
    poisson = {"kind": "levels", "targets": [1, 3], "rows": {"3": {"kind": "accuracy", "bins": [
        {"target": 1, "config": {"algo": "sor"}}, {"target": 3, "config": {"algo": "direct"}}]}}}
    use_choices(_use_doc(tmp_path, {"km": km, "poisson": poisson}), strict=True)
    assert accuracy_config("km", "0.95") == {"it": 9}
    assert level_config("poisson", "3", "2") == {"algo": "direct"}
    with pytest.raises(ChoiceError, match=r"accuracy must be a number, got None \(NoneType\)"):
        accuracy_config("km", None)
    with pytest.raises(ChoiceError, match=r"accuracy must be a number, got 'high' \(str\)"):
        level_config("poisson", 3, "high")
    with pytest.raises(ChoiceError, match=r"level must be an integer, got '3rd' \(str\)"):
        level_config("poisson", "3rd", 2)
    with pytest.raises(ChoiceError, match=r"level 4 is not tuned \(tuned: \[3\]\)"):
        level_config("poisson", "4", 2)


# ---- 13. a site called with a keyword argument ------------------------------------------------------------


def test_a_site_called_without_a_positional_input_says_so() -> None:
    use_choices(ChoicesFile())
    site = AlgorithmSite("r2-kw", {"builtin": sorted, "other": sorted})
    with pytest.raises(ChoiceError, match=r"first positional argument; call r2-kw\(xs, ...\)"):
        site(iterable=[3, 1, 2])  # untuned: refused already
    assert site([3, 1, 2]) == [1, 2, 3]
    site.set([2], ["other", "builtin"])
    with pytest.raises(ChoiceError, match="first positional argument"):
        site(iterable=[3, 1, 2])


# ---- 14. user mistakes: one line ------------------------------------------------------------------------

_SP = Space({"it": Int(1, 9)})


def _ts(**kw):
    use_choices(ChoicesFile())
    site = AlgorithmSite("r2-m", {"a": sorted, "b": sorted})
    args = dict(make_input=lambda n, rng: rng.integers(0, 99, n).tolist(), sizes=[8, 64], seed=0,
                settings=LadderSettings(population=4, generations=1))
    args.update(kw)
    return tune_sites(lambda xs: site(xs), args.pop("sites", [site]), **args)


def _ta(**kw):
    args = dict(accuracy=lambda o, x: o, targets=[3], inputs=[1], budget=4)
    args.update(kw)
    return tune_accuracy(lambda c, x: c["it"], _SP, **args)


def _tl(**kw):
    args = dict(levels=[1, 2], accuracy=lambda o, x: o, targets=[3], inputs_for_level=lambda lv: [1],
                budget_per_level=4)
    args.update(kw)
    return tune_levels(lambda lv, c, x, t: c["it"], lambda lv, t: _SP, **args)


def _site():
    return AlgorithmSite("r2-s", {"a": sorted})


@pytest.mark.parametrize("call, match", [
    (lambda: _ts(sizes=[8.5, 64]), "sizes must be integers"),
    (lambda: _ts(sites=_site()), "got the site 'r2-s' alone; pass \\[site\\]"),
    (lambda: _ts(sites=["r2-s"]), "sites must be AlgorithmSite objects"),
    (lambda: _ts(max_levels=0), "max_levels must be an integer >= 1"),
    (lambda: _ts(make_input=[1, 2]), "make_input must be a function"),
    (lambda: _ta(targets=0.9), "targets must be a list, got float"),
    (lambda: _ta(final_repeats=0), "final_repeats must be an integer >= 1"),
    (lambda: _ta(n_finalists=-1), "n_finalists must be an integer >= 1"),
    (lambda: _ta(max_verify=0), "max_verify must be an integer >= 1"),
    (lambda: _tl(targets=[None]), "accuracy targets must be finite numbers, got None"),
    (lambda: _tl(levels=[1, "two"]), "level must be an integer, got 'two'"),
    (lambda: _tl(inputs_for_level=[[1], [2]]), "inputs_for_level must be a function, got list"),
    (lambda: increa(lambda c, n: n, _SP, [100, 10, 1]), "sizes must be strictly increasing"),
    (lambda: increa(lambda c, n: n, _SP, [10, 10]), "sizes must be strictly increasing"),
    (lambda: LadderSettings(final_samples=0), "final_samples must be an integer >= 1"),
    (lambda: LadderSettings(grow=-1), "grow must be an integer >= 0"),
    (lambda: LadderSettings(resolve=-5), "resolve must be an integer >= 0"),
    (lambda: LadderSettings(population="24"), "population must be an integer >= 2, got '24'"),
    (lambda: LadderSettings(keep=0), r"keep must be a fraction in \(0, 1\]"),
])
def test_a_user_mistake_is_one_choice_error(call, match) -> None:
    with pytest.raises(ChoiceError, match=match):
        call()


def test_sequences_given_as_arrays_are_read_as_lists() -> None:
    assert _ts(sizes=np.array([8, 64])).choices.sites["r2-m"]
    assert _ta(inputs=np.array([1, 2])).bins[0].reached


# ---- 15. ChoiceTarget: a check that raises is a failed trial ----------------------------------------------


def test_a_check_that_raises_fails_the_trial_instead_of_escaping() -> None:
    site = AlgorithmSite("r2-target", {"builtin": sorted, "reversed": lambda xs: sorted(xs, reverse=True)})

    def check(data, out):
        np.testing.assert_array_equal(out, sorted(data))
        return True

    target = ChoiceTarget(lambda xs: site(xs), [site], make_input=lambda n, rng: list(rng.integers(0, 99, n)),
                          size=16, check=check, max_levels=1, seed=0)
    assert target.evaluate(Config({"r2-target": Levels((), ("builtin",))})).status is Status.OK
    bad = target.evaluate(Config({"r2-target": Levels((), ("reversed",))}))
    assert bad.status is Status.FAILED and "AssertionError" in bad.reason


def test_a_missing_file_warning_points_at_the_call_in_the_users_code(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PERFTUNE_CHOICES", str(tmp_path / "none.json"))
    monkeypatch.setattr(site_module, "_LOADED", None)  # not read yet: the first dispatch reads it
    site = AlgorithmSite("r2-warn", {"builtin": sorted})
    with pytest.warns(ChoicesFileWarning, match="not found") as record:
        site([2, 1])
    assert [w.filename for w in record] == [__file__]


def test_tune_placement_says_in_one_line_how_make_input_is_called():
    site = DeviceSite("r2-make-input")

    @site.alternative("cpu", device="cpu")
    def on_cpu(xs):
        return sorted(xs)

    with pytest.raises(ChoiceError, match=r"make_input must take two arguments, make_input\(n, rng\)"):
        tune_placement(site, sizes=[8], make_input=lambda n: list(range(n)))

    def broken(n, rng):
        raise KeyError("shape")

    with pytest.raises(ChoiceError, match=r"make_input\(8, rng\) raised KeyError"):
        tune_placement(site, sizes=[8], make_input=broken)
