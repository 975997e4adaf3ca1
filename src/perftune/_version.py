"""The perftune version, in a module of its own.

It lives apart from the package facade (``perftune/__init__.py``), which lazily imports the driver: a
lower layer such as the store that needs the version imports it from here and stays below the driver.
"""

from __future__ import annotations

__version__ = "0.1.0"
