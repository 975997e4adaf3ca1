"""One improvement for one run: `run`, `show`, `report` and `--json` print the same number, the same way.

The improvement is the speedup of the final answer over the default configuration with its
confidence interval (perftune.report.Improvement); a recorded final answer (a fallback) wins over the
best trial in every view.
"""

from __future__ import annotations

import html
import json
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.report import FinalAnswer, Improvement, improvement_of
from perftune.space import Config
from perftune.store import open_store
from perftune.trial import Status, Trial

# A noisy objective with repeats, so that the default and the best have samples and a real interval.
NOISY = textwrap.dedent("""
    name = "noisy"
    [space]
    x = { type = "int", min = 0, max = 8, default = 0 }
    [run]
    command = ["python3", "-c",
               "import random; print('value', (({x} - 5) ** 2 + 1) * (1 + 0.05 * random.random()))"]
    timeout_s = 20
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([-0-9.e]+)'
    goal = "min"
    [timing]
    repeats = 4
    warmup_runs = 0
    [check]
    stdout = "none"   # the output is the metric itself, different for every run
""")

IMPROVEMENT_LINE = re.compile(
    r"improvement over the default configuration: [0-9.]+x \(95% CI [0-9.]+x to [0-9.]+x\)"
)


@pytest.fixture
def tmp_path(public_tmp_path):
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps table cells at the terminal width


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def improvement_lines(text: str) -> list[str]:
    return IMPROVEMENT_LINE.findall(text)


def report_lines(db: str, run: str, tmp_path: Path) -> list[str]:
    out = tmp_path / f"report-{run}.html"
    invoke("--store", db, "report", run, "-o", str(out))
    # What the page shows: its text, not the data inlined for its script (which draws the same line).
    shown = re.sub(r"<script>.*?</script>", "", out.read_text(), flags=re.DOTALL)
    return improvement_lines(html.unescape(re.sub(r"<[^>]+>", "", shown)))


def test_run_show_report_and_json_print_the_same_improvement(tmp_path):
    task = tmp_path / "task.toml"
    task.write_text(NOISY)
    db = f"sqlite:///{tmp_path / 'p.db'}"

    printed = invoke("--store", db, "run", str(task), "--budget", "8", "--seed", "2", "--name", "text")
    [line] = improvement_lines(printed)
    assert improvement_lines(invoke("--store", db, "show", "text")) == [line]
    assert report_lines(db, "text", tmp_path) == [line]
    shown = json.loads(invoke("--store", db, "show", "text", "--json"))
    assert shown["improvement"]["text"] == line

    payload = json.loads(
        invoke("--store", db, "run", str(task), "--budget", "8", "--seed", "3", "--name", "js", "--json")
    )
    imp = payload["improvement"]
    assert imp["text"] == f"improvement over the default configuration: {imp['estimate']:.3f}x " \
                          f"(95% CI {imp['low']:.3f}x to {imp['high']:.3f}x)"
    assert payload["improvement_over_default"] == imp["estimate"]
    assert imp["low"] <= imp["estimate"] <= imp["high"] and imp["estimate"] > 1.0
    assert improvement_lines(invoke("--store", db, "show", "js")) == [imp["text"]]
    assert json.loads(invoke("--store", db, "show", "js", "--json"))["improvement"] == imp
    assert report_lines(db, "js", tmp_path) == [imp["text"]]

    # The number is the confidence-interval estimate of the stored samples, not a ratio of medians.
    store = open_store(db)
    try:
        info = store.get_run("js")
        trials = store.trials(info.id)
        default = next(t for t in trials if t.technique == "default")
        again = improvement_of(store.best(info.id), default, goal="min")
    finally:
        store.close()
    assert again is not None and again.text() == imp["text"]


@pytest.mark.slow
def test_the_demo_example_agrees_everywhere(tmp_path):
    example = Path(__file__).parents[2] / "examples" / "c_matmul" / "task.toml"
    db = f"sqlite:///{tmp_path / 'p.db'}"
    [line] = improvement_lines(invoke("--store", db, "run", str(example), "--budget", "5", "--name", "demo"))
    assert improvement_lines(invoke("--store", db, "show", "demo")) == [line]
    assert report_lines(db, "demo", tmp_path) == [line]
    assert json.loads(invoke("--store", db, "show", "demo", "--json"))["improvement"]["text"] == line


def _stored_run(db: str) -> int:
    """A run of three trials: the default (x=0), the best measured (x=2), and the final answer (x=1)."""
    store = open_store(db)
    try:
        run = store.create_run("fallback", None, {}, "min", None)
        rows = [(0, 4.0, "default"), (1, 2.0, "random"), (2, 1.0, "random")]
        for i, (x, value, technique) in enumerate(rows):
            samples = [value * f for f in (0.99, 1.0, 1.01)]
            store.add_trial(run.id, Trial(i, Config({"x": x}), Status.OK, value=value, loss=value,
                                          samples=samples, technique=technique))
        trials = store.trials(run.id)
        answer = FinalAnswer(improvement_of(trials[1], trials[0]), trial=1, config={"x": 1},
                             note="the best trial of the search (trial 2) failed its check: "
                                  "the final answer is trial 1")
        store.record_result(run.id, answer.to_json())
        return run.id
    finally:
        store.close()


def test_show_and_report_print_the_recorded_final_answer_not_the_best_trial(tmp_path):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    _stored_run(db)
    shown = invoke("--store", db, "show", "fallback")
    [line] = improvement_lines(shown)
    assert line.startswith("improvement over the default configuration: 2.000x")  # x=1 over x=0, not 4x
    assert "the best trial of the search (trial 2) failed its check: the final answer is trial 1" in shown
    assert 'final answer: 2 (trial 1) {"x": 1}' in shown
    assert report_lines(db, "fallback", tmp_path) == [line]
    page = html.unescape((tmp_path / "report-fallback.html").read_text())
    assert "failed its check" in page and "4.000x" not in page
    data = json.loads(invoke("--store", db, "show", "fallback", "--json"))
    assert data["improvement"]["estimate"] == 2.0 and data["final"]["trial"] == 1
    assert "failed its check" in data["note"]
    # best prints the same answer (it printed the best trial, x=2, which failed its check).
    assert json.loads(invoke("--store", db, "best", "fallback")) == {"x": 1}


def test_best_prints_an_answer_that_is_no_trial_and_says_when_there_is_none(tmp_path):
    db = f"sqlite:///{tmp_path / 'p.db'}"
    run_id = _stored_run(db)
    store = open_store(db)
    try:
        # A gcc flags run answers a flag set and its command line, not one of its trials.
        store.record_result(run_id, FinalAnswer(None, config={"flags": ["-O3", "-funroll-loops"]},
                                                command_line="gcc -O3 -funroll-loops m.c -o prog").to_json())
    finally:
        store.close()
    assert json.loads(invoke("--store", db, "best", "fallback")) == {
        "flags": ["-O3", "-funroll-loops"], "command_line": "gcc -O3 -funroll-loops m.c -o prog"}
    store = open_store(db)
    try:
        store.record_result(run_id, FinalAnswer(None, note="no verified winner among the best trials: the "
                                                           "run has no final answer").to_json())
    finally:
        store.close()
    res = CliRunner().invoke(cli, ["--store", db, "best", "fallback"])
    assert res.exit_code == 2 and "has no final answer: no verified winner" in res.output


def test_improvement_text_is_one_format():
    assert Improvement(3.99512, 3.8, 4.2).text() == \
        "improvement over the default configuration: 3.995x (95% CI 3.800x to 4.200x)"
    record = Improvement(1.23456, 1.1, 1.3, baseline="-O3").to_json()
    assert record["estimate"] == 1.235 and Improvement.from_json(record).text() == record["text"]
    assert Improvement.from_json({"estimate": "nan"}) is None and FinalAnswer.from_json("junk") is None


def test_single_measurements_claim_no_interval():
    default = Trial(0, Config({"x": 0}), Status.OK, value=7.0, samples=[7.0])
    best = Trial(1, Config({"x": 1}), Status.OK, value=1.0, samples=[1.0])
    assert improvement_of(best, default).text() == \
        "improvement over the default configuration: 7.000x (one measurement each: no confidence interval)"
    assert improvement_of(default, default).text() == (
        "improvement over the default configuration: 1.000x "
        "(the final answer is the default configuration itself)"
    )


def test_runs_and_a_resumed_run_print_the_same_improvement_as_show(tmp_path):
    task = tmp_path / "task.toml"
    task.write_text(NOISY)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    invoke("--store", db, "run", str(task), "--budget", "5", "--seed", "1", "--name", "r")
    estimate = json.loads(invoke("--store", db, "show", "r", "--json"))["improvement"]["estimate"]
    [row] = json.loads(invoke("--store", db, "runs", "--json"))["runs"]
    assert row["improvement"]["estimate"] == estimate
    assert f"{estimate:.3f}x" in invoke("--store", db, "runs")

    resumed = json.loads(invoke("--store", db, "resume", "r", "--budget", "+4", "--json"))
    assert sum(resumed["counts"].values()) == 9
    shown = json.loads(invoke("--store", db, "show", "r", "--json"))
    assert shown["improvement"] == resumed["improvement"]
    assert shown["final"]["trial"] == resumed["best"]["id"]
    assert shown["run"]["settings"]["budget"]["evals"] == 9  # the budget it ran with last, not the first


def test_runs_prints_the_improvement_of_a_run_made_from_python_as_show_does(tmp_path):
    # perftune.tune records no final answer: runs reads the best and the default trial as show does.
    import perftune
    from perftune.space import Int, Space

    db = f"sqlite:///{tmp_path / 'p.db'}"
    space = Space({"x": Int(0, 8, default=0)})
    perftune.tune(lambda c: ((c["x"] - 5) ** 2 + 1) * 1.0, space, budget=9, seed=0, store=db, name="api",
                  repeats=2)
    shown = json.loads(invoke("--store", db, "show", "api", "--json"))
    [row] = json.loads(invoke("--store", db, "runs", "--json"))["runs"]
    assert shown["improvement"]["estimate"] == 26.0 and row["improvement"] == shown["improvement"]
    assert row["created_at"] == shown["run"]["created_at"]  # the same type (a number) in both
    assert "26.000x" in invoke("--store", db, "runs")


def test_record_result_replaces_forgets_and_refuses_unknown_runs(tmp_path):
    from perftune.errors import StoreError

    store = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        run = store.create_run("r", None, {"budget": 3}, "min", None)
        store.record_result(run.id, {"note": "first"})
        store.record_result(run.id, {"note": "second"})
        assert store.get_run(run.id).settings == {"budget": 3, "result": {"note": "second"}}
        store.record_result(run.id, None)
        assert store.get_run(run.id).settings == {"budget": 3}
        with pytest.raises(StoreError, match="no run with id 99"):
            store.record_result(99, {"note": "x"})
    finally:
        store.close()


def test_an_interval_that_includes_no_improvement_says_so():
    # A flags run on a loaded machine: 1.171x with an interval from 0.605x (3 runs each).
    assert Improvement(1.171, 0.605, 2.264, baseline="-O3").text() == (
        "improvement over -O3: 1.171x (95% CI 0.605x to 2.264x: within the noise, not shown to be better)")
    assert Improvement(1.171, 1.02, 1.3).text().endswith("(95% CI 1.020x to 1.300x)")
    # Decided on the printed digits, so that show (which reads the stored, rounded numbers) says the same.
    edge = Improvement(1.1, 0.9996, 1.2)
    assert edge.text() == Improvement.from_json(edge.to_json()).text()
    assert "noise" not in edge.text()


def test_a_best_of_zero_is_no_ratio_and_says_so():
    # The default 0.08, the best exactly 0: there is no ratio, and "2.000x" read as twice as good.
    default = Trial(0, Config({"x": 0}), Status.OK, value=0.08, samples=[0.08])
    best = Trial(1, Config({"x": 1}), Status.OK, value=0.0, samples=[0.0])
    imp = improvement_of(best, default)
    assert imp is not None and not imp.ratio
    assert imp.text() == ("improvement over the default configuration: +100.0% (relative to its value: a "
                          "value is 0 or below, so there is no ratio) (one measurement each: no confidence "
                          "interval)")
    assert Improvement.from_json(imp.to_json()) == Improvement(2.0, 2.0, 2.0, interval=False, ratio=False)


def test_show_json_gives_no_ratio_where_a_value_is_zero(tmp_path):
    import perftune
    from perftune.space import Int, Space

    db = f"sqlite:///{tmp_path / 'z.db'}"
    perftune.tune(lambda c: float(c["x"]), Space({"x": Int(0, 3, default=2)}), budget=4, seed=0, store=db,
                  name="z")
    data = json.loads(invoke("--store", db, "show", "z", "--json"))
    assert data["best"]["value"] == 0.0 and data["improvement"]["ratio"] is False
    assert data["improvement_over_default"] is None  # the flat field is a ratio, and there is none
    assert "+100.0%" in data["improvement"]["text"]
