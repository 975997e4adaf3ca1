"""Search spaces: typed parameters, ``when=`` conditions, constraints and configurations.

Example:
    >>> import numpy as np
    >>> from perftune.space import Bool, Choice, Int, Pow2, Space
    >>> space = Space(
    ...     {
    ...         "block_x": Pow2(16, 256, default=32),
    ...         "block_y": Pow2(1, 16, default=4),
    ...         "algo": Choice(["naive", "tiled"]),
    ...         "tile": Int(1, 4, when="algo == 'tiled'"),
    ...         "padding": Bool(),
    ...     },
    ...     constraints=["32 <= block_x * block_y <= 1024", "not padding or block_x % 32 != 0"],
    ... )
    >>> space.is_valid(space.default())
    True
    >>> config = space.sample(np.random.default_rng(0))[0]
    >>> space.is_valid(space.mutate(config, np.random.default_rng(1)))
    True
"""

from __future__ import annotations

from perftune.space._config import Config
from perftune.space._expression import Expression, evaluate_constant
from perftune.space._params import (
    Bool,
    Choice,
    Float,
    Int,
    LogFloat,
    LogInt,
    Ordinal,
    Param,
    Pow2,
    parameter_from_dict,
)
from perftune.space._permutation import Permutation, Schedule
from perftune.space._selector import Levels, Selector
from perftune.space._sequence import PassSequence
from perftune.space._space import Space

__all__ = [
    "Bool",
    "Choice",
    "Config",
    "Expression",
    "Float",
    "Int",
    "Levels",
    "LogFloat",
    "LogInt",
    "Ordinal",
    "Param",
    "PassSequence",
    "Permutation",
    "Pow2",
    "Schedule",
    "Selector",
    "Space",
    "evaluate_constant",
    "parameter_from_dict",
]
