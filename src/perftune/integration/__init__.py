"""Integrations of perftune's search into other tools' APIs.

Each integration is a subpackage that imports its tool only when it is itself imported, so that
``import perftune`` never pulls in a third-party framework:

* :mod:`perftune.integration.optuna`: :class:`~perftune.integration.optuna.PerftuneSampler`, an Optuna
  sampler that runs perftune's default search (extra ``perftune[optuna]``; docs/optuna.md).

Example:
    >>> import perftune.integration
    >>> perftune.integration.__all__
    []
"""

from __future__ import annotations

__all__: list[str] = []
