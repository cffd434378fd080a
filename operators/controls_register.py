"""Registration of the Controls workflow's Blender pieces: the per-object control properties,
the operators and the live preview's handlers. Unregistering removes every one of them and puts
previewed poses back to their animation."""

from __future__ import annotations

from ..usecases import controls
from ..usecases.controls import registered
from . import control_ops

__all__ = ["register", "registered", "unregister"]


def register() -> None:
    controls.register()
    control_ops.register()


def unregister() -> None:
    # The handlers and properties first: they go even when the operators were never registered.
    controls.unregister()
    control_ops.unregister()
