"""How the machine is split between the two sides of a race.

A side is a set of CPUs its worker process group is pinned to (``os.sched_setaffinity``) plus an
optional ``on_start`` hook that runs in the worker before its first request: the place to select a
GPU or a stream (``CUDA_VISIBLE_DEVICES``, ``torch.cuda.set_device``) when the work runs on a GPU.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from perftune.errors import PerftuneError

__all__ = ["Side", "Split"]


@dataclass(frozen=True)
class Side:
    """One half of the machine: the CPUs of a worker and what it does when it starts.

    Args:
        cpus: CPU numbers the worker (and every process it starts) may run on.
        on_start: Called once in the worker process before its first request, e.g. to pick a GPU.
        env: Environment variables set in the worker before ``on_start`` (``CUDA_VISIBLE_DEVICES``).

    Example:
        >>> Side(cpus=(0,)).cpus
        (0,)
    """

    cpus: tuple[int, ...]
    on_start: Callable[[], None] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cpus = self.cpus
        if isinstance(cpus, str) or not isinstance(cpus, Iterable) or not all(
                isinstance(c, int) and not isinstance(c, bool) for c in cpus):
            raise PerftuneError(f"Side: cpus must be a list of CPU numbers, got {cpus!r}")
        object.__setattr__(self, "cpus", tuple(cpus))
        if self.on_start is not None and not callable(self.on_start):
            raise PerftuneError(f"Side: on_start must be a function of no arguments, got {self.on_start!r}")
        if not isinstance(self.env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()):
            raise PerftuneError(f"Side: env must map variable names to strings, got {self.env!r}")


@dataclass(frozen=True)
class Split:
    """The two disjoint sides a race runs on (side 0 and side 1).

    Example:
        >>> Split.of([[0], [1]]).sides[1].cpus
        (1,)
    """

    sides: tuple[Side, Side]

    def __post_init__(self) -> None:
        a, b = self.sides
        if not a.cpus or not b.cpus:
            raise PerftuneError("split: each side needs at least one CPU")
        shared = sorted(set(a.cpus) & set(b.cpus))
        if shared:
            raise PerftuneError(f"split: the two sides share CPU(s) {shared}; they must be disjoint")

    @classmethod
    def halves(cls) -> Split:
        """This process's CPUs cut in two halves (one CPU each on a 2-core machine)."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise PerftuneError(
                f"split: racing needs at least 2 CPUs, this process may use {len(cpus)}; "
                "use perftune.online.Explorer (no racing) instead")
        half = len(cpus) // 2
        return cls((Side(tuple(cpus[:half])), Side(tuple(cpus[half:2 * half]))))

    @classmethod
    def of(cls, value: Split | Sequence[Sequence[int]] | Sequence[Side] | None) -> Split:
        """A split from None (halves), a Split, two CPU lists, or two :class:`Side` values."""
        if value is None:
            return cls.halves()
        if isinstance(value, Split):
            value = list(value.sides)  # checked as two Side values: CPUs this process may use
        if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
            raise PerftuneError(f"split: expected two CPU lists or two Side values, got {value!r}")
        allowed = os.sched_getaffinity(0)
        sides = []
        for i, item in enumerate(value):
            if isinstance(item, Side):
                side = item
            elif isinstance(item, Sequence) and not isinstance(item, str) and all(
                    isinstance(c, int) and not isinstance(c, bool) for c in item):
                side = Side(tuple(int(c) for c in item))
            else:
                raise PerftuneError(f"split[{i}]: expected a list of CPU numbers or a Side, got {item!r}")
            missing = sorted(set(side.cpus) - allowed)
            if missing:
                raise PerftuneError(f"split[{i}]: CPU(s) {missing} are not available to this process")
            sides.append(side)
        return cls((sides[0], sides[1]))
