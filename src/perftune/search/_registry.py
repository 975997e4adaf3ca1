"""The technique registry: built-ins by name, plus plug-ins from the ``perftune.techniques`` entry points.

Built-in techniques are imported on first use (``import perftune.search`` stays cheap; scikit-learn is
only imported when the model is fitted). Registration is explicit: nothing registers itself on import.

Example:
    >>> from perftune.search import names
    >>> "bandit" in names() and "random" in names()
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perftune._plugins import check_registration, find_entry_points, lookup
from perftune.errors import PerftuneError

if TYPE_CHECKING:
    from perftune.space import Space

__all__ = ["ALIASES", "ENTRY_POINT_GROUP", "create", "get", "names", "register"]

ENTRY_POINT_GROUP = "perftune.techniques"

_BUILTIN: dict[str, str] = {
    "random": "perftune.search._random:RandomSearch",
    "greedy-uniform": "perftune.search._greedy:GreedyUniform",
    "greedy-normal": "perftune.search._greedy:GreedyNormal",
    "de": "perftune.search._de:DifferentialEvolution",
    "cma-es": "perftune.search._cmaes:CMAES",
    "trust-region": "perftune.search._trust:TrustRegion",
    "nelder-mead": "perftune.search._simplex:NelderMead",
    "pattern-search": "perftune.search._pattern:PatternSearch",
    "pso": "perftune.search._pso:ParticleSwarm",
    "ga": "perftune.search._ga:GeneticAlgorithm",
    "annealing": "perftune.search._annealing:SimulatedAnnealing",
    "coordinate-descent": "perftune.search._coordinate:CoordinateDescent",
    "model": "perftune.search._model:ModelBased",
    "parzen": "perftune.search._parzen:Parzen",
    "bandit": "perftune.search._bandit:AUCBandit",
    "boundary": "perftune.search._boundary:Boundary",
    "elite-neighbours": "perftune.search._boundary:EliteNeighbours",
    "staged": "perftune.search._staged:StagedBandit",
    "nsga2": "perftune.search._nsga2:NSGA2",
    "parego": "perftune.search._parego:ParEGO",
    "mo-bandit": "perftune.search._mobandit:MOBandit",
}

#: Other names accepted by :func:`get` and :func:`create`.
ALIASES: dict[str, str] = {"default": "staged"}

_registered: dict[str, type] = {}
_entry_points: dict[str, Any] | None = None


def _plugins() -> dict[str, Any]:
    global _entry_points
    if _entry_points is None:
        _entry_points = find_entry_points(ENTRY_POINT_GROUP)
    return _entry_points


def register(cls: type) -> type:
    """Register a technique class under its ``name`` (usable as a decorator).

    Args:
        cls: A class with a non-empty ``name`` class attribute, ``__init__(space, *, seed, settings=None)``,
            ``ask(n)`` and ``tell(trials)``.

    Returns:
        ``cls`` unchanged.

    Raises:
        PerftuneError: if the class has no name, lacks ask/tell, or the name is taken by another class.
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise PerftuneError(
            f"register({getattr(cls, '__name__', cls)!r}): the class needs a non-empty `name`"
        )
    for method in ("ask", "tell"):
        if not callable(getattr(cls, method, None)):
            raise PerftuneError(f"register({cls.__name__}): technique {name!r} has no {method}() method")
    if name in ALIASES:
        raise PerftuneError(f"register({cls.__name__}): {name!r} is an alias of {ALIASES[name]!r}")
    check_registration(cls, name, "technique", _registered, _BUILTIN)
    _registered[name] = cls
    return cls


def names() -> list[str]:
    """Names of every available technique: built-ins, registered classes and entry-point plug-ins."""
    return sorted({*_BUILTIN, *_registered, *_plugins()})


def get(name: str) -> type:
    """The technique class registered as ``name`` (or an alias such as ``"default"``).

    Raises:
        PerftuneError: for an unknown name; the message lists the known names.
    """
    key = ALIASES.get(name, name)
    cls = lookup(key, "technique", _registered, _BUILTIN, _plugins)
    if cls is not None:
        return cls
    known = ", ".join([*names(), *ALIASES])
    raise PerftuneError(f"unknown technique {name!r}; known techniques: {known}")


def create(name: str, space: Space, *, seed: int | None = None, settings: Any = None) -> Any:
    """Instantiate the technique ``name`` on ``space``.

    Args:
        name: A technique name or alias (see :func:`names`).
        space: The search space.
        seed: Seed of the technique's random generator.
        settings: The technique's settings dataclass, or None for its defaults.

    Example:
        >>> from perftune.space import Int, Space
        >>> create("de", Space({"x": Int(0, 9)}), seed=3).name
        'de'
    """
    cls = get(name)
    return cls(space, seed=seed, settings=settings)
