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

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perftune._atomic import write_text_atomic
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


def check_selector(
    name: str, cutoffs: Sequence[Any], choices: Sequence[Any], where: str = ""
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Validate one selector; return it as tuples. Raises ChoiceError with one line naming the problem."""
    at = f"{where}site {name!r}"
    if isinstance(cutoffs, (str, bytes)) or not isinstance(cutoffs, Sequence):
        raise ChoiceError(f"{at}: cutoffs must be a list of integers, got {cutoffs!r}")
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
        raise ChoiceError(f"{at}: choices must be a list of names, got {choices!r}")
    cut: list[int] = []
    for c in cutoffs:
        if isinstance(c, bool) or not isinstance(c, int):
            if isinstance(c, float) and c.is_integer():
                c = int(c)
            else:
                raise ChoiceError(f"{at}: cutoff {c!r} is not an integer")
        cut.append(int(c))
    if any(b <= a for a, b in zip(cut, cut[1:], strict=False)):
        raise ChoiceError(f"{at}: cutoffs {cut} are not strictly increasing")
    if len(choices) != len(cut) + 1:
        raise ChoiceError(f"{at}: {len(cut)} cutoffs need {len(cut) + 1} choices, got {len(choices)}")
    names: list[str] = []
    for c in choices:
        if not isinstance(c, str) or not c:
            raise ChoiceError(f"{at}: choice {c!r} is not a non-empty string")
        names.append(c)
    return tuple(cut), tuple(names)


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
        """Parse a JSON document; raises ChoiceError naming the offending key."""
        if not isinstance(doc, dict):
            raise ChoiceError(f"{where}expected a JSON object at top level")
        if doc.get("format", FORMAT_NAME) != FORMAT_NAME:
            raise ChoiceError(f"{where}format {doc.get('format')!r} is not {FORMAT_NAME!r}")
        version = doc.get("version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ChoiceError(
                f"{where}version {version!r} is not supported (this perftune reads {FORMAT_VERSION})"
            )
        out = cls()
        sites = doc.get("sites", {})
        if not isinstance(sites, dict):
            raise ChoiceError(f"{where}'sites' must be an object")
        for name, entry in sites.items():
            if not isinstance(entry, dict):
                raise ChoiceError(f"{where}site {name!r}: expected an object with 'cutoffs' and 'choices'")
            out.sites[name] = check_selector(name, entry.get("cutoffs", []), entry.get("choices", ()), where)
        tables = doc.get("tables", {})
        if not isinstance(tables, dict):
            raise ChoiceError(f"{where}'tables' must be an object")
        for name, table in tables.items():
            if not isinstance(table, dict) or "kind" not in table:
                raise ChoiceError(f"{where}table {name!r}: expected an object with a 'kind' key")
            out.tables[name] = table
        return out

    @classmethod
    def read(cls, path: str | os.PathLike[str] | None = None) -> ChoicesFile:
        """Read a file strictly: raises ChoiceError if it is missing or malformed."""
        p = choices_path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ChoiceError(f"{p}: tuned-choices file not found") from None
        except OSError as e:
            raise ChoiceError(f"{p}: cannot read tuned-choices file: {e.strerror or e}") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ChoiceError(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from None
        out = cls.from_dict(doc, where=f"{p}: ")
        out.source = p
        return out

    def write(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write atomically (temporary file + rename) and return the path written."""
        p = choices_path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(p, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
        self.source = p
        return p


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
            warnings.warn(f"{e}; using the declared defaults", ChoicesFileWarning, stacklevel=3)
        return ChoicesFile()
