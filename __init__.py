"""Marionette: retarget any humanoid animation onto any humanoid armature, then drive it with
procedural controls.

This module is only a switchboard. It imports nothing from Blender at module level (so the
package imports in plain Python and under pytest), registers the sub-packages in order and
unregisters them in reverse, and hooks the command line into ``blender --command marionette``.
"""

from __future__ import annotations

from typing import Any

_cli_handle: Any = None


def _run_cli(argv: list[str]) -> int:
    from .cli.main import main

    return main(argv)


def register() -> None:
    global _cli_handle
    import bpy

    from . import operators, panels, properties

    properties.register()
    operators.register()
    panels.register()
    if hasattr(bpy.utils, "register_cli_command"):
        _cli_handle = bpy.utils.register_cli_command("marionette", _run_cli)


def unregister() -> None:
    global _cli_handle
    import bpy

    from . import operators, panels, properties

    if _cli_handle is not None:
        bpy.utils.unregister_cli_command(_cli_handle)
        _cli_handle = None
    panels.unregister()
    operators.unregister()
    properties.unregister()
    # Clips and poses kept between clicks go with the add-on.
    from .bridge.clip_read import forget_read_clips
    from .core.retarget.pose_memo import forget_poses

    forget_read_clips()
    forget_poses()
