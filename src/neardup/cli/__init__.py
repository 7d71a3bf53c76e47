"""The ``neardup`` command: one module per command group, each a thin adapter over the core."""

from .main import main

__all__ = ["main"]
