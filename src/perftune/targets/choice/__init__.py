"""Algorithmic choice: size-dispatched algorithm sites, tuned cutoffs, accuracy and level tables.

Example:
    >>> from perftune.targets.choice import AlgorithmSite
    >>> total = AlgorithmSite("doc-total", {"builtin": sum})
    >>> total([1, 2, 3])
    6
"""

from __future__ import annotations

from perftune.targets.choice._file import (
    DEFAULT_CHOICES_PATH,
    ENV_VAR,
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    choices_path,
    load_choices,
)
from perftune.targets.choice._site import AlgorithmSite, current_choices, registered_sites, use_choices

__all__ = [
    "DEFAULT_CHOICES_PATH",
    "ENV_VAR",
    "AlgorithmSite",
    "ChoiceError",
    "ChoicesFile",
    "ChoicesFileWarning",
    "choices_path",
    "current_choices",
    "load_choices",
    "registered_sites",
    "use_choices",
]
