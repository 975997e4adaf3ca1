"""Algorithm sites: size-dispatched algorithmic choice inside ordinary Python code.

An :class:`AlgorithmSite` is a named point in a program where one of several interchangeable
algorithms runs. Each call measures the input size (``size(first_argument)``, ``len`` by default) and
dispatches through a selector: level ``i`` serves sizes ``n < cutoffs[i]``, the last level every
larger size. Recursive algorithms call the site again on their sub-problems, so a tuned sort can run
radix sort at the top, quicksort on the buckets and insertion sort on tiny slices.

The selector comes from the tuned-choices file (see ``_file.py``), read once at the first dispatch;
without a file (or an entry for the site) the declared default algorithm serves every size.

Example:
    >>> sort = AlgorithmSite("doc-sort", default="builtin")
    >>> @sort.alternative("builtin")
    ... def _builtin(xs):
    ...     return sorted(xs)
    >>> @sort.alternative("insertion")
    ... def _insertion(xs):
    ...     out = []
    ...     for x in xs:
    ...         i = len(out)
    ...         while i and out[i - 1] > x:
    ...             i -= 1
    ...         out.insert(i, x)
    ...     return out
    >>> sort.set([8], ["insertion", "builtin"])
    >>> sort.choose(5), sort.choose(8)
    ('insertion', 'builtin')
    >>> sort([3, 1, 2])
    [1, 2, 3]
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
import weakref
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from perftune.targets.choice._file import (
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    check_selector,
    load_choices,
    user_stacklevel,
)

__all__ = [
    "AlgorithmSite",
    "current_choices",
    "registered_sites",
    "use_choices",
]

_REGISTRY: dict[str, AlgorithmSite] = {}
#: Every live site, those whose name a later site took too (a module reloaded): all re-resolve.
_ALL: weakref.WeakSet[AlgorithmSite] = weakref.WeakSet()
_LOCK = threading.Lock()
#: Held for the whole of a ``site.use(...)`` block: two threads' blocks never interleave, so that the
#: selector each restores is the one it replaced.
_USE_LOCK = threading.RLock()
_LOADED: ChoicesFile | None = None


def current_choices() -> ChoicesFile:
    """The tuned-choices file of this process, read on first use (missing/corrupt -> one warning)."""
    global _LOADED
    if _LOADED is None:
        with _LOCK:
            if _LOADED is None:
                _LOADED = load_choices()
    return _LOADED


def use_choices(
    source: ChoicesFile | str | os.PathLike[str] | None = None, *, strict: bool = False
) -> ChoicesFile:
    """Make ``source`` the tuned choices of this process and re-resolve every site.

    Args:
        source: A :class:`ChoicesFile`, a path, or None for ``$PERFTUNE_CHOICES`` / the default path.
        strict: Raise :class:`ChoiceError` on a missing/corrupt file instead of warning.

    Returns:
        The file now in use.
    """
    global _LOADED
    if isinstance(source, ChoicesFile):
        loaded = source
    elif strict:
        loaded = ChoicesFile.read(source)
    else:
        loaded = load_choices(source)
    with _LOCK:
        _LOADED = loaded
        sites = list(_ALL)
    for site in sites:
        site._unresolve()
    return loaded


def registered_sites() -> dict[str, AlgorithmSite]:
    """Every site created in this process, by name (the latest one wins on a repeated name)."""
    with _LOCK:
        return dict(_REGISTRY)


def _levels_value(cutoffs: tuple[int, ...], choices: tuple[str, ...]) -> Any:
    from perftune.space import Levels

    return Levels(cutoffs=cutoffs, choices=choices)


class AlgorithmSite:
    """A named algorithmic choice, dispatched on input size.

    Args:
        name: Unique name; the key of the site in the tuned-choices file.
        alternatives: ``{name: callable}``; more can be added with :meth:`alternative`.
            All alternatives take the same arguments and return the same kind of result.
        size: Maps the first positional argument to the size used for dispatch (default ``len``).
        default: Alternative that serves every size when nothing is tuned (default: the first one).
        size_range: ``(lo, hi)`` sizes the tuner may place cutoffs in.

    Example:
        >>> _ = use_choices(ChoicesFile())  # an empty tuned-choices file: every site runs its default
        >>> site = AlgorithmSite("doc-sum", {"builtin": sum, "loop": lambda xs: sum(x for x in xs)})
        >>> site([1, 2, 3])
        6
    """

    __slots__ = (
        "_alts",
        "_cutoffs",
        "_default",
        "_funcs",
        "_names",
        "_single",
        "_size",
        "name",
        "size_range",
        "source",
        "__weakref__",
    )

    def __init__(
        self,
        name: str,
        alternatives: Mapping[str, Callable[..., Any]] | None = None,
        *,
        size: Callable[[Any], int] = len,
        default: str | None = None,
        size_range: tuple[int, int] = (1, 1 << 24),
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ChoiceError(f"AlgorithmSite name must be a non-empty string, got {name!r}")
        if not callable(size):
            raise ChoiceError(f"site {name!r}: size must be callable, got {size!r}")
        lo, hi = size_range
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo < hi):
            raise ChoiceError(f"site {name!r}: size_range must be integers 1 <= lo < hi, got {size_range!r}")
        self.name = name
        self.size_range = (lo, hi)
        self._size = size
        self._alts: dict[str, Callable[..., Any]] = {}
        if alternatives is not None:
            if not isinstance(alternatives, Mapping) or not alternatives:
                raise ChoiceError(
                    f"site {name!r} has no alternatives: pass {{'name': function, ...}} with at least one"
                )
            for alt_name, fn in alternatives.items():
                self._add(alt_name, fn)
        self._default = default
        if default is not None and alternatives is not None and default not in self._alts:
            raise ChoiceError(f"site {name!r}: default {default!r} is not one of {sorted(self._alts)}")
        self.source = "unresolved"
        self._unresolve()
        with _LOCK:
            _REGISTRY[name] = self
            _ALL.add(self)

    # ---- declaring -------------------------------------------------------------------------------

    def _add(self, alt_name: str, fn: Callable[..., Any]) -> None:
        if not isinstance(alt_name, str) or not alt_name:
            raise ChoiceError(
                f"site {self.name!r}: alternative names must be non-empty strings, got {alt_name!r}"
            )
        if not callable(fn):
            raise ChoiceError(f"site {self.name!r}: alternative {alt_name!r} is not callable")
        if alt_name in self._alts:
            raise ChoiceError(f"site {self.name!r}: alternative {alt_name!r} declared twice")
        self._alts[alt_name] = fn

    def alternative(self, alt_name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator adding an alternative; returns the function unchanged.

        Example:
            >>> s = AlgorithmSite("doc-alt")
            >>> @s.alternative("builtin")
            ... def f(xs):
            ...     return sorted(xs)
            >>> s.alternatives
            ('builtin',)
        """

        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._add(alt_name, fn)
            self._unresolve()
            return fn

        return add

    @property
    def alternatives(self) -> tuple[str, ...]:
        """Names of the alternatives, in declaration order."""
        return tuple(self._alts)

    @property
    def default(self) -> str:
        """The alternative used when nothing is tuned."""
        self._require_alternatives()
        if self._default is None:
            return next(iter(self._alts))
        if self._default not in self._alts:
            raise ChoiceError(
                f"site {self.name!r}: default {self._default!r} is not one of {sorted(self._alts)}"
            )
        return self._default

    def _require_alternatives(self) -> None:
        if not self._alts:
            raise ChoiceError(
                f"site {self.name!r} has no alternatives: add one with @site.alternative('name') "
                "or AlgorithmSite(name, {'name': function})"
            )

    # ---- dispatch --------------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Hot path: two attribute loads, one size call, one bisect. Everything else is precomputed. (A
        # try costs nothing until it catches.)
        if self._single:
            return self._funcs[0](*args, **kwargs)
        try:
            n = self._size(args[0])
        except IndexError:
            if args:
                raise
            raise self._no_positional() from None
        return self._funcs[bisect_right(self._cutoffs, n)](*args, **kwargs)

    def _no_positional(self) -> ChoiceError:
        return ChoiceError(f"site {self.name!r} dispatches on the size of its first positional argument; "
                           f"call {self.name}(xs, ...), not {self.name}(xs=...)")

    def _unresolve(self) -> None:
        # The next call resolves (reads the file if needed) and then installs the real table.
        self._cutoffs: list[int] = []
        self._names: tuple[str, ...] = ()
        self._funcs: list[Callable[..., Any]] = [self._resolve_and_call]
        self._single = True
        self.source = "unresolved"

    def _resolve_and_call(self, *args: Any, **kwargs: Any) -> Any:
        if not args:  # refused on the first call, tuned or not: not only once a tuned file adds levels
            raise self._no_positional()
        self.resolve()
        return self(*args, **kwargs)

    def _install(self, cutoffs: tuple[int, ...], names: tuple[str, ...], source: str) -> None:
        funcs = [self._alts[n] for n in names]
        self._cutoffs = list(cutoffs)
        self._names = names
        self._funcs = funcs
        self._single = len(funcs) == 1
        self.source = source

    def resolve(self) -> None:
        """Install the tuned selector from the process's tuned-choices file, or the default."""
        self._require_alternatives()
        entry = current_choices().sites.get(self.name)
        if entry is not None:
            cutoffs, names = entry
            unknown = [n for n in names if n not in self._alts]
            if not unknown:
                self._install(cutoffs, names, "file")
                return
            warnings.warn(
                f"site {self.name!r}: tuned choices name unknown alternatives {unknown} "
                f"(known: {list(self._alts)}); using default {self.default!r}",
                ChoicesFileWarning,
                stacklevel=user_stacklevel(),
            )
        self._install((), (self.default,), "default")

    # ---- inspecting and setting ------------------------------------------------------------------

    def _ensure(self) -> None:
        if self.source == "unresolved":
            self.resolve()

    def choose(self, n: int) -> str:
        """Name of the alternative that serves size ``n``."""
        self._ensure()
        return self._names[bisect_right(self._cutoffs, n)]

    @property
    def cutoffs(self) -> tuple[int, ...]:
        """Current cutoffs (strictly increasing)."""
        self._ensure()
        return tuple(self._cutoffs)

    @property
    def choices(self) -> tuple[str, ...]:
        """Current alternative per level (one more than cutoffs)."""
        self._ensure()
        return self._names

    @property
    def levels(self) -> Any:
        """The current selector as a :class:`perftune.space.Levels` value."""
        self._ensure()
        return _levels_value(tuple(self._cutoffs), self._names)

    def set(self, cutoffs: Sequence[int] | Any, choices: Sequence[str] | None = None) -> None:
        """Set the selector: ``set(levels)`` or ``set(cutoffs, choices)``. Validated."""
        if choices is None:
            levels: Any = cutoffs
            if not (hasattr(levels, "cutoffs") and hasattr(levels, "choices")):
                raise ChoiceError(f"site {self.name!r}: set() takes a Levels value or (cutoffs, choices)")
            cutoffs, choices = levels.cutoffs, levels.choices
        self._require_alternatives()
        cut, names = check_selector(self.name, list(cutoffs), list(choices))
        unknown = [n for n in names if n not in self._alts]
        if unknown:
            raise ChoiceError(
                f"site {self.name!r}: unknown alternatives {unknown}; known: {list(self._alts)}"
            )
        self._install(cut, names, "set")

    def reset(self) -> None:
        """Forget :meth:`set`; the next call resolves from the tuned-choices file again."""
        self._unresolve()

    @contextlib.contextmanager
    def use(self, cutoffs: Sequence[int] | Any, choices: Sequence[str] | None = None) -> Iterator[None]:
        """Temporarily use a selector (as :meth:`set`), restoring the previous one on exit.

        The selector is the site's, for every thread; another thread's ``use`` waits until this one ends
        (their blocks never interleave, so each restores what it replaced).
        """
        with _USE_LOCK:
            saved = (self._cutoffs, self._names, self._funcs, self._single, self.source)
            self.set(cutoffs, choices)
            try:
                yield
            finally:
                self._cutoffs, self._names, self._funcs, self._single, self.source = saved

    def selector(self, max_levels: int = 4, size_range: tuple[int, int] | None = None) -> Any:
        """A :class:`perftune.space.Selector` parameter over this site's alternatives.

        Args:
            max_levels: Most levels.
            size_range: Where cutoffs may go (default: the site's ``size_range``).
        """
        from perftune.space import Selector

        self._require_alternatives()
        return Selector(
            list(self._alts),
            max_levels=max_levels,
            size_range=size_range or self.size_range,
            default=_levels_value((), (self.default,)),
        )

    def to_entry(self) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """The current selector as (cutoffs, choices) tuples, for :meth:`ChoicesFile.set_site`."""
        self._ensure()
        return tuple(self._cutoffs), self._names

    def __repr__(self) -> str:
        if self.source == "unresolved":
            return f"AlgorithmSite({self.name!r}, alternatives={list(self._alts)}, unresolved)"
        parts = [self._names[0]]
        for c, n in zip(self._cutoffs, self._names[1:], strict=True):
            parts.append(f"<{c}> {n}")
        return f"AlgorithmSite({self.name!r}: {' '.join(parts)}, from {self.source})"
