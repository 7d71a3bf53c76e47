"""The HTTP service: ``create_app(index, settings)`` and its settings (``neardup serve``).

``create_app`` is imported on first use, so the settings (and ``neardup --help``) work
without the ``service`` extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .settings import ServiceSettings

if TYPE_CHECKING:
    from .app import create_app

__all__ = ["ServiceSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        try:
            from .app import create_app
        except ImportError as exc:
            from ..errors import MissingDependencyError

            raise MissingDependencyError(exc.name or "fastapi", "service", "the HTTP service") from exc
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
