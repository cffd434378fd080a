"""Registration of the Controls workflow's Blender pieces: the per-object control properties,
the operators and the live preview's handlers. Unregistering removes every one of them and puts
previewed poses back to their animation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


def register() -> None:
    from ..properties import control_settings as control_properties
    from ..viewport import control_overrides, live_preview
    from . import control_ops

    control_properties.register()
    control_ops.register()
    live_preview.register()
    control_overrides.register()


def unregister() -> None:
    from ..properties import control_settings as control_properties
    from ..viewport import control_overrides, live_preview
    from . import control_ops

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
