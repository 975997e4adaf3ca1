"""docs/CONTRACTS.md is checked against the code, so that it cannot drift again.

The page says how it is read (its introduction): each ``## perftune.x`` section names a module; its
``python`` blocks are stubs whose names, parameters and defaults must match the code; its ``pycon``
blocks are doctests; the parameter table's ``Name(args)`` cells are resolved like calls.
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import enum
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "CONTRACTS.md"
_HEADING = re.compile(r"^## (perftune(?:\.\w+)*)\b")
_FENCE = re.compile(r"^```(\w*)\s*$")
_TABLE_CELL = re.compile(r"^\| `(\w+\(.*\))` \|")


@dataclass(frozen=True)
class Block:
    """A fenced code block of the page, with the module its section is about."""

    module: str
    language: str
    line: int
    text: str


def _read(text: str) -> tuple[list[Block], list[tuple[str, int, str]]]:
    """The code blocks and the parameter-table calls of the page, each with its section's module."""
    blocks: list[Block] = []
    calls: list[tuple[str, int, str]] = []
    module = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if heading := _HEADING.match(line):
            module = heading.group(1)
        elif (cell := _TABLE_CELL.match(line)) and module:
            calls.append((module, i + 1, cell.group(1)))
        elif (fence := _FENCE.match(line)) and fence.group(1):
            end = lines.index("```", i + 1)
            blocks.append(Block(module, fence.group(1), i + 2, "\n".join(lines[i + 1:end])))
            i = end
        i += 1
    return blocks, calls


BLOCKS, TABLE_CALLS = _read(PAGE.read_text(encoding="utf-8"))
STUBS = [b for b in BLOCKS if b.language == "python"]
DOCTESTS = [b for b in BLOCKS if b.language == "pycon"]


def _block_id(block: Block) -> str:
    return f"{block.module}:{block.line}"


def _literal(node: ast.expr, where: str, namespace: Any = None) -> Any:
    """A literal, or a dotted name of ``namespace`` (``Status.PENDING``)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if namespace is not None and isinstance(node, ast.Attribute | ast.Name):
        value = namespace
        for part in ast.unparse(node).split("."):
            value = getattr(value, part, dataclasses.MISSING)
        if value is not dataclasses.MISSING:
            return value
    raise AssertionError(f"{where}: the default {ast.unparse(node)} is not a literal")


def _documented(args: ast.arguments, where: str) -> list[tuple[str, str, Any]]:
    """(name, kind, default) of a stub's parameters; default ``inspect.Parameter.empty`` when none."""
    empty = inspect.Parameter.empty
    positional = [*args.posonlyargs, *args.args]
    defaults = [empty] * (len(positional) - len(args.defaults)) + [_literal(d, where) for d in args.defaults]
    out = [(a.arg, "POSITIONAL_ONLY" if a in args.posonlyargs else "POSITIONAL_OR_KEYWORD", d)
           for a, d in zip(positional, defaults, strict=True)]
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", empty))
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append((a.arg, "KEYWORD_ONLY", empty if d is None else _literal(d, where)))
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", empty))
    return out


def _actual(obj: Any) -> list[tuple[str, str, Any]]:
    return [(p.name, p.kind.name, p.default) for p in inspect.signature(obj).parameters.values()
            if not p.name.startswith("_")]


def _check_function(node: ast.FunctionDef, obj: Any, where: str) -> list[str]:
    decorators = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
    if "property" in decorators:
        return [] if isinstance(obj, property) else [f"{where}: {node.name} is not a property in the code"]
    documented = _documented(node.args, where)
    if "classmethod" in decorators:
        documented = documented[1:]  # a classmethod looked up on its class is bound: no cls
    actual = _actual(obj)
    if documented == actual:
        return []
    pairs = zip(documented, actual, strict=False)
    differences = [f"page {_show(d)}, code {_show(c)}" for d, c in pairs if d != c]
    if len(documented) != len(actual):
        differences.append(f"page has {len(documented)} parameters, code {len(actual)}: "
                           f"{', '.join(_show(c) for c in actual)}")
    return [f"{where}: {node.name}: " + "; ".join(differences)]


def _show(parameter: tuple[str, str, Any]) -> str:
    name, kind, default = parameter
    prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**", "KEYWORD_ONLY": "(keyword) "}.get(kind, "")
    return f"{prefix}{name}" + ("" if default is inspect.Parameter.empty else f"={default!r}")


def _has_attribute(cls: type, name: str) -> bool:
    if hasattr(cls, name) or any(name in inspect.get_annotations(k) for k in cls.__mro__):
        return True
    # An attribute set only by instances: look for `self.name` being assigned in the class.
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return False
    return re.search(rf"\bself\.{re.escape(name)}\s*(:[^=\n]+)?=", source) is not None


def _default_of(cls: type, name: str) -> Any:
    if dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            if field.name == name:
                if field.default_factory is not dataclasses.MISSING:
                    return field.default_factory()
                return field.default
    return getattr(cls, name, dataclasses.MISSING)


def _check_class(node: ast.ClassDef, module: Any, where: str) -> list[str]:
    cls = getattr(module, node.name, None)
    if not inspect.isclass(cls):
        return [f"{where}: class {node.name} not found in {module.__name__}"]
    problems: list[str] = []
    for base in node.bases:
        name = ast.unparse(base).rpartition(".")[2]
        if name not in {k.__name__ for k in cls.__mro__}:
            problems.append(f"{where}: {node.name} does not derive from {name}")
    for item in node.body:
        at = f"{where} ({node.name}, line +{item.lineno - 1})"
        if isinstance(item, ast.FunctionDef):
            member = inspect.getattr_static(cls, item.name, None)
            if member is None:
                problems.append(f"{at}: {node.name}.{item.name} not found")
            elif isinstance(member, property):
                problems += _check_function(item, member, at)
            else:
                problems += _check_function(item, getattr(cls, item.name), at)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            name = item.target.id
            if not _has_attribute(cls, name):
                problems.append(f"{at}: {node.name}.{name} is not an attribute in the code")
            elif item.value is not None and (expected := _literal(item.value, at, module)) != (
                    got := _default_of(cls, name)):
                problems.append(f"{at}: {node.name}.{name} defaults to {got!r} in the code, "
                                f"{expected!r} here")
        elif isinstance(item, ast.Assign) and issubclass(cls, enum.Enum):
            for target in item.targets:
                assert isinstance(target, ast.Name)
                value = _literal(item.value, at)
                if target.id not in cls.__members__ or cls[target.id].value != value:
                    problems.append(f"{at}: {node.name}.{target.id} = {value!r} is not a member in the code")
    return problems


def _check_stub(block: Block) -> list[str]:
    module = importlib.import_module(block.module)
    tree = ast.parse(block.text, filename=f"{PAGE.name}:{block.line}")
    problems: list[str] = []
    for node in tree.body:
        where = f"{PAGE.name}:{block.line + node.lineno - 1}"
        if isinstance(node, ast.ClassDef):
            problems += _check_class(node, module, where)
        elif isinstance(node, ast.FunctionDef):
            obj = getattr(module, node.name, None)
            if obj is None:
                problems.append(f"{where}: {node.name} not found in {block.module}")
            else:
                problems += _check_function(node, obj, where)
        else:
            problems.append(f"{where}: a stub block holds only def and class")
    return problems


def test_the_page_has_its_sections() -> None:
    modules = {b.module for b in STUBS}
    assert {"perftune.errors", "perftune.space", "perftune.trial", "perftune.search", "perftune.store",
            "perftune.drive"} <= modules
    assert DOCTESTS and len(TABLE_CALLS) == 12


@pytest.mark.parametrize("block", STUBS, ids=_block_id)
def test_documented_names_and_signatures_match_the_code(block: Block) -> None:
    problems = _check_stub(block)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("block", DOCTESTS, ids=_block_id)
def test_documented_examples_run(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.search import _registry

    # The page shows a fresh process: techniques that other tests (or a target, such as the LLVM pass
    # search's own bandit) registered in this one are not part of what it documents.
    monkeypatch.setattr(_registry, "_registered", {})
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.text, {}, _block_id(block), str(PAGE), block.line - 1)
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)


@pytest.mark.parametrize(("module", "line", "call"), TABLE_CALLS, ids=[c for _, _, c in TABLE_CALLS])
def test_parameter_table_matches_the_constructors(module: str, line: int, call: str) -> None:
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    cls = getattr(importlib.import_module(module), node.func.id)
    params = inspect.signature(cls).parameters
    positional = [p for p in params.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    documented = [ast.unparse(a) for a in node.args]
    assert documented == [p.name for p in positional[: len(documented)]], f"{PAGE.name}:{line}: {call}"
    assert len(documented) == len([p for p in positional if p.default is inspect.Parameter.empty]), (
        f"{PAGE.name}:{line}: {call} leaves out a required argument")
    for keyword in node.keywords:
        assert keyword.arg in params, f"{PAGE.name}:{line}: {call}: no argument {keyword.arg}"
        if isinstance(keyword.value, ast.Constant | ast.Tuple):
            value = ast.literal_eval(keyword.value)
            assert params[keyword.arg].default == value, (
                f"{PAGE.name}:{line}: {call}: default of {keyword.arg}")
    # Every parameter takes default= and when=, as the page says above the table.
    assert {"default", "when"} <= set(params), f"{PAGE.name}:{line}: {call}"


# ------------------------------------------------------------------ the checker itself


def _problems_of(stub: str, module: str = "perftune.drive") -> list[str]:
    return _check_stub(Block(module, "python", 1, stub))


@pytest.mark.parametrize("stub", [
    'def tune(objective, space, *, budget, seed=None, store=None, workers=1, goal="min", metric=None,'
    ' seeds=(), technique="bandit", name=None, timeout_s=None, lag=None, executor="local", scheduler=None,'
    ' progress=False, repeats=None) -> Result: ...',
    "def tune(objective, space, budget) -> Result: ...",
    "class Budget:\n    evals: int | None = 3",
    "class Budget:\n    minutes: int | None = None",
    "class Tuner:\n    def ask(self, n) -> Trial: ...",
    "class Tuner:\n    @property\n    def ask(self) -> Trial: ...",
    "class Tuner(Exception): ...",
    "def nowhere() -> None: ...",
])
def test_the_checker_catches_drift(stub: str) -> None:
    assert _problems_of(stub)


def test_the_checker_reads_enums_and_classmethods() -> None:
    assert not _problems_of('class Status(enum.Enum):\n    OK = "ok"', "perftune.trial")
    assert _problems_of('class Status(enum.Enum):\n    OK = "fine"', "perftune.trial")
    assert not _problems_of("class Config:\n    @classmethod\n    def from_json(cls, text, space=None): ...",
                            "perftune.space")
