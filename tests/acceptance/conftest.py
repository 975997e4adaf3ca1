"""Fixtures of the acceptance tests; the helpers themselves live in acceptance_helpers.py."""

from acceptance_helpers import recorder, task_dir  # noqa: F401  (fixtures)
