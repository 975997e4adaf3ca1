"""Algorithm sites and the tuned-choices file: dispatch, round trips, bad input."""

from __future__ import annotations

import json
import warnings

import pytest

from perftune.errors import PerftuneError
from perftune.space import Levels
from perftune.targets.choice import (
    AlgorithmSite,
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    load_choices,
    use_choices,
)


def _insertion(xs):
    out = list(xs)
    for i in range(1, len(out)):
        x = out[i]
        j = i - 1
        while j >= 0 and out[j] > x:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = x
    return out


def make_sort(name, calls):
    site = AlgorithmSite(name, default="merge")

    @site.alternative("insertion")
    def insertion(xs):
        calls.append(("insertion", len(xs)))
        return _insertion(xs)

    @site.alternative("merge")
    def merge(xs):
        calls.append(("merge", len(xs)))
        if len(xs) <= 1:
            return list(xs)
        mid = len(xs) // 2
        a, b = site(xs[:mid]), site(xs[mid:])
        out, i, j = [], 0, 0
        while i < len(a) and j < len(b):
            if a[i] <= b[j]:
                out.append(a[i])
                i += 1
            else:
                out.append(b[j])
                j += 1
        return out + a[i:] + b[j:]

    return site


def test_recursive_dispatch_switches_on_small_subproblems():
    calls = []
    sort = make_sort("t-sort-rec", calls)
    sort.set([8], ["insertion", "merge"])
    data = [5, 3, 9, 1, 7, 2, 8, 6, 4, 0, 11, 10, 15, 13, 12, 14, 19, 17]
    assert sort(data) == sorted(data)
    assert all(name == "insertion" for name, n in calls if n < 8)
    assert all(name == "merge" for name, n in calls if n >= 8)
    assert ("insertion", 4) in calls or ("insertion", 5) in calls


def test_cutoff_boundary_level_serves_sizes_below_cutoff():
    sort = make_sort("t-sort-boundary", [])
    sort.set([4, 100], ["insertion", "merge", "insertion"])
    assert [sort.choose(n) for n in (0, 3, 4, 99, 100, 10**9)] == [
        "insertion",
        "insertion",
        "merge",
        "merge",
        "insertion",
        "insertion",
    ]


def test_default_runs_without_file_entry():
    calls = []
    sort = make_sort("t-sort-default", calls)
    assert sort([3, 2, 1]) == [1, 2, 3]
    assert sort.source == "default"
    assert {name for name, _ in calls} == {"merge"}


@pytest.mark.parametrize("cutoffs", [[10, 10], [20, 10], [5, 3, 8]])
def test_cutoffs_must_strictly_increase(cutoffs):
    sort = make_sort("t-sort-inc", [])
    with pytest.raises(ChoiceError, match="strictly increasing"):
        sort.set(cutoffs, ["insertion"] * (len(cutoffs) + 1))
    f = ChoicesFile()
    with pytest.raises(ChoiceError, match="strictly increasing"):
        f.set_site("x", cutoffs, ["a"] * (len(cutoffs) + 1))


def test_file_round_trip_and_program_reads_it(tmp_path, monkeypatch):
    f = ChoicesFile()
    f.set_site("t-sort-file", [7, 300], ["insertion", "merge", "insertion"])
    f.set_table("t-table", {"kind": "accuracy", "bins": []})
    path = f.write(tmp_path / "tuned.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "perftune-choices" and doc["version"] == 1
    back = ChoicesFile.read(path)
    assert back.sites == f.sites and back.tables == f.tables
    cut, _ = back.sites["t-sort-file"]
    assert all(b > a for a, b in zip(cut, cut[1:], strict=False))

    monkeypatch.setenv("PERFTUNE_CHOICES", str(path))
    use_choices(strict=True)
    sort = make_sort("t-sort-file", [])
    assert sort([4, 1, 3]) == [1, 3, 4]
    assert sort.source == "file"
    assert sort.cutoffs == (7, 300) and sort.choices == ("insertion", "merge", "insertion")


def test_levels_round_trip_through_file(tmp_path):
    sort = make_sort("t-sort-levels", [])
    sort.set([16], ["insertion", "merge"])
    f = ChoicesFile()
    f.set_site(sort.name, *sort.to_entry())
    f.write(tmp_path / "c.json")
    other = make_sort("t-sort-levels", [])
    use_choices(tmp_path / "c.json", strict=True)
    assert other.to_entry() == sort.to_entry()
    assert other.levels == sort.levels == Levels((16,), ("insertion", "merge"))
    other.set(Levels((4,), ("merge", "insertion")))
    assert other.choose(3) == "merge"
    with pytest.raises(ChoiceError, match="takes a Levels value"):
        other.set([4])


def test_missing_file_falls_back_with_one_warning(tmp_path):
    a = make_sort("t-miss-a", [])
    b = make_sort("t-miss-b", [])
    with pytest.warns(ChoicesFileWarning, match="not found") as record:
        use_choices(tmp_path / "nope.json")
        assert a([2, 1]) == [1, 2] and b([2, 1]) == [1, 2]
    assert len(record) == 1
    assert a.source == "default" and b.source == "default"


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "not valid JSON"),
        ('{"format": "perftune-choices", "version": 99}', "version 99"),
        ('{"sites": {"s": {"cutoffs": [9, 3], "choices": ["a", "b", "c"]}}}', "strictly increasing"),
        ('{"sites": {"s": {"cutoffs": [9], "choices": ["a"]}}}', "need 2 choices"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_corrupt_file_falls_back_with_one_warning(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ChoiceError, match=match):
        ChoicesFile.read(path)
    with pytest.warns(ChoicesFileWarning, match=match) as record:
        loaded = load_choices(path)
    assert len(record) == 1 and loaded.sites == {}
    site = make_sort("t-corrupt", [])
    with pytest.warns(ChoicesFileWarning):
        use_choices(path)
    assert site([3, 1, 2]) == [1, 2, 3] and site.source == "default"


def test_file_naming_unknown_alternative_warns_and_uses_default(tmp_path):
    f = ChoicesFile()
    f.set_site("t-unknown", [10], ["bogo", "merge"])
    use_choices(f)
    site = make_sort("t-unknown", [])
    with pytest.warns(ChoicesFileWarning, match="bogo"):
        assert site([2, 1]) == [1, 2]
    assert site.source == "default"


def test_site_without_alternatives_is_a_clear_error():
    with pytest.raises(ChoiceError, match="no alternatives"):
        AlgorithmSite("t-empty", {})
    site = AlgorithmSite("t-empty2")
    with pytest.raises(PerftuneError, match="'t-empty2' has no alternatives"):
        site([1])


def test_bad_declarations():
    with pytest.raises(ChoiceError, match="default 'quick'"):
        AlgorithmSite("t-bad", {"a": sorted}, default="quick")
    site = AlgorithmSite("t-bad2", {"a": sorted})
    with pytest.raises(ChoiceError, match="declared twice"):
        site.alternative("a")(sorted)
    with pytest.raises(ChoiceError, match="unknown alternatives"):
        site.set([3], ["a", "zzz"])
    with pytest.raises(ChoiceError, match="size_range"):
        AlgorithmSite("t-bad3", {"a": sorted}, size_range=(10, 5))


def test_use_restores_previous_selector():
    sort = make_sort("t-use", [])
    sort.set([5], ["insertion", "merge"])
    with sort.use([], ["insertion"]):
        assert sort.choose(10**6) == "insertion"
    assert sort.choose(10**6) == "merge" and sort.cutoffs == (5,)


def test_no_warning_when_file_is_fine():
    site = make_sort("t-quiet", [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert site([1]) == [1]
