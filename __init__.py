"""Marionette: retarget any humanoid animation onto any humanoid armature, then drive it with
procedural controls.

This module is only a switchboard. It imports nothing from Blender at module level (so the
package imports in plain Python and under pytest), registers the sub-packages in order and
unregisters them in reverse.
"""

from __future__ import annotations


def register() -> None:
    from . import operators, panels

    operators.register()
    panels.register()


def unregister() -> None:
    from . import operators, panels

    panels.unregister()
    operators.unregister()
