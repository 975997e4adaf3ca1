"""The house's import rules (docs/architecture.md), checked by reading the source with ``ast``.

Every import counts, wherever it is written: at module level, inside a function (many imports are lazy,
to keep ``import perftune`` fast), and under ``if TYPE_CHECKING:``. Imports by name held in a string
count too: a ``"perftune.x._y:Name"`` table entry or a string naming a module exactly, as the technique
registry and the lazy ``__getattr__`` of a package use them.

- The layer rules hold for TYPE_CHECKING-only imports as well: an annotation that names a type of a
  higher layer is a dependency on that layer's shape.
- The no-cycle rule leaves TYPE_CHECKING-only imports out: they never run, and two modules that name
  each other's types in annotations (``Config`` and ``Space``) are not a knot. It leaves lookups by name
  out too: a registry that names the bandit, and the bandit that asks the registry for its portfolio,
  is how a registry inverts a dependency, not a knot.

An exception would be listed in ``KNOWN_VIOLATIONS`` or ``KNOWN_CYCLES`` with its reason; both are
empty. An entry that no longer matches the code fails the test too, so the lists can only shrink.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "perftune"

#: How an import is written: at module level, inside a function, only for type checkers, or by name in a
#: string (a registry entry, a lazy ``__getattr__``).
MODULE, LAZY, TYPING, DYNAMIC = "module", "lazy", "typing", "dynamic"


@dataclass(frozen=True)
class Import:
    """One import of a perftune module by another, with where it is written."""

    importer: str
    imported: str
    path: Path
    line: int
    kind: str

    def __str__(self) -> str:
        where = f"{self.path.relative_to(SRC.parent)}:{self.line}"
        return f"{where}: {self.importer} -> {self.imported} ({self.kind})"


def _module_files() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _module_files()
# "perftune.x._y" or "perftune.x._y:Name", the forms the registries and lazy attributes use.
_MODULE_STRING = re.compile(r"perftune(?:\.\w+)+(?::\w+)?")


def _known(name: str) -> str | None:
    """The deepest known module that ``name`` (a dotted name, maybe an attribute path) lies in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, module: str, path: Path) -> None:
        self.module = module
        self.path = path
        self.is_package = path.name == "__init__.py"
        self.n_typing = 0
        self.n_functions = 0
        self.found: list[Import] = []

    def _add(self, target: str | None, line: int, kind: str | None = None) -> None:
        if target is None or not (target == PACKAGE or target.startswith(PACKAGE + ".")):
            return
        imported = _known(target)
        if imported is None:
            return
        if kind is None:
            kind = TYPING if self.n_typing else LAZY if self.n_functions else MODULE
        self.found.append(Import(self.module, imported, self.path, line, kind))

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.n_typing += 1
        for child in node.body:
            self.visit(child)
        self.n_typing -= 1
        for child in node.orelse:
            self.visit(child)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.n_functions += 1
        self.generic_visit(node)
        self.n_functions -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        for alias in node.names:
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
            submodule = f"{source}.{alias.name}"
            self._add(submodule if submodule in MODULES else source, node.lineno)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
            name, colon, _ = node.value.partition(":")
            # A bare string counts only when it names a plain module exactly: an entry-point group
            # ("perftune.techniques", "perftune.targets") is a name, not an import.
            if name in MODULES and (colon or MODULES[name].name != "__init__.py"):
                self._add(name, node.lineno, DYNAMIC)


def _collect() -> list[Import]:
    found: list[Import] = []
    for module, path in MODULES.items():
        collector = _ImportCollector(module, path)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        found.extend(i for i in collector.found if i.imported != module)
    return list(dict.fromkeys(found))  # `from m import a, b` is one import of m


IMPORTS = _collect()


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _in_any(module: str, packages: tuple[str, ...]) -> bool:
    return any(_under(module, p) for p in packages)


def _private_owner(module: str) -> str | None:
    """For a private module (``perftune.a._b``), the package whose private part it is (``perftune.a``)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


# ------------------------------------------------------------------ the rules


def _only(allowed: tuple[str, ...]) -> Callable[[Import], bool]:
    return lambda i: not _in_any(i.imported, allowed)


def _none_of(forbidden: tuple[str, ...]) -> Callable[[Import], bool]:
    # The facade `perftune` (its __init__) is named exactly: it lazily re-exports the driver.
    packages = tuple(f for f in forbidden if f != PACKAGE)
    return lambda i: i.imported in forbidden or _in_any(i.imported, packages)


def _target_of(module: str) -> str | None:
    """``perftune.targets.X`` for a module of target X; None elsewhere, and for the registry's own modules
    (``perftune.targets``, ``perftune.targets._registry``), which name every target."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "targets" and not parts[2].startswith("_"):
        return ".".join(parts[:3])
    return None


@dataclass(frozen=True)
class Rule:
    """An import rule: which importers it covers and which of their imports break it."""

    name: str
    covers: Callable[[str], bool]
    breaks: Callable[[Import], bool]


RULES = [
    # Above the space: everything. It may use the errors, nothing else of perftune.
    Rule("space imports nothing above it (only perftune.space and perftune.errors)",
         lambda m: _under(m, "perftune.space"), _only(("perftune.space", "perftune.errors"))),
    Rule("trial imports only the space and the errors",
         lambda m: m == "perftune.trial", _only(("perftune.trial", "perftune.space", "perftune.errors"))),
    # Techniques only propose and learn: no driver, store, target, measurement or CLI, and not the facade
    # (which re-exports the driver).
    Rule("search uses only space, trial, errors, _plugins (not drive, store, targets, cli, measure, facade)",
         lambda m: _under(m, "perftune.search"),
         _only(("perftune.search", "perftune.space", "perftune.trial", "perftune.errors",
                "perftune._plugins"))),
    Rule("measure and store sit below the driver (no drive, targets, report, testing, cli or facade)",
         lambda m: _in_any(m, ("perftune.measure", "perftune.store")),
         _none_of(("perftune", "perftune.drive", "perftune.targets", "perftune.report", "perftune.testing",
                   "perftune.cli"))),
    Rule("the driver sits below targets, report, testing and cli, and does not import the facade",
         lambda m: _under(m, "perftune.drive"),
         _none_of(("perftune", "perftune.targets", "perftune.report", "perftune.testing", "perftune.cli"))),
    # `python -m perftune` is the command itself, the one place that may import it.
    Rule("nothing imports cli (but perftune.__main__)",
         lambda m: m != "perftune.__main__", lambda i: _under(i.imported, "perftune.cli")),
    Rule("targets do not import each other (perftune.targets.X never imports perftune.targets.Y)",
         lambda m: _target_of(m) is not None,
         lambda i: _target_of(i.imported) not in (None, _target_of(i.importer))),
    # The top of the house uses the packages below through their curated __init__, so that they can
    # rearrange their private modules. A registry's entry by name ("perftune.targets.flags._target:X")
    # may say where a class lives, so that asking for it imports that module only.
    Rule("cli, adapt, online, integration and targets import no private module (_x) of another package",
         lambda m: _in_any(m, ("perftune.cli", "perftune.adapt", "perftune.online", "perftune.integration",
                               "perftune.targets")),
         lambda i: i.kind != DYNAMIC and (owner := _private_owner(i.imported)) is not None
         and not _under(i.importer, owner)),
    # perftune.adapt sits beside the targets and uses them (choice sites, task files): not the reverse.
    Rule("adapt sits above the targets and the driver: nothing below imports it",
         lambda m: _in_any(m, ("perftune.space", "perftune.search", "perftune.measure", "perftune.store",
                               "perftune.drive", "perftune.targets")),
         lambda i: _under(i.imported, "perftune.adapt")),
    # perftune.integration puts perftune's search inside other tools (Optuna): it sits at the top, beside
    # the targets, and only the CLI may use it.
    Rule("integration sits at the top: nothing but cli imports it, and it imports no cli",
         lambda m: not _in_any(m, ("perftune.integration", "perftune.cli")),
         lambda i: _under(i.imported, "perftune.integration")),
    Rule("_atomic (the atomic file write) imports nothing of perftune",
         lambda m: m == "perftune._atomic", lambda i: True),
    Rule("_jsonfile (reading a JSON file someone else wrote) imports nothing of perftune",
         lambda m: m == "perftune._jsonfile", lambda i: True),
    # What the two registries share sits beside the errors: any layer with a registry may use it.
    Rule("_plugins (the registries' shared lookup) imports only the errors",
         lambda m: m == "perftune._plugins", _only(("perftune._plugins", "perftune.errors"))),
]

#: (importer, imported) -> why it is allowed for now. Empty: every rule holds; an entry needs a reason.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}

#: Strongly connected groups of modules (import cycles) allowed for now, with the reason. Empty.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def _violations(rule: Rule, imports: list[Import]) -> list[Import]:
    return [i for i in imports if rule.covers(i.importer) and rule.breaks(i)]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_import_rule(rule: Rule) -> None:
    broken = [i for i in _violations(rule, IMPORTS) if (i.importer, i.imported) not in KNOWN_VIOLATIONS]
    assert not broken, f"{rule.name}, broken by:\n" + "\n".join(map(str, broken))


def test_known_violations_are_still_there() -> None:
    # An entry whose import is gone must leave the list, so that it cannot hide a new one later.
    seen = {(i.importer, i.imported) for rule in RULES for i in _violations(rule, IMPORTS)}
    stale = sorted(set(KNOWN_VIOLATIONS) - seen)
    assert not stale, "no longer violated, remove from KNOWN_VIOLATIONS:\n" + "\n".join(map(str, stale))


# ------------------------------------------------------------------ cycles


def _graph(imports: list[Import]) -> dict[str, dict[str, Import]]:
    graph: dict[str, dict[str, Import]] = {m: {} for m in MODULES}
    for i in imports:
        if i.kind not in (TYPING, DYNAMIC):
            graph[i.importer].setdefault(i.imported, i)
    return graph


def _strongly_connected(graph: dict[str, dict[str, Import]]) -> list[frozenset[str]]:
    """Tarjan's algorithm, iterative (the graph is a few hundred modules deep at most)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(frozenset(group))
    return groups


def _cycle_through(group: frozenset[str], graph: dict[str, dict[str, Import]]) -> list[Import]:
    """One shortest cycle inside ``group`` (from its first module back to it), as its imports."""
    start = min(group)
    parents: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for succ, imp in graph[node].items():
                if succ not in group:
                    continue
                if succ == start:
                    path = [imp]
                    while path[0].importer != start:
                        path.insert(0, parents[path[0].importer])
                    return path
                if succ not in parents:
                    parents[succ] = imp
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")  # pragma: no cover


def _describe(group: frozenset[str], graph: dict[str, dict[str, Import]]) -> str:
    lines = [f"cycle among {', '.join(sorted(group))}:"]
    lines += [f"    {imp}" for imp in _cycle_through(group, graph)]
    return "\n".join(lines)


def test_no_import_cycles() -> None:
    graph = _graph(IMPORTS)
    groups = _strongly_connected(graph)
    new = [g for g in groups if g not in KNOWN_CYCLES]
    assert not new, "import cycles:\n" + "\n".join(_describe(g, graph) for g in new)
    stale = [sorted(g) for g in KNOWN_CYCLES if g not in groups]
    assert not stale, "no longer a cycle (or a different one), update KNOWN_CYCLES:\n" + "\n".join(
        map(str, stale))


# ------------------------------------------------------------------ the checker itself


def _fake_imports(edges: list[tuple[str, str]], kind: str = MODULE) -> list[Import]:
    return [Import(a, b, SRC / "perftune" / "x.py", n, kind) for n, (a, b) in enumerate(edges, 1)]


def test_the_checker_finds_a_cycle_and_names_its_imports() -> None:
    space, params = "perftune.space._space", "perftune.space._params"
    config = "perftune.space._config"
    imports = _fake_imports([(space, params), (params, config), (config, space)])
    graph = _graph(imports)
    groups = _strongly_connected(graph)
    assert groups == [frozenset({space, params, config})]
    text = _describe(groups[0], graph)
    for importer, imported in [(space, params), (params, config), (config, space)]:
        assert f"{importer} -> {imported}" in text


@pytest.mark.parametrize("kind", [TYPING, DYNAMIC])
def test_type_checking_imports_and_lookups_by_name_make_no_cycle(kind: str) -> None:
    a, b = "perftune.space._space", "perftune.space._config"
    assert _strongly_connected(_graph(_fake_imports([(a, b)]) + _fake_imports([(b, a)], kind))) == []
    assert _strongly_connected(_graph(_fake_imports([(a, b), (b, a)]))) == [frozenset({a, b})]


def test_the_collector_sees_lazy_typing_relative_and_string_imports(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import _budget\n"
        "from ..space import Config\n"
        "if TYPE_CHECKING:\n"
        "    from perftune.store import Store\n"
        "def f():\n"
        "    import perftune.measure._sandbox\n"
        "TABLE = {'x': 'perftune.search._bandit:AUCBandit', 'group': 'perftune.techniques'}\n"
    )
    path = tmp_path / "_tuner.py"
    path.write_text(source)
    collector = _ImportCollector("perftune.drive._tuner", path)
    collector.visit(ast.parse(source))
    found = {(i.imported, i.kind) for i in collector.found}
    assert found == {("perftune.drive._budget", MODULE), ("perftune.space", MODULE),
                     ("perftune.store", TYPING), ("perftune.measure._sandbox", LAZY),
                     ("perftune.search._bandit", DYNAMIC)}


@pytest.mark.parametrize(("importer", "imported", "rule_index"), [
    ("perftune.space._space", "perftune.search", 0),
    ("perftune.search._bandit", "perftune.drive._tuner", 2),
    ("perftune.search._bandit", "perftune", 2),
    ("perftune.store._store", "perftune", 3),
    ("perftune.targets.flags._tune", "perftune.cli", 5),
    ("perftune.targets.flags._tune", "perftune.targets.llvm", 6),
    ("perftune.cli", "perftune.measure._sandbox", 7),
    ("perftune.adapt._tune", "perftune.drive._tuner", 7),
    ("perftune.targets.choice._site", "perftune.adapt", 8),
    ("perftune.integration.optuna._sampler", "perftune.search._bandit", 7),
    ("perftune.drive._tuner", "perftune.integration.optuna", 9),
    ("perftune.integration.optuna._sampler", "perftune.cli", 5),
    ("perftune._atomic", "perftune.errors", 10),
    ("perftune._jsonfile", "perftune.errors", 11),
    ("perftune._plugins", "perftune.space", 12),
    ("perftune.search._registry", "perftune.store", 2),
])
def test_each_rule_catches_its_violation(importer: str, imported: str, rule_index: int) -> None:
    assert _violations(RULES[rule_index], _fake_imports([(importer, imported)]))


@pytest.mark.parametrize(("importer", "imported", "kind"), [
    ("perftune.space._space", "perftune.errors", MODULE),
    ("perftune.search._bandit", "perftune.space", MODULE),
    ("perftune.store._store", "perftune.trial", MODULE),
    ("perftune.__main__", "perftune.cli", MODULE),
    ("perftune.targets.flags._tune", "perftune.targets.flags._space", MODULE),
    ("perftune.targets.flags._tune", "perftune.drive", MODULE),
    ("perftune.targets.llvm._tune", "perftune.targets.llvm._env", MODULE),
    ("perftune.targets._registry", "perftune.targets.flags", MODULE),
    ("perftune.targets._registry", "perftune.targets.flags._target", DYNAMIC),
    ("perftune.targets.flags._target", "perftune.targets._registry", MODULE),
    ("perftune.integration.optuna._sampler", "perftune.search", MODULE),
    ("perftune.integration.optuna._sampler", "perftune.integration.optuna._space", MODULE),
])
def test_rules_allow_what_the_house_allows(importer: str, imported: str, kind: str) -> None:
    assert not [r.name for r in RULES if _violations(r, _fake_imports([(importer, imported)], kind))]


# ------------------------------------------------------------------ the page that describes the rules


def test_the_architecture_page_names_every_package_and_target() -> None:
    page = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    layout = page[page.index("```\nsrc/perftune/"):]
    layout = layout[: layout.index("\n```", 4)]
    root = SRC / PACKAGE
    names = [f"{p.name}/" for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    names += [p.name for p in root.glob("*.py") if not p.name.startswith("_")]
    missing = [n for n in names if n not in layout]
    targets = [p.name for p in (root / "targets").iterdir() if p.is_dir() and not p.name.startswith("_")]
    missing += [f"targets/{t}" for t in targets if t not in layout]
    assert not missing, f"docs/architecture.md does not place: {missing}"
