"""The modules of `perftune.space` import each other as a tree: no circle, not even a lazy one."""

from __future__ import annotations

import ast
import doctest
import importlib
import io
from pathlib import Path

import numpy as np
import pytest

import perftune.space
from perftune.space import Choice, Config, Permutation, Selector
from perftune.space._normalize import normalize_value

SPACE_DIR = Path(perftune.space.__file__).parent


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path) -> set[str]:
    """Sibling modules imported anywhere in `path` (functions included), except under TYPE_CHECKING."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _is_type_checking_block(node):
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("perftune.space."):
            found.add(node.module.rsplit(".", 1)[1])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def walk(node: str, stack: list[str]) -> list[str] | None:
        if node in stack:
            return [*stack[stack.index(node):], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            found = walk(nxt, [*stack, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = walk(start, [])
        if found:
            return found
    return None


def test_cycle_finder_sees_a_lazy_circle():
    # The check below must be able to fail: _params -> _selector -> _params is what the space used to do.
    assert _cycle({"_params": {"_selector"}, "_selector": {"_params"}}) == ["_params", "_selector", "_params"]
    assert _cycle({"_params": {"_base"}, "_selector": {"_base"}, "_base": set()}) is None


def test_space_modules_import_each_other_without_a_circle():
    graph = {p.stem: _imports(p) for p in SPACE_DIR.glob("*.py") if p.stem != "__init__"}
    assert graph["_permutation"] and graph["_selector"], "the walk found no imports at all"
    assert _cycle(graph) is None, f"import circle in perftune.space: {' -> '.join(_cycle(graph) or [])}"


def _types(value: object) -> object:
    # 3 == np.int64(3), so compare types too: normalisation is about what the values are.
    return tuple(_types(v) for v in value) if isinstance(value, tuple) else type(value)


def test_parameters_and_config_normalize_values_alike():
    raw = [np.int64(3), (np.float64(0.5), ["a", np.bool_(True)])]
    expected = (3, (0.5, ("a", True)))
    for value in (normalize_value(raw), Config({"x": raw})["x"]):
        assert value == expected and _types(value) == _types(expected)
    for value, plain in [
        (Choice([np.int64(3), "a"]).options, (3, "a")),
        (Permutation([np.int64(2), np.int64(1)]).items, (2, 1)),
        (Selector([np.int64(1), np.int64(2)]).choices, (1, 2)),
    ]:
        assert value == plain and _types(value) == _types(plain)


@pytest.mark.parametrize("module", ["_base", "_normalize", "_constraints", "_solver", "_params"])
def test_docstring_examples_of_the_split_modules_run(module):
    name = f"perftune.space.{module}"
    tests = doctest.DocTestFinder(exclude_empty=True).find(importlib.import_module(name), name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out = io.StringIO()
    for test in tests:
        runner.run(test, out=out.write)
    assert sum(len(t.examples) for t in tests) > 0, f"{name} has no docstring examples"
    assert runner.failures == 0, out.getvalue()
