"""Algorithmic choice in plain Python: ``perftune.choice`` is :mod:`perftune.targets.choice`.

Example:
    >>> from perftune.choice import AlgorithmSite
    >>> sort = AlgorithmSite("doc-sort", {"builtin": sorted}, default="builtin")
    >>> sort([3, 1, 2])
    [1, 2, 3]
"""

from __future__ import annotations

from perftune.targets.choice import (
    DEFAULT_CHOICES_PATH,
    DEVICES_ENV_VAR,
    ENV_VAR,
    AccuracyBin,
    AccuracyMetricWarning,
    AccuracyTable,
    AlgorithmSite,
    ChoiceError,
    ChoicesFile,
    ChoicesFileWarning,
    DeviceSite,
    LadderResult,
    LadderSettings,
    LevelTable,
    PlacementRow,
    PlacementTuning,
    Rung,
    SiteTuning,
    UnreachableTargetWarning,
    accuracy_config,
    available_devices,
    choices_path,
    current_choices,
    increa,
    level_config,
    load_choices,
    registered_sites,
    simplify_levels,
    tune_accuracy,
    tune_levels,
    tune_placement,
    tune_sites,
    use_choices,
)

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
