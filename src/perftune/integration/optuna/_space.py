"""Optuna distributions as perftune parameters, and values back and forth.

Each distribution becomes the perftune parameter that searches it best, with a codec that turns a
perftune value into Optuna's external value and back:

* ``FloatDistribution``: :class:`~perftune.space.Float`, with ``log=True``
  :class:`~perftune.space.LogFloat`; with a ``step``, an :class:`~perftune.space.Ordinal` of the grid's
  values (``low + k * step``), so that techniques move along the grid (over 4096 values: an
  :class:`~perftune.space.Int` over ``k``).
* ``IntDistribution``: :class:`~perftune.space.Int`, with ``log=True`` :class:`~perftune.space.LogInt`;
  with a ``step`` > 1, an ``Ordinal`` of the grid (over 4096 values: an ``Int`` over ``k``).
* ``CategoricalDistribution``: a :class:`~perftune.space.Choice` of the choices; when every choice is a
  number (not a bool) and ``ordered_categoricals`` is on, an :class:`~perftune.space.Ordinal` in the
  numbers' order, because a list of allowed sizes (``[16, 32, 64, 128]``) is Optuna's idiom for an
  ordered set, and perftune's neighbourhood moves and boundary design use that order. Choices perftune
  cannot hold as options (``None``, NaN) make it a ``Choice`` of their positions.

Example:
    >>> from optuna.distributions import CategoricalDistribution, FloatDistribution
    >>> codec = codec_for(FloatDistribution(0.0, 1.0, step=0.25))
    >>> codec.param.options, codec.from_optuna(0.5)
    ((0.0, 0.25, 0.5, 0.75, 1.0), 0.5)
    >>> codec = codec_for(CategoricalDistribution([64, 16, 32]))
    >>> codec.param.options, codec.to_optuna(16)
    ((16, 32, 64), 16)
    >>> codec_for(CategoricalDistribution(["a", None])).by_position
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from perftune.errors import PerftuneError, SpaceError
from perftune.space import Choice, Float, Int, LogFloat, LogInt, Ordinal, Param

__all__ = ["MAX_LISTED_STEPS", "Codec", "codec_for"]


#: A stepped distribution with at most this many values is an Ordinal of the values themselves (so that
#: constraints read them); a longer one is an Int over the step index.
MAX_LISTED_STEPS = 4096


class Codec:
    """One Optuna distribution as a perftune parameter.

    Attributes:
        distribution: The Optuna distribution.
        param: The perftune parameter that searches it.
        by_position: True when the parameter's values are positions (a step index, a choice's
            position), not Optuna's values: a constraint cannot read such a parameter.
    """

    by_position = False

    def __init__(self, distribution: BaseDistribution, param: Param) -> None:
        self.distribution = distribution
        self.param = param

    def to_optuna(self, value: Any) -> Any:
        """Optuna's external value of the perftune value ``value``."""
        return value

    def from_optuna(self, value: Any) -> Any:
        """The perftune value of Optuna's external value ``value`` (None when it lies outside the space)."""
        return value if self.param.contains(value) else None


class _Real(Codec):
    def to_optuna(self, value: Any) -> Any:
        return float(value)

    def from_optuna(self, value: Any) -> Any:
        return super().from_optuna(float(value))


class _Integer(Codec):
    def to_optuna(self, value: Any) -> Any:
        return int(value)

    def from_optuna(self, value: Any) -> Any:
        return super().from_optuna(int(value))


class _Stepped(Codec):
    """A stepped distribution: the grid ``low + k * step`` as an Ordinal of its values, or, for a long
    grid, an Int over ``k``."""

    def __init__(self, distribution: FloatDistribution | IntDistribution) -> None:
        self.low, self.high = distribution.low, distribution.high
        step = distribution.step
        assert step is not None
        self.step = step
        self.is_int = isinstance(distribution, IntDistribution)
        # Optuna has already moved `high` onto the grid; round, since the division is of floats.
        self.n_steps = int(round((self.high - self.low) / step))
        self.by_position = self.n_steps + 1 > MAX_LISTED_STEPS
        param: Param = (Int(0, self.n_steps) if self.by_position
                        else Ordinal([self._value(k) for k in range(self.n_steps + 1)]))
        super().__init__(distribution, param)

    def _value(self, k: int) -> int | float:
        if self.is_int:
            return int(self.low + k * int(self.step))
        # Rounded to the step's decimals, so that 0.1 * 3 is 0.3 (what a user typed), unless that moves
        # it off Optuna's grid (a fine step on a wide range: Optuna would refuse the value and sample the
        # parameter at random).
        x = self.low + k * self.step
        digits = max(0, -math.floor(math.log10(abs(self.step)))) + 6
        for value in (round(x, digits), x):
            value = float(min(max(value, self.low), self.high))
            if _on_grid(value, self.low, self.step):
                return value
        return float(min(max(x, self.low), self.high))  # beyond float precision (Optuna refuses it too)

    def to_optuna(self, value: Any) -> Any:
        return self._value(int(value)) if self.by_position else value

    def from_optuna(self, value: Any) -> Any:
        k = round((float(value) - self.low) / self.step)
        if not 0 <= k <= self.n_steps:
            return None
        return k if self.by_position else self._value(k)


def _on_grid(value: float, low: float, step: float) -> bool:
    """Whether Optuna takes ``value`` as a point of the grid ``low + k * step`` (its own test)."""
    k = (value - low) / step
    return abs(k - round(k)) < 1.0e-8


def _choice_param(choices: Sequence[Any], ordered: bool) -> tuple[Param, list[int]] | None:
    """A Choice (or Ordinal) over the choices themselves, and each option's position among the choices;
    None when perftune cannot hold them as options (None, NaN, values perftune would take as equal)."""
    positions = list(range(len(choices)))
    numeric = all(isinstance(c, int | float) and not isinstance(c, bool) for c in choices)
    if ordered and numeric:
        if any(math.isnan(c) for c in choices):
            return None
        positions.sort(key=lambda i: (choices[i], i))
    try:
        options = [choices[i] for i in positions]
        param: Param = Ordinal(options) if ordered and numeric else Choice(options)
    except SpaceError:
        return None
    return param, positions


class _Categorical(Codec):
    """The choices themselves, or their positions when perftune cannot hold them as options."""

    def __init__(self, distribution: CategoricalDistribution, ordered: bool) -> None:
        self.choices = distribution.choices
        found = _choice_param(self.choices, ordered)
        if found is None:
            self.by_position = True
            self.positions = list(range(len(self.choices)))
            param: Param = Choice(self.positions)
        else:
            param, self.positions = found
        super().__init__(distribution, param)

    def to_optuna(self, value: Any) -> Any:
        if self.by_position:
            return self.choices[int(value)]
        assert isinstance(self.param, Choice)
        return self.choices[self.positions[self.param.index(value)]]

    def from_optuna(self, value: Any) -> Any:
        try:
            i = int(self.distribution.to_internal_repr(value))
        except ValueError:
            return None
        if self.by_position:
            return i
        assert isinstance(self.param, Choice)
        return self.param.options[self.positions.index(i)]


def codec_for(distribution: BaseDistribution, ordered_categoricals: bool = True) -> Codec:
    """The codec of one Optuna distribution (see the module's docstring for the mapping).

    Raises:
        PerftuneError: for a distribution type perftune does not know (the deprecated Optuna
            distributions are all subclasses of the three current ones).
    """
    if isinstance(distribution, FloatDistribution):
        if distribution.step is not None:
            return _Stepped(distribution)
        cls = LogFloat if distribution.log else Float
        return _Real(distribution, cls(distribution.low, distribution.high))
    if isinstance(distribution, IntDistribution):
        if distribution.step != 1:
            return _Stepped(distribution)
        icls = LogInt if distribution.log else Int
        return _Integer(distribution, icls(distribution.low, distribution.high))
    if isinstance(distribution, CategoricalDistribution):
        return _Categorical(distribution, ordered_categoricals)
    raise PerftuneError(f"PerftuneSampler: cannot search a {type(distribution).__name__} "
                        "(known: FloatDistribution, IntDistribution, CategoricalDistribution)")
