"""CPU/GPU placement: algorithm sites whose alternatives run on different devices (PetaBricks, heterogeneous).

A :class:`DeviceSite` is an :class:`AlgorithmSite` whose alternatives each name the device they run on
(``"cpu"``, ``"cuda"``). Every alternative takes and returns host data, so a GPU alternative's time
includes its transfers (host to device, device to host) and the synchronisation that reading the result
implies: the size cutoffs that :func:`tune_placement` finds between a CPU and a GPU alternative are
where the GPU's speed starts paying for its transfers and launches.

The site is device-aware: its selector (:meth:`DeviceSite.selector`) and its ``alternatives`` hold only
the alternatives whose device this process has, and a tuned entry that names an absent device's
alternative (choices tuned on a GPU machine, read on a laptop) is served by the site's CPU fallback on
those levels instead of failing. ``PERFTUNE_DEVICES=cpu`` hides every accelerator from the sites.

Example:
    >>> from perftune.targets.choice import ChoicesFile, use_choices
    >>> _ = use_choices(ChoicesFile())
    >>> site = DeviceSite("doc-place", devices={"python": "cpu", "gpu": "cuda"},
    ...                   alternatives={"python": sorted, "gpu": sorted})
    >>> site.device_of("gpu"), site.fallback
    ('cuda', 'python')
    >>> site([3, 1, 2])
    [1, 2, 3]
"""

from __future__ import annotations

import inspect
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perftune.targets.choice._file import ChoiceError, ChoicesFile, merge_into_file
from perftune.targets.choice._ladder import check_callable
from perftune.targets.choice._site import AlgorithmSite, current_choices
from perftune.targets.choice._tune import input_copy, simplify_levels

__all__ = ["DEVICES_ENV_VAR", "DeviceSite", "PlacementRow", "PlacementTuning", "available_devices",
           "tune_placement"]

DEVICES_ENV_VAR = "PERFTUNE_DEVICES"
_KNOWN_DEVICES = ("cpu", "cuda")


def available_devices() -> frozenset[str]:
    """The device kinds this process can run on: always ``cpu``; ``cuda`` when torch sees a GPU.

    ``$PERFTUNE_DEVICES`` (comma-separated, e.g. ``cpu``) restricts the answer. torch is imported only
    here, when a site with a non-CPU alternative resolves or builds its selector (never on a call).

    Example:
        >>> "cpu" in available_devices()
        True
    """
    restrict = os.environ.get(DEVICES_ENV_VAR, "")
    found = {"cpu"}
    wanted = {d.strip() for d in restrict.split(",") if d.strip()} if restrict else None
    if wanted is None or "cuda" in wanted:
        try:
            import torch

            if torch.cuda.is_available():
                found.add("cuda")
        except ImportError:  # no torch: no GPU alternatives, the CPU ones still run
            pass
    return frozenset(found if wanted is None else found & (wanted | {"cpu"}))


class DeviceSite(AlgorithmSite):
    """An algorithm site whose alternatives run on named devices; dispatched on input size.

    Args:
        name: Unique name; the key of the site in the tuned-choices file.
        alternatives: ``{name: callable}`` (more with :meth:`alternative`); each takes and returns host
            data, transfers included.
        devices: ``{alternative: device}``; an alternative not named runs on ``"cpu"``.
        size: Maps the first positional argument to the size used for dispatch (default ``len``).
        default: Alternative used when nothing is tuned (default: the first CPU one).
        size_range: ``(lo, hi)`` sizes the tuner may place cutoffs in.

    Example:
        >>> site = DeviceSite("doc-place-2")
        >>> @site.alternative("numpy", device="cpu")
        ... def _host(xs):
        ...     return sorted(xs)
        >>> site.alternatives, site.devices
        (('numpy',), {'numpy': 'cpu'})
    """

    __slots__ = ("_devices",)

    def __init__(
        self,
        name: str,
        alternatives: Mapping[str, Callable[..., Any]] | None = None,
        *,
        devices: Mapping[str, str] | None = None,
        size: Callable[[Any], int] = len,
        default: str | None = None,
        size_range: tuple[int, int] = (1, 1 << 24),
    ) -> None:
        self._devices: dict[str, str] = {}
        for alt, device in (devices or {}).items():
            self._devices[alt] = self._check_device(name, alt, device)
        super().__init__(name, alternatives, size=size, default=default, size_range=size_range)
        unknown = sorted(set(self._devices) - set(self._alts))
        if unknown and alternatives is not None:
            raise ChoiceError(f"site {name!r}: devices name unknown alternatives {unknown}")

    @staticmethod
    def _check_device(site: str, alt: str, device: Any) -> str:
        if device not in _KNOWN_DEVICES:
            raise ChoiceError(f"site {site!r}: alternative {alt!r} has device {device!r}; "
                              f"known devices: {list(_KNOWN_DEVICES)}")
        return str(device)

    def alternative(  # type: ignore[override]
        self, alt_name: str, device: str = "cpu"
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator adding an alternative that runs on ``device``; returns the function unchanged."""
        checked = self._check_device(self.name, alt_name, device)
        add = super().alternative(alt_name)

        def add_on_device(fn: Callable[..., Any]) -> Callable[..., Any]:
            out = add(fn)  # refuses an alternative declared twice before its device is touched
            self._devices[alt_name] = checked
            return out

        return add_on_device

    # ---- devices ---------------------------------------------------------------------------------

    def device_of(self, alt_name: str) -> str:
        """The device an alternative runs on."""
        if alt_name not in self._alts:
            raise ChoiceError(
                f"site {self.name!r}: unknown alternative {alt_name!r}; known: {list(self._alts)}"
            )
        return self._devices.get(alt_name, "cpu")

    @property
    def devices(self) -> dict[str, str]:
        """``{alternative: device}`` for every declared alternative."""
        return {alt: self._devices.get(alt, "cpu") for alt in self._alts}

    @property
    def all_alternatives(self) -> tuple[str, ...]:
        """Every declared alternative, whether or not its device is here."""
        return tuple(self._alts)

    @property
    def alternatives(self) -> tuple[str, ...]:
        """The alternatives whose device this process has (what a tuner may choose here)."""
        if all(self._devices.get(alt, "cpu") == "cpu" for alt in self._alts):
            return tuple(self._alts)  # nothing to ask torch about
        here = available_devices()
        return tuple(alt for alt in self._alts if self._devices.get(alt, "cpu") in here)

    @property
    def fallback(self) -> str:
        """The CPU alternative that serves levels tuned for a device this process lacks."""
        self._require_alternatives()
        if self._default is not None and self._devices.get(self._default, "cpu") == "cpu":
            return self._default
        cpu = [alt for alt in self._alts if self._devices.get(alt, "cpu") == "cpu"]
        if not cpu:
            raise ChoiceError(f"site {self.name!r} has no CPU alternative to fall back on")
        return cpu[0]

    @property
    def default(self) -> str:
        """The alternative used when nothing is tuned: the declared default if its device is here."""
        declared = super().default
        if self._devices.get(declared, "cpu") == "cpu" or self._devices[declared] in available_devices():
            return declared
        return self.fallback

    # ---- resolving and tuning ---------------------------------------------------------------------

    def resolve(self) -> None:
        """Install the tuned selector; levels on an absent device are served by :attr:`fallback`."""
        self._require_alternatives()
        entry = current_choices().sites.get(self.name)
        if entry is None or any(n not in self._alts for n in entry[1]):
            super().resolve()  # the base class warns about unknown names and installs the default
            return
        cutoffs, names = entry
        here = available_devices() if any(self._devices.get(n, "cpu") != "cpu" for n in names) else {"cpu"}
        absent = sorted({n for n in names if self._devices.get(n, "cpu") not in here})
        if not absent:
            self._install(cutoffs, names, "file")
            return
        fixed = [n if n not in absent else self.fallback for n in names]
        cut, chosen = simplify_levels(cutoffs, fixed)
        self._install(cut, chosen, f"file, {', '.join(absent)} on {self.fallback} (device absent)")

    def selector(self, max_levels: int = 4, size_range: tuple[int, int] | None = None) -> Any:
        """A :class:`perftune.space.Selector` over the alternatives whose device is here."""
        from perftune.space import Levels, Selector

        self._require_alternatives()
        return Selector(list(self.alternatives), max_levels=max_levels,
                        size_range=size_range or self.size_range, default=Levels((), (self.default,)))


@dataclass
class PlacementRow:
    """What :func:`tune_placement` measured at one size.

    Attributes:
        size: The input size.
        median_s: Median seconds per call of each alternative that ran correctly.
        winner: The fastest alternative at this size.
        failures: ``{alternative: reason}`` for those that raised (in the warm-up or a timed round) or
            gave a wrong output; they are not ranked at this size.

    Example:
        >>> PlacementRow(64, {"numpy": 1e-5, "torch-cuda": 9e-5}, "numpy").failures
        {}
    """

    size: int
    median_s: dict[str, float]
    winner: str
    failures: dict[str, str] = field(default_factory=dict)


@dataclass
class PlacementTuning:
    """The outcome of :func:`tune_placement`.

    Attributes:
        site: The site's name.
        cutoffs: Size cutoffs of the tuned selector (level ``i`` serves ``n < cutoffs[i]``).
        choices: Alternative per level.
        rows: The per-size measurements.
        devices: ``{alternative: device}`` of the site.

    Example:
        >>> devices = {"numpy": "cpu", "torch-cuda": "cuda"}
        >>> t = PlacementTuning("mm", (190,), ("numpy", "torch-cuda"), [], devices)
        >>> t.choose(100), t.choose(190)
        ('numpy', 'torch-cuda')
    """

    site: str
    cutoffs: tuple[int, ...]
    choices: tuple[str, ...]
    rows: list[PlacementRow]
    devices: dict[str, str]

    @property
    def choices_file(self) -> ChoicesFile:
        """The tuned selector as a tuned-choices file (this site only)."""
        out = ChoicesFile()
        out.set_site(self.site, self.cutoffs, self.choices)
        return out

    def choose(self, n: int) -> str:
        """The alternative the tuned selector runs at size ``n``."""
        import bisect

        return self.choices[bisect.bisect_right(self.cutoffs, n)]

    def save(self, path: str | Path | None = None) -> Path:
        """Merge the tuned selector into the tuned-choices file (default location) and write it."""
        return merge_into_file(path, lambda f: f.update(self.choices_file))

    def apply(self, site: AlgorithmSite) -> None:
        """Install the tuned selector in ``site`` in this process."""
        site.set(self.cutoffs, self.choices)

    def table(self) -> str:
        """The per-size measurements as a Markdown table (milliseconds)."""
        alts = list(self.devices)
        head = "| size | " + " | ".join(f"{a} ({self.devices[a]}) ms" for a in alts) + " | winner |"
        lines = [head, "|" + "---|" * (len(alts) + 2)]
        for row in self.rows:
            cells = [f"{row.median_s[a] * 1e3:.3f}" if a in row.median_s else "failed" for a in alts]
            lines.append(f"| {row.size} | " + " | ".join(cells) + f" | {row.winner} |")
        return "\n".join(lines)


def _crossing(size_a: int, size_b: int, ratio_a: float, ratio_b: float) -> int:
    """Where, between two sizes, log(t_old / t_new) crosses zero (log-log interpolation)."""
    if ratio_a == ratio_b:
        return int(round(math.sqrt(size_a * size_b)))
    f = ratio_a / (ratio_a - ratio_b)
    f = min(max(f, 0.0), 1.0)
    c = math.exp(math.log(size_a) + f * (math.log(size_b) - math.log(size_a)))
    return min(max(int(math.ceil(c)), size_a + 1), size_b)


def _check_make_input(make_input: Any) -> None:
    """One line for a ``make_input`` that cannot be called as ``make_input(n, rng)``."""
    check_callable(make_input, "tune_placement: make_input")
    try:
        inspect.signature(make_input).bind(1, None)
    except TypeError:
        raise ChoiceError("tune_placement: make_input must take two arguments, make_input(n, rng) (the size "
                          "and a numpy Generator)") from None
    except ValueError:  # no signature to read (some builtins): its call will tell
        pass


def tune_placement(
    site: DeviceSite,
    make_input: Callable[[int, np.random.Generator], Any],
    sizes: Sequence[int],
    *,
    call: Callable[[Callable[..., Any], Any], Any] | None = None,
    check: Callable[[Any, Any], bool] | None = None,
    n_rounds: int = 5,
    min_sample_s: float = 2e-3,
    seed: int | None = 0,
) -> PlacementTuning:
    """Measure each available alternative of ``site`` at each size and place the cutoffs between them.

    At every size all alternatives run on the same input in interleaved rounds (order rotated each
    round) after one warm-up call each (the first GPU call also creates its context); a sample times
    enough calls to last ``min_sample_s``. The winner of each size is the lowest median; between two
    sizes whose winners differ, the cutoff is where the two alternatives' times cross (interpolated on
    log-log scales), so transfer costs that grow with size move the cutoff where they should.

    Args:
        site: The site to tune.
        make_input: Builds the input of a size (``make_input(n, rng)``); not timed.
        sizes: Increasing input sizes.
        call: How one input is passed to an alternative (default ``fn(input)``; for a tuple of
            arguments, ``lambda fn, args: fn(*args)``).
        check: Optional ``check(input, output) -> bool``; a wrong output excludes that alternative at
            that size (checked on the warm-up call). An alternative that raises, in the warm-up or in a
            timed round (a GPU out of memory once the rounds pile up calls), is excluded there too, with
            the reason in its row's ``failures``; the sizes measured so far are kept.
        n_rounds: Interleaved samples per alternative and size.
        min_sample_s: Least duration of one sample.
        seed: Seed of the inputs.

    Returns:
        A :class:`PlacementTuning` (``.save()`` writes the tuned-choices file, ``.apply(site)`` installs it).

    Raises:
        ChoiceError: Bad sizes, or no alternative ran correctly at some size.
    """
    sizes = list(sizes)
    if not sizes or sizes != sorted(set(sizes)) or sizes[0] < 1:
        raise ChoiceError(f"tune_placement: sizes must be positive and strictly increasing, got {sizes}")
    if n_rounds < 1:
        raise ChoiceError(f"tune_placement: n_rounds must be >= 1, got {n_rounds}")
    _check_make_input(make_input)
    invoke = call or (lambda fn, data: fn(data))
    alts = list(site.alternatives)
    funcs = {alt: site._alts[alt] for alt in alts}
    rng = np.random.default_rng(seed)
    rows: list[PlacementRow] = []
    for n in sizes:
        try:
            data = make_input(n, rng)
        except Exception as exc:
            raise ChoiceError(
                f"tune_placement: make_input({n}, rng) raised {type(exc).__name__}: {exc}"
            ) from None
        failures: dict[str, str] = {}
        reps: dict[str, int] = {}
        for alt in alts:
            try:
                # Every run gets its own copy of the input (an alternative may change it in place), and
                # check compares the output with the input as it was.
                out = invoke(funcs[alt], input_copy(data))  # warm-up: caches, a GPU's context, kernels
                if check is not None and not check(input_copy(data), out):
                    failures[alt] = f"wrong output at size {n}"
                    continue
                fresh = input_copy(data)
                t0 = time.perf_counter()
                invoke(funcs[alt], fresh)
                warm_s = max(time.perf_counter() - t0, 1e-9)
            except Exception as exc:  # an alternative failing at a size is an outcome, not a crash
                failures[alt] = f"{type(exc).__name__} at size {n}: {exc}"
                continue
            reps[alt] = max(1, int(math.ceil(min_sample_s / warm_s)))
        ok = [alt for alt in alts if alt in reps]
        samples: dict[str, list[float]] = {alt: [] for alt in ok}
        for r in range(n_rounds):
            order = ok[r % len(ok):] + ok[: r % len(ok)] if ok else []
            for alt in order:
                if alt not in samples:
                    continue  # failed in an earlier round at this size
                k = reps[alt]
                copies = [input_copy(data) for _ in range(k)]  # made before the clock starts
                try:
                    t0 = time.perf_counter()
                    for one in copies:
                        invoke(funcs[alt], one)
                    took = time.perf_counter() - t0
                except Exception as exc:  # out of memory once the timed rounds pile up calls, say
                    failures[alt] = f"{type(exc).__name__} at size {n} (timed round {r + 1}): {exc}"
                    del samples[alt]
                    continue
                samples[alt].append(took / k)
        if not samples:
            raise ChoiceError(f"tune_placement: no alternative of {site.name!r} ran correctly at size {n}: "
                              f"{failures}")
        medians = {alt: statistics.median(s) for alt, s in samples.items()}
        rows.append(PlacementRow(n, medians, min(medians, key=medians.__getitem__), failures))
    cutoffs: list[int] = []
    choices = [rows[0].winner]
    for prev, row in zip(rows, rows[1:], strict=False):
        if row.winner == choices[-1]:
            continue
        old, new = choices[-1], row.winner
        if old in prev.median_s and new in prev.median_s and old in row.median_s and new in row.median_s:
            cut = _crossing(prev.size, row.size, math.log(prev.median_s[old] / prev.median_s[new]),
                            math.log(row.median_s[old] / row.median_s[new]))
        else:
            cut = row.size  # one of them failed at a size: switch where the other was measured
        cutoffs.append(cut)
        choices.append(new)
    cut_t, choice_t = simplify_levels(cutoffs, choices)
    return PlacementTuning(site.name, cut_t, choice_t, rows, {a: site.device_of(a) for a in alts})
