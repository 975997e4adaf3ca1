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

import numbers
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perftune.targets.choice._accuracy import (
    AccuracyTable,
    UnreachableTargetWarning,
    check_targets,
    tune_accuracy,
)
from perftune.targets.choice._file import ChoiceError, ChoicesFile, choices_path, merge_into_file
from perftune.targets.choice._ladder import as_list, check_callable
from perftune.targets.choice._site import current_choices

__all__ = ["LevelTable", "level_config", "tune_levels"]


def _level(level: Any, where: str) -> int:
    """A level as an int: an integral number, or a string of one (as read from argv); ChoiceError else."""
    if isinstance(level, str):
        try:
            return int(level)
        except ValueError:
            pass
    elif isinstance(level, numbers.Real) and not isinstance(level, bool) and float(level).is_integer():
        return int(float(level))  # 3, numpy's 3, 3.0
    raise ChoiceError(f"{where}: level must be an integer, got {level!r} ({type(level).__name__})")


@dataclass
class LevelTable:
    """Tuned configurations per (level, accuracy bin); each level's row is an :class:`AccuracyTable`.

    As for an accuracy table, :meth:`cell` and :meth:`config_for` hand back a ``Config`` of the level's
    space when the row knows it (a table :func:`tune_levels` returned) or ``space=`` is given; else the
    plain dict the file stores.

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
        """The accuracy table of ``level`` (an integer, or a string of one as read from argv)."""
        n = _level(level, f"table {self.name!r}")
        try:
            return self.rows[n]
        except KeyError:
            raise ChoiceError(
                f"table {self.name!r}: level {n} is not tuned (tuned: {self.levels})"
            ) from None

    def cell(self, level: int, bin_index: int, space: Any = None) -> Mapping[str, Any] | None:
        """Configuration of bin ``bin_index`` (loosest first) at ``level``; None if unreachable."""
        row = self.row(level)
        if isinstance(bin_index, bool) or not isinstance(bin_index, numbers.Integral) \
                or not 0 <= bin_index < len(row.bins):
            raise ChoiceError(f"table {self.name!r}: bin {bin_index!r} out of range 0..{len(row.bins) - 1}")
        config = row.bins[bin_index].config
        return None if config is None else row.as_config(config, space)

    def config_for(self, level: int, accuracy: float, space: Any = None) -> Mapping[str, Any]:
        """Configuration at ``level`` for a requested accuracy (the loosest bin that is strict enough)."""
        return self.row(level).config_for(accuracy, space)

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
        # A row inherits the table's direction and metric where it does not state them (the file's
        # reader refuses a row that contradicts them).
        inherited = {k: d[k] for k in ("metric", "higher_is_better") if k in d}
        try:
            rows = {int(k): AccuracyTable.from_dict(f"{name}[{k}]", {**inherited, **v})
                    for k, v in d["rows"].items()}
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

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Merge this table into the tuned-choices file and write it."""
        return merge_into_file(path, lambda f: f.set_table(self.name, self.to_dict()))

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


def level_config(name: str, level: int, accuracy: float, *, space: Any = None) -> Mapping[str, Any]:
    """At run time: the configuration of level table ``name`` at ``level`` for ``accuracy`` (numbers, or
    strings of them as read from argv); with ``space``, a ``Config`` of it (selectors as ``Levels``)."""
    doc = current_choices().tables.get(name)
    if doc is None:
        raise ChoiceError(f"table {name!r} is not in the tuned-choices file")
    return LevelTable.from_dict(name, doc).config_for(level, accuracy, space)


def _checkpointed(
    path: str | os.PathLike[str], table: LevelTable, levels: Sequence[int]
) -> dict[int, AccuracyTable]:
    """The rows of ``table`` that a checkpoint file already holds (none when the file or the table is not
    there). A checkpoint tuned for other targets, another direction or levels not asked for now is
    refused (ChoiceError), before anything is measured: resuming from it would mix two tunings, and
    saving over it would lose its rows."""
    p = choices_path(path)
    at = f"tune_levels({table.name!r}): checkpoint {p}"
    if not p.exists() and not p.is_symlink():
        return {}
    try:
        doc = ChoicesFile.read(p).tables.get(table.name)
    except ChoiceError as e:
        raise ChoiceError(f"{at}: {e}; not resumed (fix or move it, or pass another path)") from None
    if doc is None:
        return {}
    if doc.get("kind") != "levels":
        raise ChoiceError(f"{at} holds a table {table.name!r} that is not a level table; pass another "
                          "name or path")
    saved = LevelTable.from_dict(table.name, doc)
    if saved.targets != table.targets or saved.higher_is_better != table.higher_is_better:
        raise ChoiceError(
            f"{at} holds {table.name!r} tuned for targets {saved.targets} (higher_is_better="
            f"{saved.higher_is_better}), not {table.targets} ({table.higher_is_better}); pass another path"
        )
    extra = sorted(set(saved.rows) - set(levels))
    if extra:
        raise ChoiceError(f"{at} holds levels {extra} not in levels={list(levels)}: pass them too, or "
                          "another path")
    return saved.rows


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
    checkpoint: str | os.PathLike[str] | None = None,
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
        checkpoint: A tuned-choices file to save the table into after every level (merged, as
            :meth:`LevelTable.save`). On a restart with the same path, the levels it already holds are
            not tuned again (their rows are read back); a checkpoint tuned for other targets or levels
            is refused before anything is measured. Without it, an interrupted run keeps nothing.

    Returns:
        A :class:`LevelTable`. Cells no candidate reached are None (one warning lists them).
    """
    at = f"tune_levels({name!r})"
    for fn, what in ((program, "program"), (space_for_level, "space_for_level"), (accuracy, "accuracy"),
                     (inputs_for_level, "inputs_for_level")):
        check_callable(fn, f"{at}: {what}")
    for optional, what in ((held_out_for_level, "held_out_for_level"), (seeds_for_level, "seeds_for_level")):
        if optional is not None:
            check_callable(optional, f"{at}: {what}")
    levels = [_level(lv, at) for lv in as_list(levels, f"{at}: levels")]
    if levels != sorted(set(levels)) or not levels:
        raise ChoiceError(f"{at}: levels must be given coarsest first, without repeats")
    targets = check_targets(targets, at)
    table = LevelTable(
        name=name,
        targets=sorted(set(targets)),  # as tune_accuracy: a target given twice is one bin
        metric=getattr(accuracy, "__name__", "accuracy"),
        higher_is_better=higher_is_better,
    )
    if not higher_is_better:
        table.targets.reverse()
    done = _checkpointed(checkpoint, table, levels) if checkpoint is not None else {}
    missing: list[str] = []
    for i, level in enumerate(levels):
        space = space_for_level(level, table)
        if level in done:  # tuned before a restart: read back, with the space its cells belong to
            row = done[level]
            row.space = space
        else:

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
        if checkpoint is not None and level not in done:
            table.save(checkpoint)  # a later interrupt (Ctrl-C at the next level) keeps this one
        missing += [f"level {level} target {b.target:g}" for b in row.unreachable]
    if missing:
        best = {lv: row.bins[0].best_accuracy for lv, row in table.rows.items()}
        warnings.warn(
            f"tune_levels({name!r}): unreachable cells: {missing} (best accuracy per level: {best})",
            UnreachableTargetWarning,
            stacklevel=2,
        )
    return table
