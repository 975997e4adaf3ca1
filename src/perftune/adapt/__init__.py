"""Input-adaptive tuning: features of an input and a learned per-input dispatcher.

The best configuration often depends on the input, not only on its size: insertion sort for nearly
sorted data, counting for many duplicates, a direct solver for a small dense system and a few
conjugate-gradient steps for a loose tolerance. ``perftune.adapt`` learns which configuration to run
for which input, PetaBricks' two-level way (see ``docs/adapt.md``):

* :class:`AdaptiveSite` (a choice site) and :class:`AdaptiveObjective` (``run(config, input)`` over a
  space) register features with ``@site.feature(cost="cheap")`` or sampled ones with
  ``@site.feature(levels=(64, 1024))``;
* :func:`tune_inputs` clusters training inputs, tunes a landmark per cluster with
  :func:`perftune.tune`, measures every landmark on every input and fits a cost-aware tree;
* the result is saved as JSON (``perftune-dispatch.json``, beside the tuned choices), read at the
  first call, and walked in plain Python; a missing, stale or corrupt file means the default
  configuration and one :class:`DispatchFileWarning`;
* :class:`TritonSite` does the same for a kernel of ``perftune.triton.autotune`` (training
  :class:`Launch` objects; shapes and dtypes as features; a landmark per shape cluster instead of a
  tuning per exact key).

Example:
    >>> from perftune.space import Choice, Space
    >>> site = AdaptiveObjective("doc-adapt", lambda c, xs: sorted(xs, reverse=c["o"] == "d"),
    ...                          Space({"o": Choice(["a", "d"])}))
    >>> site.use_dispatcher(site.constant_dispatcher({"o": "d"}))
    >>> site([1, 2])
    [2, 1]
"""

from __future__ import annotations

from perftune.adapt._command import CommandSite
from perftune.adapt._features import (
    CHEAP,
    MEASURED,
    AdaptError,
    Feature,
    density,
    descending,
    divisibility,
    duplicates,
    far_order,
    local_inversions,
    log_size,
    monotone_runs,
    sample,
    sortedness,
)
from perftune.adapt._file import (
    DISPATCH_ENV_VAR,
    DISPATCH_FILE_NAME,
    DispatchFile,
    DispatchFileWarning,
    current_dispatch,
    dispatch_path,
    load_dispatch,
    use_dispatch,
)
from perftune.adapt._growth import GrowthCheck, fit_growth
from perftune.adapt._learn import DispatchFit, fit_dispatch, robust_landmark
from perftune.adapt._model import (
    CentroidModel,
    FamilyModel,
    ForestModel,
    GuardedModel,
    LinearModel,
    NeighbourModel,
    TreeModel,
)
from perftune.adapt._site import AdaptiveObjective, AdaptiveSite, Dispatcher
from perftune.adapt._triton import Launch, TritonSite
from perftune.adapt._tune import InputTuning, tune_inputs

__all__ = [
    "CHEAP",
    "DISPATCH_ENV_VAR",
    "DISPATCH_FILE_NAME",
    "MEASURED",
    "AdaptError",
    "AdaptiveObjective",
    "AdaptiveSite",
    "CentroidModel",
    "CommandSite",
    "DispatchFile",
    "DispatchFileWarning",
    "DispatchFit",
    "Dispatcher",
    "FamilyModel",
    "Feature",
    "ForestModel",
    "GrowthCheck",
    "GuardedModel",
    "InputTuning",
    "Launch",
    "LinearModel",
    "NeighbourModel",
    "TreeModel",
    "TritonSite",
    "current_dispatch",
    "density",
    "descending",
    "dispatch_path",
    "divisibility",
    "duplicates",
    "far_order",
    "fit_dispatch",
    "fit_growth",
    "load_dispatch",
    "local_inversions",
    "log_size",
    "monotone_runs",
    "robust_landmark",
    "sample",
    "sortedness",
    "tune_inputs",
    "use_dispatch",
]
