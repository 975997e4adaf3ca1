"""Targets: domain integrations that build a space and evaluate configurations, registered by kind.

* :class:`Target` — the shape (``space``, ``evaluate``, ``verify``, ``explain``); :class:`TargetBase`
  gives the optional parts.
* :func:`register`, :func:`get`, :func:`names` — the registry; plug-ins come from the
  ``perftune.targets`` entry-point group.
* :func:`from_task_file` — what ``perftune run TASK.toml`` runs: ``[target] kind``, else ``"command"``.

The packages (``perftune.targets.command``, ``.flags``, ``.llvm``, ``.choice``, ``.replay``) keep their
own APIs; each has a small :class:`Target` adapter over them.

Example:
    >>> from perftune import targets
    >>> targets.get("replay").kind
    'replay'
"""

from __future__ import annotations

from perftune.targets._registry import (
    DEFAULT_KIND,
    ENTRY_POINT_GROUP,
    from_task_file,
    get,
    names,
    read_task_text,
    register,
    task_kind,
)
from perftune.targets._target import (
    Example,
    Outcome,
    Target,
    TargetBase,
    TargetFailure,
    TargetObjective,
    TaskRunner,
    outcome_of,
    verified_winner,
)

__all__ = [
    "DEFAULT_KIND",
    "ENTRY_POINT_GROUP",
    "Example",
    "Outcome",
    "Target",
    "TargetBase",
    "TargetFailure",
    "TargetObjective",
    "TaskRunner",
    "from_task_file",
    "get",
    "names",
    "outcome_of",
    "read_task_text",
    "register",
    "task_kind",
    "verified_winner",
]
