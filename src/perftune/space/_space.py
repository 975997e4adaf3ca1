"""Space: named parameters, ``when=`` activity, constraints, and valid-configuration operators.

Example:
    >>> import numpy as np
    >>> from perftune.space import Bool, Int, Pow2, Space
    >>> space = Space(
    ...     {"block_x": Pow2(1, 1024), "block_y": Pow2(1, 1024),
    ...      "unroll": Bool(), "factor": Int(2, 8, when="unroll")},
    ...     constraints=["32 <= block_x * block_y <= 1024"],
    ... )
    >>> configs = space.sample(np.random.default_rng(0), n=100)
    >>> all(space.is_valid(c) for c in configs)
    True
    >>> space.is_valid({"block_x": 64, "block_y": 64, "unroll": False})
    False
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from perftune.errors import ExpressionError, SpaceError, UnsatisfiableError
from perftune.space._config import Config
from perftune.space._constraints import (
    CallableConstraint,
    Constraint,
    ConstraintFn,
    ConstraintKeyError,
    checks_hold,
    guard,
    suggest,
    unknown_name,
)
from perftune.space._expression import Expression
from perftune.space._params import Param, parameter_from_dict
from perftune.space._solver import ABSENT, EXHAUSTIVE_VALUES, SAMPLE_BUDGET, ConstraintSolver, hashable

__all__ = ["Space"]

# A finite space with constraints is enumerated once (lazily) and then sampled from its valid
# configurations when its (pruned) Cartesian product is at most ENUMERATE_LIMIT, or when an attempt
# within ENUMERATE_BUDGET candidate checks finds at most ENUMERATE_LIMIT valid configurations.
ENUMERATE_LIMIT = 50_000
ENUMERATE_BUDGET = 100_000
# Counting valid configurations by enumeration is done up to this Cartesian product.
COUNT_LIMIT = 1_000_000
# When sampling finds nothing, the valid configurations are enumerated within this many candidate checks
# (once per space): all of them when the enumeration ends within it, else those it found.
FALLBACK_ENUMERATE_BUDGET = 2_000_000
# Candidates tried per repair before giving up (per sampled configuration: SAMPLE_BUDGET).
REPAIR_BUDGET = 2_000
# Restarts of the randomized depth-first search per sampled configuration (budget shared).
SAMPLE_RESTARTS = 10

_ABSENT = ABSENT


def _when_fn(p: Param) -> ConstraintFn | None:
    return p.when._fn if p.when is not None else None


class Space:
    """A search space: named parameters, optional ``when=`` conditions and constraints.

    :meth:`is_valid` is *the* validity check: exactly the active parameters are present, each value
    is in its parameter's domain, and every constraint holds (a constraint that reads an inactive
    parameter counts as satisfied). Sampling, repair, mutation, neighbours and crossover return valid
    configurations only.

    Args:
        params: Parameter name -> parameter. The parameters are copied; ``space.params`` holds the
            copies, with ``name`` set.
        constraints: Expression strings over parameter names (Python syntax, see
            :class:`~perftune.space.Expression`) or callables ``f(config) -> bool``.

    Raises:
        SpaceError: A bad parameter, a ``when=`` or constraint naming an unknown parameter, or a
            cycle among ``when=`` conditions.

    Example:
        >>> from perftune.space import Choice, Int, Space
        >>> s = Space({"algo": Choice(["quick", "merge"]), "cutoff": Int(4, 64, when="algo == 'merge'")})
        >>> s.default()
        Config({'algo': 'quick'})
        >>> s.why_invalid({"algo": "quick", "cutoff": 8})
        "parameter 'cutoff' is present but inactive (when: algo == 'merge')"
    """

    def __init__(
        self,
        params: Mapping[str, Param],
        constraints: Sequence[str | Expression | Callable[[Config], Any]] = (),
    ) -> None:
        if not isinstance(params, Mapping):
            raise SpaceError(f"Space: params must be a dict name -> parameter, got {type(params).__name__}")
        own: dict[str, Param] = {}
        for name, p in params.items():
            if not isinstance(name, str) or not name:
                raise SpaceError(f"Space: parameter names must be non-empty strings, got {name!r}")
            if not isinstance(p, Param):
                raise SpaceError(
                    f"parameter {name!r}: expected a parameter such as Int(...) or Choice([...]), got {p!r}"
                )
            q = copy.copy(p)
            q.name = name
            own[name] = q
        if isinstance(constraints, str | Expression) or callable(constraints):
            constraints = [constraints]
        self.params: dict[str, Param] = own
        self.names: list[str] = list(own)
        self._constraint_sources: list[Any] = list(constraints)
        self._build()

    # -- derived state (rebuilt after unpickling: closures do not pickle) ---------------------------
    def _build(self) -> None:
        params = self.params
        names = self.names
        for name, p in params.items():
            if p.when is not None:
                for dep in sorted(p.when.names):
                    if dep == name:
                        raise ExpressionError(f"parameter {name!r}: when={p.when.text!r} refers to itself")
                    if dep not in params:
                        raise ExpressionError(
                            f"parameter {name!r}: when={p.when.text!r} names unknown parameter {dep!r}"
                            f"{unknown_name(dep, names)}"
                        )
        self._constraints = [Constraint(c, names) for c in self._constraint_sources]
        conditional = {n for n, p in params.items() if p.when is not None}
        for c in self._constraints:
            if c.names is not None and c.names & conditional:
                c.fn = guard(c.fn, tuple(sorted(c.names & conditional)))
        self._has_when = any(p.when is not None for p in params.values())

        # Activity order: a parameter comes after every parameter its `when` reads (stable).
        order: list[str] = []
        placed: set[str] = set()
        pending = list(names)
        while pending:
            progress = False
            for name in list(pending):
                w = params[name].when
                if w is None or w.names <= placed:
                    order.append(name)
                    placed.add(name)
                    pending.remove(name)
                    progress = True
            if not progress:
                raise SpaceError(
                    f"Space: the when= conditions of {pending!r} depend on each other in a cycle"
                )
        self._activity_order = order
        self._activity = [(n, params[n], _when_fn(params[n])) for n in order]
        self._contains = [(n, params[n].contains) for n in names]
        self._checks = [c.fn for c in self._constraints]
        # Constraints to re-check when one parameter changes (callables read anything).
        self._checks_of: dict[str, list[ConstraintFn]] = {
            n: [c.fn for c in self._constraints if c.names is None or n in c.names] for n in names
        }
        # Parameters whose change can switch another parameter on or off, and for each of them the
        # parameters whose activity may follow (transitively, in activity order).
        self._controls = frozenset(n for p in params.values() if p.when is not None for n in p.when.names)
        self._position = {n: i for i, n in enumerate(order)}
        direct: dict[str, set[str]] = {}
        for n, p in params.items():
            for dep in p.when.names if p.when is not None else ():
                direct.setdefault(dep, set()).add(n)
        self._dependents: dict[str, tuple[tuple[str, Param, ConstraintFn], ...]] = {}
        for n in self._controls:
            seen: set[str] = set()
            stack = [n]
            while stack:
                for d in direct.get(stack.pop(), ()):
                    if d not in seen:
                        seen.add(d)
                        stack.append(d)
            self._dependents[n] = tuple(
                (d, params[d], params[d].when._fn)  # type: ignore[union-attr]
                for d in sorted(seen, key=self._position.__getitem__)
            )

        # Encoding layout.
        self.slices: dict[str, slice] = {}
        start = 0
        for name in names:
            width = params[name].n_dims
            self.slices[name] = slice(start, start + width)
            start += width
        self.n_dims: int = start
        self._default_enc = {n: params[n].encode(params[n].default_value()).tolist() for n in names}
        self._encoders = [(n, params[n], getattr(params[n], "encode1", None)) for n in names]

        # Counting some domains costs (a Schedule's orders): the product is computed on first use.
        self._finite = all(params[n].is_finite() for n in names)
        self._product_value: int | None = None
        self._solver = ConstraintSolver(params, names, order, self._constraints)
        self._enumerated: list[Config] | None = None
        self._cumulative: np.ndarray | None = None
        self._enumeration_failed = False
        # Valid configurations found by the fallback enumeration when it ran out of work (None: not run).
        self._pool: list[Config] | None = None
        self._count: int | None = None

    @property
    def _product(self) -> int | None:
        """Number of combinations of the parameters' values (None if a domain is infinite)."""
        if self._product_value is None and self._finite:
            self._product_value = math.prod(self.params[n].cardinality() or 0 for n in self.names)
        return self._product_value

    def __getstate__(self) -> dict[str, Any]:
        return {"params": self.params, "names": self.names, "constraints": self._constraint_sources}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.params = state["params"]
        self.names = state["names"]
        self._constraint_sources = state["constraints"]
        self._build()

    def __repr__(self) -> str:
        texts = [c.source if isinstance(c.source, str) else c.label for c in self._constraints]
        cons = f", constraints={texts!r}"
        return f"Space({self.params!r}{cons if self._constraints else ''})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Space):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        # Equal spaces have equal fingerprints; computed once (a space does not change).
        h = self.__dict__.get("_hash")
        if h is None:
            h = self._hash = hash(self.fingerprint())
        return h

    @property
    def constraints(self) -> list[str | Callable[[Config], Any]]:
        """The constraints as given (expression texts or callables)."""
        return [c.source for c in self._constraints]

    # -- validity --------------------------------------------------------------------------------
    def _data(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if type(config) is Config:
            return config._data
        return Config(config)._data

    def _check_constraints(self, data: dict[str, Any]) -> bool:
        for fn in self._checks:
            try:
                if not fn(data):
                    return False
            except KeyError:
                continue  # reads an inactive parameter: satisfied
            except ConstraintKeyError:
                raise
            except Exception:
                return False
        return True

    def _active(self, fn: ConstraintFn, data: dict[str, Any]) -> bool:
        try:
            return bool(fn(data))
        except Exception:  # reads an inactive parameter, or cannot be computed: inactive
            return False

    def is_valid(self, config: Mapping[str, Any]) -> bool:
        """True when ``config`` is a valid configuration of this space (THE validity check)."""
        data = config._data if type(config) is Config else self._data(config)
        if not self._has_when:
            if len(data) != len(self._contains):
                return False
            for name, contains in self._contains:
                if name not in data or not contains(data[name]):
                    return False
        else:
            n_present = 0
            for name, p, when in self._activity:
                present = name in data
                if when is not None:
                    try:
                        active = bool(when(data))
                    except Exception:
                        active = False
                    if active != present:
                        return False
                elif not present:
                    return False
                if present:
                    n_present += 1
                    if not p.contains(data[name]):
                        return False
            if n_present != len(data):
                return False
        return checks_hold(self._checks, data)

    def why_invalid(self, config: Mapping[str, Any]) -> str | None:
        """Why ``config`` is not valid, in words; None when it is valid."""
        data = self._data(config)
        for name in data:
            if name not in self.params:
                return f"unknown parameter {name!r}{suggest(name, self.names)}"
        for name, p, when in self._activity:
            present = name in data
            active = True if when is None else self._active(when, data)
            if active and not present:
                return f"parameter {name!r} is missing"
            if present and not active:
                return f"parameter {name!r} is present but inactive (when: {p.when.text})"  # type: ignore[union-attr]
            if present and not p.contains(data[name]):
                return f"parameter {name!r}: {p.why_not(data[name])}"
        for c in self._constraints:
            try:
                ok = c.fn(data)
            except KeyError:
                continue
            except ConstraintKeyError:
                raise
            except Exception as e:
                return f"constraint {c.label} cannot be evaluated: {type(e).__name__}: {e}"
            if not ok:
                return f"constraint {c.label} is violated"
        return None

    # -- construction helpers ------------------------------------------------------------------------
    def _ordered(self, values: dict[str, Any]) -> Config:
        return Config._trusted({n: values[n] for n in self.names if n in values})

    def default(self) -> Config:
        """The default configuration: each active parameter at its default (may be invalid)."""
        out: dict[str, Any] = {}
        for name, p, when in self._activity:
            if when is None or self._active(when, out):
                out[name] = p.default_value()
        return self._ordered(out)

    def _complete(self, data: Mapping[str, Any], rng: np.random.Generator | None) -> dict[str, Any]:
        """Fix activity: drop inactive parameters, give newly active or illegal ones a legal value."""
        out: dict[str, Any] = {}
        for name, p, when in self._activity:
            if when is not None and not self._active(when, out):
                continue
            v = data.get(name, _ABSENT)
            if v is _ABSENT:
                out[name] = p.default_value() if rng is None else p.sample(rng)
            elif p.contains(v):
                out[name] = v
            else:
                out[name] = p.nearest(v)
        return out

    # -- sampling ----------------------------------------------------------------------------------
    def _domains(self) -> dict[str, list[Any]]:
        return self._solver.domains()

    def _search(
        self,
        rng: np.random.Generator | None,
        prefer: Mapping[str, Any] | None = None,
        budget: int | None = SAMPLE_BUDGET,
        pinned: frozenset[str] = frozenset(),
        stats: dict[str, int] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Complete valid assignments from the constraint solver (see :meth:`ConstraintSolver.search`)."""
        return self._solver.search(rng, prefer, budget, pinned, stats)

    def _enumeration(self) -> list[Config] | None:
        """All valid configurations, for finite spaces small enough (computed once)."""
        if self._enumerated is None:
            if not self._finite:
                return None
            domains = self._domains()
            size = math.prod(
                len(domains[n]) if n in domains else (self.params[n].cardinality() or 0) for n in self.names
            )
            if size <= ENUMERATE_LIMIT:
                found = [self._ordered(v) for v in self._search(None, budget=None)]
            else:
                if self._enumeration_failed or self._estimated_valid() > 2 * ENUMERATE_LIMIT:
                    self._enumeration_failed = True
                    return None
                stats: dict[str, int] = {}
                found = []
                for v in self._search(None, budget=ENUMERATE_BUDGET, stats=stats):
                    found.append(self._ordered(v))
                    if len(found) > ENUMERATE_LIMIT:
                        break
                if stats.get("budget_hit") or len(found) > ENUMERATE_LIMIT:
                    self._enumeration_failed = True
                    return None
            self._set_enumerated(found)
        return self._enumerated

    def _set_enumerated(self, found: list[Config]) -> None:
        """Keep every valid configuration, for sampling, counting and enumerating."""
        self._enumerated = found
        self._enumeration_failed = False
        # Keep each parameter's own distribution (log-uniform...): weight every valid
        # configuration by its probability under independent sampling.
        weighted = [n for n in self.names if self.params[n].uniform_mass is False]
        if weighted and found:
            w = np.ones(len(found))
            for n in weighted:
                p = self.params[n]
                w *= [p.mass(c[n]) if n in c else 1.0 for c in found]
            self._cumulative = np.cumsum(w)

    def _fallback_pool(self) -> tuple[list[Config], int]:
        """Valid configurations for a space that sampling found none of, and the candidate checks spent.

        The first call enumerates a space of at most :data:`FALLBACK_ENUMERATE_BUDGET` combinations (of
        its pruned domains) within as many candidate checks: when that ends, the valid configurations are
        all known (and sampled as :meth:`sample` does a small space's); when it does not, those found are
        kept to sample from. A larger space is not enumerated (an unsatisfiable one fails as fast as
        before). Later calls return what the first found, at no cost.
        """
        if self._enumerated is not None:
            return self._enumerated, 0
        if self._pool is not None or not self._finite:
            return self._pool or [], 0
        domains = self._domains()
        size = math.prod(len(domains[n]) if n in domains else (self.params[n].cardinality() or 0)
                         for n in self.names)
        if size > FALLBACK_ENUMERATE_BUDGET:
            self._pool = []  # too many combinations to go through: sampling's failure stands
            return [], 0
        stats: dict[str, int] = {}
        found: list[Config] = []
        for v in self._search(None, budget=FALLBACK_ENUMERATE_BUDGET, stats=stats):
            found.append(self._ordered(v))
            if len(found) > ENUMERATE_LIMIT:
                break
        if not stats.get("budget_hit") and len(found) <= ENUMERATE_LIMIT:
            self._set_enumerated(found)
        else:
            self._pool = found
        return found, stats.get("evals", 0)

    def _estimated_valid(self, n_draws: int = 256) -> float:
        """Rough number of valid configurations: product times the valid fraction of plain draws."""
        if self._product is None:
            return math.inf
        rng = np.random.default_rng(0)  # fixed: the estimate must not disturb the caller's stream
        ok = sum(self._check_constraints(self._sample_direct(rng)) for _ in range(n_draws))
        return (self._product * ok) // n_draws  # integers: products can exceed any float

    def _sample_direct(self, rng: np.random.Generator) -> dict[str, Any]:
        # One numpy call for all scalar parameters: decode(uniform) is their sampling distribution.
        u = rng.random(len(self._activity)).tolist()
        out: dict[str, Any] = {}
        for k, (name, p, when) in enumerate(self._activity):
            if when is None or self._active(when, out):
                out[name] = p.decode((u[k],)) if p.decode_is_sample else p.sample(rng)
        return out

    def sample(self, rng: np.random.Generator | int | None = None, n: int = 1) -> list[Config]:
        """``n`` random valid configurations.

        Without constraints, each active parameter is sampled directly. A small finite space with
        constraints is enumerated once and sampled uniformly from its valid configurations; a larger
        one is sampled constructively (parameters assigned in an order that checks each constraint as
        soon as its names are known, with backtracking).

        Raises:
            UnsatisfiableError: No valid configuration was found within a bounded effort.
        """
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        out: list[Config] = []
        if not self._checks:
            for _ in range(n):
                out.append(self._ordered(self._sample_direct(rng)))
            return out
        self._domains()
        if self._solver.unsat is not None:
            raise UnsatisfiableError(
                f"{self._solver.unsat}: constraints may be unsatisfiable{self._raised()}")
        valid = self._enumeration()
        if valid is not None:
            if not valid:
                raise UnsatisfiableError(
                    f"no valid configuration exists among all {self._product} combinations: "
                    f"constraints may be unsatisfiable{self._raised()}"
                )
            if self._cumulative is not None:
                cum = self._cumulative
                idx = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), len(valid) - 1)
            else:
                idx = rng.integers(len(valid), size=n)
            return [valid[int(i)] for i in idx]
        for _ in range(n):
            if self._pool:  # sampling found nothing before: what the fallback enumeration found
                out.append(self._pool[int(rng.integers(len(self._pool)))])
                continue
            spent: list[int] = []
            try:
                out.append(self._sample_one(rng, spent))
            except UnsatisfiableError:
                pool, n_checked = self._fallback_pool()
                if not pool:
                    raise UnsatisfiableError(
                        f"no valid configuration found after {sum(spent) + n_checked} tries: "
                        f"constraints may be unsatisfiable{self._raised()}") from None
                if self._enumerated is not None:
                    return out + self.sample(rng, n - len(out))
                out.append(pool[int(rng.integers(len(pool)))])
        return out

    def _sample_one(self, rng: np.random.Generator, spent: list[int] | None = None) -> Config:
        # A couple of plain draws first: cheap and unbiased when most of the space is valid.
        for _ in range(2):
            data = self._sample_direct(rng)
            if self._check_constraints(data):
                return self._ordered(data)
        n_checked = 2
        for _ in range(SAMPLE_RESTARTS):
            stats: dict[str, int] = {}
            found = next(self._search(rng, budget=SAMPLE_BUDGET // SAMPLE_RESTARTS, stats=stats), None)
            if found is not None:
                return self._ordered(found)
            n_checked += stats.get("evals", 0)
        if spent is not None:
            spent.append(n_checked)
        raise UnsatisfiableError(
            f"no valid configuration found after {n_checked} tries: constraints may be unsatisfiable"
            f"{self._raised()}"
        )

    def _raised(self) -> str:
        """What the callable constraints raised (a bug in one reads as "unsatisfiable" otherwise)."""
        notes = [f"; constraint {c.fn.label} raised {c.fn.error}" for c in self._constraints
                 if isinstance(c.fn, CallableConstraint) and c.fn.error is not None]
        return "".join(notes)

    # -- repair and operators -------------------------------------------------------------------------
    def repair(
        self, config: Mapping[str, Any], rng: np.random.Generator | int | None = None
    ) -> Config | None:
        """A valid configuration close to ``config``, or None if none was found with bounded effort.

        Values are first made legal (clipped, activity fixed); then a parameter of a violated
        constraint is resampled a few times; finally a depth-first search in plan order keeps as
        many of the values as it can.
        """
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        return self._repair(dict(config), rng)

    def _repair(
        self,
        raw: dict[str, Any],
        rng: np.random.Generator,
        pinned: frozenset[str] = frozenset(),
        budget: int = REPAIR_BUDGET,
    ) -> Config | None:
        data = self._complete(raw, rng)
        if self._check_constraints(data):
            return self._ordered(data)
        self._domains()
        if self._solver.unsat is not None:
            return None
        violated = self._violated_names(data)
        fixed = self._repair_one(data, rng, pinned, list(dict.fromkeys(violated)))
        if fixed is not None:
            return fixed
        # Local repair: resample one parameter named by a violated constraint (a name read by several of
        # them is drawn more often).
        names = [n for n in violated if n not in pinned]
        for _ in range(3):
            if not names:
                break
            trial = dict(data)
            name = names[int(rng.integers(len(names)))]
            trial[name] = self.params[name].sample(rng)
            if name in self._controls:
                trial = self._complete(trial, rng)
            if self._check_constraints(trial):
                return self._ordered(trial)
        found = next(self._search(rng, prefer=data, budget=budget, pinned=pinned), None)
        if found is not None:
            return self._ordered(found)
        if pinned:
            return None
        valid = self._enumeration()
        if valid:
            return self._nearest_enumerated(data, valid, rng)
        return None

    def _violated_names(self, data: Mapping[str, Any]) -> list[str]:
        """The names each constraint that ``data`` breaks reads, constraint after constraint (a name once per
        constraint it is in), each in declaration order: iterating a frozenset would depend on
        PYTHONHASHSEED. A constraint reading an absent name holds; one that raises is broken."""
        names: list[str] = []
        for c in self._constraints:
            try:
                ok = c.fn(data)
            except KeyError:
                continue
            except ConstraintKeyError:
                raise
            except Exception:
                ok = False
            if not ok:
                names.extend(n for n in data if c.names is None or n in c.names)
        return names

    def _repair_one(
        self, data: dict[str, Any], rng: np.random.Generator, pinned: frozenset[str], names: list[str]
    ) -> Config | None:
        """A valid configuration that differs from ``data`` in one parameter of a violated constraint, one
        with too many values for the search to try them all: its equalities solved for it (``by = 1024 /
        bx``). One of the fixes found, at random; None when there is none within REPAIR_BUDGET checks.
        (A parameter of a few values is left to the search, which tries each of them.) ``names``: those of
        the violated constraints, each once."""
        domains = self._domains()
        fixes: list[tuple[str, Any]] = []
        work = 0
        for name in names:
            if name in pinned or name in self._controls:
                continue  # a controller's change switches other parameters: the search below handles it
            p = self.params[name]
            dom = domains.get(name)
            if dom is not None and len(dom) <= EXHAUSTIVE_VALUES:
                continue
            others = {k: v for k, v in data.items() if k != name}
            solved, spent = self._solver.solve(name, p, others, dom, near=data[name])
            work += spent
            for v in solved or ():
                if work >= REPAIR_BUDGET:
                    break
                if v == data[name] or not p.contains(v):
                    continue
                work += 1
                trial = dict(data)
                trial[name] = v
                if self._check_constraints(trial):
                    fixes.append((name, v))
        if not fixes:
            return None
        name, v = fixes[int(rng.integers(len(fixes)))]
        return self._ordered({**data, name: v})

    def _nearest_enumerated(
        self, data: dict[str, Any], valid: list[Config], rng: np.random.Generator
    ) -> Config:
        best: list[Config] = []
        best_d = None
        for c in valid:
            d = sum(1 for n in self.names if c.get(n, _ABSENT) != data.get(n, _ABSENT))
            if best_d is None or d < best_d:
                best, best_d = [c], d
            elif d == best_d:
                best.append(c)
        return best[int(rng.integers(len(best)))]

    def _follow(self, trial: dict[str, Any], changed: list[str], rng: np.random.Generator | None) -> bool:
        """Update the activity of the parameters that depend on ``changed`` (in place).

        Newly active parameters get their default (``rng`` None) or a random value; the names
        whose presence changed are appended to ``changed``. Returns True when any did.
        """
        dependents = [d for n in changed if n in self._controls for d in self._dependents[n]]
        if not dependents:
            return False
        if len(changed) > 1:
            dependents = sorted(dict.fromkeys(dependents), key=lambda d: self._position[d[0]])
        moved = False
        for name, p, when in dependents:
            try:
                active = bool(when(trial))
            except Exception:
                active = False
            if active and name not in trial:
                trial[name] = p.default_value() if rng is None else p.sample(rng)
            elif not active and name in trial:
                del trial[name]
            else:
                continue
            changed.append(name)
            moved = True
        return moved

    def _changed_ok(self, trial: dict[str, Any], changed: Sequence[str]) -> bool:
        """Validity of ``trial``: a valid configuration whose ``changed`` parameters got new legal values."""
        if len(changed) == 1:
            checks = self._checks_of[changed[0]]
        else:
            seen: set[int] = set()
            checks = []
            for n in changed:
                for fn in self._checks_of[n]:
                    if id(fn) not in seen:
                        seen.add(id(fn))
                        checks.append(fn)
        for fn in checks:
            try:
                if not fn(trial):
                    return False
            except KeyError:
                continue
            except ConstraintKeyError:
                raise
            except Exception:
                return False
        return True

    def mutate(
        self,
        config: Mapping[str, Any],
        rng: np.random.Generator | int | None = None,
        rate: float | None = None,
        scale: float = 0.1,
    ) -> Config:
        """A valid configuration near ``config``: each active parameter mutates with probability ``rate``.

        ``rate`` defaults to one over the number of active parameters (at least one always mutates);
        ``scale`` is the step size as a fraction of each parameter's range. When the mutated
        configuration breaks a constraint, the other parameters are adjusted (keeping the mutated
        values when possible).
        """
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        base = config._data if type(config) is Config else Config(config)._data
        base_ok = self.is_valid(Config._trusted(base))
        active = [n for n in self.names if n in base]
        if not active:
            return Config._trusted(base) if base_ok else self.sample(rng)[0]
        p_rate = rate if rate is not None else 1.0 / len(active)
        params = self.params
        trial: dict[str, Any] = dict(base)
        chosen: list[str] = []
        domain_sets = self._solver.domain_sets
        exact = self._solver.exact_names() if self._checks else frozenset()
        for _ in range(6):
            trial = dict(base)
            draws = rng.random(len(active) + 1).tolist()
            chosen = [n for n, u in zip(active, draws, strict=False) if u < p_rate]
            if not chosen:
                chosen = [active[int(draws[-1] * len(active))]]
            hopeless = False
            for name in chosen:
                v = params[name].mutate(base[name], rng, scale)
                if name in exact:
                    v = self._nearest_solution(name, v, trial)
                trial[name] = v
                dom = domain_sets.get(name)
                if dom is not None and hashable(v) not in dom:
                    hopeless = True  # pruned: in no valid configuration
            if hopeless or trial == base:
                continue
            if base_ok:
                changed = list(chosen)
                moved = self._has_when and self._follow(trial, changed, rng)
                if self._changed_ok(trial, changed):
                    return self._ordered(trial) if moved else Config._trusted(trial)
                continue
            trial = self._complete(trial, rng)
            if self.is_valid(Config._trusted(trial)):
                return self._ordered(trial)
        if self._checks and trial != base:
            # Keep the mutation, adjust the rest; failing that, adjust anything.
            for pinned in (frozenset(chosen), frozenset()):
                fixed = self._repair(
                    trial, rng, pinned=pinned, budget=REPAIR_BUDGET // 4 if pinned else REPAIR_BUDGET
                )
                if fixed is not None and fixed._data != base:
                    return fixed
        return self.sample(rng)[0]

    def _nearest_solution(self, name: str, value: Any, data: Mapping[str, Any]) -> Any:
        """The value next to ``value`` that solves the congruences or memberships of ``name`` (``n % 4096 ==
        0``: a random step of ``n`` would almost never keep it), given the other values of ``data``;
        ``value`` itself when there is none."""
        others = {k: v for k, v in data.items() if k != name}
        solved, _ = self._solver.solve(name, self.params[name], others, None, near=value)
        if not solved:
            return value
        try:
            return min(solved, key=lambda v: abs(v - value))
        except TypeError:  # not numbers: the first solution
            return solved[0]

    def neighbors(self, config: Mapping[str, Any]) -> list[Config]:
        """Valid configurations that differ from ``config`` in one parameter's neighbourhood move."""
        base = config._data if type(config) is Config else self._data(config)
        fast = self.is_valid(Config._trusted(base))
        out: list[Config] = []
        seen: set[Config] = set()
        for name in self.names:
            if name not in base:
                continue
            for v in self.params[name].neighbors(base[name]):
                trial = dict(base)
                trial[name] = v
                if fast:
                    # Only the constraints that read the changed parameters can change their verdict.
                    changed = [name]
                    moved = self._has_when and self._follow(trial, changed, None)
                    if self._changed_ok(trial, changed):
                        out.append(self._ordered(trial) if moved else Config._trusted(trial))
                    continue
                if self._has_when:
                    trial = self._complete(trial, None)
                c = self._ordered(trial)
                if c not in seen and c._data != base and self.is_valid(c):
                    seen.add(c)
                    out.append(c)
        return out

    def crossover(
        self, a: Mapping[str, Any], b: Mapping[str, Any], rng: np.random.Generator | int | None = None
    ) -> Config:
        """A valid child of ``a`` and ``b``: each parameter's own crossover, activity fixed, repaired."""
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        da, db = self._data(a), self._data(b)
        child: dict[str, Any] = {}
        for _ in range(3):
            child = {}
            for name in self.names:
                ina, inb = name in da, name in db
                if ina and inb:
                    child[name] = self.params[name].crossover(da[name], db[name], rng)
                elif ina or inb:
                    child[name] = da[name] if ina else db[name]
            if self._has_when:
                child = self._complete(child, rng)
            if self.is_valid(Config._trusted(child)):
                return self._ordered(child)
        fixed = self._repair(child, rng)
        if fixed is not None:
            return fixed
        pick = da if rng.random() < 0.5 else db
        return self._ordered(dict(pick)) if self.is_valid(pick) else self.sample(rng)[0]

    # -- encoding ------------------------------------------------------------------------------------
    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        """Position in ``[0, 1] ** n_dims``; inactive parameters encode as their default."""
        data = config._data if type(config) is Config else self._data(config)
        out: list[float] = []
        for name, p, encode1 in self._encoders:
            v = data.get(name, _ABSENT)
            if v is _ABSENT:
                out.extend(self._default_enc[name])
            elif encode1 is not None:
                out.append(encode1(v))
            else:
                out.extend(p.encode(v).tolist())
        return np.array(out, dtype=float)

    def decode(self, vec: Sequence[float] | np.ndarray) -> Config:
        """A configuration of legal values with activity fixed (constraints may fail: use repair)."""
        vec = np.asarray(vec, dtype=float)
        if vec.shape != (self.n_dims,):
            raise ValueError(f"expected a vector of {self.n_dims} numbers, got shape {vec.shape}")
        xs = vec.tolist()
        out: dict[str, Any] = {}
        slices = self.slices
        for name, p, when in self._activity:
            if when is None or self._active(when, out):
                sl = slices[name]
                out[name] = p.decode((xs[sl.start],) if p.n_dims == 1 else vec[sl])
        return self._ordered(out)

    # -- enumeration ---------------------------------------------------------------------------------
    def enumerate(self, limit: int | None = None) -> Iterator[Config]:
        """Every valid configuration of a finite space (at most ``limit`` of them).

        Raises:
            SpaceError: A parameter has infinitely many values.
        """
        for name in self.names:
            if self.params[name].cardinality() is None:
                raise SpaceError(
                    f"parameter {name!r} has infinitely many values: the space cannot be enumerated"
                )
        if limit is not None and limit <= 0:
            return
        source: Any = (
            self._enumerated
            if self._enumerated is not None
            else (self._ordered(v) for v in self._search(None, budget=None))
        )
        for count, c in enumerate(source, start=1):
            yield c
            if limit is not None and count >= limit:
                return

    def cardinality(self) -> int | None:
        """Number of valid configurations; None if the space is infinite.

        Exact without constraints and ``when=`` conditions, and whenever the Cartesian product is at
        most 1,000,000 (counted by enumeration, once). Beyond that, the product of the parameters'
        cardinalities, an upper bound.
        """
        if not self._finite:
            return None
        assert self._product is not None
        if not self._checks and not self._has_when:
            return self._product
        if self._count is None:
            if self._enumerated is not None:
                self._count = len(self._enumerated)
            elif self._product <= COUNT_LIMIT:
                self._count = sum(1 for _ in self._search(None, budget=None))
            else:
                self._count = self._product
        return self._count

    # -- serialization ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``{"params": {name: param.to_dict()}, "constraints": [...]}``.

        Callable constraints cannot be serialized; they appear as ``{"callable": "module.qualname"}``
        and :meth:`from_dict` refuses them.
        """
        cons: list[Any] = []
        for c in self._constraints:
            if isinstance(c.source, str):
                cons.append(c.source)
            else:
                fn = c.source
                cons.append(
                    {"callable": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"}
                )
        return {"params": {n: p.to_dict() for n, p in self.params.items()}, "constraints": cons}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Space:
        """Inverse of :meth:`to_dict`.

        Raises:
            SpaceError: A bad parameter or constraint, or a constraint that was a Python callable.
        """
        if not isinstance(d, Mapping) or "params" not in d:
            raise SpaceError("space: expected an object with 'params' (and optionally 'constraints')")
        raw_params = d["params"]
        if not isinstance(raw_params, Mapping):
            raise SpaceError("space: 'params' must be an object name -> parameter")
        params = {name: parameter_from_dict(pd, name=name) for name, pd in raw_params.items()}
        constraints: list[str] = []
        for i, c in enumerate(d.get("constraints", ()) or ()):
            if isinstance(c, str):
                constraints.append(c)
            elif isinstance(c, Mapping) and "callable" in c:
                raise SpaceError(
                    f"constraint #{i + 1} was the Python callable {c['callable']}: callables cannot be "
                    "rebuilt from a dict; pass it to Space(...) in Python or write it as an expression"
                )
            elif isinstance(c, Mapping) and isinstance(c.get("expression", c.get("Expression")), str):
                constraints.append(c.get("expression", c.get("Expression")))
            else:
                raise SpaceError(f"constraint #{i + 1}: expected an expression string, got {c!r}")
        return cls(params, constraints)

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of :meth:`to_dict` (same space, same fingerprint)."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()
