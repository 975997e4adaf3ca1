"""Algorithmic choice: size-dispatched algorithm sites, tuned cutoffs, accuracy and level tables.

* :class:`AlgorithmSite` — a named choice point in Python code, dispatched on input size at every
  (recursive) call through tuned cutoffs; reads the tuned-choices file once.
* :func:`tune_sites` — tunes the sites of a program bottom-up by input size (PetaBricks style).
* :func:`tune_accuracy` — one run, one configuration per accuracy bin, verified and monotone.
* :func:`tune_levels` — levels x accuracy-bins table for recursive solvers, by dynamic programming.
* :class:`DeviceSite`, :func:`tune_placement` — alternatives on different devices (CPU, GPU), with size
  cutoffs measured transfers included; device-aware selectors with a CPU fallback.
* :func:`increa` — the incremental (small-to-large input size) ladder underneath.

Example:
    >>> from perftune.targets.choice import AlgorithmSite, ChoicesFile, use_choices
    >>> _ = use_choices(ChoicesFile())  # an empty tuned-choices file: every site runs its default
    >>> total = AlgorithmSite("doc-total", {"builtin": sum})
    >>> total([1, 2, 3])
    6
"""

from __future__ import annotations

from perftune.targets.choice._accuracy import (
    AccuracyBin,
    AccuracyMetricWarning,
    AccuracyTable,
    UnreachableTargetWarning,
    accuracy_config,
    tune_accuracy,
)
from perftune.targets.choice._file import (
    DEFAULT_CHOICES_PATH,
    ENV_VAR,
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    choices_path,
    load_choices,
)
from perftune.targets.choice._ladder import LadderResult, LadderSettings, Rung, increa
from perftune.targets.choice._levels import LevelTable, level_config, tune_levels
from perftune.targets.choice._placement import (
    DEVICES_ENV_VAR,
    DeviceSite,
    PlacementRow,
    PlacementTuning,
    available_devices,
    tune_placement,
)
from perftune.targets.choice._site import AlgorithmSite, current_choices, registered_sites, use_choices
from perftune.targets.choice._tune import SiteTuning, simplify_levels, tune_sites

__all__ = [
    "DEFAULT_CHOICES_PATH",
    "DEVICES_ENV_VAR",
    "ENV_VAR",
    "AccuracyBin",
    "AccuracyMetricWarning",
    "AccuracyTable",
    "AlgorithmSite",
    "ChoiceError",
    "ChoicesFile",
    "ChoicesFileWarning",
    "DeviceSite",
    "LadderResult",
    "LadderSettings",
    "LevelTable",
    "PlacementRow",
    "PlacementTuning",
    "Rung",
    "SiteTuning",
    "UnreachableTargetWarning",
    "accuracy_config",
    "available_devices",
    "choices_path",
    "current_choices",
    "increa",
    "level_config",
    "load_choices",
    "registered_sites",
    "simplify_levels",
    "tune_accuracy",
    "tune_levels",
    "tune_placement",
    "tune_sites",
    "use_choices",
]
