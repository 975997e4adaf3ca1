"""The dispatcher file: learned per-input dispatchers, as JSON, beside the tuned-choices file.

Format (``version`` 1)::

    {
      "format": "perftune-dispatch",
      "version": 1,
      "dispatchers": {
        "sort": {
          "target": "site",                  # site | objective | command
          "fingerprint": "3f1c...",          # of the site's alternatives/space and its features
          "columns": ["n", "sortedness@64", "duplicates@64"],
          "landmarks": [{"cutoffs": [16], "choices": ["insertion", "merge"]}, ...],
          "model": {"kind": "tree", "left": [...], "right": [...], "feature": [...],
                    "threshold": [...], "leaf": [...]},
          "trained": {"n_inputs": 48, "selected": ["sortedness@64"], ...}
        }
      }
    }

Location: ``$PERFTUNE_DISPATCH`` if set, else ``perftune-dispatch.json`` in the folder of the
tuned-choices file (``$PERFTUNE_CHOICES`` or ``./perftune-choices.json``). A program reads it once,
at the first dispatch of a site. A missing or corrupt file, or an entry whose fingerprint no longer
matches its site (alternatives, space or features changed), means "run the default configuration",
announced by ONE warning; the program runs on. No pickle: the file is data, safe to read.

Example:
    >>> f = DispatchFile()
    >>> f.dispatchers["doc"] = {"target": "objective", "fingerprint": "x", "columns": [],
    ...                         "landmarks": [{"k": 1}], "model": {"kind": "tree", "left": [-1],
    ...                         "right": [-1], "feature": [-1], "threshold": [0.0], "leaf": [0]}}
    >>> sorted(DispatchFile.from_dict(f.to_dict()).dispatchers)
    ['doc']
"""

from __future__ import annotations

import json
import math
import numbers
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from perftune._atomic import write_text_atomic
from perftune._jsonfile import read_json_file, shown
from perftune.adapt._features import AdaptError

__all__ = [
    "DISPATCH_ENV_VAR",
    "DISPATCH_FILE_NAME",
    "DispatchFile",
    "DispatchFileWarning",
    "current_dispatch",
    "dispatch_path",
    "load_dispatch",
    "use_dispatch",
]

FORMAT_NAME = "perftune-dispatch"
FORMAT_VERSION = 1
DISPATCH_FILE_NAME = "perftune-dispatch.json"
DISPATCH_ENV_VAR = "PERFTUNE_DISPATCH"
_ENTRY_KEYS = ("target", "fingerprint", "columns", "landmarks", "model")
#: Most landmarks and feature columns an entry may have (a learned one has a few of each): each landmark
#: is parsed by the site at its first call, so a file of millions would stall that call.
MAX_LANDMARKS = 10_000
MAX_COLUMNS = 10_000


class DispatchFileWarning(UserWarning):
    """The dispatcher file is missing, corrupt or stale; the default configuration runs instead."""


def dispatch_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Where the dispatcher file is: ``path``, else ``$PERFTUNE_DISPATCH``, else beside the tuned choices."""
    if path is not None:
        return Path(path)
    env = os.environ.get(DISPATCH_ENV_VAR)
    if env:
        return Path(env)
    from perftune.targets.choice import choices_path

    return choices_path().parent / DISPATCH_FILE_NAME


def _real(v: Any) -> float | None:
    """``v`` as a finite float, or None when it is not a finite number of JSON (bools are not numbers)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


#: Landmark kinds whose stored form does not depend on the site: a selector for a choice site, an
#: object (a configuration) for the others.
_SELECTOR_TARGETS = ("site",)
_CONFIG_TARGETS = ("objective", "command", "triton")


def _check_landmark(target: str, landmark: Any, at: str) -> None:
    if target in _CONFIG_TARGETS and not isinstance(landmark, dict):
        raise AdaptError(f"{at}: a landmark must be an object (a configuration), got {shown(landmark)}")
    if target in _SELECTOR_TARGETS:
        if not isinstance(landmark, dict) or set(landmark) != {"cutoffs", "choices"}:
            raise AdaptError(f"{at}: a landmark must be an object with 'cutoffs' and 'choices', "
                             f"got {shown(landmark)}")
        cutoffs, choices = landmark["cutoffs"], landmark["choices"]
        if not isinstance(cutoffs, list) or not all(type(c) is int for c in cutoffs):
            raise AdaptError(f"{at}: landmark cutoffs must be a list of integers, got {shown(cutoffs)}")
        if not isinstance(choices, list) or not all(isinstance(c, str) and c for c in choices):
            raise AdaptError(f"{at}: landmark choices must be a list of names, got {shown(choices)}")


def _check_growth(growth: Any, at: str) -> None:
    """The numbers of an asymptotic check: finite, sizes >= 0, and > 0 where a landmark has a law.

    Its shape (keys, one row per landmark) is :meth:`GrowthCheck.from_dict`'s to check, at the site.
    """
    if not isinstance(growth, dict):
        return  # GrowthCheck.from_dict refuses it, at the site
    stack: list[Any] = [growth]
    while stack:  # every number in it (the nesting is bounded by the reader)
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif v is not None and _real(v) is None:
            raise AdaptError(f"{at}: growth holds {shown(v)}, not a finite number")
    sizes, fits = growth.get("max_size"), growth.get("fits")
    if isinstance(sizes, list):
        if any(not isinstance(s, int | float) or s < 0 for s in sizes):
            raise AdaptError(f"{at}: growth max_size must be sizes >= 0, got {shown(sizes)}")
        if isinstance(fits, list) and len(fits) == len(sizes):
            for k, (size, row) in enumerate(zip(sizes, fits, strict=True)):
                if isinstance(row, list) and k < len(row) and row[k] is not None and not size > 0:
                    raise AdaptError(
                        f"{at}: growth max_size[{k}] is {size!r}, yet landmark {k} has a growth law")


def _check_entry(name: str, entry: Any, where: str) -> None:
    """One entry of the file, as far as it does not depend on the site; raises :class:`AdaptError`."""
    at = f"{where}dispatcher {name!r}"
    if not isinstance(entry, dict):
        raise AdaptError(f"{at}: expected an object")
    missing = [k for k in _ENTRY_KEYS if k not in entry]
    if missing:
        raise AdaptError(f"{at}: missing {', '.join(missing)}")
    for key in ("target", "fingerprint"):
        if not isinstance(entry[key], str):
            raise AdaptError(f"{at}: {key!r} must be a string, got {shown(entry[key])}")
    columns, landmarks = entry["columns"], entry["landmarks"]
    if not isinstance(columns, list) or not isinstance(landmarks, list):
        raise AdaptError(f"{at}: 'columns' and 'landmarks' must be lists")
    if not all(isinstance(c, str) for c in columns):
        raise AdaptError(f"{at}: 'columns' must be feature names (strings), got {shown(columns)}")
    if not landmarks:
        raise AdaptError(f"{at}: no landmarks")
    if len(landmarks) > MAX_LANDMARKS or len(columns) > MAX_COLUMNS:
        raise AdaptError(f"{at}: {len(landmarks)} landmarks and {len(columns)} columns, more than the "
                         f"{MAX_LANDMARKS} and {MAX_COLUMNS} perftune reads")
    for i, landmark in enumerate(landmarks):
        _check_landmark(entry["target"], landmark, f"{at}: landmark {i}")
    if not isinstance(entry["model"], dict):
        raise AdaptError(f"{at}: 'model' must be an object, got {shown(entry['model'])}")
    for key in ("trained", "one_level"):
        if key in entry and not isinstance(entry[key], dict):
            raise AdaptError(f"{at}: {key!r} must be an object, got {shown(entry[key])}")
    if entry.get("growth") is not None:
        _check_growth(entry["growth"], at)


class DispatchFile:
    """In-memory dispatcher document: one entry per site (see the module's format).

    Example:
        >>> DispatchFile().to_dict()["dispatchers"]
        {}
    """

    def __init__(self) -> None:
        self.dispatchers: dict[str, dict[str, Any]] = {}
        #: Entries that failed the site-independent checks: name -> (the entry as read, why). A site
        #: whose entry is here runs its default (one warning); :meth:`to_dict` writes them back verbatim,
        #: so that saving another site's dispatcher never deletes them.
        self.unusable: dict[str, tuple[Any, str]] = {}
        self.source: Path | None = None
        #: Set by ``use_dispatch(..., strict=True)``: a site whose entry is stale raises instead of warning.
        self.strict = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (unusable entries included, as read, unless replaced by a usable one)."""
        entries: dict[str, Any] = {k: v[0] for k, v in self.unusable.items() if k not in self.dispatchers}
        entries.update(self.dispatchers)
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "dispatchers": {k: entries[k] for k in sorted(entries)},
        }

    @classmethod
    def from_dict(cls, doc: Any, where: str = "") -> DispatchFile:
        """Parse a document; raises :class:`AdaptError` naming the offending key.

        What does not depend on the site is checked here, for every entry (see :func:`_check_entry`);
        what does (its fingerprint, the landmarks it can run) and the model (:func:`model_from_dict`)
        are checked by the site when it loads its entry, so that one bad entry leaves the others usable.
        """
        if not isinstance(doc, dict):
            raise AdaptError(f"{where}expected a JSON object at top level")
        if doc.get("format") != FORMAT_NAME:
            raise AdaptError(f"{where}format {shown(doc.get('format'))} is not {FORMAT_NAME!r}")
        version = doc.get("version")
        if isinstance(version, bool) or version != FORMAT_VERSION:
            raise AdaptError(
                f"{where}version {shown(version)} is not supported "
                f"(this perftune reads {FORMAT_VERSION})"
            )
        entries = doc.get("dispatchers")
        if not isinstance(entries, dict):
            raise AdaptError(f"{where}'dispatchers' must be an object")
        out = cls()
        for name, entry in entries.items():
            try:
                _check_entry(name, entry, where)
            except AdaptError as e:
                out.unusable[name] = (entry, str(e))
                continue
            except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError, RecursionError) as e:
                why = f"{type(e).__name__}: {str(e)[:160]}"
                out.unusable[name] = (entry, f"{where}dispatcher {name!r}: malformed ({why})")
                continue
            out.dispatchers[name] = entry
        return out

    @classmethod
    def read(cls, path: str | os.PathLike[str] | None = None) -> DispatchFile:
        """Read strictly: raises :class:`AdaptError` when the file is missing or malformed.

        Only a regular file of at most 8 MB of UTF-8 JSON, nested at most 64 deep, is read
        (:func:`perftune._jsonfile.read_json_file`); then :meth:`from_dict` checks it.
        """
        p = dispatch_path(path)
        doc = read_json_file(p, "dispatcher", AdaptError)
        try:
            out = cls.from_dict(doc, where=f"{p}: ")
        except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError, RecursionError) as e:
            # A check that missed a case: still one line naming the file, never a traceback.
            why = f"{type(e).__name__}: {str(e)[:160]}"
            raise AdaptError(f"{p}: malformed dispatcher file ({why})") from None
        out.source = p
        return out

    def write(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write atomically (temporary file + rename); returns the path written."""
        p = dispatch_path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(p, json.dumps(self.to_dict(), indent=1) + "\n")
        self.source = p
        return p


def load_dispatch(path: str | os.PathLike[str] | None = None, *, warn: bool = True) -> DispatchFile:
    """Read the dispatcher file leniently: missing or corrupt -> an empty file and one warning."""
    try:
        return DispatchFile.read(path)
    except AdaptError as e:
        if warn:
            warnings.warn(f"{e}; adaptive sites run their default configuration", DispatchFileWarning,
                          stacklevel=3)
        out = DispatchFile()
        out.source = None
        return out


_LOCK = threading.Lock()
_LOADED: DispatchFile | None = None
#: Bumped by :func:`use_dispatch`, so that every adaptive site resolves again at its next call.
_GENERATION = [0]


def current_dispatch() -> DispatchFile:
    """The dispatcher file of this process, read on first use (missing/corrupt -> one warning)."""
    global _LOADED
    if _LOADED is None:
        with _LOCK:
            if _LOADED is None:
                _LOADED = load_dispatch()
    return _LOADED


def use_dispatch(
    source: DispatchFile | str | os.PathLike[str] | None = None, *, strict: bool = False
) -> DispatchFile:
    """Make ``source`` the dispatcher file of this process; every adaptive site resolves again.

    A site whose dispatcher was installed with ``use_dispatcher`` keeps it unless the new file has an
    entry of that site's name.

    Args:
        source: A :class:`DispatchFile`, a path, or None for the default location.
        strict: Raise :class:`AdaptError` on a missing or corrupt file, or one with a malformed entry,
            instead of warning; a site whose entry is stale then raises at its first call.
    """
    global _LOADED
    if isinstance(source, DispatchFile):
        loaded = source
    elif strict:
        loaded = DispatchFile.read(source)
        if loaded.unusable:
            raise AdaptError(next(iter(loaded.unusable.values()))[1])
        loaded.strict = True
    else:
        loaded = load_dispatch(source)
    with _LOCK:
        _LOADED = loaded
        _GENERATION[0] += 1
    return loaded
