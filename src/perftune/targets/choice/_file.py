"""The tuned-choices file: one JSON document holding every tuned choice of a program.

Format (``version`` 1)::

    {
      "format": "perftune-choices",
      "version": 1,
      "sites":  {"sort": {"cutoffs": [24, 1500], "choices": ["insertion", "quick", "radix"]}},
      "tables": {"kmeans": {"kind": "accuracy", ...}, "poisson": {"kind": "levels", ...}}
    }

``sites`` maps a site name to its selector: level ``i`` serves sizes ``n < cutoffs[i]`` and the last
choice serves every larger size, so ``len(choices) == len(cutoffs) + 1`` and cutoffs strictly
increase. ``tables`` holds accuracy tables and level tables (see ``_accuracy.py`` and ``_levels.py``).

Location: ``$PERFTUNE_CHOICES`` if set, else ``./perftune-choices.json``. A program reads it once, on
the first dispatch; a missing or corrupt file means "use the declared defaults", announced by ONE
warning, and the program runs on.

Example:
    >>> f = ChoicesFile()
    >>> f.set_site("sort", [16], ["insertion", "merge"])
    >>> ChoicesFile.from_dict(f.to_dict()).sites["sort"]
    ((16,), ('insertion', 'merge'))
"""

from __future__ import annotations

import contextlib
import json
import math
import numbers
import os
import stat
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from perftune._atomic import locked, write_text_atomic
from perftune._jsonfile import read_json_file, shown
from perftune.errors import PerftuneError

__all__ = [
    "DEFAULT_CHOICES_PATH",
    "ENV_VAR",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ChoiceError",
    "ChoicesFile",
    "ChoicesFileWarning",
    "choices_path",
    "load_choices",
]

FORMAT_NAME = "perftune-choices"
FORMAT_VERSION = 1
DEFAULT_CHOICES_PATH = "perftune-choices.json"
ENV_VAR = "PERFTUNE_CHOICES"
#: The largest cutoff a selector read from a file may have (an input size).
MAX_CUTOFF = (1 << 63) - 1
_TABLE_KINDS = ("accuracy", "levels")


class ChoiceError(PerftuneError):
    """A choice site, selector, table or tuned-choices file is used wrongly."""


class ChoicesFileWarning(UserWarning):
    """The tuned-choices file is missing or unreadable; declared defaults are used instead."""


def choices_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Where the tuned-choices file is: ``path``, else ``$PERFTUNE_CHOICES``, else the default path."""
    if path is not None:
        return Path(path)
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else Path(DEFAULT_CHOICES_PATH)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the first caller outside this package (the line
    of the user's program), however deep inside the package the warning is raised. Called by the
    function that warns."""
    level = 1
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _finite(v: Any) -> bool:
    """A number of JSON (not a bool) that is finite as a float."""
    if not _is_number(v):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def check_selector(
    name: str, cutoffs: Sequence[Any], choices: Sequence[Any], where: str = "", *, from_file: bool = False
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Validate one selector; return it as tuples. Raises ChoiceError with one line naming the problem.

    ``from_file``: the selector was read from a file, so its lists are JSON arrays and every cutoff is
    an input size, ``1 <= cutoff <= 2**63 - 1``.
    """
    at = f"{where}site {name!r}"
    if from_file and not isinstance(cutoffs, list):
        raise ChoiceError(f"{at}: cutoffs must be a list of integers, got {shown(cutoffs)}")
    if from_file and not isinstance(choices, list):
        raise ChoiceError(f"{at}: choices must be a list of names, got {shown(choices)}")
    if isinstance(cutoffs, (str, bytes)) or not isinstance(cutoffs, Sequence):
        raise ChoiceError(f"{at}: cutoffs must be a list of integers, got {shown(cutoffs)}")
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
        raise ChoiceError(f"{at}: choices must be a list of names, got {shown(choices)}")
    cut: list[int] = []
    for c in cutoffs:
        if isinstance(c, bool) or not isinstance(c, int):
            if isinstance(c, float) and c.is_integer():
                c = int(c)
            else:
                raise ChoiceError(f"{at}: cutoff {shown(c)} is not an integer")
        if from_file and not 1 <= c <= MAX_CUTOFF:
            raise ChoiceError(f"{at}: cutoff {shown(c)} is not an input size (1 to 2**63 - 1)")
        cut.append(int(c))
    if any(b <= a for a, b in zip(cut, cut[1:], strict=False)):
        raise ChoiceError(f"{at}: cutoffs {shown(cut)} are not strictly increasing")
    if len(choices) != len(cut) + 1:
        raise ChoiceError(f"{at}: {len(cut)} cutoffs need {len(cut) + 1} choices, got {len(choices)}")
    names: list[str] = []
    for c in choices:
        if not isinstance(c, str) or not c:
            raise ChoiceError(f"{at}: choice {shown(c)} is not a non-empty string")
        names.append(c)
    return tuple(cut), tuple(names)


def _check_number(d: dict[str, Any], key: str, at: str, *, required: bool = False, finite: bool = True,
                  low: float | None = None) -> None:
    """``d[key]`` is a number (finite unless not ``finite``; at least ``low``), or absent/null if allowed."""
    if key not in d or d[key] is None:
        if required:
            raise ChoiceError(f"{at}: {key!r} is missing")
        return
    v = d[key]
    ok = _finite(v) if finite else _is_number(v)
    if ok and low is not None:
        ok = float(v) >= low
    if not ok:
        want = "a finite number" if finite else "a number"
        raise ChoiceError(f"{at}: {key!r} must be {want}{'' if low is None else f' >= {low:g}'}, "
                          f"got {shown(v)}")


def _check_table_header(table: dict[str, Any], at: str) -> None:
    if "metric" in table and not isinstance(table["metric"], str):
        raise ChoiceError(f"{at}: 'metric' must be a string, got {shown(table['metric'])}")
    if "higher_is_better" in table and not isinstance(table["higher_is_better"], bool):
        got = shown(table["higher_is_better"])
        raise ChoiceError(f"{at}: 'higher_is_better' must be true or false, got {got}")


def _check_accuracy_table(table: dict[str, Any], at: str, higher_is_better: bool = True) -> None:
    """An accuracy table as ``AccuracyTable.to_dict`` writes it; raises ChoiceError naming the field.

    ``higher_is_better``: the direction when the table does not state it (a level table's rows inherit
    the level table's). The bins must be ordered loosest target first for that direction, as every lookup
    assumes.
    """
    _check_table_header(table, at)
    higher_is_better = table.get("higher_is_better", higher_is_better)
    n = table.get("n_measurements", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ChoiceError(f"{at}: 'n_measurements' must be an integer >= 0, got {shown(n)}")
    bins = table.get("bins")
    if not isinstance(bins, list):
        raise ChoiceError(f"{at}: 'bins' must be a list, got {shown(bins)}")
    for i, b in enumerate(bins):
        where = f"{at}: bin {i}"
        if not isinstance(b, dict):
            raise ChoiceError(f"{where}: expected an object, got {shown(b)}")
        _check_number(b, "target", where, required=True)
        config = b.get("config")
        if config is not None and not isinstance(config, dict):
            raise ChoiceError(f"{where}: 'config' must be an object or null, got {shown(config)}")
        _check_number(b, "time_s", where, low=0.0)
        _check_number(b, "accuracy", where)
        _check_number(b, "verified_accuracy", where)
        _check_number(b, "best_accuracy", where, finite=False)  # only reported: may be -inf (none found)
    targets = [float(b["target"]) for b in bins]
    if higher_is_better:
        ordered = all(a < b for a, b in zip(targets, targets[1:], strict=False))
    else:
        ordered = all(a > b for a, b in zip(targets, targets[1:], strict=False))
    if not ordered:
        way = "increasing" if higher_is_better else "decreasing (an error-like metric)"
        raise ChoiceError(f"{at}: bin targets {shown(targets)} are not strictly {way}: bins go loosest first")


def _check_table(name: str, table: Any, where: str) -> None:
    """A table of the file: an accuracy table or a level table (one accuracy table per level)."""
    at = f"{where}table {name!r}"
    if not isinstance(table, dict) or "kind" not in table:
        raise ChoiceError(f"{at}: expected an object with a 'kind' key")
    kind = table["kind"]
    if kind == "accuracy":
        _check_accuracy_table(table, at)
        return
    if kind != "levels":
        raise ChoiceError(f"{at}: kind {shown(kind)} is not {' or '.join(map(repr, _TABLE_KINDS))}")
    _check_table_header(table, at)
    targets = table.get("targets")
    if not isinstance(targets, list) or not all(_finite(t) for t in targets):
        raise ChoiceError(f"{at}: 'targets' must be a list of finite numbers, got {shown(targets)}")
    rows = table.get("rows")
    if not isinstance(rows, dict):
        raise ChoiceError(f"{at}: 'rows' must be an object (level -> accuracy table), got {shown(rows)}")
    for level, row in rows.items():
        try:
            canonical = str(int(level)) == level
        except ValueError:
            canonical = False
        if not canonical:  # "03" and "3" would both be level 3, and one of them silently lost
            raise ChoiceError(f"{at}: row {shown(level)} is not a level (an integer written as 3, not 03)")
        if not isinstance(row, dict) or row.get("kind") != "accuracy":
            raise ChoiceError(f"{at}: row {level}: expected an accuracy table")
        for key in ("metric", "higher_is_better"):  # a row inherits these; it may repeat, not contradict
            if key in table and key in row and row[key] != table[key]:
                raise ChoiceError(f"{at}: row {level}: {key!r} is {json.dumps(row[key])} but the table's is "
                                  f"{json.dumps(table[key])}")
        _check_accuracy_table(row, f"{at}[{level}]", table.get("higher_is_better", True))


class ChoicesFile:
    """In-memory tuned-choices document: selectors of sites and accuracy/level tables.

    Example:
        >>> f = ChoicesFile()
        >>> f.set_site("sort", [], ["merge"])
        >>> f.to_dict()["sites"]
        {'sort': {'cutoffs': [], 'choices': ['merge']}}
    """

    def __init__(self) -> None:
        self.sites: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {}
        self.tables: dict[str, dict[str, Any]] = {}
        self.source: Path | None = None

    def set_site(self, name: str, cutoffs: Sequence[int], choices: Sequence[str]) -> None:
        """Record the selector of site ``name`` (validated)."""
        self.sites[name] = check_selector(name, cutoffs, choices)

    def set_table(self, name: str, table: dict[str, Any]) -> None:
        """Record an accuracy or level table (its ``to_dict()``)."""
        if not isinstance(table, dict) or "kind" not in table:
            raise ChoiceError(f"table {name!r}: expected a dict with a 'kind' key")
        self.tables[name] = table

    def update(self, other: ChoicesFile) -> None:
        """Merge ``other`` into this file (other wins on equal names)."""
        self.sites.update(other.sites)
        self.tables.update(other.tables)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "sites": {
                k: {"cutoffs": list(c), "choices": list(ch)} for k, (c, ch) in sorted(self.sites.items())
            },
            "tables": {k: self.tables[k] for k in sorted(self.tables)},
        }

    @classmethod
    def from_dict(cls, doc: Any, where: str = "") -> ChoicesFile:
        """Parse a JSON document; raises ChoiceError naming the offending key.

        Every value is checked (types, cutoffs that are input sizes, tables of a known kind with finite
        numbers), so a document this accepts makes every site and table lookup meaningful.
        """
        if not isinstance(doc, dict):
            raise ChoiceError(f"{where}expected a JSON object at top level")
        if doc.get("format", FORMAT_NAME) != FORMAT_NAME:
            raise ChoiceError(f"{where}format {shown(doc.get('format'))} is not {FORMAT_NAME!r}")
        version = doc.get("version", FORMAT_VERSION)
        if isinstance(version, bool) or version != FORMAT_VERSION:
            raise ChoiceError(
                f"{where}version {shown(version)} is not supported (this perftune reads {FORMAT_VERSION})"
            )
        out = cls()
        sites = doc.get("sites", {})
        if not isinstance(sites, dict):
            raise ChoiceError(f"{where}'sites' must be an object, got {shown(sites)}")
        for name, entry in sites.items():
            if not isinstance(entry, dict):
                raise ChoiceError(f"{where}site {name!r}: expected an object with 'cutoffs' and 'choices'")
            out.sites[name] = check_selector(
                name, entry.get("cutoffs", []), entry.get("choices", []), where, from_file=True
            )
        tables = doc.get("tables", {})
        if not isinstance(tables, dict):
            raise ChoiceError(f"{where}'tables' must be an object, got {shown(tables)}")
        for name, table in tables.items():
            _check_table(name, table, where)
            out.tables[name] = table
        return out

    @classmethod
    def read(cls, path: str | os.PathLike[str] | None = None) -> ChoicesFile:
        """Read a file strictly: raises ChoiceError if it is missing or malformed.

        Only a regular file of at most :data:`perftune._jsonfile.MAX_FILE_BYTES` of UTF-8 JSON is read (see
        :func:`perftune._jsonfile.read_json_file`); every value is then checked (:meth:`from_dict`).
        """
        p = choices_path(path)
        doc = read_json_file(p, "tuned-choices", ChoiceError)
        try:
            out = cls.from_dict(doc, where=f"{p}: ")
        except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError, RecursionError) as e:
            # A check above that missed a case: still one line naming the file, never a traceback.
            why = f"{type(e).__name__}: {str(e)[:160]}"
            raise ChoiceError(f"{p}: malformed tuned-choices file ({why})") from None
        out.source = p
        return out

    def write(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write atomically (temporary file + rename) and return the path written.

        Raises:
            ChoiceError: the content is not what :meth:`read` accepts (a cutoff of 0, an infinite
                accuracy): a file every program start would refuse is not written.
        """
        p = choices_path(path)
        doc = self.to_dict()
        try:
            text = json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n"
            ChoicesFile.from_dict(json.loads(text), where=f"{p} (not written): ")
        except ValueError as e:  # NaN or infinity: JSON has no such number
            raise ChoiceError(f"{p} (not written): a value is not a finite number ({e})") from None
        p.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(p, text)
        self.source = p
        return p


def _aside_name(p: Path) -> Path:
    """A free name to keep an unreadable file under: ``NAME.unreadable``, else ``NAME.unreadable.1``, ...
    (a file kept aside before is never replaced)."""
    aside = p.with_name(p.name + ".unreadable")
    n = 0
    while aside.exists() or aside.is_symlink():
        n += 1
        aside = p.with_name(f"{p.name}.unreadable.{n}")
    return aside


def _replaceable(p: Path) -> bool:
    """Whether a readable regular file is at ``p`` (False: nothing is, or a dangling link). Anything else
    there (a folder, a FIFO, a file this process may not read) is no tuned-choices file to replace:
    ChoiceError."""
    try:
        mode = os.stat(p).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise ChoiceError(f"{p}: is {kind}, not a tuned-choices file; not overwritten "
                              "(save to another path)")
        with open(p, "rb"):  # a regular file: opening it cannot block
            pass
    except FileNotFoundError:
        return False
    except OSError as e:
        why = e.strerror or e
        raise ChoiceError(f"{p}: cannot read the tuned-choices file ({why}); not overwritten") from None
    return True


def load_for_merge(path: str | os.PathLike[str] | None = None) -> ChoicesFile:
    """The tuned-choices file that a save merges into: empty when there is none.

    A regular file whose content cannot be used (not JSON, a bad value) is renamed aside (``NAME.unreadable``,
    or ``NAME.unreadable.1``, ... when that is taken; one warning) rather than overwritten without a word,
    so that the choices it holds can still be recovered by hand. Anything else at the path (a folder, a
    FIFO, a file this process may not read) is no tuned-choices file to replace: ChoiceError, nothing moved.
    """
    p = choices_path(path)
    if not _replaceable(p):
        return ChoicesFile()
    try:
        return ChoicesFile.read(p)
    except ChoiceError as e:
        aside = _aside_name(p)
        try:
            os.replace(p, aside)
        except OSError as move:
            raise ChoiceError(f"{e}; it could not be moved aside ({move.strerror}), so it is not "
                              "overwritten") from None
        warnings.warn(f"{e}; a new file is written with this tuning's choices only, the old one kept as "
                      f"{aside}", ChoicesFileWarning, stacklevel=user_stacklevel())
        return ChoicesFile()


@contextlib.contextmanager
def _save_lock(p: Path) -> Iterator[None]:
    """An exclusive lock on ``NAME.lock`` beside the file, for a whole read-merge-write: two tunings
    saving into one file at once take turns, so neither writes a merge made before the other saved."""
    try:
        lock = locked(p)
    except OSError as e:
        raise ChoiceError(f"{p}: cannot lock the tuned-choices file for saving ({e.strerror or e})") from None
    with lock:
        yield


def merge_into_file(path: str | os.PathLike[str] | None, update: Callable[[ChoicesFile], None]) -> Path:
    """Read the tuned-choices file (:func:`load_for_merge`), let ``update`` change it, write it back, all
    under the file's lock; returns the path written. Every tuning's ``save()`` goes through here."""
    p = choices_path(path)
    _replaceable(p)  # a folder at the path: refused before a lock file is made beside it
    with _save_lock(p):
        f = load_for_merge(p)
        update(f)
        return f.write(p)


def load_choices(path: str | os.PathLike[str] | None = None, *, warn: bool = True) -> ChoicesFile:
    """Read the tuned-choices file leniently: missing or corrupt -> empty file and one warning.

    Args:
        path: The file; default ``$PERFTUNE_CHOICES`` or ``./perftune-choices.json``.
        warn: Emit a :class:`ChoicesFileWarning` when falling back to defaults.
    """
    try:
        return ChoicesFile.read(path)
    except ChoiceError as e:
        if warn:
            warnings.warn(f"{e}; using the declared defaults", ChoicesFileWarning,
                          stacklevel=user_stacklevel())
        return ChoicesFile()
