"""Learned per-input dispatch (perftune.adapt) against one configuration for all inputs.

For each algorithm: learn a dispatcher with ``tune_inputs`` on training inputs, tune one
configuration on all training inputs together (same search, same total budget) as the
single-configuration baseline, then generate a test set from input families and sizes that training
never saw and time, on every test input, interleaved and repeated (medians):

* the two-level dispatcher, end to end (features + decision + landmark run);
* the one-level baseline, end to end (every feature, nearest cluster's landmark);
* every landmark, and the single tuned configuration, pinned (no features);

then report totals: "best single" is the best of the pinned configurations *on the test set*
(chosen with hindsight, the strongest one-configuration baseline); "oracle" is the best landmark per
input, without feature costs.

Times are CPU seconds of the main thread (``time.thread_time``) by default (``--clock cpu``): on a
machine shared with other jobs they are disturbed less than wall-clock times; every run is
single-threaded (one BLAS thread), so CPU time is the time the run took to compute. ``--clock wall``
uses ``time.perf_counter``. The dispatcher learns with the same clock.

The training families are passed to ``tune_inputs`` as ``groups`` (so it learns the family model; see
docs/adapt.md); the test families are never seen by anything before the test.

Usage:
    nice python benchmarks/adapt.py sort --seed 1 --tag run1   # -> benchmarks/results/adapt-sort-run1.md
    nice python benchmarks/adapt.py solve --seed 1 --tag run1  # -> benchmarks/results/adapt-solve-run1.md
    nice python benchmarks/adapt.py sort --quick               # a smaller run (smoke test)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# One BLAS thread: on 2 shared cores, threaded LU only adds contention noise to the timings.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src" / "perftune" / "examples" / "adapt"))


@dataclass
class Setup:
    """One algorithm's benchmark: its adaptive target, data and checks."""

    name: str
    target: Any
    train: list[Any]
    test: list[tuple[str, Any]]
    train_groups: list[str]
    budget: int
    single_budget: int
    n_clusters: int
    check: Callable[[Any, Any], bool] | None = None
    accuracy: Callable[[Any, Any], float] | None = None
    required: Callable[[Any], float] | None = None
    size: Callable[[Any], int] = len
    notes: str = ""
    #: Extra configurations the single-configuration search tries first (a fair, strong baseline).
    single_seeds: list[dict[str, Any]] = field(default_factory=list)
    #: ``tune_inputs(required_levels=...)``: requirements every training input is also learned at.
    required_levels: tuple[float, ...] | None = None
    #: ``tune_inputs(compose_seeds=...)``: two-level seeds for a choice site (``--no-compose-seeds``: off).
    compose_seeds: bool = True


def sort_setup(quick: bool, seed: int) -> Setup:
    import adaptive_sort as example

    train_sizes = [100, 1000, 10_000] if quick else [100, 1000, 10_000, 30_000]
    # Test sizes beyond 1e5 in both modes: 12x (quick) and 7x the largest training size.
    test_sizes = [300, 3000, 20_000, 120_000] if quick else [300, 3000, 20_000, 200_000]
    labelled = example.make_inputs(example.TRAIN_FAMILIES, train_sizes, 2, seed=2 * seed)
    train = [x for _, x in labelled]
    test = example.make_inputs(example.TEST_FAMILIES, test_sizes, 1, seed=2 * seed + 1)
    return Setup(
        name="sort",
        target=example.adaptive_sort,
        train=train,
        test=test,
        train_groups=[f for f, _ in labelled],
        budget=60 if quick else 84,
        single_budget=24 if quick else 30,
        n_clusters=6,
        check=example.is_sorted_copy,
        notes=(
            f"training families {sorted(example.TRAIN_FAMILIES)} at sizes {train_sizes} (2 inputs each); "
            f"test families {sorted(example.TEST_FAMILIES)} at sizes {test_sizes} (1 each). 'random' "
            "is in both, at other sizes; the other test families were never seen in training. Sizes stop "
            f"at {max(test_sizes)} (not 1e7): every sort is pure Python and the machine is 2 shared cores; "
            f"the largest test size is {max(test_sizes) / max(train_sizes):.0f}x the largest training size. "
            f"{'A --quick run: smaller sizes and budgets than the default run. ' if quick else ''}"
            "The sawtooth and the sorted input with a random tail, once left out of every set "
            "(adapt-sort-longrange-failure.md), are training families."
        ),
    )


def solve_setup(quick: bool, seed: int) -> Setup:
    import adaptive_solve as example

    labelled = example.make_labelled(example.TRAIN_FAMILIES, 2, seed=2 * seed)
    train = [x for _, x in labelled]
    test = example.make_labelled(example.TEST_FAMILIES, 1, seed=2 * seed + 1)
    return Setup(
        name="solve",
        target=example.adaptive_solve,
        train=train,
        test=test,
        train_groups=[f for f, _ in labelled],
        budget=60 if quick else 96,
        single_budget=24 if quick else 40,
        n_clusters=6,
        accuracy=example.digits,
        required=example.required_digits,
        size=lambda p: p.n,
        notes=example.BENCHMARK_NOTES,
        single_seeds=[{"method": "cg", "iters": 2048}, {"method": "dense"}, {"method": "sparse"}],
        required_levels=example.REQUIRED_LEVELS,
    )


# The thread's CPU clock: under the CPU-time limit of run_limited (ITIMER_PROF), Linux updates the
# process's clock only at scheduler ticks, and time.process_time read short runs as 0 or 4 ms.
TIMER: Callable[[], float] = time.thread_time


def _time(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = TIMER()
    out = fn()
    return TIMER() - t0, out


def _wall(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _attempt(fn: Callable[[], Any], limit_s: float) -> tuple[float, Any, bool, bool]:
    """``(seconds, output, stopped, raised)`` of one limited run; a run that raises has no output."""
    from perftune.adapt._limit import run_limited

    t0 = TIMER()
    try:
        dt, out, stopped = run_limited(fn, limit_s, TIMER)
    except Exception:  # a configuration that fails on an input (the example's dense LU on a huge one)
        return TIMER() - t0, None, False, True
    return dt, out, stopped, False


def single_config(setup: Setup, seed: int) -> Any:
    """One configuration tuned on all training inputs together (the existing search, no features)."""
    import perftune

    target = setup.target
    space = target.landmark_space(setup.train)
    # The same representatives' rule as a landmark search, over every input: a few of each size.
    reps = setup.train[::2]

    from perftune.adapt._limit import run_limited

    fastest: dict[int, float] = {}

    def objective(config: Any) -> float:
        landmark = target.landmark_from_config(config)
        times = []
        for i, x in enumerate(reps):
            # As in tune_inputs: a run 20x slower than the fastest correct configuration's on this input
            # is a failed trial.
            limit = max(0.2, 20 * fastest.get(i, np.inf))
            dt, out, stopped = run_limited(lambda x=x: target.run_with(landmark, x), limit, TIMER)
            if stopped:
                raise ValueError("stopped: 20x slower than the fastest run on an input")
            if setup.check is not None and not setup.check(x, out):
                raise ValueError("wrong output")
            if setup.accuracy is not None and setup.accuracy(out, x) < setup.required(x):
                raise ValueError("not accurate enough")
            times.append(dt)
        for i, dt in enumerate(times):
            fastest[i] = min(fastest.get(i, np.inf), dt)
        return sum(times)

    result = perftune.tune(objective, space, budget=setup.single_budget, seed=seed,
                           seeds=[*target.seed_configs(), *setup.single_seeds], repeats=3)
    assert result.best is not None, "no single configuration ran correctly on every training input"
    return target.landmark_from_config(result.best.config)


def run(setup: Setup, repeats: int, seed: int) -> str:
    from perftune.adapt import tune_inputs

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    learned = tune_inputs(
        setup.target, setup.train, budget=setup.budget, n_clusters=setup.n_clusters, seed=seed,
        repeats=3, check=setup.check, accuracy=setup.accuracy, required=setup.required,
        groups=setup.train_groups, clock="cpu" if TIMER is time.thread_time else "wall",
        required_levels=setup.required_levels, compose_seeds=setup.compose_seeds,
    )
    train_s = time.perf_counter() - t0
    load_trained = os.getloadavg()
    t0 = time.perf_counter()
    single = single_config(setup, seed)
    single_s = time.perf_counter() - t0
    target = setup.target
    two = learned.dispatcher()
    one = learned.dispatcher(one_level=True)
    pinned = [*learned.landmarks, single]
    labels = [f"landmark {k}" for k in range(len(learned.landmarks))] + ["single tuned"]
    n, k = len(setup.test), len(pinned)
    t_pinned = np.zeros((repeats, n, k))
    t_two = np.zeros((repeats, n))
    t_one = np.zeros((repeats, n))
    bad_pinned = np.zeros((n, k), dtype=bool)
    bad_two = np.zeros(n, dtype=bool)
    bad_one = np.zeros(n, dtype=bool)

    def wrong(x: Any, out: Any) -> bool:
        if setup.check is not None and not setup.check(x, out):
            return True
        return setup.accuracy is not None and setup.accuracy(out, x) < setup.required(x)

    stopped = np.zeros((n, k), dtype=bool)
    fastest = np.full(n, np.inf)
    rng = np.random.default_rng(seed)
    for r in range(repeats):
        for i in rng.permutation(n):
            x = setup.test[i][1]
            jobs = [("pinned", j) for j in range(k)] + [("one", 0)]
            jobs = [jobs[m] for m in rng.permutation(len(jobs))]
            # The dispatcher first in the first round, so that a hopeless pinned configuration can be
            # stopped against a time already measured on this input.
            jobs = [("two", 0), *jobs] if r == 0 else [jobs[0], ("two", 0), *jobs[1:]]
            for which, j in jobs:
                if which == "pinned":
                    if stopped[i, j]:
                        continue
                    # A pinned configuration 20x slower than the fastest run on this input is stopped:
                    # its time is then a lower bound, which can only flatter the single-config baseline.
                    limit = max(0.2, 20 * fastest[i])
                    dt, out, was_stopped, raised = _attempt(
                        lambda x=x, j=j: target.run_with(pinned[j], x), limit
                    )
                    if raised:
                        bad_pinned[i, j] = stopped[i, j] = True
                        t_pinned[:, i, j] = dt
                        continue
                    if was_stopped:
                        stopped[i, j] = True
                        t_pinned[:, i, j] = dt
                        continue
                    t_pinned[r, i, j] = dt
                    is_wrong = wrong(x, out)
                    fastest[i] = fastest[i] if is_wrong else min(fastest[i], dt)
                    bad_pinned[i, j] |= is_wrong
                else:
                    d = two if which == "two" else one
                    target.use_dispatcher(d)
                    dt, out, _, raised = _attempt(lambda x=x: target(x), float("inf"))
                    (t_two if which == "two" else t_one)[r, i] = dt
                    is_wrong = raised or wrong(x, out)
                    fastest[i] = fastest[i] if is_wrong else min(fastest[i], dt)
                    bad = bad_two if which == "two" else bad_one
                    bad[i] |= is_wrong
    target.use_dispatcher(None)
    load_after = os.getloadavg()
    T = np.median(t_pinned, axis=0)
    two_s = np.median(t_two, axis=0)
    one_s = np.median(t_one, axis=0)
    # A configuration that gave a wrong or inaccurate answer on some test input cannot be "the best
    # single configuration": it is ranked after every correct one.
    totals = [(int(bad_pinned[:, j].sum()), float(T[:, j].sum()), j) for j in range(k)]
    best_wrong, best_total, best_j = min(totals)
    landmark_ok = ~bad_pinned[:, : len(learned.landmarks)]
    oracle = float(np.where(landmark_ok, T[:, : len(learned.landmarks)], np.inf).min(axis=1).sum())

    speedup, of_oracle = best_total / float(two_s.sum()), float(two_s.sum()) / oracle
    goal_met = speedup >= 1.5 and of_oracle <= 1.10 and not bad_two.any()
    # Decision time alone (features + walk), on the test inputs: what dispatch adds to a call.
    decide = []
    for _, x in setup.test:
        # Wall clock here: a decision takes microseconds, finer than the CPU clock is worth reading.
        decide.append(min(_wall(lambda x=x: two.choose(x)) for _ in range(5)))
    chose_two = [two.choose(x) for _, x in setup.test]
    chose_one = [one.choose(x) for _, x in setup.test]
    # What the asymptotic check changed: the model's own choice, without it.
    from perftune.adapt import Dispatcher

    unchecked = Dispatcher(two.columns, target.column_functions(), two.model, two.landmarks)
    regrown = [(fam, setup.size(x), unchecked.choose(x), c)
               for (fam, x), c in zip(setup.test, chose_two, strict=True) if unchecked.choose(x) != c]
    decide_small = [d for (_, x), d in zip(setup.test, decide, strict=True) if setup.size(x) <= 3000]
    if DUMP:
        _dump(DUMP, setup, learned, T, bad_pinned, stopped, two_s, one_s, chose_two)

    lines = [f"# perftune.adapt: learned per-input dispatch, {setup.name}", ""]
    lines += [
        f"Command: `python benchmarks/adapt.py {' '.join(sys.argv[1:])}`  ",
        f"Machine: {platform.node()}, {os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()} (the load average below says how busy it was)  ",
        f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  ",
        f"Load average (1/5/15 min) before: {'/'.join(f'{v:.1f}' for v in load_before)}, "
        f"after: {'/'.join(f'{v:.1f}' for v in load_after)}  ",
        f"Load average after training: {'/'.join(f'{v:.1f}' for v in load_trained)}  ",
        f"Clock: {'CPU time of the thread (time.thread_time)' if TIMER is time.thread_time else 'wall'}  ",
        f"Repeats: {repeats} per (input, method), interleaved in random order, medians.",
        "",
        setup.notes,
        "",
        f"Training: {len(setup.train)} inputs, {learned.n_trials} landmark trials ({train_s:.0f} s with the "
        f"landmark measurements); single configuration: {setup.single_budget} trials ({single_s:.0f} s).",
        "",
        "```",
        learned.summary(),
        f"single tuned configuration: {target.landmark_to_json(single)}",
        "```",
        "",
        "Model selection (cross-validated total on the training inputs: random folds plus "
        "leave-one-family-out; the 6 best candidates of "
        f"{len(learned.fit.scores)}; wrong choices first):",
        "",
        *[f"- {name}: {wrong} wrong, {total * 1e3:.1f} ms"
          for name, wrong, total in sorted(learned.fit.scores, key=lambda c: (c[1], c[2]))[:6]],
        "",
        f"## Test set: {n} inputs",
        "",
        "| method | total (ms) | vs best single | vs oracle | wrong answers |",
        "|---|---:|---:|---:|---:|",
    ]
    rows = [
        ("two-level dispatcher (features included)", float(two_s.sum()), int(bad_two.sum())),
        ("one-level (all features, nearest cluster)", float(one_s.sum()), int(bad_one.sum())),
        (f"best single configuration ({labels[best_j]})", best_total, best_wrong),
        ("per-input oracle (best landmark, no features)", oracle, 0),
    ]
    for name, total, n_bad in rows:
        lines.append(
            f"| {name} | {total * 1e3:.1f} | {best_total / total:.2f}x | {total / oracle:.3f} | {n_bad} |"
        )
    lines += ["", "Every pinned configuration on the test set (stopped: runs cut at 20x the fastest run on "
              "that input; their time counts as the cut, a lower bound):", "",
              "| configuration | total (ms) | wrong | stopped |", "|---|---:|---:|---:|"]
    for j in range(k):
        lines.append(f"| {labels[j]}: `{target.landmark_to_json(pinned[j])}` | {T[:, j].sum() * 1e3:.1f} | "
                     f"{int(bad_pinned[:, j].sum())} | {int(stopped[:, j].sum())} |")
    families = sorted({f for f, _ in setup.test})
    lines += ["", "Per family (ms); the landmarks chosen, input by input in order of size (oracle: the "
              "fastest landmark measured on each):", "",
              "| family | sizes | two-level | one-level | best single | oracle | two-level chose "
              "| one-level chose | oracle |", "|---|---|---:|---:|---:|---:|---|---|---|"]
    n_landmarks = len(learned.landmarks)
    for fam in families:
        idx = sorted((i for i, (f, _) in enumerate(setup.test) if f == fam),
                     key=lambda i: setup.size(setup.test[i][1]))
        masked = np.where(landmark_ok[idx], T[idx][:, :n_landmarks], np.inf)
        orc = masked.min(axis=1).sum()
        sizes = ", ".join(str(setup.size(setup.test[i][1])) for i in idx)
        lines.append(f"| {fam} | {sizes} | {two_s[idx].sum() * 1e3:.1f} | {one_s[idx].sum() * 1e3:.1f} | "
                     f"{T[idx, best_j].sum() * 1e3:.1f} | {orc * 1e3:.1f} | "
                     f"{' '.join(str(chose_two[i]) for i in idx)} | "
                     f"{' '.join(str(chose_one[i]) for i in idx)} | "
                     f"{' '.join(str(int(m)) for m in masked.argmin(axis=1))} |")
    lines += [
        "",
        "Asymptotic check (inputs beyond the training sizes): "
        + ("off (no size)" if learned.growth is None else
           f"changed the model's landmark on {len(regrown)} of {n} test inputs"
           + "".join(f"; {fam} {size}: {a} -> {b}" for fam, size, a, b in regrown)),
        "",
        f"Decision time (features the tree reads + walk), median over test inputs: "
        f"{np.median(decide) * 1e6:.1f} µs; on inputs of at most 3000 elements: "
        f"{np.median(decide_small) * 1e6:.1f} µs.",
        "",
        "Two-level speedup over the best single configuration: "
        f"**{best_total / float(two_s.sum()):.2f}x**; "
        f"two-level / oracle: **{float(two_s.sum()) / oracle:.3f}**; wrong answers: {int(bad_two.sum())}. "
        f"Goal (>= 1.5x and <= 1.10 of the oracle, no wrong answer): "
        f"**{'met' if goal_met else 'not met'}**.",
    ]
    return "\n".join(lines) + "\n"


QUICK = False
#: ``--dump FILE``: the training and test tables of a run, for replaying other learners offline.
DUMP: str | None = None


def _dump(path: str, setup: Setup, learned: Any, T: np.ndarray, bad: np.ndarray, stopped: np.ndarray,
          two_s: np.ndarray, one_s: np.ndarray, chose_two: list[int]) -> None:
    """Save what a learner needs and what the test measured (``numpy.savez``, no pickle): the training
    tables of ``tune_inputs`` and, for every test input, every column's value and cost (one reading,
    cheap columns free) and every pinned configuration's median time."""
    target = setup.target
    fns = target.column_functions()
    cheap = target.cheap_columns()
    n, m = len(setup.test), len(fns)
    values, cost = np.zeros((n, m)), np.zeros((n, m))
    for i, (_, x) in enumerate(setup.test):
        for c, fn in enumerate(fns):
            dt, v = _time(lambda fn=fn, x=x: fn(x))
            values[i, c], cost[i, c] = float(v), 0.0 if c in cheap else dt
    stopped_train = learned.stopped if learned.stopped is not None else np.zeros_like(learned.ok)
    # What tune_inputs relabels the training tables with before fitting (variable accuracy).
    from perftune.adapt._tune import _required_column

    levels = setup.required_levels
    relabel: dict[str, Any] = {}
    if levels is not None and learned.accuracy_reached is not None:
        relabel = {"required_levels": np.array(levels, dtype=float),
                   "train_accuracy": learned.accuracy_reached,
                   "required_column": _required_column(target, setup.required, levels, setup.accuracy)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)  # a missing folder must not lose the run
    np.savez_compressed(
        path, columns=np.array(learned.columns), train_values=learned.values, train_cost=learned.cost_s,
        train_time=learned.time_s, train_ok=learned.ok, train_stopped=stopped_train,
        train_resampled=learned.resampled if learned.resampled is not None else np.zeros((0,)),
        train_groups=np.array(setup.train_groups), train_sizes=np.array([setup.size(x) for x in setup.train]),
        test_values=values, test_cost=cost, test_time=T, test_bad=bad, test_stopped=stopped,
        test_groups=np.array([f for f, _ in setup.test]),
        test_sizes=np.array([setup.size(x) for _, x in setup.test]), two_s=two_s, one_s=one_s,
        chose_two=np.array(chose_two), n_landmarks=len(learned.landmarks), **relabel,
    )


def main() -> None:
    global QUICK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("algorithm", choices=["sort", "solve"])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and budgets")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=None, help="trials of all landmark searches")
    parser.add_argument("--clusters", type=int, default=None, help="clusters (landmark searches)")
    parser.add_argument("--tag", default="", help="suffix of the results file name")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--no-relabel", action="store_true",
                        help="learn each training input at its own requirement only (solve: no "
                             "tune_inputs(required_levels=...))")
    parser.add_argument("--dump", default=None,
                        help="also save the training and test tables here (.npz) for offline replay")
    parser.add_argument("--no-compose-seeds", action="store_true",
                        help="no two-level seeds in the landmark searches (tune_inputs(compose_seeds=False))")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                        help="time runs by this process's CPU time (default) or the wall clock")
    args = parser.parse_args()
    global TIMER, DUMP
    QUICK = args.quick
    DUMP = args.dump
    TIMER = time.thread_time if args.clock == "cpu" else time.perf_counter
    make_setup = sort_setup if args.algorithm == "sort" else solve_setup
    setup = make_setup(args.quick, args.seed)
    setup.budget = args.budget or setup.budget
    setup.n_clusters = args.clusters or setup.n_clusters
    if args.no_relabel:
        setup.required_levels = None
    setup.compose_seeds = not args.no_compose_seeds
    text = run(setup, args.repeats, args.seed)
    tag = f"-{args.tag}" if args.tag else ""
    out = Path(args.out) / f"adapt-{args.algorithm}{'-quick' if args.quick else ''}{tag}.md"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print("wrote", out)


if __name__ == "__main__":
    main()
