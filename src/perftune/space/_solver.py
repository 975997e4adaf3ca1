"""The constraint solver behind :class:`~perftune.space.Space`: it finds assignments that satisfy the
declared constraints.

Parameters are assigned in a *plan* order that checks each constraint as soon as the names it reads
are known; finite domains are pruned by arc consistency over small constraint tables; a depth-first
search with conflict-directed backjumping draws random solutions, and without a generator enumerates
them all in order. An equality (``bx * by == 1024``, ``a == b``, one ``==`` of an ``and``) whose other
names are assigned is solved for the last one over a large ordered domain by bisection (a few dozen
evaluations instead of a random hit among a million values); the checks then verify the solutions.
``Space`` owns the parameters, activity and operators and asks the solver for valid assignments.

Example:
    >>> import numpy as np
    >>> from perftune.space import Int, Space
    >>> space = Space({"a": Int(0, 9), "b": Int(0, 9)}, constraints=["a + b == 17"])
    >>> sorted(tuple(v.values()) for v in space._solver.search(None, budget=None))
    [(8, 9), (9, 8)]
"""

from __future__ import annotations

import ast
import functools
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from perftune.errors import ExpressionError
from perftune.space._base import Param
from perftune.space._constraints import Constraint, ConstraintFn, ConstraintKeyError, checks_hold
from perftune.space._expression import Expression
from perftune.space._params import Int, Pow2

__all__ = ["ABSENT", "SAMPLE_BUDGET", "ConstraintSolver", "hashable"]

# Candidates tried per sampled configuration before giving up.
SAMPLE_BUDGET = 20_000
# A parameter with at most this many values is tried exhaustively (in random order) when sampling.
EXHAUSTIVE_VALUES = 256
RANDOM_CANDIDATES = 24
# Domains of finite parameters up to this size are pruned by the constraints (arc consistency),
# one constraint at a time when the product of the domains it reads is at most PRUNE_LIMIT.
DOMAIN_LIMIT = 4096
PRUNE_LIMIT = 50_000
TABLE_WORK = 300_000

# Equalities are looked for in constraint texts of at most this many characters (a long membership
# test, as perftune.triton writes, is not re-parsed).
EQUATION_TEXT_LIMIT = 2_000

# A parameter with no value (inactive, or no preference); the end of a candidate iterator.
ABSENT = object()
_END = object()

_Allowed = tuple[tuple[Any, ...], frozenset[Any]]
_NONE_ALLOWED: _Allowed = ((), frozenset())
_Step = tuple[str, Param, ConstraintFn | None, list[ConstraintFn]]


class _Uniform:
    """Uniform numbers in [0, 1) drawn from a numpy Generator in batches (one call per 64)."""

    __slots__ = ("buf", "i", "rng")

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.buf: list[float] = []
        self.i = 0

    def __call__(self) -> float:
        i = self.i
        if i >= len(self.buf):
            self.buf = self.rng.random(64).tolist()
            i = 0
        self.i = i + 1
        return self.buf[i]


@functools.lru_cache(maxsize=512)
def _coprime_steps(n: int) -> tuple[int, ...]:
    return tuple(s for s in range(1, n) if math.gcd(s, n) == 1) or (1,)


def hashable(v: Any) -> Any:
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


class Equation(NamedTuple):
    """``lhs == rhs``, a constraint or a conjunct of one (``a % 8 == 0 and a * b == 1024``).

    A congruence ``var % modulus == remainder`` (neither side reading ``var`` otherwise) also keeps
    ``var``, ``modulus`` and ``remainder``, so that its solutions can be counted and drawn uniformly; a
    membership ``var in (a, b, c)`` keeps ``var`` and ``members`` (its ``lhs``/``rhs`` are None).
    """

    names: frozenset[str]
    lhs: ConstraintFn | None
    rhs: ConstraintFn | None
    var: str | None = None
    modulus: ConstraintFn | None = None
    remainder: ConstraintFn | None = None
    members: ConstraintFn | None = None


def _reads(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _congruence(lhs: ast.expr, rhs: ast.expr) -> tuple[str, ast.expr, ast.expr] | None:
    """``(var, modulus, remainder)`` when ``lhs == rhs`` is ``var % modulus == remainder`` (either way)."""
    for mod, other in ((lhs, rhs), (rhs, lhs)):
        if (isinstance(mod, ast.BinOp) and isinstance(mod.op, ast.Mod) and isinstance(mod.left, ast.Name)
                and not _reads(mod.right, mod.left.id) and not _reads(other, mod.left.id)):
            return mod.left.id, mod.right, other
    return None


def _membership(node: ast.Compare) -> Equation | None:
    """``var in (a, b, c)`` (a tuple, list or set of expressions that do not read ``var``)."""
    items = node.comparators[0]
    if not (isinstance(node.left, ast.Name) and isinstance(items, ast.Tuple | ast.List | ast.Set)):
        return None
    var = node.left.id
    if _reads(items, var):
        return None
    try:
        members = Expression(ast.unparse(ast.Tuple(elts=list(items.elts), ctx=ast.Load())))
    except (ExpressionError, RecursionError, ValueError):
        return None
    return Equation(members.names | {var}, None, None, var=var, members=members._fn)


def equations(text: str) -> list[Equation]:
    """The equalities a constraint text requires: itself, or the ``==`` conjuncts of an ``and``.

    Example:
        >>> [sorted(e.names) for e in equations("a > 0 and a * b == 1024")]
        [['a', 'b']]
    """
    if len(text) > EQUATION_TEXT_LIMIT:
        return []
    try:
        stack: list[ast.expr] = [ast.parse(text.strip(), mode="eval").body]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[Equation] = []
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            stack.extend(reversed(node.values))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
            try:
                lhs, rhs = Expression(ast.unparse(node.left)), Expression(ast.unparse(node.comparators[0]))
            except (ExpressionError, RecursionError, ValueError):
                continue
            if not lhs.names | rhs.names:
                continue
            equation = Equation(lhs.names | rhs.names, lhs._fn, rhs._fn)
            found = _congruence(node.left, node.comparators[0])
            if found is not None:
                try:
                    modulus, remainder = Expression(ast.unparse(found[1])), Expression(ast.unparse(found[2]))
                except (ExpressionError, RecursionError, ValueError):
                    pass
                else:
                    equation = equation._replace(var=found[0], modulus=modulus._fn, remainder=remainder._fn)
            out.append(equation)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
            member = _membership(node)
            if member is not None:
                out.append(member)
    return out


def _roots(residual: Callable[[int], Any], n: int) -> tuple[list[int] | None, int]:
    """Indices ``k`` in ``range(n)`` where ``residual(k) == 0``, found by bisection between the ends, and
    the evaluations spent.

    ``[]`` when no index makes it zero although it changes sign between the ends (a monotone residual
    then has no root), or keeps one sign there and is strictly monotone at three points between them
    (``bx * by - 1024`` for a ``bx`` above 1024). None when the ends and those points tell nothing
    (``a % 1000 - 7`` has one sign at both ends, and many roots).
    """
    d0, d1 = residual(0), residual(n - 1)
    found = [k for k, d in ((0, d0), (n - 1, d1)) if d == 0]
    n_evals = 2
    if found:
        return found, n_evals
    if (d0 < 0) == (d1 < 0):
        points = [d0, *(residual(n * q // 4) for q in (1, 2, 3)), d1]
        n_evals += 3
        pairs = list(itertools.pairwise(points))
        monotone = all(a < b for a, b in pairs) or all(a > b for a, b in pairs)
        return ([] if monotone and 0 not in points else None), n_evals
    lo, hi = 0, n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        dm = residual(mid)
        n_evals += 1
        if dm == 0:
            return [mid], n_evals
        if (dm < 0) == (d0 < 0):
            lo = mid
        else:
            hi = mid
    return [], n_evals


def _active(fn: ConstraintFn, data: Mapping[str, Any]) -> bool:
    try:
        return bool(fn(data))
    except Exception:  # reads an inactive parameter, or cannot be computed: inactive
        return False


class ConstraintSolver:
    """Valid assignments of a space's parameters under its constraints.

    Built once per space (and rebuilt after unpickling); the plan is fixed at construction, the
    pruned domains and constraint tables are computed on first use.

    Args:
        params: Parameter name -> parameter.
        names: The parameter names in declaration order.
        activity_order: The names ordered so that each comes after the parameters its ``when=`` reads.
        constraints: The space's constraints, already guarded against inactive parameters.

    Example:
        >>> from perftune.space import Int
        >>> from perftune.space._constraints import Constraint
        >>> params = {"a": Int(0, 3), "b": Int(0, 3)}
        >>> solver = ConstraintSolver(params, ["a", "b"], ["a", "b"], [Constraint("a > b + 1", ["a", "b"])])
        >>> [tuple(v.values()) for v in solver.search(None, budget=None)]
        [(2, 0), (3, 0), (3, 1)]
    """

    def __init__(
        self,
        params: Mapping[str, Param],
        names: Sequence[str],
        activity_order: Sequence[str],
        constraints: Sequence[Constraint],
    ) -> None:
        self.params = params
        self.names = list(names)
        self._activity_order = list(activity_order)
        self._constraints = list(constraints)
        self._checks = [c.fn for c in self._constraints]
        self.plan: list[_Step] = self._make_plan()
        self._conflict_cache: tuple[list[frozenset[int]], list[list[frozenset[int]]]] | None = None
        self._pruned: dict[str, list[Any]] | None = None
        # name -> its pruned domain as a set (of hashable stand-ins), once the domains are pruned.
        self.domain_sets: dict[str, set[Any]] = {}
        # name -> [(names before it in a tabulated constraint, their values -> its consistent values)]
        self.tables: dict[str, list[tuple[tuple[str, ...], dict[tuple[Any, ...], _Allowed]]]] = {}
        # Why the constraints cannot hold, when pruning proved it.
        self.unsat: str | None = None
        # id of a tabulated constraint -> the last exception it raised (for unsat's message).
        self._raised: dict[int, str] = {}
        # name -> the equalities that read it (over always-active parameters), found on first use.
        self._equations: dict[str, list[Equation]] | None = None
        self._exact_names: frozenset[str] | None = None

    def satisfies(self, data: Mapping[str, Any]) -> bool:
        """True when every constraint holds for ``data`` (one reading an absent name holds)."""
        return checks_hold(self._checks, data)

    def _make_plan(self) -> list[_Step]:
        """Order the parameters so that each constraint is checked as soon as its names are assigned.

        Parameters that constraints read (and those their ``when=`` conditions need) come first,
        chosen greedily: the one that completes most constraints, then the one with fewest values.
        The other parameters follow in activity order: no constraint can fail on them, so a search
        never backtracks into them, and enumeration never repeats the constrained part for them.
        """
        params = self.params
        expr_cons = [c for c in self._constraints if c.names is not None]
        needed: set[str] = set()
        stack = [n for c in expr_cons for n in c.names or ()]
        while stack:
            n = stack.pop()
            if n not in needed:
                needed.add(n)
                w = params[n].when
                stack.extend(w.names if w is not None else ())
        mentions = {n: 0 for n in needed}
        for c in expr_cons:
            for n in c.names or ():
                mentions[n] += 1
        declared = {n: i for i, n in enumerate(self.names)}
        remaining = [n for n in self._activity_order if n in needed]
        assigned: set[str] = set()
        order: list[str] = []
        while remaining:
            ready = [n for n in remaining if params[n].when is None or params[n].when.names <= assigned]  # type: ignore[union-attr]

            def score(n: str) -> tuple[int, int, int, int]:
                completes = sum(
                    1
                    for c in expr_cons
                    if n in (c.names or ()) and (c.names or frozenset()) - assigned <= {n}
                )
                card = params[n].cardinality()
                return (-completes, card if card is not None else 1 << 62, -mentions[n], declared[n])

            best = min(ready, key=score)
            order.append(best)
            assigned.add(best)
            remaining.remove(best)
        order.extend(n for n in self._activity_order if n not in needed)
        last = {}
        position = {n: i for i, n in enumerate(order)}
        for c in self._constraints:
            last[id(c)] = (
                max((position[n] for n in c.names), default=0) if c.names is not None else len(order) - 1
            )
        plan = []
        for i, name in enumerate(order):
            checks = [c.fn for c in self._constraints if last[id(c)] == i]
            w = params[name].when
            plan.append((name, params[name], w._fn if w is not None else None, checks))
        return plan

    def domains(self) -> dict[str, list[Any]]:
        """Domains of finite parameters, pruned of values that no valid configuration can use.

        Computed once, lazily. Each expression constraint over always-active finite parameters
        whose (current) domains multiply to at most PRUNE_LIMIT is evaluated on every combination,
        smallest first; its satisfying combinations are kept as a table. Values that appear in no
        row of a table are dropped from their domain, and the tables are filtered in turn until
        nothing changes (generalized arc consistency). Pruning is sound: a dropped value is in no
        valid configuration. The tables then guide sampling (see :meth:`_allowed`).
        """
        if self._pruned is not None:
            return self._pruned
        domains: dict[str, list[Any]] = {}
        for name, p in self.params.items():
            card = p.cardinality()
            if card is not None and card <= DOMAIN_LIMIT:
                domains[name] = list(p.iter_values())
        prunable = {n for n in domains if self.params[n].when is None}
        cons = [c for c in self._constraints if c.names and c.names <= prunable]
        position = {name: i for i, (name, *_rest) in enumerate(self.plan)}
        scopes = {id(c): sorted(c.names or (), key=position.__getitem__) for c in cons}
        rows: dict[int, list[tuple[Any, ...]]] = {}
        work = 0

        def size(c: Constraint) -> int:
            return math.prod(len(domains[n]) for n in scopes[id(c)])

        while self.unsat is None:
            todo = [c for c in cons if id(c) not in rows and size(c) <= PRUNE_LIMIT]
            if not todo:
                break
            c = min(todo, key=size)
            if work + size(c) > TABLE_WORK:
                break
            work += size(c)
            scope = scopes[id(c)]
            fn = c.fn
            table: list[tuple[Any, ...]] = []
            for combo in itertools.product(*(domains[n] for n in scope)):
                try:
                    ok = fn(dict(zip(scope, combo, strict=True)))
                except Exception as exc:
                    ok = False
                    self._raised[id(c)] = f"{type(exc).__name__}: {exc}"
                if ok:
                    table.append(combo)
            rows[id(c)] = table
            self._propagate(cons, scopes, rows, domains, c)
        self._pruned = domains
        self.domain_sets = {n: set(map(hashable, d)) for n, d in domains.items()}
        for c in cons:
            found = rows.get(id(c))
            if found is None:
                continue
            table = found
            scope = scopes[id(c)]
            # Rows are in domain order, so the consistent values are too (deterministic enumeration).
            lists: list[dict[tuple[Any, ...], dict[Any, None]]] = [{} for _ in scope]
            for combo in table:
                for j in range(len(scope)):
                    lists[j].setdefault(combo[:j], {})[combo[j]] = None
            for j, name in enumerate(scope):
                allowed = {k: (tuple(v), frozenset(v)) for k, v in lists[j].items()}
                self.tables.setdefault(name, []).append((tuple(scope[:j]), allowed))
        return domains

    def _propagate(
        self,
        cons: list[Constraint],
        scopes: dict[int, list[str]],
        rows: dict[int, list[tuple[Any, ...]]],
        domains: dict[str, list[Any]],
        start: Constraint,
    ) -> None:
        """Arc consistency over the tabulated constraints, starting from ``start``."""
        queue = [start]
        queued = {id(start)}
        while queue:
            c = queue.pop()
            queued.discard(id(c))
            scope = scopes[id(c)]
            sets = [set(domains[n]) for n in scope]
            table = [r for r in rows[id(c)] if all(v in s for v, s in zip(r, sets, strict=True))]
            rows[id(c)] = table
            if not table:
                names = ", ".join(repr(n) for n in scope)
                raised = self._raised.get(id(c))
                self.unsat = f"constraint {c.label} holds for no values of {names}" + (
                    f" (it raised {raised})" if raised is not None else "")
                return
            for j, name in enumerate(scope):
                support = {r[j] for r in table}
                kept = [v for v in domains[name] if v in support]
                if len(kept) < len(domains[name]):
                    domains[name] = kept
                    for c2 in cons:
                        if id(c2) in rows and id(c2) not in queued and c2 is not c and name in scopes[id(c2)]:
                            queue.append(c2)
                            queued.add(id(c2))

    def exact_names(self) -> frozenset[str]:
        """Parameters of too many values for a domain table (more than DOMAIN_LIMIT) that a congruence or a
        membership is solved for exactly (see :meth:`solve`): a mutation of one moves to a solution."""
        if self._exact_names is None:
            wide = [n for n in self.names
                    if (self.params[n].cardinality() or DOMAIN_LIMIT + 1) > DOMAIN_LIMIT]
            self._exact_names = frozenset(n for n in wide if any(e.var == n for e in self.equations_of(n)))
        return self._exact_names

    def equations_of(self, name: str) -> list[Equation]:
        """The equalities of the constraints that read ``name`` (computed once, on first use)."""
        if self._equations is None:
            self._equations = {}
            for c in self._constraints:
                if not isinstance(c.source, str) or not c.names:
                    continue
                if any(self.params[n].when is not None for n in c.names):
                    continue  # guarded: an inactive parameter makes it hold
                for eq in equations(c.source):
                    for n in eq.names:
                        self._equations.setdefault(n, []).append(eq)
        return self._equations.get(name, [])

    def solve(
        self,
        name: str,
        p: Param,
        values: Mapping[str, Any],
        domain: Sequence[Any] | None,
        uniform: Callable[[], float] | None = None,
        near: Any = ABSENT,
    ) -> tuple[list[Any] | None, int]:
        """Values of ``name`` that satisfy an equality whose other names are in ``values``, found by
        bisection over its ordered domain (``domain``, else an ``Int`` range), and the evaluations spent.

        ``[]`` when an equality changes sign over the domain without a root (none, if it is monotone in
        ``name``, as products, sums and comparisons of names are); None when bisection tells nothing.
        Every value returned satisfies its equality; one that is not monotone may have solutions that
        are not found.

        A congruence ``name % m == r`` and a membership ``name in (a, b, c)`` are solved exactly instead:
        with ``uniform`` (sampling), random solutions drawn uniformly among all of them (bisection would
        find the same end of the range every time); with ``near`` (repair), the solutions next to it.
        """
        eqs = [e for e in self.equations_of(name) if all(n == name or n in values for n in e.names)]
        if not eqs:
            return None, 0
        env = dict(values)
        found: list[Any] = []
        n_evals = 0
        no_root = False
        bisect: list[Equation] = []
        for eq in eqs:
            if eq.var == name and (uniform is not None or near is not ABSENT):
                try:
                    exact = self._exact(eq, p, env, domain, uniform, near)
                except Exception:  # not numbers, a division by zero...: left to bisection
                    exact = None
                if exact is not None:
                    n_evals += 1 + len(exact)
                    no_root = no_root or not exact
                    found.extend(v for v in exact if v not in found)
                    continue
            if eq.lhs is not None:
                bisect.append(eq)
        at: Callable[[int], Any]
        if domain is not None:
            n, at = len(domain), domain.__getitem__
        elif isinstance(p, Int) and not isinstance(p, Pow2):
            lo = p.lo
            n, at = p.hi - p.lo + 1, lambda k: lo + k
        else:
            bisect = []  # no ordered domain to bisect
        for eq in bisect:
            lhs, rhs = eq.lhs, eq.rhs
            assert lhs is not None and rhs is not None

            def residual(k: int, lhs: ConstraintFn = lhs, rhs: ConstraintFn = rhs) -> Any:
                env[name] = at(k)
                d = lhs(env) - rhs(env)
                if isinstance(d, bool) or not isinstance(d, int | float) or d != d:
                    raise TypeError("not a real number")
                return d

            try:
                roots, spent = _roots(residual, n)
            except Exception:  # not numbers, a division by zero...: nothing solved here
                n_evals += 2
                continue
            n_evals += spent
            if roots is not None:
                no_root = no_root or not roots
                found.extend(at(k) for k in roots if at(k) not in found)
        if found:
            return found, n_evals
        return ([] if no_root else None), n_evals

    def _exact(
        self,
        eq: Equation,
        p: Param,
        env: Mapping[str, Any],
        domain: Sequence[Any] | None,
        uniform: Callable[[], float] | None,
        near: Any,
    ) -> list[Any] | None:
        """The solutions of a congruence or membership for its ``var``: random ones (``uniform``), else
        those next to ``near``; ``[]`` when there is none, None when this equation cannot tell."""
        if eq.members is not None:
            items = [v for v in dict.fromkeys(map(hashable, eq.members(env))) if p.contains(v)]
            if domain is not None:
                kept = self.domain_sets.get(str(eq.var))
                items = [v for v in items if kept is None or v in kept]
            if uniform is not None:
                for i in range(len(items) - 1, 0, -1):  # shuffled: every member as likely to come first
                    j = int(uniform() * (i + 1))
                    items[i], items[j] = items[j], items[i]
            return items
        assert eq.modulus is not None and eq.remainder is not None
        m, r = eq.modulus(env), eq.remainder(env)
        if type(m) is not int or type(r) is not int or m <= 0:
            return None
        if not 0 <= r < m:
            return []  # x % m lies in [0, m) for m > 0
        if domain is not None:
            members = [v for v in domain if type(v) is int and v % m == r]
            if not members:
                return []
            if uniform is not None:
                picks = (members[int(uniform() * len(members))] for _ in range(RANDOM_CANDIDATES))
                return list(dict.fromkeys(picks))
            lower = [v for v in members if v <= near]
            upper = [v for v in members if v > near]
            return [*lower[-1:], *upper[:1]]
        if not isinstance(p, Int) or isinstance(p, Pow2):
            return None
        first = p.lo + (r - p.lo) % m
        if first > p.hi:
            return []
        count = (p.hi - first) // m + 1
        if uniform is not None:
            steps = (min(int(uniform() * count), count - 1) for _ in range(min(count, RANDOM_CANDIDATES)))
            return list(dict.fromkeys(first + m * k for k in steps))
        if type(near) is not int:
            return [first]
        below = near - (near - r) % m
        return [v for v in dict.fromkeys((below, below + m)) if first <= v <= p.hi] or [first]

    def allowed(self, name: str, values: dict[str, Any]) -> _Allowed | None:
        """Values of ``name`` consistent with the tabulated constraints, given earlier values."""
        tables = self.tables.get(name)
        if not tables:
            return None
        best: _Allowed | None = None
        for prefix, table in tables:
            found = table.get(tuple(map(values.__getitem__, prefix)))
            if found is None:
                return _NONE_ALLOWED
            if best is None:
                best = found
            else:
                kept = tuple(v for v in best[0] if v in found[1])
                best = (kept, frozenset(kept))
        return best

    def _candidates(
        self,
        name: str,
        p: Param,
        rng: np.random.Generator | None,
        uniform: _Uniform | None,
        prefer: Any,
        domains: dict[str, list[Any]],
        allowed: _Allowed | None = None,
        solved: Sequence[Any] | None = None,
    ) -> Iterator[Any]:
        dom = domains.get(name)
        if allowed is not None:
            ordered, members = allowed
            if prefer is not ABSENT and prefer in members and p.contains(prefer):
                yield prefer
            n = len(ordered)
            if rng is None or uniform is None:
                yield from ordered
            elif n == 1:
                yield ordered[0]
            elif n:
                # Every consistent value once, in a cheap pseudo-random order.
                start = int(uniform() * n)
                steps = _coprime_steps(n)
                step = steps[int(uniform() * len(steps))]
                for k in range(n):
                    yield ordered[(start + k * step) % n]
            return
        if prefer is not ABSENT and p.contains(prefer):
            yield prefer
        if rng is None or uniform is None:
            yield from (dom if dom is not None else p.iter_values())
            return
        if solved is not None:
            if not solved:
                return  # an equality has no solution here: random draws among many would only fail it
            for v in solved:
                if p.contains(v) and (dom is None or hashable(v) in self.domain_sets[name]):
                    yield v
        if dom is not None:
            n = len(dom)
            if n == 0:
                return
            # The first candidate follows the parameter's own distribution (log-uniform...).
            first = p.decode((uniform(),)) if p.decode_is_sample else p.sample(rng)
            if hashable(first) in self.domain_sets[name]:
                yield first
            if n <= EXHAUSTIVE_VALUES:
                # Every value once, in a cheap pseudo-random order: random start, co-prime stride.
                start = int(uniform() * n)
                steps = _coprime_steps(n)
                step = steps[int(uniform() * len(steps))]
                for k in range(n):
                    yield dom[(start + k * step) % n]
            else:
                for _ in range(RANDOM_CANDIDATES):
                    yield dom[int(uniform() * n)]
        elif p.decode_is_sample:
            # Continuous: half plain samples, half drawn towards a bound, where budget-like
            # constraints ("x + y <= 0.05") tend to be satisfied.
            for _ in range(RANDOM_CANDIDATES):
                yield p.decode((uniform(),))
                u = uniform() ** 4
                yield p.decode((u if uniform() < 0.5 else 1.0 - u,))
        else:
            for _ in range(2 * RANDOM_CANDIDATES):
                yield p.sample(rng)

    def search(
        self,
        rng: np.random.Generator | None,
        prefer: Mapping[str, Any] | None = None,
        budget: int | None = SAMPLE_BUDGET,
        pinned: frozenset[str] = frozenset(),
        stats: dict[str, int] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Depth-first assignment in plan order with constraint checks as early as possible.

        With ``rng`` the candidate values are random (exhaustive for small domains); without, every
        value in order (enumeration). ``prefer`` gives values tried first; ``pinned`` names whose
        preferred value is the only candidate. Yields complete valid assignments; stops after
        ``budget`` candidate checks.
        """
        plan = self.plan
        n = len(plan)
        prefer = prefer or {}
        if n == 0:
            if self.satisfies({}):
                yield {}
            return
        domains = self.domains()
        uniform = _Uniform(rng) if rng is not None else None
        # Conflict-directed backjumping when looking for one random solution: a level that runs out
        # of candidates jumps back to the deepest earlier level that took part in its failures.
        # (Enumeration backtracks chronologically: jumping could skip solutions.)
        backjump = rng is not None
        static, check_levels = self.conflict_levels()
        position = {name: i for i, (name, *_rest) in enumerate(plan)}
        conflicts: list[set[int]] = [set() for _ in range(n)]
        sampled = [False] * n  # level i draws random candidates (not every value)
        values: dict[str, Any] = {}
        iters: list[Iterator[Any] | None] = [None] * n
        i = 0
        evals = 0
        while i >= 0:
            if i == n:
                yield dict(values)
                i -= 1
                continue
            name, p, when, checks = plan[i]
            it = iters[i]
            if it is None:
                if backjump:
                    conflicts[i] = set(static[i])
                sampled[i] = False
                if when is not None and not _active(when, values):
                    it = iter((ABSENT,))
                elif name in pinned and p.contains(prefer.get(name, ABSENT)):
                    it = iter((prefer[name],))
                else:
                    allowed = self.allowed(name, values) if self.tables else None
                    dom = domains.get(name)
                    sampled[i] = allowed is None and (dom is None or len(dom) > EXHAUSTIVE_VALUES)
                    solved: list[Any] | None = None
                    if sampled[i] and rng is not None:
                        # Too many values to try them all: solve an equality for this one first.
                        solved, spent = self.solve(name, p, values, dom, uniform)
                        evals += spent
                        if solved == []:
                            # No value can satisfy the equalities after the earlier values they read:
                            # those levels are to blame (no random draws to retry here).
                            sampled[i] = False
                            if backjump:
                                conflicts[i].update(
                                    position[n] for e in self.equations_of(name) for n in e.names
                                    if n != name and n in values)
                    it = self._candidates(name, p, rng, uniform, prefer.get(name, ABSENT), domains, allowed,
                                          solved)
                iters[i] = it
            v = next(it, _END)
            if v is _END:
                iters[i] = None
                values.pop(name, None)
                conflict = conflicts[i]
                if backjump and not conflict and sampled[i]:
                    # Random candidates failed for reasons that do not depend on earlier levels:
                    # draw more here (the budget bounds this) rather than give up.
                    continue
                if backjump and conflict:
                    h = max(conflict)
                    conflicts[h] |= conflict
                    conflicts[h].discard(h)
                    for k in range(h + 1, i):
                        iters[k] = None
                        values.pop(plan[k][0], None)
                    i = h
                else:
                    i -= 1
                continue
            if v is ABSENT:
                values.pop(name, None)
            else:
                values[name] = v
            evals += 1
            if stats is not None:
                stats["evals"] = evals
            if budget is not None and evals > budget:
                if stats is not None:
                    stats["budget_hit"] = 1
                return
            ok = True
            for k, fn in enumerate(checks):
                try:
                    if fn(values):
                        continue
                except KeyError:
                    continue
                except ConstraintKeyError:
                    raise
                except Exception:
                    pass
                ok = False
                if backjump:
                    conflicts[i].update(check_levels[i][k])
                break
            if ok:
                i += 1

    def conflict_levels(self) -> tuple[list[frozenset[int]], list[list[frozenset[int]]]]:
        """For each plan level: the earlier levels its candidate set depends on (``when``, tables),
        and for each of its checks, the earlier levels the constraint reads."""
        if self._conflict_cache is not None:
            return self._conflict_cache
        position = {name: i for i, (name, *_rest) in enumerate(self.plan)}
        by_fn = {id(c.fn): c for c in self._constraints}
        static: list[frozenset[int]] = []
        per_check: list[list[frozenset[int]]] = []
        for i, (name, p, _when, checks) in enumerate(self.plan):
            deps: set[int] = set()
            if p.when is not None:
                deps.update(position[n] for n in p.when.names)
            for prefix, _table in self.tables.get(name, ()):
                deps.update(position[n] for n in prefix)
            deps.discard(i)
            static.append(frozenset(deps))
            levels = []
            for fn in checks:
                c = by_fn.get(id(fn))
                names = c.names if c is not None and c.names is not None else None
                if names is None:
                    levels.append(frozenset(range(i)))
                else:
                    levels.append(frozenset(position[n] for n in names if position[n] != i))
            per_check.append(levels)
        self._conflict_cache = (static, per_check)
        return self._conflict_cache
