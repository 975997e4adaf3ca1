"""Multi-fidelity: objectives that report intermediate values, and asynchronous successive halving.

An objective that declares a parameter named ``trial`` (other than its first, the configuration) is
called as ``objective(config, trial=handle)``. The handle, a :class:`RunningTrial`, takes
``trial.report(step, value)`` and answers ``trial.should_prune()``; the objective stops by returning
or by raising :class:`perftune.Pruned`. The trial then ends PRUNED with the pruner's reason.

The rule is ASHA, asynchronous successive halving (Li et al., 2020): the rungs are steps
``min_steps * eta**k``; a trial that reaches rung ``k`` goes on if its value there is among the best
``1/eta`` of the values that *any* trial recorded at rung ``k`` so far (the best one when fewer than
``eta`` did), and is pruned otherwise. Nothing ever waits for a rung to fill, so a worker is never idle
while there is work: a promoted trial simply continues, and a pruned one frees its worker for a new
configuration. With ``brackets > 1`` (Hyperband-style), trial ``i`` belongs to a bracket (``i % brackets``,
or Hyperband's shares), whose first rung is ``eta**bracket`` times later; each bracket is its own
competition. The defaults: with ``max_steps`` given, one bracket per rung with Hyperband's shares (for
``eta=3, max_steps=27``: brackets starting at steps 1, 3 and 9), else one; and a fresh run evaluates
``random_starts`` (``eta**2``) random configurations first, so that the rungs' first competitions are
among diverse configurations, not the default configuration and its neighbours
(benchmarks/results/fidelity.md measures both).

Where the rungs live: a directory of append-only files, one per (bracket, rung), each line a trial's
value there. Worker processes (forked, or Dask workers on this machine) append with ``O_APPEND`` and read
only what was added since they last looked, so that a decision costs what is new, not the whole
history (docs/architecture.md, rule 4); a worker killed mid-write leaves at most a partial record, which
is ignored (it costs its own value, never a later one). Threads of a process share its reader, under a
lock.

Example:
    >>> import tempfile
    >>> board = tempfile.TemporaryDirectory()
    >>> fid = Fidelity(ASHA(eta=2), "min", board.name)
    >>> pruned = []
    >>> for i, v in enumerate([0.5, 0.9, 0.1]):
    ...     t = RunningTrial(i, {}, fid)
    ...     t.report(1, v)
    ...     pruned.append(t.should_prune())
    >>> pruned
    [False, True, False]
    >>> board.cleanup()
"""

from __future__ import annotations

import bisect
import inspect
import math
import numbers
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from perftune.errors import PerftuneError

__all__ = ["ASHA", "Fidelity", "RunningTrial", "takes_trial"]

_MAX_RUNGS = 64  # geometric rungs without max_steps: eta**64 steps is beyond any real run
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class ASHA:
    """Settings of asynchronous successive halving, the pruner of reporting objectives.

    Args:
        eta: Reduction factor: at each rung, the best ``1/eta`` go on (default 3, as in ASHA and
            Hyperband papers and Optuna's ``SuccessiveHalvingPruner``).
        min_steps: Step of the first rung (default 1: judge from the first report on).
        max_steps: The step of a full evaluation, when known: no rung at or beyond it (default None:
            rungs go on geometrically; a trial that returns is a full evaluation whatever its step).
        brackets: Hyperband-style brackets. Bracket ``s`` starts at ``min_steps * eta**s``; trial ``i``
            is in bracket ``i % brackets`` (see ``allocation``). Default None: one bracket per rung
            when ``max_steps`` bounds the ladder (with ``eta=3, max_steps=27``: rungs at 1, 3 and 9,
            brackets starting at 1, 3 and 9, so every bracket prunes at least once: Hyperband's
            brackets but the one that never prunes), else 1 (plain ASHA).
        rungs: Explicit rung steps, increasing, instead of the geometric ones (task files: one rung per
            fidelity level but the last): integers of at least 1, below ``max_steps`` when it is given,
            and not with ``min_steps``. With ``brackets > 1``, bracket ``s`` skips the first ``s``.
        allocation: How trials are shared among brackets: ``"even"`` (``i % brackets``) or
            ``"hyperband"``: bracket ``b`` of ``B`` gets a share proportional to ``B * eta**k / (k + 1)``
            with ``k = B - 1 - b`` (Hyperband's numbers of configurations, as in Optuna's
            ``HyperbandPruner``), so the brackets that prune early get more trials; trials are spread by
            their ticket (a golden-ratio sequence), so a seeded run stays reproducible. Default None:
            ``"hyperband"`` for the default brackets, ``"even"`` when ``brackets`` is given.
        random_starts: How many random configurations (uniform samples of the space) a fresh run
            evaluates first, before the default configuration and the search's proposals (default None:
            ``eta**2``, 9). Under pruning a random configuration is cheap (most stop at the first rung),
            and the first trials set the rungs' competition: without them the default configuration and
            the search's first neighbours of it are alone at every rung and run to the end.

    Example:
        >>> ASHA().rung_steps(0)[:4]
        (1, 3, 9, 27)
        >>> default = ASHA(max_steps=27)
        >>> default.brackets, default.allocation, default.random_starts, default.rung_steps(2)
        (3, 'hyperband', 9, (9,))
        >>> ASHA().brackets, ASHA(brackets=2).allocation
        (1, 'even')
        >>> ASHA(eta=2, min_steps=4, max_steps=40, brackets=2).rung_steps(1)
        (8, 16, 32)
        >>> hb = ASHA(max_steps=27, brackets=4, allocation="hyperband")
        >>> [sum(hb.bracket_of(i) == b for i in range(490)) for b in range(4)]
        [269, 121, 60, 40]
    """

    eta: int = 3
    min_steps: int = 1
    max_steps: int | None = None
    brackets: int | None = None
    rungs: tuple[int, ...] | None = None
    allocation: str | None = None
    random_starts: int | None = None

    def __post_init__(self) -> None:
        def positive_int(name: str, value: Any, least: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise PerftuneError(f"ASHA: {name} must be an integer of at least {least}, got {value!r}")

        positive_int("eta", self.eta, 2)
        positive_int("min_steps", self.min_steps, 1)
        if self.brackets is not None:
            positive_int("brackets", self.brackets, 1)
        if self.random_starts is not None:
            positive_int("random_starts", self.random_starts, 0)
        if self.max_steps is not None:
            positive_int("max_steps", self.max_steps, self.min_steps + 1)
        if self.rungs is not None:
            self._check_rungs()
        if self.allocation not in (None, "even", "hyperband"):
            raise PerftuneError(f"ASHA: allocation must be 'even' or 'hyperband', got {self.allocation!r}")
        # The defaults, resolved once, so that the settings say what runs (and are stored so).
        allocation = self.allocation
        if self.brackets is None:
            bounded = self.max_steps is not None and self.rungs is None
            n = len(self.rung_steps(0)) if bounded else 1  # rung_steps(0) does not read brackets
            object.__setattr__(self, "brackets", max(1, n))
            if allocation is None and n > 1:
                allocation = "hyperband"
        object.__setattr__(self, "allocation", allocation or "even")
        if self.random_starts is None:
            object.__setattr__(self, "random_starts", self.eta**2)

    def _check_rungs(self) -> None:
        expected = f"ASHA: rungs must be increasing integer steps, got {self.rungs!r}"
        if isinstance(self.rungs, str | bytes | Mapping) or not isinstance(self.rungs, Iterable):
            raise PerftuneError(expected)
        steps = list(self.rungs)
        if not steps or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) for s in steps) \
                or any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
            raise PerftuneError(expected)
        if steps[0] < 1:  # steps are judged from 1 on, as min_steps
            raise PerftuneError(f"ASHA: rungs must be steps of at least 1, got {self.rungs!r}")
        if self.max_steps is not None and steps[-1] >= self.max_steps:
            # A full evaluation is never judged: a rung at or past max_steps would prune finished trials.
            raise PerftuneError(f"ASHA: rungs must be below max_steps ({self.max_steps}), got {self.rungs!r}")
        if self.min_steps != 1:
            raise PerftuneError(f"ASHA: give either rungs or min_steps, not both (rungs={self.rungs!r}, "
                                f"min_steps={self.min_steps!r}): the rungs' steps are the ones judged")
        object.__setattr__(self, "rungs", tuple(int(s) for s in steps))

    def rung_steps(self, bracket: int) -> tuple[int, ...]:
        """The steps at which a trial of ``bracket`` is judged, in order."""
        if self.rungs is not None:
            return self.rungs[bracket:]
        out: list[int] = []
        step = self.min_steps * self.eta**bracket
        while len(out) < _MAX_RUNGS and (self.max_steps is None or step < self.max_steps):
            out.append(step)
            step *= self.eta
        return tuple(out)

    def bracket_of(self, trial_id: int) -> int:
        """The bracket of ticket ``trial_id``."""
        n = self.brackets or 1  # resolved in __post_init__: never None here
        if self.allocation == "even" or n == 1:
            return trial_id % n
        weights = [n * self.eta ** (n - 1 - b) / (n - b) for b in range(n)]
        # The fractional parts of i * golden ratio fill [0, 1) evenly for any run length, so every
        # stretch of tickets is shared in about the right proportions.
        position = (trial_id * _GOLDEN) % 1.0 * sum(weights)
        for bracket, weight in enumerate(weights):
            position -= weight
            if position < 0:
                return bracket
        return n - 1

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data (stored with the run: ``run.settings["pruner"]``)."""
        return {"eta": self.eta, "min_steps": self.min_steps, "max_steps": self.max_steps,
                "brackets": self.brackets, "rungs": None if self.rungs is None else list(self.rungs),
                "allocation": self.allocation, "random_starts": self.random_starts}

    @classmethod
    def from_dict(cls, d: Any) -> ASHA:
        """Rebuild from :meth:`to_dict`.

        Example:
            >>> ASHA.from_dict(ASHA(max_steps=27).to_dict()) == ASHA(max_steps=27)
            True

        Raises:
            PerftuneError: ``d`` is not what :meth:`to_dict` writes (one line).
        """
        names = {f.name for f in fields(cls)}
        if not isinstance(d, Mapping) or not set(d) <= names:
            raise PerftuneError(f"ASHA: expected a mapping of {', '.join(sorted(names))}, got {repr(d)[:80]}")
        return cls(**d)


class _RungFiles:
    """The rungs' values as this process has read them: one sorted list of losses per (bracket, rung).

    A record is ``\n<ticket> <loss>;\n``: it starts a line of its own even after a torn write (a writer
    killed inside its ``write()``, a full disk), and it counts only when it reaches its ``;``, so a torn
    record costs its own value and nothing else. Threads of one process share the reader (one per
    directory and process), so reading is under a lock: each line is counted once.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._seen: dict[tuple[int, int], tuple[int, list[float]]] = {}  # (offset read to, losses)
        self._lock = threading.Lock()
        self.pid = os.getpid()

    def forked(self) -> _RungFiles:
        """A copy for this (forked) process: what was read so far, and a fresh lock."""
        copy = _RungFiles(self.directory)
        copy._seen = {key: (offset, list(values)) for key, (offset, values) in self._seen.items()}
        return copy

    def _path(self, bracket: int, rung: int) -> str:
        return os.path.join(self.directory, f"b{bracket}-r{rung}.txt")

    def record(self, bracket: int, rung: int, trial_id: int, loss: float) -> None:
        line = f"\n{trial_id} {loss!r};\n".encode()
        # One write of a short line with O_APPEND: concurrent writers never interleave inside a line.
        fd = os.open(self._path(bracket, rung), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def _read(self, bracket: int, rung: int) -> list[float]:
        # Under self._lock: the rung's sorted losses, with what was appended since the last read.
        key = (bracket, rung)
        offset, values = self._seen.get(key, (0, []))
        try:
            with open(self._path(bracket, rung), "rb") as f:
                f.seek(offset)
                new = f.read()
        except FileNotFoundError:
            new = b""
        end = new.rfind(b"\n") + 1  # a line still being written is read next time
        for line in new[:end].splitlines():
            loss = _parse_record(line)
            if loss is not None:
                bisect.insort(values, loss)
        self._seen[key] = (offset + end, values)
        return values

    def losses(self, bracket: int, rung: int) -> list[float]:
        """Every loss recorded at the rung so far, sorted (reads only what was appended since last time)."""
        with self._lock:
            return list(self._read(bracket, rung))

    def cut(self, bracket: int, rung: int, eta: int) -> tuple[float | None, int, int]:
        """``(the worst loss still promoted, n_keep, n)`` at the rung: the ``n_keep = max(1, n // eta)``-th
        best of the ``n`` losses recorded there (None while there is none)."""
        with self._lock:
            values = self._read(bracket, rung)
            n_keep = max(1, len(values) // eta)
            return (values[n_keep - 1] if values else None), n_keep, len(values)


def _parse_record(line: bytes) -> float | None:
    """The loss of a complete record line, None for a blank line or what a torn write left."""
    fields = line.split()
    if len(fields) != 2 or not fields[1].endswith(b";"):
        return None
    try:
        int(fields[0])
        loss = float(fields[1][:-1])
    except ValueError:
        return None
    return loss if math.isfinite(loss) else None


# One reader per board directory and process, so that each process reads every line once.
_READERS: dict[str, _RungFiles] = {}


def _reader(directory: str) -> _RungFiles:
    reader = _READERS.get(directory)
    if reader is None:
        # setdefault is atomic: two threads that come here first get the same reader.
        reader = _READERS.setdefault(directory, _RungFiles(directory))
    elif reader.pid != os.getpid():
        # A forked worker: keep what the driver had read, with a lock of its own (a lock held by another
        # thread of the parent at the fork would never be released here).
        reader = _READERS[directory] = reader.forked()
    return reader


@dataclass(frozen=True)
class Fidelity:
    """What an evaluation needs to report and be judged: the pruner, the goal and the rungs' directory.

    Plain and picklable; the driver sends it with every submission (``EvalContext.fidelity``).

    Attributes:
        pruner: The ASHA settings, or None to record reports without ever pruning.
        goal: ``"min"`` or ``"max"`` (reported values are in the user's units).
        board: Directory of the rung files (made by the driver, removed when the run ends).

    Example:
        >>> Fidelity(ASHA(eta=2), "max", "/tmp/rungs").pruner.rung_steps(0)[:3]
        (1, 2, 4)
    """

    pruner: ASHA | None
    goal: str = "min"
    board: str | None = None


@dataclass
class RunningTrial:
    """The handle an objective that declares ``trial`` receives: report intermediate values, ask whether
    to stop (Optuna's ``trial.report`` / ``trial.should_prune`` pair).

    Attributes:
        id: The trial's ticket in the run.
        config: The configuration being evaluated.
        intermediate: What was reported so far, ``{step: value}``.

    Example:
        >>> t = RunningTrial(0, {"lr": 0.1}, None)
        >>> t.report(1, 0.7); t.report(2, 0.6)
        >>> t.intermediate, t.should_prune()
        ({1: 0.7, 2: 0.6}, False)
    """

    id: int
    config: Mapping[str, Any]
    fidelity: Fidelity | None = None
    intermediate: dict[int, float] = field(default_factory=dict)
    prune_reason: str | None = None
    _rung: int = -1  # the last rung reached (index in the bracket's rung steps)
    _rung_step: int = 0
    _rung_loss: float = 0.0
    _promoted: int = -1  # the last rung at which this trial was judged good enough

    def report(self, step: int, value: float) -> None:
        """Record ``value`` (the objective so far, in its units) at ``step`` (epochs, iterations, input size).

        Steps increase; the value at the first report on or past a rung's step is the trial's value there.

        Raises:
            PerftuneError: a step that is not an integer above the last one, or a value that is not a
                finite number.
        """
        # Any integer and any real number (numpy's too: `for epoch in np.arange(...)`, a float32 loss),
        # as for the value an objective returns; bools are refused.
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise PerftuneError(f"trial.report(): step must be a non-negative integer, got {step!r}")
        step = int(step)
        if self.intermediate and step <= max(self.intermediate):
            raise PerftuneError(f"trial.report(): step {step} after step {max(self.intermediate)}; "
                                "steps must increase")
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise PerftuneError(f"trial.report(): value must be a finite number, got {value!r}")
        value = float(value)
        self.intermediate[step] = value
        fid = self.fidelity
        if fid is None or fid.pruner is None or fid.board is None:
            return
        bracket = fid.pruner.bracket_of(self.id)
        steps = fid.pruner.rung_steps(bracket)
        rung = bisect.bisect_right(steps, step) - 1  # the highest rung at or before this step
        if rung > self._rung:
            self._rung, self._rung_step = rung, steps[rung]
            self._rung_loss = value if fid.goal == "min" else -value
            _reader(fid.board).record(bracket, rung, self.id, self._rung_loss)

    def should_prune(self) -> bool:
        """Whether the trial should stop now: its value at the last rung it reached is not among the best
        ``1/eta`` recorded there (the best one, while fewer than ``eta`` trials reached it).

        Never waits: the answer uses what other trials recorded so far. Once promoted at a rung, a trial
        stays promoted there; once pruned, the answer stays True.
        """
        if self.prune_reason is not None:
            return True
        fid = self.fidelity
        if fid is None or fid.pruner is None or fid.board is None or self._rung < 0 \
                or self._promoted >= self._rung:
            return False
        pruner = fid.pruner
        cut, n_keep, n = _reader(fid.board).cut(pruner.bracket_of(self.id), self._rung, pruner.eta)
        threshold = self._rung_loss if cut is None else cut
        if self._rung_loss <= threshold:
            self._promoted = self._rung
            return False
        sign = 1.0 if fid.goal == "min" else -1.0
        value, bound = sign * self._rung_loss, sign * threshold
        self.prune_reason = (f"pruned at step {self._rung_step}: {value:.6g} worse than the top "
                             f"1/{pruner.eta} at that step ({bound:.6g}, the {_ordinal(n_keep)} best of "
                             f"{n})")
        return True


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def replay(fidelity: Fidelity, trial_id: int, intermediate: Mapping[int, float]) -> None:
    """Put a stored trial's reports back on the rungs (a resumed run starts with a fresh board)."""
    handle = RunningTrial(trial_id, {}, fidelity)
    for step in sorted(intermediate):
        handle.report(int(step), float(intermediate[step]))


def takes_trial(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` declares a parameter named ``trial`` after its first (then it gets a handle).

    The first parameter is the configuration whatever its name, so an old ``def f(trial): ...`` that
    reads ``trial["x"]`` keeps receiving the configuration.

    Example:
        >>> takes_trial(lambda config, trial: 0), takes_trial(lambda trial: 0)
        (True, False)
    """
    try:
        parameters: Sequence[inspect.Parameter] = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return any(p.name == "trial" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               for p in parameters[1:])
