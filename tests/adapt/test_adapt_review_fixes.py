"""Fixes from a review: saving beside unreadable files, first-call races, installed dispatchers kept
across unrelated loads, pickling, one bad entry, strict loads, warnings and argument checks."""

from __future__ import annotations

import json
import pickle
import sys
import threading
import warnings
from pathlib import Path

import pytest

from perftune.adapt import (
    AdaptError,
    AdaptiveObjective,
    AdaptiveSite,
    DispatchFile,
    DispatchFileWarning,
    tune_inputs,
    use_dispatch,
)
from perftune.choice import AlgorithmSite
from perftune.space import Choice, Space

CONSTANT = {"kind": "tree", "left": [-1], "right": [-1], "feature": [-1], "threshold": [0.0], "leaf": [0]}


@pytest.fixture(autouse=True)
def _no_dispatch_file_after():
    yield
    use_dispatch(DispatchFile())


def _objective(name: str) -> AdaptiveObjective:
    site = AdaptiveObjective(name, lambda c, x: c["way"], Space({"way": Choice(["a", "b"])}),
                             default={"way": "a"})
    site.feature(len, name="n", cost="cheap")
    return site


def _entry(site: AdaptiveObjective, way: str = "b", **extra: object) -> dict:
    return {"target": "objective", "fingerprint": site.fingerprint(), "columns": list(site.columns),
            "landmarks": [{"way": way}], "model": CONSTANT, **extra}


def _write(path: Path, dispatchers: dict, version: int = 1) -> None:
    doc = {"format": "perftune-dispatch", "version": version, "dispatchers": dispatchers}
    path.write_text(json.dumps(doc))


def _tuned(name: str):
    site = AdaptiveObjective(name, lambda c, xs: sorted(xs), Space({"o": Choice(["a", "b"])}))
    site.feature(len, name="n", cost="cheap")
    inputs = [list(range(n)) for n in (10, 100, 1000, 20)]
    return tune_inputs(site, inputs, budget=4, repeats=1, search_repeats=None, seed=0)


# ---- 1: save never deletes other sites' entries ------------------------------------------------------


def test_save_refuses_to_overwrite_a_file_of_a_newer_version(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    other = _objective("rf-other")
    _write(path, {"rf-other": _entry(other)}, version=2)
    before = path.read_text()
    result = _tuned("rf-save-newer")
    with pytest.raises(AdaptError, match=r"d\.json.*version 2"):
        result.save(path)
    assert path.read_text() == before


def test_save_keeps_an_unusable_entry_of_another_site_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    other = _objective("rf-bad")
    bad = _entry(other, trained="hand edited")
    _write(path, {"rf-bad": bad})
    result = _tuned("rf-save-bad")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DispatchFileWarning)
        result.save(path)
    doc = json.loads(path.read_text())
    assert sorted(doc["dispatchers"]) == ["rf-bad", "rf-save-bad"]
    assert doc["dispatchers"]["rf-bad"] == bad


# ---- 8: one bad entry leaves the others usable; strict raises on a stale entry -------------------------


def test_one_bad_entry_leaves_the_other_sites_usable(tmp_path: Path) -> None:
    good, bad = _objective("rf-good"), _objective("rf-bad2")
    path = tmp_path / "d.json"
    _write(path, {"rf-good": _entry(good), "rf-bad2": _entry(bad, trained="oops")})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_dispatch(path)
        assert good([1]) == "b" and good.source == "file"
        assert bad([1]) == "a" and bad.source == "default"
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "rf-bad2" in messages[0] and "trained" in messages[0]


def test_strict_load_raises_on_a_stale_entry(tmp_path: Path) -> None:
    site = _objective("rf-strict")
    path = tmp_path / "d.json"
    _write(path, {"rf-strict": {**_entry(site), "fingerprint": "stale"}})
    use_dispatch(path, strict=True)
    with pytest.raises(AdaptError, match="stale"):
        site([1])


def test_strict_load_raises_on_a_malformed_entry(tmp_path: Path) -> None:
    site = _objective("rf-strict2")
    path = tmp_path / "d.json"
    _write(path, {"rf-strict2": _entry(site), "other": _entry(site, trained=3)})
    with pytest.raises(AdaptError, match="'other'.*trained"):
        use_dispatch(path, strict=True)


# ---- 2: the first call of many threads at once ----------------------------------------------------------


@pytest.mark.parametrize("stale", [False, True])
def test_first_calls_from_many_threads_agree_and_warn_once(tmp_path: Path, stale: bool) -> None:
    site = _objective(f"rf-race-{stale}")
    path = tmp_path / "d.json"
    entry = _entry(site)
    if stale:
        entry["fingerprint"] = "stale"
    _write(path, {site.name: entry})
    outs: list[str] = []
    caught: list[str] = []
    old_interval = sys.getswitchinterval()
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(100):
            outs.append(site([1.0]))

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        use_dispatch(path)
        sys.setswitchinterval(1e-6)
        try:
            for _ in range(5):
                threads = [threading.Thread(target=worker) for _ in range(8)]
                use_dispatch(path)
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        finally:
            sys.setswitchinterval(old_interval)
        caught = [str(x.message) for x in w]
    assert set(outs) == ({"a"} if stale else {"b"})
    assert len(caught) == (5 if stale else 0)  # one per load of the file


# ---- 4: an installed dispatcher survives unrelated saves and loads --------------------------------------


def test_use_dispatcher_survives_another_sites_save(tmp_path: Path) -> None:
    a = _objective("rf-pinned")
    a.use_dispatcher(a.constant_dispatcher({"way": "b"}))
    _tuned("rf-pinned-other").save(tmp_path / "d.json")
    assert a([1]) == "b" and a.source == "set"
    # A file with this site's own entry does replace it.
    _write(tmp_path / "e.json", {"rf-pinned": _entry(a, way="a")})
    use_dispatch(tmp_path / "e.json")
    assert a([1]) == "a" and a.source == "file"


# ---- 5: pickling ----------------------------------------------------------------------------------------


def _way(config, xs):
    return config["way"]


def _n(xs):
    return len(xs)


def test_sites_with_a_loaded_dispatcher_pickle(tmp_path: Path) -> None:
    obj = AdaptiveObjective("rf-pickle", _way, Space({"way": Choice(["a", "b"])}), default={"way": "a"})
    obj.feature(_n, cost="cheap")
    _write(tmp_path / "d.json", {"rf-pickle": _entry(obj)})
    use_dispatch(tmp_path / "d.json")
    assert obj([1]) == "b"
    copy = pickle.loads(pickle.dumps(obj))
    assert copy([1]) == "b" and copy.source == "file"  # re-resolved from the file
    obj.use_dispatcher(obj.constant_dispatcher({"way": "a"}))
    copy = pickle.loads(pickle.dumps(obj))
    assert copy([1]) == "a" and copy.source == "set"


# ---- 11: warnings -----------------------------------------------------------------------------------------


def test_oversized_landmark_gives_a_short_warning(tmp_path: Path) -> None:
    site = _objective("rf-big")
    entry = _entry(site)
    entry["landmarks"] = [{"way": "a", "x" * 200_000: 1}]
    _write(tmp_path / "d.json", {"rf-big": entry})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_dispatch(tmp_path / "d.json")
        assert site([1]) == "a"
    assert len(caught) == 1 and len(str(caught[0].message)) < 1000


# ---- 9: the wrapped site's size ---------------------------------------------------------------------------


def test_adaptive_site_uses_the_wrapped_sites_size() -> None:
    inner = AlgorithmSite("rf-intsite", {"a": lambda n: sum(range(n)), "b": lambda n: n * (n - 1) // 2},
                          size=lambda n: n)
    site = AdaptiveSite(inner)
    site.feature(lambda n: n, name="n", cost="cheap")
    assert site.input_size(1000) == 1000.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune_inputs(site, [10, 100, 1000, 5000], budget=8, repeats=1, search_repeats=None, seed=0)
    assert result.landmarks


# ---- 7: non-finite feature values at dispatch; hostile growth numbers --------------------------------------


def test_nan_feature_runs_the_guards_robust_landmark_with_one_warning() -> None:
    from perftune.adapt import Dispatcher, TreeModel
    from perftune.adapt._model import GuardedModel

    site = AdaptiveObjective("rf-nan", lambda c, x: c["way"], Space({"way": Choice(["a", "b"])}),
                             default={"way": "a"})
    site.feature(lambda x: x, name="x", cost="cheap")
    inner = TreeModel.constant(0)
    guarded = GuardedModel(inner, guard=[0], center=[0.0], scale=[1.0], points=[[0.0]], radius=10.0,
                           fallback=1)
    landmarks = [site.landmark_from_json({"way": "a"}), site.landmark_from_json({"way": "b"})]
    site.use_dispatcher(Dispatcher(site.columns, site.column_functions(), guarded, landmarks))
    assert site(1.0) == "a"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [site(float("nan")), site(float("inf"))] == ["b", "b"]
    assert len(caught) == 1 and "'x'" in str(caught[0].message)


def test_nan_feature_without_a_robust_landmark_runs_the_default() -> None:
    site = _objective("rf-nan2")
    site._features.clear()
    site.feature(lambda x: x, name="x", cost="cheap")
    tree = {"kind": "tree", "left": [1, -1, -1], "right": [2, -1, -1], "feature": [0, -1, -1],
            "threshold": [0.5, 0.0, 0.0], "leaf": [-1, 0, 0]}
    f = DispatchFile()
    f.dispatchers[site.name] = {"target": "objective", "fingerprint": site.fingerprint(), "columns": ["x"],
                                "landmarks": [{"way": "b"}], "model": tree}
    use_dispatch(f)
    assert site(1.0) == "b"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert site(float("nan")) == "a"
    assert len(caught) == 1


def test_growth_slope_too_large_is_rejected_at_load(tmp_path: Path) -> None:
    site = AdaptiveObjective("rf-growth", lambda c, x: c["way"], Space({"way": Choice(["a", "b"])}), size=len)
    site.feature(len, name="n", cost="cheap")
    entry = _entry(site)
    entry["landmarks"] = [{"way": "a"}, {"way": "b"}]
    entry["growth"] = {"max_size": [10.0, 10.0], "fits": [[[0.0, 1e300], [0.0, 1.0]], [None, None]]}
    _write(tmp_path / "d.json", {"rf-growth": entry})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_dispatch(tmp_path / "d.json")
        assert site(list(range(10**5))) == "a"  # the default, no OverflowError
    assert len(caught) == 1 and "growth" in str(caught[0].message)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"classifier": "bogus"}, "classifier must be"),
    ({"n_representatives": 0}, "n_representatives must be a positive integer"),
    ({"seed": "abc"}, "seed must be a non-negative integer"),
    ({"max_depth": 0}, "max_depth must be a positive integer"),
])
def test_argument_mistakes_are_refused_before_anything_is_measured(kwargs: dict, message: str) -> None:
    # classifier= was checked after every measurement (hours on a real workload); the others were an
    # IndexError or ValueError traceback.
    measured: list[int] = []
    inner = AlgorithmSite("rf-args", {"a": lambda n: measured.append(n) or n, "b": lambda n: n})
    site = AdaptiveSite(inner)
    site.feature(lambda n: n, name="n", cost="cheap")
    with pytest.raises(AdaptError, match=message):
        tune_inputs(site, [10, 100, 1000, 5000], budget=8, repeats=1, **kwargs)
    assert measured == []


# ---- two saves into one dispatcher file at once keep both entries ---------------------------------------


def test_two_saves_at_once_keep_both_dispatchers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A read that takes a while (a large file, a slow disk): without a lock, the later writer writes a
    # merge made before the earlier one saved, and the earlier one's dispatcher is lost.
    import time

    from perftune.adapt._file import DispatchFile

    path = tmp_path / "d.json"
    other = _objective("rf-lock-other")
    _write(path, {"rf-lock-other": _entry(other)})
    a, b = _tuned("rf-lock-a"), _tuned("rf-lock-b")
    read = DispatchFile.read.__func__  # type: ignore[attr-defined]

    def slow_read(cls, p=None):  # noqa: ANN001, ANN202
        out = read(cls, p)
        time.sleep(0.3)
        return out

    monkeypatch.setattr(DispatchFile, "read", classmethod(slow_read))
    first = threading.Thread(target=a.save, args=(path,))
    first.start()
    time.sleep(0.1)  # the second save starts while the first one is reading
    b.save(path)
    first.join()
    saved = json.loads(path.read_text())["dispatchers"]
    assert set(saved) == {"rf-lock-other", "rf-lock-a", "rf-lock-b"}
