"""Bad input to perftune.online: one line naming what is wrong, before anything runs or is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from perftune.errors import PerftuneError
from perftune.online import Explorer, PromotionRule, Racer, RequestError, ShiftDetector, Side, Split
from perftune.space import Int, Space

SPACE = Space({"n": Int(1, 8, default=2)}, constraints=["n != 5"])


def _objective(config: Any, x: int) -> int:
    return x


@pytest.mark.parametrize("make, message", [
    (lambda: Racer(_objective, SPACE, split=[[0], [0]]), "split: the two sides share CPU(s) [0]"),
    (lambda: Racer(_objective, SPACE, split=[[0], [4096]]), "split[1]: CPU(s) [4096] are not available"),
    (lambda: Racer(_objective, SPACE, split="halves"), "split: expected two CPU lists or two Side values"),
    (lambda: Racer(_objective, SPACE, split=[[0], []]), "split: each side needs at least one CPU"),
    (lambda: Racer(_objective), "online: an objective needs a space"),
    (lambda: Racer(42, SPACE), "online: expected an objective(config, request) or a choice site, got int"),
    (lambda: Racer(_objective, {"n": 1}), "online: expected a perftune.space.Space, got dict"),
    (lambda: Racer(_objective, SPACE, safe={"m": 1}), "online: safe has unknown parameter(s) m"),
    (lambda: Racer(_objective, SPACE, safe={"n": 5}), "online: the safe configuration is invalid"),
    (lambda: Racer(_objective, SPACE, safe=3), "online: safe must be a configuration (a mapping), got int"),
    (lambda: Racer(_objective, SPACE, budget=0), "online: budget must be a positive number of candidates"),
    (lambda: Racer(_objective, SPACE, check="yes"), "online: check must be a function check(request, "),
    (lambda: Racer(_objective, SPACE, timeout_s=-1), "Racer: timeout_s must be a positive number of seconds"),
    (lambda: Racer(_objective, SPACE, timeout_s=float("inf")), "Racer: timeout_s must be a positive"),
    (lambda: Racer(_objective, SPACE, timeout_s=float("nan")), "Racer: timeout_s must be a positive"),
    (lambda: Racer(_objective, SPACE, rule={"max_races": 3}), "online: rule must be a perftune.online"),
    (lambda: Racer(_objective, SPACE, detector=3), "online: detector must be a ShiftDetector, False or None"),
    (lambda: Explorer(_objective, SPACE), "Explorer: give check=check(request, answer)"),
    (lambda: Explorer(_objective, SPACE, check=bool, explore_fraction=0.9),
     "Explorer: explore_fraction must be in (0, 0.5], got 0.9"),
    (lambda: Explorer(_objective, SPACE, check=bool, guard=1), "Explorer: guard must be a number > 1"),
    (lambda: Explorer(_objective, SPACE, check=bool, cpus=(4096,)), "Explorer: cpus (4096,) are not all"),
    (lambda: PromotionRule(min_races=0), "PromotionRule: min_races must be a positive integer, got 0"),
    (lambda: PromotionRule(min_races=9, max_races=4), "PromotionRule: min_races (9) must not exceed max"),
    (lambda: PromotionRule(confidence=1.5), "PromotionRule: confidence must be in (0, 1), got 1.5"),
    (lambda: PromotionRule(min_races=2, max_races=4), "PromotionRule: no candidate could ever be promoted"),
    (lambda: ShiftDetector(window_n=1), "ShiftDetector: window_n must be an integer >= 2, got 1"),
    (lambda: ShiftDetector(threshold=0), "ShiftDetector: threshold must be a positive number, got 0"),
    (lambda: Split.of([[0], [1], [2]]), "split: expected two CPU lists or two Side values"),
    (lambda: Split.of(Split((Side((0,)), Side((4096,))))), "split[1]: CPU(s) [4096] are not available"),
    (lambda: Side(cpus=0), "Side: cpus must be a list of CPU numbers, got 0"),  # type: ignore[arg-type]
    (lambda: Side(cpus=(0,), on_start="gpu0"), "Side: on_start must be a function"),  # type: ignore[arg-type]
    (lambda: Explorer(_objective, SPACE, check=bool, cpus=0), "Explorer: cpus must be a list of CPU numbers"),
    (lambda: Explorer(_objective, SPACE, check=bool, guard=float("inf")), "Explorer: guard must be a number"),
    (lambda: Racer(_objective, SPACE, seed="x"), "online: seed must be an integer or None, got 'x'"),
    (lambda: Racer(_objective, SPACE, name=3), "online: name must be a non-empty string, got 3"),
    (lambda: Racer(_objective, SPACE, store=3), "online: store must be a store URL or a perftune.store"),
    (lambda: ShiftDetector(threshold=float("inf")), "ShiftDetector: threshold must be a positive number"),
])
def test_bad_input_is_one_line(make: Any, message: str) -> None:
    with pytest.raises(PerftuneError) as err:
        make()
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_bad_split_writes_no_run(tmp_path: Path) -> None:
    from perftune.store import open_store

    url = f"sqlite:///{tmp_path}/online.db"
    with pytest.raises(PerftuneError):
        Racer(_objective, SPACE, split=[[0], [0]], store=url)
    assert open_store(url).list_runs() == []


def test_a_closed_racer_refuses_requests() -> None:
    racer = Racer(_objective, SPACE, seed=0)
    assert racer(3) == 3
    racer.close()
    with pytest.raises(PerftuneError, match="Racer is closed"):
        racer(4)


def _slow_double(config: Any, x: int) -> int:
    import time

    time.sleep(0.001 * config["n"])
    return 2 * x


@pytest.mark.parametrize("kind", ["Racer", "Explorer"])
def test_calls_from_several_threads_are_served_one_at_a_time(kind: str) -> None:
    import threading

    make = Racer if kind == "Racer" else Explorer
    results: dict[int, Any] = {}
    with make(_slow_double, SPACE, check=lambda x, y: y == 2 * x, seed=0) as served:  # type: ignore[operator]

        def caller(base: int) -> None:
            for x in range(base, base + 25):
                try:
                    results[x] = served(x)
                except Exception as exc:  # noqa: BLE001 - what the caller got, compared below
                    results[x] = exc

        threads = [threading.Thread(target=caller, args=(b,), daemon=True) for b in (0, 1000)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "a call never returned"
    assert results == {x: 2 * x for b in (0, 1000) for x in range(b, b + 25)}
    assert sorted(r.seq for r in served.records) == list(range(50))


def test_a_call_from_within_a_call_is_one_line() -> None:
    holder: list[Any] = []

    def serves_again(config: Any, x: int) -> int:
        return holder[0](x - 1) if x == 99 else x  # serving again from the objective, in this process

    with Racer(serves_again, SPACE, seed=0, budget=1) as racer:
        holder.append(racer)
        assert racer(1) == 1 and not racer.exploring
        with pytest.raises(RequestError) as err:
            racer(99)
        assert racer(2) == 2
    assert str(err.value) == ("request 1: the safe configuration raised PerftuneError: Racer: called "
                              "again while serving a request (from the objective, check, or a signal "
                              "handler): serve one request at a time")


def _sum_of(config: Any, request: Any) -> int:
    return sum(request())


@pytest.mark.parametrize("kind", ["Racer", "Explorer"])
def test_a_request_that_cannot_be_pickled_is_served_in_process_said_once(kind: str) -> None:
    make = Racer if kind == "Racer" else Explorer
    more = {"explore_fraction": 0.5} if kind == "Explorer" else {}
    with make(_sum_of, SPACE, check=lambda r, y: y == 6, seed=0, **more) as served, \
            pytest.warns(RuntimeWarning) as said:  # type: ignore[operator]
        answers = [served(lambda: [1, 2, 3]) for _ in range(12)]
    assert answers == [6] * 12
    message = str(said[0].message)
    assert len(said) == 1 and f"{kind}: request " in message
    assert "cannot be sent to a worker process (AttributeError: Can't pickle local object" in message
    assert served.failed == {} and getattr(served, "n_explored", 0) == 0


def _generator(config: Any, x: int) -> Any:
    import time

    time.sleep(0.02 if config["n"] == 2 else 0.001)
    return (i for i in range(x))  # an answer that cannot be pickled, whatever the configuration


@pytest.mark.parametrize("kind", ["Racer", "Explorer"])
def test_answers_that_cannot_be_pickled_blame_no_candidate_and_are_served_in_process(kind: str) -> None:
    make = Racer if kind == "Racer" else Explorer
    more = {"explore_fraction": 0.5} if kind == "Explorer" else {}
    with make(_generator, SPACE, check=lambda x, y: True, seed=0, detector=False, **more) as served, \
            pytest.warns(RuntimeWarning) as said:  # type: ignore[operator]
        answers = [sum(served(x)) for x in range(12)]
    assert answers == [sum(range(x)) for x in range(12)]
    assert served.failed == {} and not served.exploring
    assert len(said) == 1
    assert "the safe configuration's answer cannot be sent back (TypeError: cannot pickle 'generator'" in str(
        said[0].message)
