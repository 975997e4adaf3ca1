"""Uniform random search.

Example:
    >>> from perftune.space import Int, Space
    >>> tech = RandomSearch(Space({"x": Int(0, 9)}), seed=0)
    >>> len(tech.ask(4))
    4
"""

from __future__ import annotations

from typing import ClassVar

from perftune.search._base import BaseTechnique, NoSettings

__all__ = ["RandomSearch"]


class RandomSearch(BaseTechnique):
    """Valid configurations sampled uniformly (constructive/repair sampling of the space)."""

    name: ClassVar[str] = "random"
    Settings: ClassVar[type] = NoSettings
