"""Level-by-level tuning of recursive solvers: a table over levels x accuracy bins, filled bottom-up.

For a recursive solver (multigrid is the classic case), a configuration at level ``l`` may call the
solver at a lower level with some accuracy. :func:`tune_levels` fills the table by dynamic programming
from the coarsest level up: each level is a variable-accuracy tuning (:func:`tune_accuracy`) whose
candidates may only call cells of lower levels, which are already tuned and fixed.

Example:
    >>> table = tune_levels(solve, space_for_level, levels=[2, 3, 4, 5], targets=[1, 3, 5, 7],
    ...                     accuracy=digits, inputs_for_level=rhs, budget_per_level=40)  # doctest: +SKIP
    >>> table.config_for(5, accuracy=5)  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perftune.targets.choice._accuracy import (
    AccuracyTable,
    UnreachableTargetWarning,
    tune_accuracy,
)
from perftune.targets.choice._file import ChoiceError, load_for_merge
from perftune.targets.choice._site import current_choices

__all__ = ["LevelTable", "level_config", "tune_levels"]


@dataclass
class LevelTable:
    """Tuned configurations per (level, accuracy bin); each level's row is an :class:`AccuracyTable`.

    Example:
        >>> from perftune.targets.choice import AccuracyBin
        >>> row = AccuracyTable("r", [AccuracyBin(1.0, {"it": 1}), AccuracyBin(2.0, {"it": 3})])
        >>> t = LevelTable("doc", [1.0, 2.0], rows={3: row})
        >>> t.cell(3, 1), t.config_for(3, 1.5)
        ({'it': 3}, {'it': 3})
    """

    name: str
    targets: list[float]
    rows: dict[int, AccuracyTable] = field(default_factory=dict)
    metric: str = "accuracy"
    higher_is_better: bool = True

    @property
    def levels(self) -> list[int]:
        """Tuned levels, coarsest first."""
        return sorted(self.rows)

    def row(self, level: int) -> AccuracyTable:
        try:
            return self.rows[level]
        except KeyError:
            raise ChoiceError(
                f"table {self.name!r}: level {level} is not tuned (tuned: {self.levels})"
            ) from None

    def cell(self, level: int, bin_index: int) -> dict[str, Any] | None:
        """Configuration of bin ``bin_index`` (loosest first) at ``level``; None if unreachable."""
        bins = self.row(level).bins
        if not 0 <= bin_index < len(bins):
            raise ChoiceError(f"table {self.name!r}: bin {bin_index} out of range 0..{len(bins) - 1}")
        return bins[bin_index].config

    def config_for(self, level: int, accuracy: float) -> dict[str, Any]:
        """Configuration at ``level`` for a requested accuracy (the loosest bin that is strict enough)."""
        return self.row(level).config_for(accuracy)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "levels",
            "metric": self.metric,
            "higher_is_better": self.higher_is_better,
            "targets": list(self.targets),
            "rows": {str(lv): self.rows[lv].to_dict() for lv in self.levels},
        }

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> LevelTable:
        if d.get("kind") != "levels":
            raise ChoiceError(f"table {name!r}: kind {d.get('kind')!r} is not 'levels'")
        try:
            rows = {int(k): AccuracyTable.from_dict(f"{name}[{k}]", v) for k, v in d["rows"].items()}
            targets = [float(t) for t in d["targets"]]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ChoiceError(f"table {name!r}: malformed level table ({e})") from None
        return cls(
            name=name,
            targets=targets,
            rows=rows,
            metric=str(d.get("metric", "accuracy")),
            higher_is_better=bool(d.get("higher_is_better", True)),
        )

    def save(self, path: str | Path | None = None) -> Path:
        """Merge this table into the tuned-choices file and write it."""
        f = load_for_merge(path)
        f.set_table(self.name, self.to_dict())
        return f.write(path)

    def format(self) -> str:
        """Levels x bins as text: time per cell, or '-' if unreachable."""
        head = f"{'level':>6} " + " ".join(f"{t:>14.4g}" for t in self.targets)
        lines = [head]
        for lv in self.levels:
            cells = []
            for b in self.rows[lv].bins:
                cells.append(
                    f"{b.time_s * 1e3:>12.3f}ms" if b.reached and b.time_s is not None else f"{'-':>14}"
                )
            lines.append(f"{lv:>6} " + " ".join(cells))
        return "\n".join(lines)


def level_config(name: str, level: int, accuracy: float) -> dict[str, Any]:
    """At run time: the configuration of level table ``name`` at ``level`` for ``accuracy``."""
    doc = current_choices().tables.get(name)
    if doc is None:
        raise ChoiceError(f"table {name!r} is not in the tuned-choices file")
    return LevelTable.from_dict(name, doc).config_for(level, accuracy)


def tune_levels(
    program: Callable[[int, Any, Any, LevelTable], Any],
    space_for_level: Callable[[int, LevelTable], Any],
    *,
    levels: Sequence[int],
    accuracy: Callable[[Any, Any], float],
    targets: Sequence[float],
    inputs_for_level: Callable[[int], Sequence[Any]],
    held_out_for_level: Callable[[int], Sequence[Any]] | None = None,
    budget_per_level: int = 40,
    higher_is_better: bool = True,
    seed: int | None = None,
    seeds_for_level: Callable[[int, LevelTable], Sequence[Any]] | None = None,
    name: str = "levels",
    margin: float = 0.0,
) -> LevelTable:
    """Fill a levels x accuracy-bins table by dynamic programming from the coarsest level up.

    Args:
        program: ``program(level, config, input, table) -> output``; may call cells of lower levels
            of ``table`` (already tuned), never of its own level or above.
        space_for_level: The :class:`perftune.space.Space` of candidates at a level (may depend on
            which lower cells were reachable).
        levels: Levels, coarsest first.
        accuracy: ``accuracy(output, input) -> float``.
        targets: Accuracy targets (bins).
        inputs_for_level: Training inputs at a level.
        held_out_for_level: Held-back inputs at a level, to verify every cell.
        budget_per_level: Candidates measured per level.
        higher_is_better: False for error-like metrics.
        seed: Random seed.
        seeds_for_level: Configurations to try first at a level.
        name: Table name (its key in the tuned-choices file).
        margin: Safety margin on the training inputs (see :func:`tune_accuracy`).

    Returns:
        A :class:`LevelTable`. Cells no candidate reached are None (one warning lists them).
    """
    if list(levels) != sorted(set(levels)) or not levels:
        raise ChoiceError(f"tune_levels({name!r}): levels must be given coarsest first, without repeats")
    table = LevelTable(
        name=name,
        targets=sorted({float(t) for t in targets}),  # as tune_accuracy: a target given twice is one bin
        metric=getattr(accuracy, "__name__", "accuracy"),
        higher_is_better=higher_is_better,
    )
    if not higher_is_better:
        table.targets.reverse()
    missing: list[str] = []
    for i, level in enumerate(levels):
        space = space_for_level(level, table)

        def run(config: Any, x: Any, _level: int = level) -> Any:
            return program(_level, config, x, table)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreachableTargetWarning)
            row = tune_accuracy(
                run,
                space,
                accuracy=accuracy,
                targets=targets,
                inputs=inputs_for_level(level),
                held_out=held_out_for_level(level) if held_out_for_level else (),
                budget=budget_per_level,
                higher_is_better=higher_is_better,
                seed=None if seed is None else seed + i,
                seeds=seeds_for_level(level, table) if seeds_for_level else (),
                name=f"{name}[{level}]",
                margin=margin,
            )
        table.rows[level] = row
        missing += [f"level {level} target {b.target:g}" for b in row.unreachable]
    if missing:
        best = {lv: row.bins[0].best_accuracy for lv, row in table.rows.items()}
        warnings.warn(
            f"tune_levels({name!r}): unreachable cells: {missing} (best accuracy per level: {best})",
            UnreachableTargetWarning,
            stacklevel=2,
        )
    return table
