"""The racer: wrong candidates never answer, failing ones cost nothing, the store sees every candidate."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from perftune.errors import PerftuneError
from perftune.online import PromotionRule, Racer, RequestError, ShiftDetector
from perftune.space import Choice, Config, Space
from perftune.store import open_store
from perftune.trial import Status

# Racing needs two disjoint CPU sets; the project's machines (and CI) have at least two CPUs.
pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="racing needs at least 2 CPUs")

# The safe configuration sleeps this long: sleeping needs no CPU, so timings hold on a busy machine.
SAFE_S = 0.05


def _space(*kinds: str) -> Space:
    return Space({"kind": Choice(["safe", *kinds], default="safe")})


def _double(config: Any, x: int) -> int:
    kind = config["kind"]
    if kind == "safe":
        time.sleep(SAFE_S)
    elif kind == "fast":
        time.sleep(0.001)
    elif kind == "slow":
        time.sleep(4 * SAFE_S)
    elif kind == "wrong":  # fast, and wrong
        return -x
    elif kind == "raises":
        raise ValueError("boom")
    elif kind == "crashes":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "hangs":
        time.sleep(600)
    return 2 * x


def _is_double(x: int, y: int) -> bool:
    return bool(y == 2 * x)


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped (killed: it runs no more)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize("check", [_is_double, None], ids=["check", "agreement"])
def test_a_wrong_candidate_never_answers_and_never_becomes_safe(tmp_path: Path, check: Any) -> None:
    store = open_store(f"sqlite:///{tmp_path}/online.db")
    with Racer(_double, _space("wrong"), check=check, store=store, name="wrong", seed=0) as racer:
        answers = [racer(x) for x in range(1, 13)]
    assert answers == [2 * x for x in range(1, 13)]
    assert racer.safe["kind"] == "safe" and not racer.promotions
    (config, reason), = racer.failed.items()
    assert config["kind"] == "wrong" and reason.startswith("wrong answer")
    assert any(r.outcome == "wrong" for r in racer.records)
    assert all(r.answered_by != "candidate" for r in racer.records)
    stored = {t.config["kind"]: t for t in store.trials(store.get_run("wrong").id)}
    assert stored["wrong"].status is Status.FAILED and stored["wrong"].reason.startswith("wrong answer")
    assert stored["safe"].technique == "default" and stored["safe"].ok  # the baseline, measured alone


@pytest.mark.parametrize("kind, reason", [("raises", "raised ValueError: boom"),
                                          ("crashes", "crashed (killed by signal 11, SIGSEGV)")])
def test_a_failing_candidate_costs_the_request_nothing(kind: str, reason: str) -> None:
    with Racer(_double, _space(kind), check=_is_double, seed=0) as racer:
        answers = [racer(x) for x in range(6)]
        # The worker that crashed was replaced: the next race runs on both halves again.
        assert all(w.pid and not _dead(w.pid) for w in racer._workers)
    assert answers == [2 * x for x in range(6)]
    assert racer.failed[racer.space.default().__class__({"kind": kind})] == reason
    raced = [r for r in racer.records if r.outcome == "failed"]
    assert len(raced) == 1 and raced[0].answered_by == "safe"
    assert raced[0].latency_s < SAFE_S + 0.5


def test_a_hanging_candidate_is_killed_when_the_safe_answers(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def hangs(config: Any, x: int) -> int:
        if config["kind"] == "hangs":
            # It hangs in a child process too: the kill must reach the whole process group.
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            with pids.open("a") as f:
                f.write(f"{os.getpid()} {child.pid}\n")
            time.sleep(600)
        return _double(config, x)

    store = open_store(f"sqlite:///{tmp_path}/online.db")
    with Racer(hangs, _space("hangs"), check=_is_double, seed=0, store=store, name="hang",
               rule=PromotionRule(min_races=3, max_races=8)) as racer:
        t0 = time.perf_counter()
        answers = [racer(x) for x in range(8)]
        elapsed = time.perf_counter() - t0
    assert answers == [2 * x for x in range(8)]
    hung = [r for r in racer.records if r.candidate_trial is not None and r.outcome == "loss"]
    assert hung and all(r.answered_by == "safe" for r in hung)
    # Every request was served at the safe configuration's pace (8 x 50 ms plus overhead), never 600 s.
    assert elapsed < 8 * SAFE_S + 3.0
    assert max(r.latency_s for r in racer.records) < SAFE_S + 1.0
    lines = pids.read_text().split()
    deadline = time.monotonic() + 5
    while not all(_dead(int(p)) for p in lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_dead(int(p)) for p in lines), "a killed candidate (or its child) still runs"
    assert racer.n_killed >= len(hung)
    (trial,) = [t for t in store.trials(store.get_run("hang").id) if t.config["kind"] == "hangs"]
    assert trial.status is Status.TIMEOUT
    assert trial.reason.startswith(f"killed in all {len(hung)} races: never finished before the safe")


def test_promotion_needs_the_stated_number_of_wins() -> None:
    rule = PromotionRule(confidence=0.95, min_races=3, max_races=12)
    with Racer(_double, _space("fast"), check=_is_double, rule=rule, seed=0, detector=False) as racer:
        for x in range(rule.min_wins + 4):
            racer(x)
            wins = sum(r.outcome == "win" for r in racer.records)
            # Safe until the candidate has won min_wins races, then promoted, not a race earlier.
            assert (racer.safe["kind"] == "fast") == (wins >= rule.min_wins)
    (promotion,) = racer.promotions
    assert promotion.wins == promotion.races == rule.min_wins
    winners = [r for r in racer.records if r.outcome == "win"]
    assert all(r.answered_by == "candidate" and r.candidate_s < SAFE_S for r in winners)


def test_a_slower_candidate_is_dropped_and_never_promoted() -> None:
    rule = PromotionRule()
    with Racer(_double, _space("slow"), check=_is_double, rule=rule, seed=0, detector=False) as racer:
        for x in range(12):
            racer(x)
    assert racer.safe["kind"] == "safe" and not racer.promotions
    losses = [r for r in racer.records if r.outcome == "loss"]
    assert len(losses) == 5  # dropped by the futility look after five straight losses
    assert not racer.exploring  # the only candidate is done: the safe configuration runs alone
    assert [r.answered_by for r in racer.records][-3:] == ["alone"] * 3


def test_without_a_check_a_faster_candidate_wins_but_only_answers_once_safe() -> None:
    rule = PromotionRule(min_races=3, max_races=12)
    with Racer(_double, _space("fast"), rule=rule, seed=0, detector=False) as racer:
        answers = [racer(x) for x in range(rule.min_wins + 4)]
    assert answers == [2 * x for x in range(rule.min_wins + 4)]
    assert racer.safe["kind"] == "fast"
    before = [r for r in racer.records if r.outcome == "win"]
    assert len(before) == rule.min_wins and all(r.answered_by == "safe" for r in before)
    assert racer.records[-1].answered_by == "alone" and racer.records[-1].safe_s < SAFE_S


def test_a_shift_reopens_exploration_in_a_new_run(tmp_path: Path) -> None:
    # Phase 1 favours "a" (the safe one), phase 2 makes "a" slow and "b" fast.
    def phased(config: Any, request: tuple[int, int]) -> int:
        phase, x = request
        fast = (config["kind"] == "a") == (phase == 1)
        time.sleep(0.004 if fast else 0.03)
        return 2 * x

    space = Space({"kind": Choice(["a", "b"], default="a")})
    store = open_store(f"sqlite:///{tmp_path}/online.db")
    detector = ShiftDetector(reference_n=10, window_n=6, threshold=0.5, confidence=0.99)
    with Racer(phased, space, check=lambda r, y: y == 2 * r[1], store=store, name="shift", seed=0,
               detector=detector) as racer:
        for x in range(30):
            racer((1, x))
        assert racer.safe["kind"] == "a" and not racer.shifts
        for x in range(60):
            racer((2, x))
    assert racer.shifts and racer.safe["kind"] == "b"
    assert racer.promotions[-1].epoch == 1
    assert racer.run_names == ["shift", "shift-shift1"]
    second = store.trials(store.get_run("shift-shift1").id)
    assert any(t.config["kind"] == "b" and t.metrics.get("promoted") == 1.0 for t in second)


def test_perftune_show_lists_the_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/online.db"
    space = _space("fast", "raises")
    with Racer(_double, space, check=_is_double, store=url, name="served", seed=0) as racer:
        for x in range(20):
            racer(x)
    out = subprocess.run([sys.executable, "-m", "perftune", "show", "served", "--store", url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "run served" in out.stdout and "raised ValueError: boom" in out.stdout


def test_a_request_the_safe_configuration_fails_raises_one_line() -> None:
    def broken(config: Any, x: int) -> int:
        raise KeyError("no such row")

    with Racer(broken, _space(), seed=0) as racer, pytest.raises(RequestError) as err:
        racer(1)
    assert "request 0: the safe configuration raised KeyError" in str(err.value)
    assert "\n" not in str(err.value)


def test_timeout_s_bounds_a_request_whose_safe_configuration_hangs() -> None:
    def hangs(config: Any, x: int) -> int:
        time.sleep(600)
        return x

    with Racer(hangs, _space(), timeout_s=0.2, seed=0) as racer:
        t0 = time.perf_counter()
        with pytest.raises(RequestError, match="took longer than timeout_s=0.2"):
            racer(1)
        assert time.perf_counter() - t0 < 3.0


def test_an_algorithm_site_is_raced_through_its_selector() -> None:
    from perftune.choice import AlgorithmSite

    site = AlgorithmSite("online-test-sort", default="slow", size_range=(1, 1000))

    @site.alternative("slow")
    def _slow(xs: list[int]) -> list[int]:
        time.sleep(0.02)
        return sorted(xs)

    @site.alternative("fast")
    def _fast(xs: list[int]) -> list[int]:
        return sorted(xs)

    with Racer(site, check=lambda xs, ys: ys == sorted(xs), seed=0) as racer:
        answers = [racer([3, 1, 2]) for _ in range(30)]
    assert answers == [[1, 2, 3]] * 30
    assert racer.promotions
    with site.use(racer.safe["online-test-sort"]):
        assert site.choose(3) == "fast"  # the promoted selector runs the fast alternative on these inputs


def test_close_leaves_no_process_behind(tmp_path: Path) -> None:
    pids = tmp_path / "pids"

    def noting(config: Any, x: int) -> int:
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return _double(config, x)

    racer = Racer(noting, _space("fast", "slow"), check=_is_double, seed=0)
    for x in range(12):
        racer(x)
    zygote = racer._zygote.pid
    racer.close()
    seen = {int(p) for p in pids.read_text().split()} - {os.getpid()}  # the safe one alone runs in-process
    assert len(seen) >= 3  # losers were killed and replaced by fresh workers
    deadline = time.monotonic() + 5
    while not all(_dead(p) for p in [*seen, zygote]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_dead(p) for p in [*seen, zygote])


def test_a_request_the_safe_configuration_fails_is_not_held_up_by_a_hanging_candidate() -> None:
    def safe_fails_on_negatives(config: Any, x: int) -> int:
        if config["kind"] == "safe" and x < 0:
            raise ValueError("negative")
        return _double(config, x)

    with Racer(safe_fails_on_negatives, _space("hangs"), check=_is_double, seed=0) as racer:
        assert racer(1) == 2  # the default, measured alone
        t0 = time.perf_counter()
        with pytest.raises(RequestError, match="request 1: the safe configuration raised ValueError"):
            racer(-1)
        assert time.perf_counter() - t0 < 2.0
        assert racer.n_killed >= 1  # the hanging candidate was killed, not waited for
        assert racer(2) == 4  # the racer goes on serving


def _slow_safe_wrong_candidates(config: Any, x: int) -> int:
    if config["kind"] == "safe":
        time.sleep(0.6)
        return 2 * x
    time.sleep(0.4)
    return -999


def test_a_request_cut_short_by_an_exception_leaves_nothing_for_the_next_one() -> None:
    # A caller's own per-request deadline (SIGALRM raising) interrupts a race: both workers still hold
    # it. The next request must not read their answers (it got the wrong candidate's -999, as "safe").
    class Deadline(Exception):
        pass

    def on_alarm(*_: Any) -> None:
        raise Deadline

    before = signal.signal(signal.SIGALRM, on_alarm)
    try:
        with Racer(_slow_safe_wrong_candidates, _space("wrong", "fast"), check=_is_double, seed=1) as racer:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(Deadline):
                racer(10)
            signal.setitimer(signal.ITIMER_REAL, 0)
            assert racer(21) == 42
            assert all(r.answered_by == "safe" for r in racer.records)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def _rarely_wrong(config: Any, x: int) -> int:
    if config["kind"] == "safe":
        time.sleep(0.02)
        return 2 * x
    time.sleep(0.001)
    return -1 if x % 25 == 24 else 2 * x  # faster, and wrong on 4% of the inputs


def test_a_promoted_configuration_that_answers_wrongly_is_demoted_and_never_answers() -> None:
    # It passed check on the races that promoted it; a wrong answer later is caught by check too.
    with Racer(_rarely_wrong, _space("fast"), check=_is_double, seed=0, budget=2) as racer:
        answers = [racer(x) for x in range(60)]
        assert racer.promotions and dict(racer.promotions[0].config) == {"kind": "fast"}
        assert [dict(c) for _, c, _ in racer.demotions] == [{"kind": "fast"}]
        assert racer.failed[Config({"kind": "fast"})].startswith("demoted after a wrong answer")
        assert dict(racer.safe) == {"kind": "safe"}
    assert answers == [2 * x for x in range(60)]


def _pair(config: Any, x: int) -> tuple:
    import numpy as np

    time.sleep(SAFE_S if config["kind"] == "safe" else 0.001)
    a = np.arange(4) * x
    return (a, {"twice": a * 2})


def test_answers_holding_arrays_agree_when_equal() -> None:
    with Racer(_pair, _space("fast"), seed=0) as racer:
        for x in range(12):
            racer(x)
        assert racer.failed == {} and [dict(p.config) for p in racer.promotions] == [{"kind": "fast"}]


def test_an_equal_that_raises_on_a_candidates_answer_fails_the_candidate_not_the_request() -> None:
    def answer(config: Any, x: int) -> Any:
        time.sleep(SAFE_S if config["kind"] == "safe" else 0.001)
        return None if config["kind"] == "fast" else float(x)

    def close(a: Any, b: Any) -> bool:
        return abs(a - b) < 1e-9  # raises for None

    with Racer(answer, _space("fast"), equal=close, seed=0) as racer:
        assert [racer(x) for x in range(3)] == [0.0, 1.0, 2.0]
        assert racer.failed[Config({"kind": "fast"})].startswith("wrong answer (equal raised TypeError")


def test_a_check_that_returns_no_bool_is_the_callers_mistake_said_in_one_line() -> None:
    import numpy as np

    def elementwise(x: Any, y: Any) -> Any:
        return np.asarray([y, y]) == np.asarray([x, x]) * 2  # elementwise: an array, not a bool

    with Racer(_double, _space("fast"), check=elementwise, seed=0) as racer:
        with pytest.raises(PerftuneError, match=r"must return True or False, got ndarray"):
            for x in range(10):  # the first candidate's answer is checked
                racer(x)
        assert racer.failed == {}  # no candidate blamed
        racer.check = _is_double  # mended: the workers the error left were replaced, nothing stale is read
        assert [racer(x) for x in range(4)] == [0, 2, 4, 6]


def _rogue(config: Any, x: int) -> int:
    if config["kind"] == "safe":
        time.sleep(SAFE_S)
        return 2 * x
    os.closerange(0, 1024)  # closes its connection to perftune, and goes on running
    time.sleep(30)
    return 2 * x


def test_a_candidate_that_closes_its_connection_and_runs_on_does_not_hold_up_the_answer() -> None:
    with Racer(_rogue, _space("fast"), check=_is_double, seed=0, timeout_s=5) as racer:
        t0 = time.perf_counter()
        answers = [racer(x) for x in range(2)]
        assert time.perf_counter() - t0 < 3  # was 30 s: the racer waited for it to exit
        assert answers == [0, 2]
        assert racer.failed[Config({"kind": "fast"})] == (
            "closed its connection to perftune and went on running (killed)")


def _no_gpu() -> None:
    raise RuntimeError("CUDA device 1 not found")


def test_a_side_that_cannot_start_is_said_at_the_start_and_blames_no_candidate(tmp_path: Path) -> None:
    from perftune.online import Side

    url = f"sqlite:///{tmp_path}/online.db"
    cpus = sorted(os.sched_getaffinity(0))
    split = [Side((cpus[0],)), Side((cpus[1],), on_start=_no_gpu)]
    with pytest.raises(PerftuneError) as err:
        Racer(_double, _space("fast"), split=split, store=url, name="svc")
    assert str(err.value) == (f"Racer: split side 1 ([{cpus[1]}]) its side's setup failed: "
                              "RuntimeError: CUDA device 1 not found")
    with open_store(url) as st:
        [run] = st.list_runs()
        assert run.status == "failed" and st.trials(run.id) == []


def test_a_service_restarted_with_the_same_name_gets_a_run_of_its_own(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/online.db"
    names = []
    for _ in range(2):  # two lives of the same service (docs/online.md's example passes name=)
        with Racer(_double, _space("fast"), check=_is_double, store=url, name="svc", seed=0) as racer:
            assert [racer(x) for x in range(3)] == [0, 2, 4]
            names.append(racer.run_names)
    assert names == [["svc"], ["svc-2"]]
    with open_store(url) as st:
        assert sorted(r.name for r in st.list_runs()) == ["svc", "svc-2"]


def _wrong_at_once(config: Any, x: int) -> int:
    if config["kind"] != "safe":
        return -1
    time.sleep(0.5 if x == 0 else 0.01)  # request 0 outlasts timeout_s for the safe configuration
    return 2 * x


def test_a_wrong_answer_before_the_safe_run_times_out_is_recorded() -> None:
    with Racer(_wrong_at_once, _space("wrong"), check=_is_double, timeout_s=0.2, seed=0) as racer:
        with pytest.raises(RequestError, match="took longer than timeout_s=0.2"):
            racer(0)
        assert racer.failed == {Config({"kind": "wrong"}): "wrong answer (check(request, answer) is false)"}


class _Odd(Exception):
    """Pickles in the worker, but cannot be unpickled: ``__init__`` takes two arguments, ``args`` has one."""

    def __init__(self, a: Any, b: Any) -> None:
        super().__init__(a)


def _odd_answers(config: Any, x: int) -> Any:
    if config["kind"] == "safe":
        time.sleep(0.02)
        return 2 * x
    return _Odd(1, 2)


def test_a_candidate_whose_answer_cannot_be_read_fails_and_the_safe_answers() -> None:
    with Racer(_odd_answers, _space("fast"), check=_is_double, seed=0) as racer:
        answers = [racer(x) for x in range(6)]
    assert answers == [2 * x for x in range(6)]
    reason = racer.failed[Config({"kind": "fast"})]
    assert reason.startswith("its answer cannot be read by the caller (TypeError")


def _huge_wrong(config: Any, x: int) -> Any:
    if config["kind"] == "safe":
        time.sleep(1.5)  # the huge answer is made and pickled long before
        return 2 * x
    return bytes(100 << 20)  # 100 MiB, and wrong


def test_an_answer_over_max_answer_bytes_fails_the_candidate_unread() -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Racer(_huge_wrong, _space("huge"), check=_is_double, seed=0, detector=False) as racer:
        answers = [racer(x) for x in range(2)]
    assert answers == [0, 2]
    reason = racer.failed[Config({"kind": "huge"})]
    assert reason == "its answer is 100 MiB pickled, more than max_answer_bytes=67108864"
    # Refused from its header: the caller never held it (it grew by 100 MiB or more when it read it).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 << 10


def test_a_safe_answer_over_max_answer_bytes_is_one_line_and_blames_no_candidate() -> None:
    def big(config: Any, x: int) -> Any:
        time.sleep(SAFE_S if config["kind"] == "safe" else 0.001)
        return bytes(2 << 20)

    with Racer(big, _space("fast"), seed=0) as racer:
        racer.max_answer_bytes = 1 << 20
        for x in range(3):
            with pytest.raises(PerftuneError) as err:
                racer(x)
            assert str(err.value) == (f"Racer: request {x}: the safe configuration's answer is 2 MiB "
                                      "pickled, more than max_answer_bytes=1048576; raise "
                                      "racer.max_answer_bytes")
        assert racer.failed == {} and racer.exploring
        racer.max_answer_bytes = 4 << 20
        assert len(racer(3)) == 2 << 20


def test_nan_answers_agree() -> None:
    import numpy as np

    from perftune.online._racer import _agree

    assert _agree(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    assert _agree(float("nan"), float("nan")) and _agree((np.float32("nan"), 1), (np.float32("nan"), 1))
    assert not _agree(np.array([np.nan, 1.0]), np.array([np.nan, 2.0])) and not _agree(float("nan"), 1.0)
    assert _agree(np.array(["a", None], dtype=object), np.array(["a", None], dtype=object))


def _with_nan(config: Any, x: int) -> Any:
    import numpy as np

    time.sleep(SAFE_S if config["kind"] == "safe" else 0.001)
    return np.array([np.nan, float(x)]), float("nan")


def test_answers_holding_nan_agree_and_a_faster_candidate_is_promoted() -> None:
    with Racer(_with_nan, _space("fast"), seed=0, detector=False) as racer:
        for x in range(16):  # 9 wins of 9 races promote it; a few more, for races lost to a loaded machine
            racer(x)
    assert racer.failed == {} and [dict(p.config) for p in racer.promotions] == [{"kind": "fast"}]


def _fast_then_wrong(config: Any, x: int) -> int:
    if config["kind"] == "safe":
        time.sleep(0.02)
        return 2 * x
    return -1 if x >= 20 else 2 * x  # fast, and wrong from request 20 on


@pytest.mark.parametrize("timeout_s", [None, 5.0], ids=["in-process", "timeout_s"])
def test_a_demoted_configurations_request_is_run_again_with_the_restored_one(timeout_s: Any) -> None:
    with Racer(_fast_then_wrong, _space("fast"), check=_is_double, seed=0, budget=2, detector=False,
               timeout_s=timeout_s) as racer:
        answers = [racer(x) for x in range(22)]
    assert racer.promotions and [dict(c) for _, c, _ in racer.demotions] == [{"kind": "fast"}]
    assert answers == [2 * x for x in range(22)]


def test_a_demotion_is_in_the_store_and_the_final_answer_is_the_configuration_served(tmp_path: Path) -> None:
    from perftune.report import final_answer

    url = f"sqlite:///{tmp_path}/online.db"
    with Racer(_fast_then_wrong, _space("fast"), check=_is_double, seed=0, budget=2, detector=False,
               store=url, name="svc") as racer:
        for x in range(22):
            racer(x)
    (seq, _, why), = racer.demotions
    with open_store(url) as st:
        info = st.get_run("svc")
        (promoted,) = [t for t in st.trials(info.id) if t.metrics.get("promoted") == 1.0]
        assert info.settings["demoted"] == [{"request": seq, "config": {"kind": "fast"}, "why": why,
                                             "run": info.id, "trial": promoted.id}]
        answer = final_answer(st, info)
        assert answer.config == {"kind": "safe"} and answer.trial != promoted.id
        assert f"trial {promoted.id} " in str(answer.note) and "demoted on request" in str(answer.note)
    out = subprocess.run([sys.executable, "-m", "perftune", "best", "svc", "--store", url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == '{"kind": "safe"}', out.stderr


def _fails_on_odd(config: Any, x: int) -> int:
    if x % 2:
        raise ValueError("odd")
    time.sleep(0.01 if config["kind"] == "safe" else 0.001)
    return 2 * x


@pytest.mark.parametrize("budget", [1, 3], ids=["alone", "raced"])
def test_records_hold_every_request_also_those_that_raised(budget: int) -> None:
    with Racer(_fails_on_odd, _space("fast", "slow"), check=_is_double, seed=0, budget=budget,
               timeout_s=5) as racer:
        for x in range(10):
            with contextlib.suppress(RequestError):
                racer(x)
    assert [r.seq for r in racer.records] == list(range(10))
    assert all(r.answered_by == "none" for r in racer.records if r.seq % 2)
    assert all(r.answered_by != "none" for r in racer.records if not r.seq % 2)


def test_close_closes_the_store_it_opened(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/online.db"

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    with Racer(_double, _space("fast"), check=_is_double, store=url, seed=0) as racer:  # warmed up
        racer(1)
    gc.collect()  # what earlier tests left for the collector is closed now, not during the loop
    before = open_fds()
    for _ in range(5):
        with Racer(_double, _space("fast"), check=_is_double, store=url, seed=0) as racer:
            racer(1)
    assert open_fds() == before
