"""Kernel Tuner cache interop: loading hub caches, exporting runs, and replaying them in Kernel Tuner."""

from __future__ import annotations

import gzip
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import perftune
from perftune.errors import PerftuneError
from perftune.space import Choice, Config, Int, Ordinal, Space
from perftune.targets import replay
from perftune.trial import Status

ROOT = Path(__file__).resolve().parents[3]
HUB = ROOT / "data" / "benchmark_hub"


def _kt_cache(path: Path) -> dict:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _configs_that_failed_to_compile(doc: dict) -> list[Config]:
    names = doc["tune_params_keys"]
    entries = doc["cache"].values()
    return [Config({n: e[n] for n in names}) for e in entries if e["time"] == "CompilationFailedConfig"]


@pytest.fixture(scope="module")
def conv_titan() -> replay.ReplayProblem:
    return replay.load_kt(HUB / "convolution.T1.json", HUB / "convolution.RTX_Titan.kt.json.gz")


def test_a_hub_cache_loads_with_its_failures_as_failed_measurements(conv_titan: replay.ReplayProblem) -> None:
    doc = _kt_cache(HUB / "convolution.RTX_Titan.kt.json.gz")
    by_kind: dict[str, list[dict]] = {}
    for entry in doc["cache"].values():
        kind = entry["time"] if isinstance(entry["time"], str) else "ok"
        by_kind.setdefault(kind, []).append(entry)
    assert set(by_kind) == {"ok", "CompilationFailedConfig", "RuntimeFailedConfig"}
    names = doc["tune_params_keys"]
    assert conv_titan.n_results == len(doc["cache"]) == 6768
    n_failures = len(by_kind["CompilationFailedConfig"]) + len(by_kind["RuntimeFailedConfig"])
    assert conv_titan.n_failed == n_failures
    assert conv_titan.n_outside == 0
    for kind in ("CompilationFailedConfig", "RuntimeFailedConfig"):
        config = Config({n: by_kind[kind][0][n] for n in names})
        with pytest.raises(replay.ReplayFailure, match=f"^{kind}$"):
            conv_titan.objective(config)
    good = by_kind["ok"][0]
    assert conv_titan.objective(Config({n: good[n] for n in names})) == good["time"]
    assert conv_titan.optimum == min(e["time"] for e in by_kind["ok"])
    assert conv_titan.metadata["device_name"] == "NVIDIA TITAN RTX"


def test_tuning_a_hub_cache_records_its_failures_as_failed_trials(conv_titan: replay.ReplayProblem) -> None:
    doc = _kt_cache(HUB / "convolution.RTX_Titan.kt.json.gz")
    failing = _configs_that_failed_to_compile(doc)
    run = perftune.tune(conv_titan.objective, conv_titan.space, budget=4, seed=0, seeds=failing[:2])
    failed = [t for t in run.trials if t.config in failing[:2]]
    assert len(failed) == 2
    assert all(t.status is Status.FAILED and "CompilationFailedConfig" in (t.reason or "") for t in failed)


@pytest.mark.parametrize(
    ("kernel", "device", "n_valid"),
    [("pnpoly", "RTX_3060_laptop", 4092), ("pnpoly", "RTX_Titan", 4092),
     ("convolution", "RTX_3060_laptop", 6768), ("gemm", "RTX_2080_Ti", 17956), ("gemm", "RTX_Titan", 17956)],
)
def test_every_hub_cache_covers_the_t1_space(kernel: str, device: str, n_valid: int) -> None:
    problem = replay.load_kt(HUB / f"{kernel}.T1.json", HUB / f"{kernel}.{device}.kt.json.gz")
    assert problem.name == f"{kernel}.{device}"
    # A brute-forced cache holds every configuration the T1 Conditions allow, and nothing else.
    assert problem.space.cardinality() == n_valid == problem.n_results
    assert problem.n_outside == 0
    assert len(problem.objective.records) == n_valid


def test_t1_value_expressions_are_evaluated() -> None:
    problem = replay.load_kt(HUB / "pnpoly.T1.json", HUB / "pnpoly.RTX_Titan.kt.json.gz")
    bx = problem.space.params["block_size_x"]
    tile = problem.space.params["tile_size"]
    assert isinstance(bx, Ordinal) and bx.values() == [32 * i for i in range(1, 32)]
    assert tile.values() == [1] + [2 * i for i in range(1, 11)]
    assert problem.space.params["use_method"] == Int(0, 2, default=1)


def _cut(tmp_path: Path, *, drop: int = 0, close: bool = True) -> tuple[Path, Path, dict]:
    """A small cache cut from the pnpoly one: 12 configurations, some of them failed."""
    doc = _kt_cache(HUB / "pnpoly.RTX_3060_laptop.kt.json.gz")
    entries = list(doc["cache"].items())
    kept = [kv for kv in entries if kv[1]["block_size_x"] in (512, 544) and kv[1]["tile_size"] in (18, 20)
            and kv[1]["use_method"] in (0, 1, 2) and kv[1]["between_method"] == 0]
    assert len(kept) == 12 and any(isinstance(v["time"], str) for _, v in kept)
    small = dict(doc, cache=dict(kept[drop:]),
                 tune_params=dict(doc["tune_params"], block_size_x=[512, 544], tile_size=[18, 20],
                                  between_method=[0]))
    t1 = {"ConfigurationSpace": {"TuningParameters": [
        {"Name": "between_method", "Type": "int", "Values": "[0]", "Default": 0},
        {"Name": "block_size_x", "Type": "int", "Values": "[512 + 32 * i for i in range(2)]", "Default": 512},
        {"Name": "tile_size", "Type": "int", "Values": "[18, 20]", "Default": 18},
        {"Name": "use_method", "Type": "int", "Values": "[0, 1, 2]", "Default": 1},
    ], "Conditions": []}}
    p1, pk = tmp_path / "cut.T1.json", tmp_path / "cut.dev.kt.json"
    p1.write_text(json.dumps(t1))
    text = json.dumps(small)
    if not close:  # what an interrupted Kernel Tuner session leaves: entries end with a comma, no brackets
        text = text.removesuffix("}}") + ","
    pk.write_text(text)
    return p1, pk, small


def test_a_cut_cache_loads_and_missing_configurations_are_hidden_constraints(tmp_path: Path) -> None:
    p1, pk, small = _cut(tmp_path, drop=1)
    problem = replay.load_kt(p1, pk)
    assert problem.name == "cut.dev"
    assert problem.n_results == 11
    dropped = next(iter(_kt_cache(HUB / "pnpoly.RTX_3060_laptop.kt.json.gz")["cache"].values()))
    assert problem.space.cardinality() == 12
    failures = [e for e in small["cache"].values() if isinstance(e["time"], str)]
    assert problem.n_failed == len(failures)
    missing = [c for c in problem.space.enumerate() if problem.objective.lookup(c) is None]
    assert len(missing) == 1
    with pytest.raises(replay.ReplayFailure, match="missing: not in the Kernel Tuner cache"):
        problem.objective(missing[0])
    assert dropped  # the hub file itself is untouched


def test_an_unclosed_cache_from_an_interrupted_session_loads(tmp_path: Path) -> None:
    p1, pk, small = _cut(tmp_path, close=False)
    with pytest.raises(json.JSONDecodeError):
        json.loads(pk.read_text())
    problem = replay.load_kt(p1, pk)
    assert problem.n_results == len(small["cache"]) == 12


def test_cache_mistakes_name_the_file(tmp_path: Path) -> None:
    p1, pk, small = _cut(tmp_path)
    with pytest.raises(PerftuneError, match="nope.kt.json: Kernel Tuner cache file not found"):
        replay.load_kt(p1, tmp_path / "nope.kt.json")
    (tmp_path / "bad.kt.json").write_text("{not json")
    with pytest.raises(PerftuneError, match="bad.kt.json: not a valid Kernel Tuner cache"):
        replay.load_kt(p1, tmp_path / "bad.kt.json")
    (tmp_path / "t4.kt.json").write_text(json.dumps({"results": []}))
    with pytest.raises(PerftuneError, match="not a Kernel Tuner cache file"):
        replay.load_kt(p1, tmp_path / "t4.kt.json")
    other = dict(small, tune_params_keys=["between_method", "block_size_x", "tile", "use_method"])
    (tmp_path / "other.kt.json").write_text(json.dumps(other))
    mismatch = r"only in the cache: \['tile'\]; only in the T1 file: \['tile_size'\]"
    with pytest.raises(PerftuneError, match=mismatch):
        replay.load_kt(p1, tmp_path / "other.kt.json")


def test_hostile_t1_values_are_refused(tmp_path: Path) -> None:
    p1, pk, _ = _cut(tmp_path)
    t1 = json.loads(p1.read_text())
    hostile = [("[().__class__]", "attribute access"), ("[0 for i in range(10**12)]", "too large"),
               ("__import__('os').system('true')", "not allowed")]
    for values, message in hostile:
        t1["ConfigurationSpace"]["TuningParameters"][0]["Values"] = values
        p1.write_text(json.dumps(t1))
        with pytest.raises(PerftuneError, match=f"between_method.*{message}"):
            replay.load_kt(p1, pk)


# -- export --------------------------------------------------------------------------------------------


def _small_problem() -> tuple[Space, object]:
    space = Space(
        {"bx": Ordinal([1, 2, 4, 8], default=1), "algo": Choice(["a", "b"], default="b"),
         "t": Int(1, 3, default=1)},
        ["bx * t <= 16"],
    )

    def objective(config: Config) -> float:
        if config["bx"] == 8 and config["t"] == 2:
            raise RuntimeError("launch failed")
        return float(abs(config["bx"] - 4) + config["t"] + (config["algo"] == "a"))

    return space, objective


def _small_t1(tmp_path: Path) -> Path:
    t1 = {"ConfigurationSpace": {"TuningParameters": [
        {"Name": "bx", "Type": "int", "Values": "[2 ** i for i in range(4)]", "Default": 1},
        {"Name": "algo", "Type": "string", "Values": ["a", "b"], "Default": "b"},
        {"Name": "t", "Type": "int", "Values": "[1, 2, 3]", "Default": 1},
    ], "Conditions": [{"Expression": "bx * t <= 16", "Parameters": ["bx", "t"]}]}}
    p = tmp_path / "small.T1.json"
    p.write_text(json.dumps(t1))
    return p


def _stored_full_run(tmp_path: Path) -> tuple[Path, Space, list]:
    space, objective = _small_problem()
    n_valid = space.cardinality()
    assert n_valid == 22
    db = tmp_path / "runs.db"
    result = perftune.tune(objective, space, budget=n_valid, seed=4, store=str(db), name="small")
    assert len({t.config for t in result.trials}) == n_valid  # the whole space, each once
    return db, space, list(result.trials)


def test_an_exported_run_loads_back_with_the_same_measurements(tmp_path: Path) -> None:
    from perftune.store import open_store

    db, space, trials = _stored_full_run(tmp_path)
    store = open_store(str(db))
    try:
        out = replay.export_run_kt(store, "small", tmp_path / "small.dev.kt.json.gz")
    finally:
        store.close()
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    assert doc["kernel_name"] == "small" and doc["tune_params_keys"] == ["bx", "algo", "t"]
    assert doc["tune_params"] == {"bx": [1, 2, 4, 8], "algo": ["a", "b"], "t": [1, 2, 3]}
    assert doc["cache"]["8,b,2"]["time"] == "RuntimeFailedConfig"
    assert doc["cache"]["4,b,1"]["times"] == [1.0]
    again = replay.load_kt(_small_t1(tmp_path), out)
    assert again.n_results == len(trials) and again.n_outside == 0
    for t in trials:
        rec = again.objective.lookup(t.config)
        assert rec is not None
        if t.status is Status.OK:
            assert rec.value == t.value
        else:
            assert rec.value is None and rec.reason == "RuntimeFailedConfig"
    assert again.optimum == min(t.value for t in trials if t.value is not None)


def test_export_keeps_kernel_tuner_failure_strings_and_categories(conv_titan: replay.ReplayProblem) -> None:
    doc = _kt_cache(HUB / "convolution.RTX_Titan.kt.json.gz")
    names = doc["tune_params_keys"]
    failing = _configs_that_failed_to_compile(doc)
    run = perftune.tune(conv_titan.objective, conv_titan.space, budget=3, seed=0, seeds=failing[:1])
    exported = replay.kt_cache_document(run.trials, space=conv_titan.space)
    key = ",".join(str(failing[0][n]) for n in names)
    assert exported["cache"][key]["time"] == "CompilationFailedConfig"
    # Failure reasons of other targets map onto Kernel Tuner's classes by their category.
    from perftune.trial import Trial

    made = [Trial(0, Config({"x": 1}), Status.FAILED, reason="compile: nvcc exited 1"),
            Trial(1, Config({"x": 2}), Status.TIMEOUT, reason="ran past 2 s"),
            Trial(2, Config({"x": 3}), Status.FAILED, reason="violates constraints: x > 2"),
            Trial(3, Config({"x": 4}), Status.CANCELLED)]
    cache = replay.kt_cache_document(made)["cache"]
    assert {k: v["time"] for k, v in cache.items()} == {
        "1": "CompilationFailedConfig", "2": "RuntimeFailedConfig", "3": "InvalidConfig"}


def test_a_run_with_inactive_parameters_is_refused() -> None:
    from perftune.trial import Trial

    trials = [Trial(0, Config({"x": 1, "y": 2}), Status.OK, value=1.0),
              Trial(1, Config({"x": 2}), Status.OK, value=2.0)]
    with pytest.raises(PerftuneError, match="trial 1 has no value for y"):
        replay.kt_cache_document(trials)


def _kernel_tuner_python() -> str | None:
    """An interpreter with kernel_tuner: this one, $PERFTUNE_KT_PYTHON, or the benchmarks' .peers env."""
    if importlib.util.find_spec("kernel_tuner") is not None:
        return sys.executable
    peers_env = ROOT / ".peers" / "kerneltuner" / "bin" / "python"
    for candidate in (os.environ.get("PERFTUNE_KT_PYTHON"), str(peers_env)):
        if candidate and shutil.which(candidate):
            return candidate
    return None


_REPLAY_IN_KT = """
import json, sys, warnings
import kernel_tuner
warnings.simplefilter("ignore")
path, restrictions = sys.argv[1], json.loads(sys.argv[2])
doc = json.load(open(path))
results, env = kernel_tuner.tune_kernel(
    doc["kernel_name"], "__global__ void k() {}", [1, 1], [], doc["tune_params"],
    restrictions=restrictions, strategy="brute_force", cache=path, simulation_mode=True, quiet=True)
out = []
for r in results:
    t = r["time"]
    out.append({"config": {n: r[n] for n in doc["tune_params_keys"]},
                "time": t if type(t) in (int, float) else str(r.get("__error__", t))})
print(json.dumps(out))
"""


def test_an_exported_run_replays_in_kernel_tuner_simulation_mode(tmp_path: Path) -> None:
    python = _kernel_tuner_python()
    if python is None:
        pytest.skip("kernel_tuner is not installed (benchmarks/quality.py --setup puts it in .peers/)")
    from perftune.store import open_store

    db, space, trials = _stored_full_run(tmp_path)
    store = open_store(str(db))
    try:
        out = replay.export_run_kt(store, "small", tmp_path / "small.kt.json")
    finally:
        store.close()
    before = out.read_text()
    proc = subprocess.run(
        [python, "-c", _REPLAY_IN_KT, str(out), json.dumps(["bx * t <= 16"])],
        capture_output=True, text=True, timeout=240, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    replayed = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = {tuple(sorted(dict(t.config).items())): t for t in trials}
    assert len(replayed) == len(ours) == 22  # Kernel Tuner visited every configuration, all from the cache
    for r in replayed:
        t = ours[tuple(sorted(r["config"].items()))]
        assert r["time"] == (t.value if t.status is Status.OK else "RuntimeFailedConfig")
    assert out.read_text() == before  # simulation mode only read the file


def test_the_cli_exports_a_run_as_a_kernel_tuner_cache(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli

    db, _space, trials = _stored_full_run(tmp_path)
    out = tmp_path / "cli.kt.json"
    res = CliRunner().invoke(cli, ["export", "small", "--format", "kt", "-o", str(out), "--store", str(db)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert len(doc["cache"]) == len(trials) and doc["kernel_name"] == "small"
    assert out.read_text().endswith("}}}")  # how Kernel Tuner recognises a closed cache file


def test_small_problem_matches_the_t1_file(tmp_path: Path) -> None:
    space, _ = _small_problem()
    from_t1 = replay.space_from_t1(json.loads(_small_t1(tmp_path).read_text()))
    expected = {tuple(c[n] for n in space.names) for c in space.enumerate()}
    assert {tuple(c[n] for n in space.names) for c in from_t1.enumerate()} == expected
    combos = itertools.product([1, 2, 4, 8], "ab", [1, 2, 3])
    assert len(expected) == sum(1 for bx, _a, t in combos if bx * t <= 16)


def test_a_task_file_replays_a_kernel_tuner_cache(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli

    p1, pk, small = _cut(tmp_path)
    task = tmp_path / "cut.toml"
    target = f'[target]\nkind = "replay"\nt1 = "{p1.name}"\nkt = "{pk.name}"\n'
    task.write_text(target + "[tuning]\nbudget = 12\nseed = 1\n")
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "p.db"), "run", str(task), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{"):])
    n_failed = sum(isinstance(e["time"], str) for e in small["cache"].values())
    assert payload["counts"] == {"ok": 12 - n_failed, "failed": n_failed}
    times = [e["time"] for e in small["cache"].values() if not isinstance(e["time"], str)]
    assert payload["best"]["value"] == min(times)
    both = tmp_path / "both.toml"
    both.write_text(target + 't4 = "x.T4.json"\n')
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "p.db"), "run", str(both)])
    assert result.exit_code == 2 and "give one of them, not both" in result.output


def test_a_hub_cache_round_trips_through_a_perftune_run(tmp_path: Path) -> None:
    p1, pk, _small = _cut(tmp_path)
    original = replay.load_kt(p1, pk)
    run = perftune.tune(original.objective, original.space, budget=12, seed=2)
    assert len({t.config for t in run.trials}) == 12
    out = replay.export_kt(run.trials, tmp_path / "again.kt.json", space=original.space)
    again = replay.load_kt(p1, out)
    assert again.objective.records.keys() == original.objective.records.keys()
    for key, rec in original.objective.records.items():
        back = again.objective.records[key]
        assert (back.value, back.reason) == (rec.value, rec.reason)  # RuntimeFailedConfig stays itself


def test_a_maximised_run_is_not_written_as_times_to_minimise(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli

    space, objective = _small_problem()
    db = tmp_path / "max.db"
    perftune.tune(objective, space, budget=5, seed=0, store=str(db), name="gflops", goal="max")
    out = tmp_path / "max.kt.json"
    res = CliRunner().invoke(cli, ["export", "gflops", "--format", "kt", "-o", str(out), "--store", str(db)])
    # Kernel Tuner replays its cache's objective as a time to minimise: the best would come out last.
    assert res.exit_code == 2 and "maximises" in res.output and "export it as CSV or JSON" in res.output
    assert len(res.output.strip().splitlines()) == 1 and not out.exists()


def test_an_export_replaces_the_file_whole_or_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli

    db, _space, trials = _stored_full_run(tmp_path)
    target = tmp_path / "site" / "cache.kt.json"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "out.kt.json"
    link.symlink_to(target)

    def no_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    args = ["export", "small", "--format", "kt", "-o", str(link), "--store", str(db)]
    with monkeypatch.context() as m:  # the disk fills while the file is written: the old one stays
        m.setattr(os, "fsync", no_disk)
        res = CliRunner().invoke(cli, args)
    assert res.exit_code != 0 and "No space left on device" in res.output and "Traceback" not in res.output
    assert target.read_text() == "old\n" and not list(target.parent.glob("*.tmp"))
    # A link named with -o is followed (as `perftune report -o` does): its target is replaced whole.
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and len(json.loads(target.read_text())["cache"]) == len(trials)
    gz = tmp_path / "cache.kt.json.gz"
    res = CliRunner().invoke(cli, ["export", "small", "--format", "kt", "-o", str(gz), "--store", str(db)])
    assert res.exit_code == 0, res.output
    assert json.loads(gzip.decompress(gz.read_bytes()))["cache"] == json.loads(target.read_text())["cache"]
