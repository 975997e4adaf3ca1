"""Problems and the counting ledger shared by every tool in the quality benchmark.

This module is imported by the runner of each tool, each in its own virtual environment, so it uses
only the standard library and numpy (every peer environment has numpy). It does NOT import perftune:
the problems are defined once here, the same for every tool.

Counting (identical for every tool): the budget is the number of measured configurations, failures
included; proposals that violate declared constraints and repeats of measured configurations are
answered but do not count. Deciding time is the tool's wall time minus the time spent measuring.
"""

from __future__ import annotations

import ast
import gzip
import itertools
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HUB = ROOT / "data" / "benchmark_hub"
BUDGETS = (25, 50, 100, 200)

_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
          ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b}


def t1_values(text: str) -> list[Any]:
    """The values of a T1 tuning parameter written as a Python list expression, evaluated safely.

    Kernel Tuner's T1 files write values such as ``"[1] + [2 * i for i in range(1, 11)]"``. Only list
    literals, numbers and strings, ``+ - * / //``, unary minus, ``range`` and list comprehensions are
    accepted (no attribute access, no other calls), so a data file cannot run code.

    >>> t1_values("[32 * i for i in range(1, 4)]")
    [32, 64, 96]
    """
    result = _eval_node(ast.parse(text, mode="eval").body, {})
    if not isinstance(result, list):
        raise ValueError(f"T1 values must be a list, got {text!r}")
    return result


def _eval_node(node: ast.AST, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str) and not isinstance(
            node.value, bool):
        return node.value
    if isinstance(node, ast.List):
        return [_eval_node(e, names) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_node(node.operand, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return _ARITH[type(node.op)](_eval_node(node.left, names), _eval_node(node.right, names))
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and not node.keywords and 1 <= len(node.args) <= 3):
        args = [_eval_node(a, names) for a in node.args]
        if not all(isinstance(a, int) for a in args):
            raise ValueError("range() takes integers")
        return list(range(*args))
    if isinstance(node, ast.ListComp):
        return _eval_comprehension(node.elt, node.generators, names)
    raise ValueError(f"not allowed in T1 values: {ast.dump(node)}")


def _eval_comprehension(elt: ast.expr, generators: list[ast.comprehension],
                        names: dict[str, Any]) -> list[Any]:
    if not generators:
        return [_eval_node(elt, names)]
    gen, rest = generators[0], generators[1:]
    if gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
        raise ValueError("only plain 'for name in ...' comprehensions are allowed in T1 values")
    out: list[Any] = []
    for item in _eval_node(gen.iter, names):
        out += _eval_comprehension(elt, rest, {**names, gen.target.id: item})
    return out


def _t1_params(t1: dict[str, Any]) -> tuple[list[Param], list[str]]:
    """Parameters (ordered if numeric) and constraint expressions of a T1 space description."""
    cs = t1["ConfigurationSpace"]
    params = []
    for p in cs["TuningParameters"]:
        raw = p["Values"]
        if isinstance(raw, str):
            try:
                values = json.loads(raw)
            except json.JSONDecodeError:  # Kernel Tuner's T1 files write Python list expressions
                values = t1_values(raw)
        else:
            values = raw
        numeric = all(isinstance(v, int | float) for v in values)
        params.append(Param(p["Name"], "ordinal" if numeric else "choice",
                            sorted(values) if numeric else list(values)))
    return params, [c["Expression"] for c in cs.get("Conditions", [])]


# Builtins allowed in T1 condition expressions (Python syntax subset).
_SAFE = {"__builtins__": {}, "min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round,
         "len": len}


@dataclass
class Param:
    """One parameter, described plainly so that every tool can map it to its own types.

    kind: ``int`` (lo..hi), ``ordinal`` (ordered values), ``choice`` (unordered), ``bool``,
    ``float`` (lo..hi), ``perm`` (a permutation of ``values``).
    """

    name: str
    kind: str
    values: list[Any] = field(default_factory=list)
    lo: float = 0.0
    hi: float = 0.0


class Problem:
    """Base class: parameters, declared constraints, measurement, and the optimum for scoring."""

    name: str
    params: list[Param]
    optimum: float
    score_by_value: bool = False  # Rosenbrock: optimum 0, scored by the best value itself
    constraints: list[str]
    default_budget_max: int = 200

    def is_valid(self, config: dict[str, Any]) -> bool:
        for p in self.params:
            v = config.get(p.name)
            if p.kind in ("int",):
                if not (isinstance(v, int | np.integer) and p.lo <= v <= p.hi):
                    return False
            elif p.kind in ("ordinal", "choice", "bool"):
                if v not in p.values:
                    return False
            elif p.kind == "float":
                if not (isinstance(v, float | int) and p.lo <= v <= p.hi):
                    return False
            elif p.kind == "perm" and (v is None or sorted(v) != sorted(p.values)):
                return False
        return all(eval(c, _SAFE, config) for c in self._compiled())  # noqa: S307 (trusted benchmark data)

    def _compiled(self) -> list[Any]:
        if not hasattr(self, "_code"):
            self._code = [compile(c, "<constraint>", "eval") for c in self.constraints]
        return self._code

    def key(self, config: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(tuple(config[p.name]) if p.kind == "perm" else config[p.name] for p in self.params)

    def measure(self, config: dict[str, Any]) -> float | None:
        raise NotImplementedError

    def score(self, best: float | None) -> float:
        if best is None:
            return math.inf
        return best if self.score_by_value else best / self.optimum

    def spec(self) -> dict[str, Any]:
        raise NotImplementedError


class TableProblem(Problem):
    """A benchmark-hub space: T1 parameters and Conditions, T4 results (failures and gaps are failures)."""

    def __init__(self, bench: str, device: str) -> None:
        self.name = f"{bench.removesuffix('_milo')}.{device}"
        self.bench, self.device = bench, device
        self.t1_path = HUB / f"{bench}.T1.json"
        self.t4_path = HUB / f"{bench}.{device}.T4.json.gz"
        self.params, self.constraints = _t1_params(json.loads(self.t1_path.read_text()))
        with gzip.open(self.t4_path, "rt") as f:
            results = json.load(f)["results"]
        self.table: dict[tuple[Any, ...], float | None] = {}
        for r in results:
            k = tuple(r["configuration"][p.name] for p in self.params)
            v = next((m["value"] for m in r["measurements"] if m["name"] == "time"), None)
            ok = r.get("invalidity") == "correct" and isinstance(v, int | float)
            self.table[k] = float(v) if ok else None
        self.optimum = min(v for v in self.table.values() if v is not None)
        self.raw_t4 = results

    def measure(self, config: dict[str, Any]) -> float | None:
        return self.table.get(self.key(config))

    def valid_keys(self) -> list[tuple[Any, ...]]:
        """All configurations that satisfy the declared constraints (enumerated)."""
        out = []
        names = [p.name for p in self.params]
        codes = self._compiled()
        for combo in itertools.product(*[p.values for p in self.params]):
            env = dict(zip(names, combo, strict=True))
            if all(eval(c, _SAFE, env) for c in codes):  # noqa: S307
                out.append(combo)
        return out

    def spec(self) -> dict[str, Any]:
        return {"kind": "table", "bench": self.bench, "device": self.device}


class KTTableProblem(TableProblem):
    """A Kernel Tuner cache file (``*.kt.json.gz``) with its T1 file for the parameters and restrictions.

    A cache entry whose ``time`` is a number is a measurement; a string (``CompilationFailedConfig``,
    ``RuntimeFailedConfig``) is a failure, and so is a valid configuration the cache does not hold
    (the same rule as for T4 gaps). The benchmark reads the files itself so that it does not depend on
    the product's loader.
    """

    def __init__(self, bench: str, device: str) -> None:  # noqa: D107 (the class says it)
        self.name = f"{bench}.{device}"
        self.bench, self.device = bench, device
        self.t1_path = HUB / f"{bench}.T1.json"
        self.kt_path = HUB / f"{bench}.{device}.kt.json.gz"
        self.params, self.constraints = _t1_params(json.loads(self.t1_path.read_text()))
        with gzip.open(self.kt_path, "rt") as f:
            self.kt_doc: dict[str, Any] = json.load(f)
        keys = self.kt_doc["tune_params_keys"]
        names = [p.name for p in self.params]
        if sorted(keys) != sorted(names):
            raise ValueError(f"{self.kt_path.name}: parameters {keys} do not match the T1 file's {names}")
        self.table = {}
        for entry in self.kt_doc["cache"].values():
            t = entry["time"]
            ok = isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
            self.table[tuple(entry[n] for n in names)] = float(t) if ok else None
        self.optimum = min(v for v in self.table.values() if v is not None)
        self.raw_t4 = []

    def spec(self) -> dict[str, Any]:
        return {"kind": "table", "format": "kt", "bench": self.bench, "device": self.device}


class Rosenbrock(Problem):
    """OpenTuner's Rosenbrock example: 2-D on [-1000, 1000]^2; scored by its best value (optimum 0)."""

    default_budget_max = 300
    score_by_value = True

    def __init__(self, dim: int = 2, lo: float = -1000.0, hi: float = 1000.0) -> None:
        self.name = f"rosenbrock{dim}d"
        self.dim, self.lo, self.hi = dim, lo, hi
        self.params = [Param(f"x{i}", "float", lo=lo, hi=hi) for i in range(dim)]
        self.constraints = []
        self.optimum = 0.0

    def measure(self, config: dict[str, Any]) -> float | None:
        x = [float(config[f"x{i}"]) for i in range(self.dim)]
        return float(sum(100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(self.dim - 1)))

    def spec(self) -> dict[str, Any]:
        return {"kind": "rosenbrock", "dim": self.dim, "lo": self.lo, "hi": self.hi}


def _tour_length(order: tuple[int, ...] | list[int], dist: np.ndarray) -> float:
    idx = np.asarray(order)
    return float(dist[idx, np.roll(idx, -1)].sum())


def _two_opt(order: list[int], dist: np.ndarray) -> list[int]:
    n = len(order)
    improved = True
    while improved:
        improved = False
        for i in range(n - 1):
            for j in range(i + 2, n if i else n - 1):
                a, b, c, d = order[i], order[i + 1], order[j], order[(j + 1) % n]
                if dist[a, c] + dist[b, d] < dist[a, b] + dist[c, d] - 1e-9:
                    order[i + 1 : j + 1] = reversed(order[i + 1 : j + 1])
                    improved = True
    return order


class TSP(Problem):
    """A symmetric Euclidean TSP instance (TSPLIB EUC_2D rounding), generated from a seed.

    The tour is a permutation of all cities. The optimum is exact (Held-Karp) for up to 12 cities and
    the best of 2000 two-opt descents (a best known value) above that.
    """

    def __init__(self, n: int, seed: int) -> None:
        self.name = f"tsp{n}"
        self.n, self.seed = n, seed
        rng = np.random.default_rng(seed)
        self.coords = rng.integers(0, 1000, size=(n, 2))
        diff = self.coords[:, None, :] - self.coords[None, :, :]
        self.dist = np.floor(np.sqrt((diff**2).sum(-1)) + 0.5)
        self.params = [Param("tour", "perm", values=list(range(n)))]
        self.constraints = []
        self.optimum = self._held_karp() if n <= 12 else self._best_known()

    def _held_karp(self) -> float:
        n, d = self.n, self.dist
        best: dict[tuple[int, int], float] = {}
        for k in range(1, n):
            best[(1 << k, k)] = d[0, k]
        for size in range(2, n):
            for subset in itertools.combinations(range(1, n), size):
                bits = sum(1 << b for b in subset)
                for k in subset:
                    prev = bits & ~(1 << k)
                    best[(bits, k)] = min(best[(prev, m)] + d[m, k] for m in subset if m != k)
        full = (1 << n) - 2
        return float(min(best[(full, k)] + d[k, 0] for k in range(1, n)))

    def _best_known(self) -> float:
        cache = ROOT / "benchmarks" / "results" / "quality_tsp_best_known.json"
        key = f"{self.n}-{self.seed}"
        known = json.loads(cache.read_text()) if cache.exists() else {}
        if key in known:
            return float(known[key])
        rng = np.random.default_rng(12345)
        best = math.inf
        for _ in range(2000):
            order = _two_opt(list(rng.permutation(self.n)), self.dist)
            best = min(best, _tour_length(order, self.dist))
        known[key] = best
        cache.write_text(json.dumps(known, indent=1, sort_keys=True))
        return best

    def measure(self, config: dict[str, Any]) -> float | None:
        return _tour_length(tuple(config["tour"]), self.dist)

    def spec(self) -> dict[str, Any]:
        return {"kind": "tsp", "n": self.n, "seed": self.seed}


class Mixed(Problem):
    """A synthetic mixed-type kernel model: ints, powers of two, a choice, an ordinal, a bool, a float
    and a loop-order permutation, with declared constraints and hidden failures.

    It is a product of per-parameter factors with interactions through ``algo`` (its preferred block
    size and tile differ), so its optimum is found by enumerating the discrete part (the float and the
    permutation terms reach their minimum 1 independently).
    """

    ALGOS = ("naive", "blocked", "recursive", "strassen")
    BASE = {"naive": 3.0, "blocked": 1.25, "recursive": 1.4, "strassen": 1.0}
    X0 = {"naive": 10, "blocked": 40, "recursive": 23, "strassen": 52}
    T0 = {"naive": 0, "blocked": 4, "recursive": 3, "strassen": 5}  # log2 of the best tile
    TARGET = (3, 0, 4, 1, 2)

    def __init__(self) -> None:
        self.name = "mixed"
        self.params = [
            Param("x", "int", lo=0, hi=63),
            Param("tile", "ordinal", values=[1, 2, 4, 8, 16, 32, 64]),
            Param("algo", "choice", values=list(self.ALGOS)),
            Param("unroll", "ordinal", values=[1, 2, 4, 8, 16]),
            Param("vec", "bool", values=[False, True]),
            Param("alpha", "float", lo=0.0, hi=1.0),
            Param("order", "perm", values=[0, 1, 2, 3, 4]),
        ]
        self.constraints = ["tile * unroll <= 256", "not (algo == 'strassen' and tile < 8)"]
        self.optimum = self._enumerate_optimum()

    def _discrete_factor(self, x: int, tile: int, algo: str, unroll: int, vec: bool) -> float | None:
        if vec and x % 7 == 3:  # hidden failure: misaligned vector loads
            return None
        if tile * x > 1500:  # hidden failure: out of shared memory
            return None
        f = self.BASE[algo]
        f *= 1.0 + ((x - self.X0[algo]) / 12.0) ** 2
        f *= 1.0 + 0.35 * abs(math.log2(tile) - self.T0[algo])
        f *= 1.0 + 0.12 * abs(math.log2(unroll) - (3 if vec else 1))
        f *= 0.8 if vec else 1.0
        return f

    def _enumerate_optimum(self) -> float:
        best = math.inf
        for x in range(64):
            for tile, algo, unroll, vec in itertools.product(
                self.params[1].values, self.ALGOS, self.params[3].values, (False, True)
            ):
                if not self.is_valid_discrete(tile, algo, unroll):
                    continue
                f = self._discrete_factor(x, tile, algo, unroll, vec)
                if f is not None:
                    best = min(best, f)
        return best

    def is_valid_discrete(self, tile: int, algo: str, unroll: int) -> bool:
        return tile * unroll <= 256 and not (algo == "strassen" and tile < 8)

    def measure(self, config: dict[str, Any]) -> float | None:
        f = self._discrete_factor(int(config["x"]), int(config["tile"]), str(config["algo"]),
                                  int(config["unroll"]), bool(config["vec"]))
        if f is None:
            return None
        alpha = float(config["alpha"])
        f *= 1.0 + 1.5 * (alpha - 0.62) ** 2
        order = list(config["order"])
        pos = {v: i for i, v in enumerate(order)}
        target_pos = [pos[v] for v in self.TARGET]
        inversions = sum(1 for i in range(5) for j in range(i + 1, 5) if target_pos[i] > target_pos[j])
        return f * (1.0 + 0.04 * inversions)

    def spec(self) -> dict[str, Any]:
        return {"kind": "mixed"}


DEV_SPACES = [(b, d) for b in ("convolution_milo", "dedispersion_milo") for d in ("A4000", "A6000", "W6600")]
# Kernel Tuner cache files (``<bench>.<device>.kt.json.gz``): the six newer development spaces.
KT_DEV_SPACES = [("gemm", "RTX_2080_Ti"), ("gemm", "RTX_Titan"), ("pnpoly", "RTX_3060_laptop"),
                 ("pnpoly", "RTX_Titan"), ("convolution", "RTX_3060_laptop"), ("convolution", "RTX_Titan")]


def all_problem_specs() -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = [{"kind": "table", "bench": b, "device": d} for b, d in DEV_SPACES]
    specs += [{"kind": "table", "format": "kt", "bench": b, "device": d} for b, d in KT_DEV_SPACES]
    specs.append({"kind": "rosenbrock", "dim": 2, "lo": -1000.0, "hi": 1000.0})
    specs += [{"kind": "tsp", "n": 10, "seed": 1}, {"kind": "tsp", "n": 20, "seed": 2}]
    specs.append({"kind": "mixed"})
    return specs


def make_problem(spec: dict[str, Any]) -> Problem:
    kind = spec["kind"]
    if kind == "table" and spec.get("format") == "kt":
        return KTTableProblem(spec["bench"], spec["device"])
    if kind == "table":
        return TableProblem(spec["bench"], spec["device"])
    if kind == "rosenbrock":
        return Rosenbrock(spec["dim"], spec["lo"], spec["hi"])
    if kind == "tsp":
        return TSP(spec["n"], spec["seed"])
    if kind == "mixed":
        return Mixed()
    raise ValueError(f"unknown problem kind {kind!r}")


class BudgetSpent(Exception):
    """Raised when a tool asks to measure beyond its budget (the runner stops the tool)."""


class Ledger:
    """Applies the counting rules and keeps the trace of one run.

    ``evaluate(config)`` returns ``(status, value)`` with status ``ok``, ``failed`` (counted),
    ``invalid`` or ``repeat`` (not counted). It raises :class:`BudgetSpent` when a new
    measurement would exceed the budget, and also when the tool has made ``max_asks`` proposals
    in all (50 per budget unit, the cap an independent harness used): a tool that only repeats itself
    (or proposes only invalid configurations) is stalled; its best so far stands. There is no shorter
    cut-off for proposals in a row without a new measurement (there was one, 300, and it ended every
    plain CMA-ES run after 42-84 measurements): unanswered proposals cost a peer nothing under these
    rules, so a peer may spend up to the cap finding its way out.
    """

    def __init__(self, problem: Problem, budget: int, max_asks: int | None = None) -> None:
        self.problem, self.budget = problem, budget
        self.max_asks = max_asks if max_asks is not None else 50 * budget
        self.values: list[float | None] = []
        self.seen: dict[tuple[Any, ...], float | None] = {}
        self.n_asked = self.n_invalid = self.n_repeat = self.n_since_new = 0
        self.max_idle_asks = self.max_asks
        self.measure_s = 0.0
        self.started = time.perf_counter()
        self.stalled = False

    def evaluate(self, config: dict[str, Any]) -> tuple[str, float | None]:
        t0 = time.perf_counter()
        try:
            if len(self.values) >= self.budget:
                raise BudgetSpent()
            if self.n_asked >= self.max_asks or self.n_since_new >= self.max_idle_asks:
                self.stalled = True
                raise BudgetSpent()
            self.n_asked += 1
            self.n_since_new += 1
            if not self.problem.is_valid(config):
                self.n_invalid += 1
                return "invalid", None
            key = self.problem.key(config)
            if key in self.seen:
                self.n_repeat += 1
                v = self.seen[key]
                return ("ok" if v is not None else "failed"), v
            v = self.problem.measure(config)
            self.n_since_new = 0
            self.values.append(v)
            self.seen[key] = v
            return ("ok" if v is not None else "failed"), v
        finally:
            self.measure_s += time.perf_counter() - t0

    @property
    def done(self) -> bool:
        return len(self.values) >= self.budget

    def record(self, tool: str, seed: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        wall = time.perf_counter() - self.started
        rec = {
            "problem": self.problem.name,
            "tool": tool,
            "seed": seed,
            "values": self.values,
            "n_asked": self.n_asked,
            "n_invalid": self.n_invalid,
            "n_repeat": self.n_repeat,
            "deciding_s": max(wall - self.measure_s, 0.0),
            "stalled": self.stalled,
        }
        extra = dict(extra or {})
        if "deciding_s_override" in extra:  # the tool ran its own loop; its wall time is measured outside
            rec["deciding_s"] = extra.pop("deciding_s_override")
        rec.update(extra)
        return rec


def scores_after(
    problem: Problem, values: list[float | None], budgets: Sequence[int] = BUDGETS
) -> list[float]:
    """``problem.score`` of the best of the first ``b`` measured values (failures are None), per budget."""
    out = []
    for b in budgets:
        measured = [v for v in values[:b] if v is not None]
        out.append(problem.score(min(measured) if measured else None))
    return out


def parse_seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += list(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out
