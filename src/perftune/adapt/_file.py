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
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from perftune._atomic import write_text_atomic
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


class DispatchFile:
    """In-memory dispatcher document: one entry per site (see the module's format).

    Example:
        >>> DispatchFile().to_dict()["dispatchers"]
        {}
    """

    def __init__(self) -> None:
        self.dispatchers: dict[str, dict[str, Any]] = {}
        self.source: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON document."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "dispatchers": {k: self.dispatchers[k] for k in sorted(self.dispatchers)},
        }

    @classmethod
    def from_dict(cls, doc: Any, where: str = "") -> DispatchFile:
        """Parse a document; raises :class:`AdaptError` naming the offending key."""
        if not isinstance(doc, dict):
            raise AdaptError(f"{where}expected a JSON object at top level")
        if doc.get("format") != FORMAT_NAME:
            raise AdaptError(f"{where}format {doc.get('format')!r} is not {FORMAT_NAME!r}")
        if doc.get("version") != FORMAT_VERSION:
            raise AdaptError(
                f"{where}version {doc.get('version')!r} is not supported "
                f"(this perftune reads {FORMAT_VERSION})"
            )
        entries = doc.get("dispatchers")
        if not isinstance(entries, dict):
            raise AdaptError(f"{where}'dispatchers' must be an object")
        out = cls()
        for name, entry in entries.items():
            if not isinstance(entry, dict):
                raise AdaptError(f"{where}dispatcher {name!r}: expected an object")
            missing = [k for k in _ENTRY_KEYS if k not in entry]
            if missing:
                raise AdaptError(f"{where}dispatcher {name!r}: missing {', '.join(missing)}")
            if not isinstance(entry["columns"], list) or not isinstance(entry["landmarks"], list):
                raise AdaptError(f"{where}dispatcher {name!r}: 'columns' and 'landmarks' must be lists")
            if not entry["landmarks"]:
                raise AdaptError(f"{where}dispatcher {name!r}: no landmarks")
            out.dispatchers[name] = entry
        return out

    @classmethod
    def read(cls, path: str | os.PathLike[str] | None = None) -> DispatchFile:
        """Read strictly: raises :class:`AdaptError` when the file is missing or malformed."""
        p = dispatch_path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise AdaptError(f"{p}: dispatcher file not found") from None
        except OSError as e:
            raise AdaptError(f"{p}: cannot read dispatcher file: {e.strerror or e}") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise AdaptError(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from None
        out = cls.from_dict(doc, where=f"{p}: ")
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

    Args:
        source: A :class:`DispatchFile`, a path, or None for the default location.
        strict: Raise :class:`AdaptError` on a missing or corrupt file instead of warning.
    """
    global _LOADED
    if isinstance(source, DispatchFile):
        loaded = source
    elif strict:
        loaded = DispatchFile.read(source)
    else:
        loaded = load_dispatch(source)
    with _LOCK:
        _LOADED = loaded
        _GENERATION[0] += 1
    return loaded
