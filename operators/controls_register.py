"""Registration of the Controls workflow's Blender pieces: the per-object control properties,
the operators and the live preview's handlers. Unregistering removes every one of them and puts
previewed poses back to their animation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def register() -> None:
    from . import control_ops, control_overrides, control_properties, live_preview

    control_properties.register()
    control_ops.register()
    live_preview.register()
    control_overrides.register()


def unregister() -> None:
    from . import control_ops, control_overrides, control_properties, live_preview

    control_overrides.unregister()
    live_preview.unregister()
    control_ops.unregister()
    control_properties.unregister()


@contextlib.contextmanager
def registered() -> Iterator[None]:
    """The controls' properties and operators registered for the block (for the command line,
    where the add-on itself is not), unless they already are."""
    import bpy

    if hasattr(bpy.types.Object, "marionette_controls"):
        yield
        return
    register()
    try:
        yield
    finally:
        unregister()
