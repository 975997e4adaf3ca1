"""perftune's search inside Optuna: :class:`PerftuneSampler`, an Optuna sampler (docs/optuna.md).

An existing study changes one line::

    >>> import optuna
    >>> from perftune.integration.optuna import PerftuneSampler
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study(sampler=PerftuneSampler(seed=0))
    >>> study.optimize(lambda t: (t.suggest_int("x", 0, 20) - 7) ** 2, n_trials=30)
    >>> study.best_params["x"]
    7

Needs Optuna (``pip install 'perftune[optuna]'``); without it, importing this module raises an
ImportError that says so in one line.
"""

from __future__ import annotations

try:
    import optuna  # noqa: F401 (checked here so that the message names the extra)
except ModuleNotFoundError as error:
    if error.name != "optuna":
        raise  # Optuna is there but broken: its own message says more than ours would
    raise ImportError("perftune.integration.optuna needs Optuna: pip install 'perftune[optuna]'",
                      name="optuna") from None

from perftune.integration.optuna._sampler import PerftuneSampler

__all__ = ["PerftuneSampler"]
