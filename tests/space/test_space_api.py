"""The public API of perftune.space: __all__ is complete and every name is documented."""

from __future__ import annotations

import inspect

import perftune.space as space_module


def test_all_is_complete_and_exists() -> None:
    public = {
        name
        for name, obj in vars(space_module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__.startswith("perftune.space")
    }
    assert public == set(space_module.__all__)
    assert all(hasattr(space_module, name) for name in space_module.__all__)


def test_every_public_name_has_a_docstring_with_an_example() -> None:
    for name in space_module.__all__:
        doc = inspect.getdoc(getattr(space_module, name)) or ""
        assert "Example" in doc, name


def test_contract_names_exist() -> None:
    from perftune.space import Int, Permutation, Space

    for method in (
        "default",
        "is_valid",
        "why_invalid",
        "sample",
        "repair",
        "mutate",
        "neighbors",
        "crossover",
        "encode",
        "decode",
        "enumerate",
        "cardinality",
        "to_dict",
        "from_dict",
        "fingerprint",
    ):
        assert callable(getattr(Space, method)), method
    p = Int(1, 2)
    for method in (
        "default_value",
        "sample",
        "mutate",
        "neighbors",
        "crossover",
        "encode",
        "decode",
        "contains",
        "cardinality",
        "values",
        "to_json_value",
        "from_json_value",
        "to_dict",
    ):
        assert callable(getattr(p, method)), method
    for method in ("swap", "insert", "invert", "pmx", "ox", "cx"):
        assert callable(getattr(Permutation, method)), method
