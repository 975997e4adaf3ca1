"""Search techniques in ask/tell style, the AUC-bandit ensemble and the technique registry.

A technique proposes valid configurations (``ask``) and learns from finished trials (``tell``); the
driver owns the loop. Techniques are created by name::

    >>> from perftune.space import Int, Pow2, Space
    >>> from perftune import search
    >>> space = Space({"block": Pow2(16, 1024), "unroll": Int(1, 8)})
    >>> tech = search.create("default", space, seed=0)    # the AUC bandit over the default portfolio
    >>> configs = tech.ask(2)
    >>> all(space.is_valid(c) for c in configs)
    True

Built-in names: ``random, greedy-uniform, greedy-normal, de, cma-es, trust-region, nelder-mead,
pattern-search, pso, ga, annealing, coordinate-descent, model, parzen, boundary, elite-neighbours``, the
ensemble ``bandit`` and ``staged`` (alias ``default``); for several objectives (docs/multiobjective.md)
``nsga2``, ``parego`` and their ensemble ``mo-bandit``. Plug-ins register through
the ``perftune.techniques`` entry-point group or :func:`register`.
"""

from __future__ import annotations

from perftune.search._annealing import AnnealingSettings, SimulatedAnnealing
from perftune.search._bandit import DEFAULT_PORTFOLIO, AUCBandit, BanditSettings
from perftune.search._base import (
    BaseTechnique,
    ClockAware,
    CountsWork,
    LabelsProposals,
    NoSettings,
    ParallelismAware,
    PreloadsImports,
    Technique,
)
from perftune.search._boundary import Boundary, BoundarySettings, EliteNeighbours, EliteNeighboursSettings
from perftune.search._cmaes import CMAES, CMAESSettings
from perftune.search._coordinate import CoordinateDescent, CoordinateDescentSettings
from perftune.search._de import DESettings, DifferentialEvolution
from perftune.search._ga import GASettings, GeneticAlgorithm
from perftune.search._greedy import GreedyNormal, GreedySettings, GreedyUniform
from perftune.search._mobandit import MO_PORTFOLIO, MOBandit
from perftune.search._model import ModelBased, ModelSettings
from perftune.search._nsga2 import NSGA2, NSGA2Settings
from perftune.search._objectives import Constraint, MultiObjectiveAware, Objectives
from perftune.search._parego import ParEGO, ParEGOSettings
from perftune.search._pareto import (
    crowding_distance,
    dominates,
    hypervolume,
    non_dominated_sort,
    pareto_front,
)
from perftune.search._parzen import Parzen, ParzenSettings
from perftune.search._pattern import PatternSearch, PatternSearchSettings
from perftune.search._pso import ParticleSwarm, PSOSettings
from perftune.search._random import RandomSearch
from perftune.search._registry import ALIASES, ENTRY_POINT_GROUP, create, get, names, register
from perftune.search._sequential import SequentialTechnique
from perftune.search._simplex import NelderMead, NelderMeadSettings
from perftune.search._staged import CONTINUOUS_PORTFOLIO, STAGED_PORTFOLIO, StagedBandit, StagedSettings
from perftune.search._trust import TrustRegion, TrustRegionSettings

__all__ = [
    "ALIASES",
    "DEFAULT_PORTFOLIO",
    "ENTRY_POINT_GROUP",
    "AUCBandit",
    "AnnealingSettings",
    "BanditSettings",
    "BaseTechnique",
    "Boundary",
    "BoundarySettings",
    "CMAES",
    "CMAESSettings",
    "Constraint",
    "ClockAware",
    "CountsWork",
    "CONTINUOUS_PORTFOLIO",
    "CoordinateDescent",
    "CoordinateDescentSettings",
    "DESettings",
    "EliteNeighbours",
    "EliteNeighboursSettings",
    "DifferentialEvolution",
    "GASettings",
    "GeneticAlgorithm",
    "GreedyNormal",
    "GreedySettings",
    "GreedyUniform",
    "LabelsProposals",
    "MO_PORTFOLIO",
    "MOBandit",
    "ModelBased",
    "ModelSettings",
    "Parzen",
    "ParzenSettings",
    "MultiObjectiveAware",
    "NSGA2",
    "NSGA2Settings",
    "NelderMead",
    "NelderMeadSettings",
    "NoSettings",
    "Objectives",
    "ParEGO",
    "ParEGOSettings",
    "PSOSettings",
    "ParallelismAware",
    "PreloadsImports",
    "ParticleSwarm",
    "PatternSearch",
    "PatternSearchSettings",
    "RandomSearch",
    "SequentialTechnique",
    "STAGED_PORTFOLIO",
    "SimulatedAnnealing",
    "StagedBandit",
    "StagedSettings",
    "TrustRegion",
    "TrustRegionSettings",
    "Technique",
    "create",
    "crowding_distance",
    "dominates",
    "get",
    "hypervolume",
    "names",
    "non_dominated_sort",
    "pareto_front",
    "register",
]
