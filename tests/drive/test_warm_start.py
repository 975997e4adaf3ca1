"""Warm starts: a prior from results measured elsewhere, by rank, never trusted over new measurements."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import perftune
from perftune import PerftuneError, Status, Trial
from perftune.drive import Prior, Tuner, WarmStart
from perftune.space import Config, Int, Pow2, Space
from perftune.store import open_store

SPACE = Space({"block": Pow2(1, 64), "unroll": Int(1, 6)}, ["block * unroll <= 256"])


def time_on_a(c: Config) -> float:
    """'GPU A': best at block 16, unroll 4."""
    return 1.0 + abs(c["block"].bit_length() - 5) + abs(c["unroll"] - 4) * 0.5


def time_on_b(c: Config) -> float:
    """'GPU B': the same order, a thousand times slower throughout (absolute values do not carry)."""
    return 1000.0 * time_on_a(c)


def warm(trials: list[Trial]) -> list[Config]:
    return [t.config for t in trials if t.technique == "seed"]


def true_order(objective, space: Space = SPACE) -> list[Config]:
    return sorted(space.enumerate(), key=objective)


def write_t4(path: Path, rows: list[tuple[dict, float | str]]) -> Path:
    results = []
    for conf, value in rows:
        ok = not isinstance(value, str)
        results.append({"configuration": conf, "invalidity": "correct" if ok else "compile",
                        "measurements": [{"name": "time", "value": value, "unit": "ms"}],
                        "objectives": ["time"]})
    with gzip.open(path, "wt") as f:
        json.dump({"schema_version": "1.0.0", "results": results}, f)
    return path


def test_warm_start_from_a_run_in_a_store_measures_its_best_ranked_configurations_first(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    old = perftune.tune(time_on_b, SPACE, budget=30, seed=0, store=url, name="on-b")
    store = open_store(url)
    new = perftune.tune(time_on_a, SPACE, budget=6, seed=1,
                        warm_start=WarmStart([(store, "on-b")], n_propose=4))
    ranked = [t.config for t in sorted(old.trials, key=lambda t: t.value) if t.config != SPACE.default()]
    assert new.trials[0].technique == "default"
    assert warm(new.trials) == ranked[:4]
    assert [t.technique for t in new.trials[1:5]] == ["seed"] * 4
    assert new.best.config == true_order(time_on_a)[0]  # the old run had found it; it is measured again


def test_a_store_source_takes_every_run_on_this_space_and_skips_runs_of_other_spaces(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    perftune.tune(time_on_b, SPACE, budget=20, seed=0, store=url, name="on-b")
    other = Space({"n": Int(0, 9)})
    perftune.tune(lambda c: c["n"], other, budget=5, seed=0, store=url, name="other")
    prior = Prior.from_sources([url], SPACE)
    assert prior.n_sources == 1 and prior.ranked[0] in set(SPACE.enumerate())
    with pytest.raises(PerftuneError, match="holds no run on this space"):
        Prior.from_sources([url], Space({"m": Int(0, 3)}))


def test_warm_start_from_a_t4_file_skips_failures_and_configurations_invalid_here(tmp_path):
    path = write_t4(tmp_path / "k.B.T4.json.gz", [
        ({"block": 16, "unroll": 4}, "CompilationFailedConfig"),  # failed there: no rank to learn
        ({"block": 64, "unroll": 6}, 0.5),  # best there, but it violates the constraint here
        ({"block": 8, "unroll": 4}, 2.0),
        ({"block": 32, "unroll": 3}, 3.0),
        ({"block": 2, "unroll": 1}, 9.0),
    ])
    result = perftune.tune(time_on_a, SPACE, budget=5, seed=0, warm_start=WarmStart([str(path)], n_propose=3))
    assert [dict(c) for c in warm(result.trials)] == [
        {"block": 8, "unroll": 4}, {"block": 32, "unroll": 3}, {"block": 2, "unroll": 1}]


def test_a_tuple_of_two_files_is_two_sources_and_a_store_with_a_run_name_is_one(tmp_path):
    c84, c21, c41 = {"block": 8, "unroll": 4}, {"block": 2, "unroll": 1}, {"block": 4, "unroll": 1}
    a = write_t4(tmp_path / "a.T4.json.gz", [(c84, 2.0), (c21, 1.0)])
    b = write_t4(tmp_path / "b.T4.json.gz", [(c84, 1.0), (c21, 2.0), (c41, 3.0)])
    assert WarmStart.coerce((str(a), str(b))).sources == (str(a), str(b))
    assert Prior.from_sources(WarmStart.coerce((str(a), str(b))).sources, SPACE).n_sources == 2
    url = f"sqlite:///{tmp_path / 'p.db'}"
    perftune.tune(time_on_a, SPACE, budget=3, seed=0, store=url, name="old")
    store = open_store(url)
    assert WarmStart.coerce((store, "old")).sources == ((store, "old"),)


def test_warm_start_from_a_kernel_tuner_cache_file(tmp_path):
    cache = {"tune_params_keys": ["block", "unroll"], "tune_params": {"block": [1, 2, 4, 8, 16, 32, 64],
                                                                      "unroll": [1, 2, 3, 4, 5, 6]},
             "cache": {"16,4": {"block": 16, "unroll": 4, "time": "RuntimeFailedConfig"},
                       "8,4": {"block": 8, "unroll": 4, "time": 7.0, "times": [7.0]},
                       "4,2": {"block": 4, "unroll": 2, "time": 3.0, "times": [3.0]}}}
    path = tmp_path / "k.json"
    path.write_text(json.dumps(cache))
    prior = Prior.from_sources([path], SPACE)
    assert [dict(c) for c in prior.ranked] == [{"block": 4, "unroll": 2}, {"block": 8, "unroll": 4}]


def test_sources_are_combined_by_rank_not_by_value(tmp_path):
    configs = [Config({"block": b, "unroll": 1}) for b in (1, 2, 4)]
    # Source a (fast hardware) orders 1, 2, 4; source b (1000x slower) orders 2, 4, 1. By value, a would
    # decide everything; by rank, block 2 (ranks 0.5 and 0) is first.
    a = [Trial(i, c, Status.OK, value=v, loss=v)
         for i, (c, v) in enumerate(zip(configs, [1.0, 1.1, 1.2], strict=True))]
    b = [Trial(i, c, Status.OK, value=v, loss=v)
         for i, (c, v) in enumerate(zip(configs, [3000, 1000, 2000], strict=True))]
    prior = Prior.from_sources([a, b], SPACE)
    assert [c["block"] for c in prior.ranked] == [2, 1, 4]
    assert prior.rank == (0.25, 0.5, 0.75) and prior.n_sources == 2


def test_a_source_with_other_parameters_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    elsewhere = Space({"threads": Int(1, 8), "unroll": Int(1, 6)})
    other = perftune.tune(lambda c: c["threads"], elsewhere, budget=4, seed=0)
    with pytest.raises(PerftuneError) as error:
        Tuner(SPACE, seed=0, store=url, warm_start=[other])
    message = str(error.value)
    assert "\n" not in message and "missing block" in message and "extra threads" in message
    assert open_store(url).list_runs() == []
    path = write_t4(tmp_path / "x.T4.json.gz", [({"block": 2, "threads": 4}, 1.0)])
    with pytest.raises(PerftuneError, match="x.T4.json.gz was measured on another space"):
        Prior.from_sources([path], SPACE)


def test_a_source_with_the_same_parameters_and_other_ranges_is_mapped():
    wider = Space({"block": Pow2(1, 1024), "unroll": Int(1, 16)})
    old = perftune.tune(lambda c: time_on_a(c) if c["unroll"] <= 6 else 0.1, wider, budget=40, seed=0)
    prior = Prior.from_sources([old], SPACE)
    assert prior.ranked and all(SPACE.is_valid(c) for c in prior.ranked)
    assert len(prior.ranked) < len({t.config for t in old.trials})  # the best of the old space are not here


def test_a_source_with_nothing_valid_here_is_refused():
    old = [Trial(0, Config({"block": 64, "unroll": 6}), Status.OK, value=1.0, loss=1.0)]
    with pytest.raises(PerftuneError, match="no successful configuration valid in this space"):
        Prior.from_sources([old], SPACE)


@pytest.mark.parametrize("seed", range(5))
def test_an_adversarial_prior_never_outranks_measurements(seed):
    space = Space({"block": Pow2(1, 256), "unroll": Int(1, 16)}, ["block * unroll <= 1024"])
    # The prior ranks the space exactly backwards: its "best" configurations are the worst ones.
    reversed_prior = [Trial(i, c, Status.OK, value=-time_on_a(c), loss=-time_on_a(c))
                      for i, c in enumerate(space.enumerate())]
    result = perftune.tune(time_on_a, space, budget=64, seed=seed,
                           warm_start=WarmStart([reversed_prior], n_propose=8))
    order = true_order(time_on_a, space)
    worst = sorted((time_on_a(c) for c in order if c != space.default()), reverse=True)[:8]
    assert sorted(map(time_on_a, warm(result.trials)), reverse=True) == worst  # the prior was followed...
    assert result.best.config == order[0]  # ...and the measurements won: 64 of 124 configurations


def test_warm_start_is_recorded_in_the_run_settings_and_a_bad_count_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    old = perftune.tune(time_on_a, SPACE, budget=10, seed=0)
    perftune.tune(time_on_a, SPACE, budget=3, seed=0, store=url, name="warm", warm_start=old)
    assert open_store(url).get_run("warm").settings["warm_start"] == {"n_sources": 1, "n_propose": 4,
                                                                          "skipped": []}
    with pytest.raises(PerftuneError, match="n_propose"):
        WarmStart([old], n_propose=-1)
    with pytest.raises(PerftuneError, match="cannot read a prior from int"):
        Tuner(SPACE, warm_start=[3])


TASK = """
name = "blocks"
[space]
block = { type = "pow2", min = 1, max = 64, default = 1 }
unroll = { type = "int", min = 1, max = 6, default = 1 }
[run]
command = ["python3", "-c", "print('value', abs({block} - 16) + abs({unroll} - 4) + 1)"]
timeout_s = 20
[objective]
metric = "stdout_regex"
pattern = 'value ([-0-9.e]+)'
goal = "min"
[timing]
repeats = 1
warmup_runs = 0
[check]
stdout = "none"   # the output is the metric itself, different for every configuration
"""


def test_the_cli_warm_starts_from_t4_files_and_combines_their_ranks(public_tmp_path):
    from click.testing import CliRunner

    from perftune.cli import cli

    task = public_tmp_path / "task.toml"
    task.write_text(TASK)
    a = write_t4(public_tmp_path / "k.A.T4.json.gz", [({"block": 16, "unroll": 4}, 1.0),
                                                       ({"block": 8, "unroll": 2}, 2.0),
                                                       ({"block": 2, "unroll": 6}, 3.0)])
    b = write_t4(public_tmp_path / "k.B.T4.json.gz", [({"block": 16, "unroll": 4}, 2000.0),
                                                       ({"block": 8, "unroll": 2}, 1000.0),
                                                       ({"block": 2, "unroll": 6}, 3000.0)])
    db = f"sqlite:///{public_tmp_path / 'p.db'}"
    out = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "4", "--seed", "0",
                                   "--warm-start", str(a), "--warm-start", str(b), "--json"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    trials = open_store(db).trials(open_store(db).get_run("blocks").id)
    assert [dict(t.config) for t in trials if t.technique == "seed"] == [
        {"block": 16, "unroll": 4}, {"block": 8, "unroll": 2}, {"block": 2, "unroll": 6}]
    assert json.loads(out.output)["best"]["value"] == 1.0


def test_the_cli_transfers_a_replay_target_from_another_gpus_t4_file(tmp_path):
    from click.testing import CliRunner

    from perftune.cli import cli

    hub = Path(__file__).resolve().parents[2] / "data" / "benchmark_hub"
    task = tmp_path / "w6600.toml"
    task.write_text(f'[target]\nkind = "replay"\nt1 = "{hub / "dedispersion_milo.T1.json"}"\n'
                    f't4 = "{hub / "dedispersion_milo.W6600.T4.json.gz"}"\n')
    db = f"sqlite:///{tmp_path / 'p.db'}"
    out = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "5", "--seed", "0", "--json",
                                   "--warm-start", str(hub / "dedispersion_milo.A4000.T4.json.gz")],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    store = open_store(db)
    trials = store.trials(store.list_runs()[0].id)
    warm_started = [t.config for t in trials if t.technique == "seed"]
    assert [t.technique for t in trials if t.technique != "default"][:4] == ["seed"] * 4
    from perftune.targets import replay

    a4000 = hub / "dedispersion_milo.A4000.T4.json.gz"
    space = replay.load(hub / "dedispersion_milo.T1.json", a4000).space
    ranked = [c for c in Prior.from_sources([a4000], space).ranked if c != space.default()]
    assert warm_started == ranked[: len(warm_started)] and len(warm_started) == 4
