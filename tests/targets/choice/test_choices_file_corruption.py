"""Every way a tuned-choices file can be wrong ends in the documented fallback: the declared defaults and
ONE ChoicesFileWarning naming the file and what is wrong; never an exception out of the site's call,
never a value accepted that makes the choice meaningless (docs/choice.md). The table holds the
corruptions a review found escaping (bytes that are not UTF-8, deep nesting, cutoffs that are no input
size) and the others it and these tests tried.
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

from perftune.targets.choice import (
    AlgorithmSite,
    ChoiceError,
    ChoicesFileWarning,
    accuracy_config,
    level_config,
    use_choices,
)

NAME = "t-choices-corrupt"
GOOD_SITE = {"cutoffs": [5], "choices": ["b", "c"]}  # n < 5: "b", else "c"; the default runs "a"
BIN = {
    "target": 0.9,
    "config": {"it": 3},
    "time_s": 0.01,
    "accuracy": 0.95,
    "verified_accuracy": 0.93,
    "best_accuracy": 0.99,
}
ACCURACY = {
    "kind": "accuracy",
    "metric": "accuracy",
    "higher_is_better": True,
    "n_measurements": 4,
    "bins": [BIN],
}
LEVELS = {
    "kind": "levels",
    "metric": "accuracy",
    "higher_is_better": True,
    "targets": [0.9],
    "rows": {"2": ACCURACY},
}
DEFAULT_CONFIG = {"it": 1}


def _doc(site: Any = None, **changes: Any) -> dict[str, Any]:
    doc = {
        "format": "perftune-choices",
        "version": 1,
        "sites": {NAME: GOOD_SITE if site is None else site},
        "tables": {"acc": ACCURACY, "lv": LEVELS},
    }
    return {**doc, **changes}


def _text() -> str:
    return json.dumps(_doc())


Writer = Callable[[Path], None]


def raw(make: Callable[[], bytes | str]) -> Writer:
    def write(path: Path) -> None:
        data = make()
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

    return write


def doc(make: Callable[[], Any]) -> Writer:
    return raw(lambda: json.dumps(make()))


def site(**changes: Any) -> Writer:
    return doc(lambda: _doc({**GOOD_SITE, **changes}))


def table(name: str, value: Any) -> Writer:
    return doc(lambda: _doc(tables={"acc": ACCURACY, "lv": LEVELS, name: value}))


def bin_(**changes: Any) -> Writer:
    return table("acc", {**ACCURACY, "bins": [{**BIN, **changes}]})


def padded(size: int) -> Writer:
    return raw(lambda: _text() + " " * (size - len(_text())))


def sparse(size: int) -> Writer:
    def write(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(size)

    return write


def folder(path: Path) -> None:
    path.mkdir()


CASES: list[Any] = [
    # reading, decoding, parsing
    pytest.param(raw(lambda: b"\xff\xfe"), "not UTF-8", id="not-utf8"),
    pytest.param(
        raw(lambda: _text().replace('"b"', '"\xe9"').encode("latin-1")),
        "not UTF-8",
        id="latin1-inside-a-string",
    ),
    pytest.param(raw(lambda: _text().encode("utf-16")), "not UTF-8", id="utf16"),
    pytest.param(raw(lambda: b"\xef\xbb\xbf" + _text().encode()), "byte-order mark", id="bom"),
    pytest.param(raw(lambda: _text()[: len(_text()) // 2]), "not valid JSON", id="truncated"),
    pytest.param(raw(lambda: ""), "not valid JSON", id="empty"),
    pytest.param(raw(lambda: "[" * 100_000 + "]" * 100_000), "more than 64 deep", id="deep-100k"),
    pytest.param(raw(lambda: "[" * 300 + "]" * 300), "more than 64 deep", id="deep-300"),
    pytest.param(
        raw(lambda: _text()[:-1] + ', "x": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}"),
        "more than 64 deep",
        id="deep-inside",
    ),
    pytest.param(
        raw(lambda: _text()[:-1] + ', "n": 1' + "0" * 5000 + "}"),
        "not valid JSON",
        id="integer-of-5001-digits",
    ),
    pytest.param(padded(9 << 20), "larger than the 8 MB", id="huge-file"),
    pytest.param(sparse(1 << 30), "larger than the 8 MB", id="sparse-1GB"),
    pytest.param(folder, "is a folder", id="folder"),
    # the document
    pytest.param(raw(lambda: "[1, 2]"), "JSON object", id="top-level-list"),
    pytest.param(
        doc(lambda: _doc(format="perftune-dispatch")), "format 'perftune-dispatch'", id="other-format"
    ),
    pytest.param(doc(lambda: _doc(version=99)), "version 99", id="version-99"),
    pytest.param(doc(lambda: _doc(version=True)), "version True", id="version-true"),
    pytest.param(doc(lambda: _doc(sites=[GOOD_SITE])), "'sites' must be an object", id="sites-list"),
    pytest.param(doc(lambda: _doc(tables=[ACCURACY])), "'tables' must be an object", id="tables-list"),
    pytest.param(doc(lambda: _doc("5")), "expected an object with 'cutoffs' and 'choices'", id="site-string"),
    # a site's selector
    pytest.param(site(cutoffs=[float("nan")]), "cutoff nan is not an integer", id="cutoff-nan"),
    pytest.param(site(cutoffs=[float("inf")]), "cutoff inf is not an integer", id="cutoff-inf"),
    pytest.param(site(cutoffs=[5.5]), "cutoff 5.5 is not an integer", id="cutoff-float"),
    pytest.param(site(cutoffs=["5"]), "cutoff '5' is not an integer", id="cutoff-string"),
    pytest.param(site(cutoffs=[True]), "cutoff True is not an integer", id="cutoff-bool"),
    pytest.param(site(cutoffs=[-5]), "cutoff -5 is not an input size", id="cutoff-negative"),
    pytest.param(site(cutoffs=[0]), "cutoff 0 is not an input size", id="cutoff-zero"),
    pytest.param(site(cutoffs=[10**400]), "is not an input size", id="cutoff-10-to-400"),
    pytest.param(site(cutoffs=[1e300]), "is not an input size", id="cutoff-1e300"),
    pytest.param(site(cutoffs=5), "cutoffs must be a list", id="cutoffs-int"),
    pytest.param(site(cutoffs={"5": 1}), "cutoffs must be a list", id="cutoffs-object"),
    pytest.param(site(cutoffs=[9, 3], choices=["a", "b", "c"]), "strictly increasing", id="not-increasing"),
    pytest.param(site(cutoffs=[9], choices=["a"]), "need 2 choices", id="too-few-choices"),
    pytest.param(site(choices="bc"), "choices must be a list", id="choices-string"),
    pytest.param(site(choices={"b": 1, "c": 2}), "choices must be a list", id="choices-object"),
    pytest.param(site(choices=["b", 3]), "choice 3 is not a non-empty string", id="choice-int"),
    pytest.param(site(choices=["b", ""]), "choice '' is not a non-empty string", id="choice-empty"),
    pytest.param(site(choices=["b", ["c"]]), "choice ['c'] is not a non-empty string", id="choice-list"),
    pytest.param(doc(lambda: _doc({"cutoffs": [5]})), "1 cutoffs need 2 choices, got 0", id="no-choices"),
    # tables
    pytest.param(
        table("t", {"kind": ["x"]}), "kind ['x'] is not 'accuracy' or 'levels'", id="table-kind-list"
    ),
    pytest.param(table("t", {"kind": "svm"}), "kind 'svm'", id="table-kind-unknown"),
    pytest.param(table("t", {"bins": []}), "expected an object with a 'kind' key", id="table-without-kind"),
    pytest.param(table("t", "accuracy"), "expected an object with a 'kind' key", id="table-string"),
    pytest.param(table("acc", {**ACCURACY, "bins": {"0": BIN}}), "'bins' must be a list", id="bins-object"),
    pytest.param(table("acc", {**ACCURACY, "bins": [5]}), "bin 0: expected an object", id="bin-number"),
    pytest.param(table("acc", {**ACCURACY, "metric": 5}), "'metric' must be a string", id="metric-int"),
    pytest.param(
        table("acc", {**ACCURACY, "higher_is_better": "yes"}),
        "'higher_is_better' must be true or",
        id="higher-is-better-string",
    ),
    pytest.param(
        table("acc", {**ACCURACY, "n_measurements": -1}),
        "'n_measurements' must be an integer",
        id="n-measurements-negative",
    ),
    pytest.param(bin_(target=float("nan")), "'target' must be a finite number", id="bin-target-nan"),
    pytest.param(bin_(target="0.9"), "'target' must be a finite number", id="bin-target-string"),
    pytest.param(bin_(target=None), "'target' is missing", id="bin-target-null"),
    pytest.param(bin_(config="it=3"), "'config' must be an object or null", id="bin-config-string"),
    pytest.param(bin_(config=[3]), "'config' must be an object or null", id="bin-config-list"),
    pytest.param(bin_(time_s=float("inf")), "'time_s' must be a finite number", id="bin-time-inf"),
    pytest.param(bin_(time_s=-1.0), "'time_s' must be a finite number >= 0", id="bin-time-negative"),
    pytest.param(bin_(accuracy=float("nan")), "'accuracy' must be a finite number", id="bin-accuracy-nan"),
    pytest.param(bin_(best_accuracy="high"), "'best_accuracy' must be a number", id="bin-best-string"),
    pytest.param(
        table("lv", {**LEVELS, "rows": [ACCURACY]}), "'rows' must be an object", id="levels-rows-list"
    ),
    pytest.param(
        table("lv", {**LEVELS, "rows": {"two": ACCURACY}}), "row 'two' is not a level", id="levels-row-key"
    ),
    pytest.param(
        table("lv", {**LEVELS, "rows": {"2": {"kind": "levels"}}}),
        "expected an accuracy table",
        id="levels-in-levels",
    ),
    pytest.param(
        table("lv", {**LEVELS, "targets": [float("nan")]}),
        "'targets' must be a list of finite",
        id="levels-target-nan",
    ),
    pytest.param(
        table("lv", {**LEVELS, "rows": {"2": {**ACCURACY, "bins": [{**BIN, "target": float("inf")}]}}}),
        "'target' must be a finite number",
        id="levels-bin-target-inf",
    ),
]


def _sort_site() -> AlgorithmSite:
    s = AlgorithmSite(NAME, default="a")
    for name in ("a", "b", "c"):
        s.alternative(name)(lambda xs, name=name: name)
    return s


def test_the_good_file_is_used(tmp_path):
    path = tmp_path / "choices.json"
    path.write_text(_text())
    s = _sort_site()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        use_choices(path, strict=True)
        assert [s([0] * 3), s([0] * 8)] == ["b", "c"]
        assert accuracy_config("acc", 0.9, default=DEFAULT_CONFIG) == {"it": 3}
        assert level_config("lv", 2, 0.9) == {"it": 3}
    assert s.source == "file"


@pytest.mark.parametrize(("write", "message"), CASES)
def test_a_corrupt_choices_file_runs_the_defaults_with_one_warning(tmp_path, write, message):
    path = tmp_path / "choices.json"
    write(path)
    s = _sort_site()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_choices(path)
        results = [s([0] * 3), s([0] * 8), s([0] * 3)]
        config = accuracy_config("acc", 0.9, default=DEFAULT_CONFIG)
    said = [f"{w.category.__name__}: {w.message}" for w in caught]
    assert results == ["a", "a", "a"] and s.source == "default", said
    assert config == DEFAULT_CONFIG
    assert len(caught) == 1, said
    assert caught[0].category is ChoicesFileWarning
    text = str(caught[0].message)
    assert str(path) in text and message in text, text
    assert "\n" not in text and len(text) < 600
    with pytest.raises(ChoiceError, match=re.escape(message)):
        use_choices(path, strict=True)


# A FIFO with no writer and /dev/zero: a reader that opens or reads them blindly blocks or fills the
# memory. They run in a child process, limited in time and memory, so that a regression fails the test
# instead of hanging it or the machine.
_CHILD = """
import json, sys, warnings
from perftune.targets.choice import AlgorithmSite, use_choices
s = AlgorithmSite("t", default="a")
s.alternative("a")(lambda xs: "a")
s.alternative("b")(lambda xs: "b")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    use_choices(sys.argv[1])
    results = [s([0]), s([0] * 9)]
print(json.dumps({"results": results, "source": s.source,
                  "warnings": [[w.category.__name__, str(w.message)] for w in caught]}))
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"), reason="POSIX only")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path, kind):
    if kind == "fifo":
        path = str(tmp_path / "choices.json")
        os.mkfifo(path)
    else:
        path = "/dev/zero"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, path],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {path} hung")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["results"] == ["a", "a"] and out["source"] == "default"
    assert len(out["warnings"]) == 1
    category, text = out["warnings"][0]
    assert category == "ChoicesFileWarning" and path in text and "not a regular file" in text
