"""Every way a dispatcher file can be wrong ends in the documented fallback: the default configuration and
ONE DispatchFileWarning naming the file and what is wrong; never an exception out of the site's call,
never a value accepted that makes the dispatch meaningless (docs/adapt.md, "A program reads the file
once"). The table holds the corruptions a review found escaping (bytes that are not UTF-8, deep nesting,
a forest in a forest, NaN and infinite thresholds) and the others it and these tests tried.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perftune.adapt import (
    AdaptError,
    AdaptiveObjective,
    AdaptiveSite,
    DispatchFile,
    DispatchFileWarning,
    use_dispatch,
)
from perftune.choice import AlgorithmSite, ChoicesFile, use_choices
from perftune.space import Choice, Space

NAME = "t-dispatch-corrupt"
# x <= 5 -> landmark 1 ("b"), else landmark 2 ("c"); the default configuration runs "a" everywhere.
TREE: dict[str, Any] = {
    "kind": "tree",
    "left": [1, -1, -1],
    "right": [2, -1, -1],
    "feature": [0, -1, -1],
    "threshold": [5.0, 0.0, 0.0],
    "leaf": [-1, 1, 2],
}
LANDMARKS = [{"k": "a"}, {"k": "b"}, {"k": "c"}]
INPUTS = [3, 8, 3, 8]


@pytest.fixture(autouse=True)
def _no_files():
    use_choices(ChoicesFile())  # the choice site's own tuned choices: in memory, no fallback warning
    yield
    use_dispatch(DispatchFile())
    use_choices(ChoicesFile())


def _objective() -> AdaptiveObjective:
    site = AdaptiveObjective(NAME, lambda config, x: config["k"], Space({"k": Choice(["a", "b", "c"])}))
    site.feature(lambda x: float(x), name="x", cost="cheap")
    return site


def _entry(site: AdaptiveObjective | AdaptiveSite, **changes: Any) -> dict[str, Any]:
    entry = {
        "target": site.target_kind,
        "fingerprint": site.fingerprint(),
        "columns": list(site.columns),
        "landmarks": LANDMARKS,
        "model": TREE,
    }
    return {**entry, **changes}


def _doc(entry: Any, name: str = NAME) -> dict[str, Any]:
    return {"format": "perftune-dispatch", "version": 1, "dispatchers": {name: entry}}


def _text(entry: dict[str, Any]) -> str:
    return json.dumps(_doc(entry))


# A case writes the file at `path` from the good entry of the site; None: it made `path` itself.
Writer = Callable[[dict[str, Any], Path], None]


def raw(make: Callable[[dict[str, Any]], bytes | str]) -> Writer:
    def write(entry: dict[str, Any], path: Path) -> None:
        data = make(entry)
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    return write


def doc(make: Callable[[dict[str, Any]], Any]) -> Writer:
    """The JSON of ``make(entry)`` (NaN and Infinity written as Python's json writes them)."""
    return raw(lambda entry: json.dumps(make(entry)))


def entry(**changes: Any) -> Writer:
    return doc(lambda e: _doc({**e, **changes}))


def model(**changes: Any) -> Writer:
    return entry(model={**TREE, **changes})


def deep_tree(levels: int) -> dict[str, Any]:
    """A chain: node 2i tests x <= i and goes left to leaf 2i+1 (landmark 1) or right to node 2i+2."""
    n = 2 * levels + 1
    left, right, feature, threshold, leaf = [-1] * n, [-1] * n, [-1] * n, [0.0] * n, [1] * n
    for i in range(levels):
        left[2 * i], right[2 * i], feature[2 * i], threshold[2 * i], leaf[2 * i] = (
            2 * i + 1,
            2 * i + 2,
            0,
            i,
            -1,
        )
    return {
        "kind": "tree",
        "left": left,
        "right": right,
        "feature": feature,
        "threshold": threshold,
        "leaf": leaf,
    }


def padded(size: int) -> Writer:
    """A good file, padded with spaces to ``size`` bytes: valid JSON, but larger than perftune reads."""
    return raw(lambda e: _text(e) + " " * (size - len(_text(e))))


def sparse(path_size: int) -> Writer:
    def write(entry: dict[str, Any], path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(path_size)

    return write


def folder(entry: dict[str, Any], path: Path) -> None:
    path.mkdir()


NEIGHBOURS = {
    "kind": "neighbours",
    "features": [0],
    "center": [0.0],
    "scale": [1.0],
    "points": [[1.0], [9.0]],
    "ratio": [[1.0, 1.0, 2.0], [2.0, 1.0, 1.0]],
    "k": 1,
    "radius": None,
    "fallback": 0,
}
LINEAR = {
    "kind": "linear",
    "features": [0],
    "center": [0.0],
    "scale": [1.0],
    "low": [0.0],
    "high": [10.0],
    "coef": [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]],
}
CENTROIDS = {
    "kind": "centroids",
    "center": [0.0],
    "scale": [1.0],
    "centroids": [[1.0], [9.0]],
    "landmark": [1, 2],
}
GUARDED = {
    "kind": "guarded",
    "inner": TREE,
    "guard": [0],
    "center": [0.0],
    "scale": [1.0],
    "points": [[3.0]],
    "radius": 100.0,
    "fallback": 0,
}
FAMILIES = {
    "kind": "families",
    "features": [0],
    "center": [0.0],
    "scale": [1.0],
    "centroids": [[1.0], [9.0]],
    "families": ["p", "q"],
    "sizes": [],
    "required": None,
    "at": [[[]], [[]]],
    "level": [[0.0], [0.0]],
    "regret": [[[1.0, 0.0, 1.0]], [[1.0, 1.0, 0.0]]],
}
GROWTH = {"max_size": [10.0, 10.0, 10.0], "fits": [[None] * 3, [None, [0.0, 1.0], [0.0, 1.0]], [None] * 3]}


def _big_int() -> str:
    return "1" + "0" * 5000


# (case, what the one warning says): the whole file (read, JSON, structure of an entry) ...
FILE_CASES: list[Any] = [
    pytest.param(raw(lambda e: b"\xff\xfe garbage"), "not UTF-8", id="not-utf8"),
    pytest.param(
        raw(lambda e: _text(e).replace('"x"', '"caf\xe9"').encode("latin-1")),
        "not UTF-8",
        id="latin1-inside-a-string",
    ),
    pytest.param(raw(lambda e: _text(e).encode("utf-16")), "not UTF-8", id="utf16"),
    pytest.param(raw(lambda e: b"\xef\xbb\xbf" + _text(e).encode()), "byte-order mark", id="bom"),
    pytest.param(raw(lambda e: _text(e)[: len(_text(e)) // 2]), "not valid JSON", id="truncated"),
    pytest.param(raw(lambda e: ""), "not valid JSON", id="empty"),
    pytest.param(raw(lambda e: "[" * 100_000 + "]" * 100_000), "more than 64 deep", id="deep-100k"),
    pytest.param(raw(lambda e: "[" * 300 + "]" * 300), "more than 64 deep", id="deep-300"),
    pytest.param(
        raw(lambda e: _text(e)[:-2] + ', "x": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}}"),
        "more than 64 deep",
        id="deep-inside-an-entry",
    ),
    pytest.param(
        doc(lambda e: _doc({**e, "model": _nested_forest(300)})), "more than 64 deep", id="forest-300-deep"
    ),
    pytest.param(
        raw(lambda e: _text(e)[:-2] + ', "n": ' + _big_int() + "}}"),
        "not valid JSON",
        id="integer-of-5001-digits",
    ),
    pytest.param(padded(9 << 20), "larger than the 8 MB", id="huge-file"),
    pytest.param(sparse(1 << 30), "larger than the 8 MB", id="sparse-1GB"),
    pytest.param(folder, "is a folder", id="folder"),
    pytest.param(raw(lambda e: "[]"), "JSON object", id="top-level-list"),
    pytest.param(doc(lambda e: {**_doc(e), "format": "perftune-choices"}), "format", id="other-format"),
    pytest.param(doc(lambda e: {**_doc(e), "version": 2}), "version 2", id="version-2"),
    pytest.param(doc(lambda e: {**_doc(e), "version": True}), "version True", id="version-true"),
    pytest.param(
        doc(lambda e: {**_doc(e), "dispatchers": [e]}),
        "'dispatchers' must be an object",
        id="dispatchers-list",
    ),
    pytest.param(doc(lambda e: _doc("tree")), "expected an object", id="entry-string"),
    pytest.param(
        doc(lambda e: _doc({k: v for k, v in e.items() if k != "model"})),
        "missing model",
        id="entry-without-model",
    ),
    pytest.param(entry(target=["objective"]), "'target' must be a string", id="target-list"),
    pytest.param(entry(fingerprint=7), "'fingerprint' must be a string", id="fingerprint-int"),
    pytest.param(entry(columns="x"), "must be lists", id="columns-string"),
    pytest.param(entry(columns=[0]), "feature names", id="columns-ints"),
    pytest.param(entry(landmarks=[]), "no landmarks", id="no-landmarks"),
    pytest.param(entry(landmarks=[{"k": "a"}] * 10_001), "more than the 10000", id="too-many-landmarks"),
    pytest.param(entry(landmarks=["a", "b", "c"]), "must be an object", id="landmark-string"),
    pytest.param(entry(model=None), "'model' must be an object", id="model-null"),
    pytest.param(entry(trained="x"), "'trained' must be an object", id="trained-string"),
    pytest.param(
        entry(growth={**GROWTH, "max_size": [10.0, float("nan"), 10.0]}),
        "not a finite number",
        id="growth-nan",
    ),
    pytest.param(
        entry(growth={**GROWTH, "max_size": [10.0, -1.0, 10.0]}), "sizes >= 0", id="growth-negative"
    ),
    pytest.param(
        entry(growth={**GROWTH, "max_size": [10.0, 0.0, 10.0]}),
        "has a growth law",
        id="growth-zero-size-with-a-law",
    ),
    pytest.param(
        entry(growth={**GROWTH, "margin": float("inf")}), "not a finite number", id="growth-margin-inf"
    ),
    pytest.param(
        entry(growth={**GROWTH, "max_size": [10.0, 10**400, 10.0]}),
        "not a finite number",
        id="growth-int-beyond-float",
    ),
]


def _nested_forest(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = TREE
    for _ in range(levels):
        out = {"kind": "forest", "trees": [out]}
    return out


# ... and the model, checked when the site loads its entry (the other entries stay usable).
MODEL_CASES: list[Any] = [
    pytest.param(entry(model=_nested_forest(2)), "a forest holds trees only", id="forest-in-forest"),
    pytest.param(
        entry(model={"kind": "forest", "trees": [TREE, _nested_forest(1)]}),
        "a forest holds trees only",
        id="forest-in-forest-second",
    ),
    pytest.param(
        entry(model={"kind": "forest", "trees": [TREE] * 1001}),
        "1001 trees, more than 1000",
        id="huge-forest",
    ),
    pytest.param(entry(model={"kind": "forest", "trees": []}), "no trees", id="empty-forest"),
    pytest.param(
        entry(model={"kind": "forest", "trees": {"kind": "tree"}}),
        "trees must be a list",
        id="forest-trees-object",
    ),
    pytest.param(entry(model=deep_tree(100_000)), "levels deep, more than 1000", id="tree-100k-levels"),
    pytest.param(model(threshold=[float("nan"), 0.0, 0.0]), "threshold[0] is nan", id="threshold-nan"),
    pytest.param(model(threshold=[float("inf"), 0.0, 0.0]), "threshold[0] is inf", id="threshold-inf"),
    pytest.param(
        model(threshold=[float("-inf"), 0.0, 0.0]), "threshold[0] is -inf", id="threshold-minus-inf"
    ),
    pytest.param(model(threshold=[0.0, float("nan"), 0.0]), "threshold[1] is nan", id="leaf-threshold-nan"),
    pytest.param(
        model(threshold=[10**400, 0.0, 0.0]), "out of a float's range", id="threshold-int-beyond-float"
    ),
    pytest.param(model(threshold=["5", 0.0, 0.0]), "must be a number", id="threshold-string"),
    pytest.param(model(threshold=[True, 0.0, 0.0]), "must be a number", id="threshold-bool"),
    pytest.param(model(threshold=5.0), "threshold must be a list", id="threshold-number"),
    pytest.param(model(left=[1.0, -1, -1]), "left[0] must be an integer", id="child-float"),
    pytest.param(model(left=[float("inf"), -1, -1]), "left[0] must be an integer", id="child-inf"),
    pytest.param(model(left=["1", -1, -1]), "left[0] must be an integer", id="child-string"),
    pytest.param(model(left=[True, -1, -1]), "left[0] must be an integer", id="child-bool"),
    pytest.param(model(left={"0": 1}), "left must be a list", id="children-object"),
    pytest.param(model(left=[0, -1, -1]), "out of order", id="cycle"),
    pytest.param(model(left=[1, -1, -1], right=[1, -1, -1]), "2 parents", id="child-shared"),
    pytest.param(model(left=[1, -1, -1], right=[7, -1, -1]), "out of order", id="child-out-of-range"),
    pytest.param(model(left=[1, 5, -1]), "leaf 1 has children", id="leaf-with-children"),
    pytest.param(model(leaf=[0, 1, 2]), "inner node 0 names landmark 0", id="inner-node-with-landmark"),
    pytest.param(model(leaf=[-1, -1, 2]), "leaf 1 has no landmark", id="leaf-without-landmark"),
    pytest.param(model(leaf=[-1, 1, 99]), "landmarks [99] out of range", id="leaf-out-of-range"),
    pytest.param(model(leaf=[-1, [1], 2]), "leaf[1] must be an integer", id="leaf-list"),
    pytest.param(model(feature=[9, -1, -1]), "columns [9] out of range", id="feature-out-of-range"),
    pytest.param(model(feature=[-5, -1, -1]), "less than -1", id="feature-below-minus-one"),
    pytest.param(model(feature=[0, -1]), "different lengths", id="arrays-of-different-lengths"),
    pytest.param(
        entry(model={k: v for k, v in TREE.items() if k != "right"}),
        "missing 'right'",
        id="tree-without-right",
    ),
    pytest.param(model(kind="svm"), "kind 'svm'", id="unknown-kind"),
    pytest.param(model(kind=["tree"]), "kind ['tree']", id="kind-list"),
    pytest.param(
        entry(model={**GUARDED, "inner": CENTROIDS}),
        "inner model must be a tree or a forest",
        id="guard-around-centroids",
    ),
    pytest.param(
        entry(model={**GUARDED, "inner": GUARDED}),
        "inner model must be a tree or a forest",
        id="guard-around-guard",
    ),
    pytest.param(
        entry(model={**GUARDED, "center": [float("nan")]}), "center[0] is nan", id="guard-center-nan"
    ),
    pytest.param(entry(model={**GUARDED, "radius": float("nan")}), "radius is nan", id="guard-radius-nan"),
    pytest.param(entry(model={**GUARDED, "radius": -1.0}), "radius is -1.0", id="guard-radius-negative"),
    pytest.param(
        entry(model={**GUARDED, "inner": {**TREE, "threshold": [float("nan"), 0, 0]}}),
        "inner tree: threshold[0] is nan",
        id="guard-inner-nan",
    ),
    pytest.param(
        entry(model={**GUARDED, "fallback": 3}), "landmarks [3] out of range", id="guard-fallback-range"
    ),
    pytest.param(entry(model={**NEIGHBOURS, "k": 0}), "k is 0", id="neighbours-k-0"),
    pytest.param(entry(model={**NEIGHBOURS, "scale": [0.0]}), "scale[0] is 0.0", id="neighbours-scale-0"),
    pytest.param(
        entry(model={**NEIGHBOURS, "points": [[float("nan")], [9.0]]}),
        "points[0][0] is nan",
        id="neighbours-point-nan",
    ),
    pytest.param(
        entry(model={**NEIGHBOURS, "ratio": [[1.0, float("inf"), 2.0], [2.0, 1.0, 1.0]]}),
        "ratio[0][1] is inf",
        id="neighbours-ratio-inf",
    ),
    pytest.param(
        entry(model={**NEIGHBOURS, "radius": float("inf")}), "radius is inf", id="neighbours-radius-inf"
    ),
    pytest.param(
        entry(model={**NEIGHBOURS, "size_high": "ab"}),
        "size_high must be a list",
        id="neighbours-size-high-string",
    ),
    pytest.param(entry(model={**LINEAR, "scale": [0.0]}), "scale[0] is 0.0", id="linear-scale-0"),
    pytest.param(
        entry(model={**LINEAR, "coef": [[1.0, float("nan")], [0.0, 0.0], [0.0, 1.0]]}),
        "coef[0][1] is nan",
        id="linear-coef-nan",
    ),
    pytest.param(entry(model={**LINEAR, "low": [11.0]}), "low is above its high", id="linear-low-above-high"),
    pytest.param(entry(model={**CENTROIDS, "scale": [0.0]}), "scale[0] is 0.0", id="centroids-scale-0"),
    pytest.param(
        entry(model={**CENTROIDS, "center": [float("nan")]}), "center[0] is nan", id="centroids-nan"
    ),
    pytest.param(
        entry(model={**CENTROIDS, "landmark": [1, 5]}),
        "landmarks [5] out of range",
        id="centroids-landmark-range",
    ),
    pytest.param(
        entry(model={**FAMILIES, "regret": [[[1.0, float("nan"), 1.0]], [[1.0, 1.0, 0.0]]]}),
        "regret[0][0][1] is nan",
        id="families-regret-nan",
    ),
    pytest.param(
        entry(model={**FAMILIES, "families": [1, 2]}), "families must be names", id="families-names-int"
    ),
    pytest.param(
        entry(model={**FAMILIES, "required": -1}), "required is -1", id="families-required-negative"
    ),
    pytest.param(
        entry(landmarks=[{"k": "a"}, {"k": "zz"}, {"k": "c"}]),
        "not valid in the space",
        id="landmark-not-in-the-space",
    ),
]


def _assert_one_fallback(site: Any, path: Path | str, message: str, inputs: list[Any], default: Any) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_dispatch(path)
        results = [site(x) for x in inputs]
    said = [f"{w.category.__name__}: {w.message}" for w in caught]
    assert results == [default] * len(inputs), said
    assert site.source == "default"
    assert len(caught) == 1, said
    assert caught[0].category is DispatchFileWarning
    text = str(caught[0].message)
    assert str(path) in text and message in text, text
    assert "\n" not in text and len(text) < 600


def test_the_good_file_dispatches(tmp_path):
    site = _objective()
    path = tmp_path / "dispatch.json"
    path.write_text(_text(_entry(site)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use_dispatch(path, strict=True)
        assert [site(x) for x in INPUTS] == ["b", "c", "b", "c"]
    assert site.source == "file"


@pytest.mark.parametrize(("write", "message"), FILE_CASES + MODEL_CASES)
def test_a_corrupt_dispatcher_file_runs_the_default_with_one_warning(tmp_path, write, message):
    site = _objective()
    path = tmp_path / "dispatch.json"
    write(_entry(site), path)
    _assert_one_fallback(site, path, message, INPUTS, "a")


@pytest.mark.parametrize(("write", "message"), FILE_CASES[:12])
def test_strict_reading_raises_one_adapt_error(tmp_path, write, message):
    site = _objective()
    path = tmp_path / "dispatch.json"
    write(_entry(site), path)
    with pytest.raises(AdaptError, match=re.escape(message)) as info:
        use_dispatch(path, strict=True)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_bad_model_leaves_the_other_sites_of_the_file_usable(tmp_path):
    site = _objective()
    good = _entry(site)
    path = tmp_path / "dispatch.json"
    path.write_text(
        json.dumps(
            {
                "format": "perftune-dispatch",
                "version": 1,
                "dispatchers": {NAME: good, "t-dispatch-other": {**good, "model": _nested_forest(2)}},
            }
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use_dispatch(path)
        assert [site(x) for x in INPUTS] == ["b", "c", "b", "c"]


# A choice site's landmarks are selectors: checked for every entry of target "site".
def _choice_site() -> AdaptiveSite:
    inner = AlgorithmSite("t-dispatch-corrupt-choice", default="a")
    for name in ("a", "b", "c"):
        inner.alternative(name)(lambda xs, name=name: name)
    site = AdaptiveSite(inner)
    site.feature(lambda xs: float(len(xs)), name="n", cost="cheap")
    return site


SELECTOR_LANDMARKS = [{"cutoffs": [], "choices": [c]} for c in "abc"]


@pytest.mark.parametrize(
    ("landmark", "message"),
    [
        pytest.param(
            {"cutoffs": 5, "choices": ["a"]}, "cutoffs must be a list of integers", id="cutoffs-int"
        ),
        pytest.param({"cutoffs": [], "choices": None}, "choices must be a list of names", id="choices-null"),
        pytest.param(
            {"cutoffs": [float("nan")], "choices": ["a", "b"]}, "cutoffs must be a list", id="cutoff-nan"
        ),
        pytest.param(
            {"cutoffs": [], "choices": [{"x": 1}]}, "choices must be a list of names", id="choice-object"
        ),
        pytest.param({"cutoffs": []}, "'cutoffs' and 'choices'", id="no-choices"),
        pytest.param(["a"], "'cutoffs' and 'choices'", id="landmark-list"),
        pytest.param(
            {"cutoffs": [9, 3], "choices": ["a", "b", "c"]}, "strictly increasing", id="not-increasing"
        ),
        pytest.param({"cutoffs": [], "choices": ["zz"]}, "unknown alternatives", id="unknown-alternative"),
    ],
)
def test_a_corrupt_selector_landmark_runs_the_default_with_one_warning(tmp_path, landmark, message):
    site = _choice_site()
    path = tmp_path / "dispatch.json"
    landmarks = [SELECTOR_LANDMARKS[0], landmark, SELECTOR_LANDMARKS[2]]
    path.write_text(json.dumps(_doc(_entry(site, landmarks=landmarks), site.name)))
    _assert_one_fallback(site, path, message, [[0] * 3, [0] * 8], "a")


def test_the_good_selector_file_dispatches(tmp_path):
    site = _choice_site()
    path = tmp_path / "dispatch.json"
    path.write_text(json.dumps(_doc(_entry(site, landmarks=SELECTOR_LANDMARKS), site.name)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use_dispatch(path, strict=True)
        assert [site([0] * 3), site([0] * 8)] == ["b", "c"]


# A FIFO with no writer and /dev/zero: a reader that opens or reads them blindly blocks or fills the
# memory. They run in a child process, limited in time and memory, so that a regression fails the test
# instead of hanging it or the machine.
_CHILD = """
import json, sys, warnings
from perftune.adapt import AdaptiveObjective, use_dispatch
from perftune.space import Choice, Space
site = AdaptiveObjective("t", lambda config, x: config["k"], Space({"k": Choice(["a", "b"])}))
site.feature(lambda x: float(x), name="x", cost="cheap")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    use_dispatch(sys.argv[1])
    results = [site(3), site(8)]
print(json.dumps({"results": results, "source": site.source,
                  "warnings": [[w.category.__name__, str(w.message)] for w in caught]}))
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def run_child(code: str, path: str) -> dict[str, Any]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, path],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {path} hung")
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="POSIX only")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path, kind):
    if kind == "fifo":
        path = str(tmp_path / "dispatch.json")
        os.mkfifo(path)
    else:
        path = "/dev/zero"
    out = run_child(_CHILD, path)
    assert out["results"] == ["a", "a"] and out["source"] == "default"
    assert len(out["warnings"]) == 1
    category, text = out["warnings"][0]
    assert category == "DispatchFileWarning" and path in text and "not a regular file" in text
