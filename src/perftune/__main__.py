"""``python -m perftune`` is the ``perftune`` command."""

from perftune.cli import entry

entry()
