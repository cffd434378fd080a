"""The Blender layer: operators, the bulk bridge between Blender data and core arrays
(:mod:`.armature_io`, :mod:`.file_import`), the jobs shared with the command line (:mod:`.jobs`)
and the one compatibility module for Blender-version differences (:mod:`.compat`)."""

from __future__ import annotations


def register() -> None:
    from ..properties import retarget_settings as properties
    from . import batch_bake, controls_register, pmx_import, retarget_ops

    properties.register()
    retarget_ops.register()
    batch_bake.register()
    controls_register.register()
    pmx_import.register()


def unregister() -> None:
    from ..properties import retarget_settings as properties
    from . import batch_bake, controls_register, pmx_import, retarget_ops

    pmx_import.unregister()
    controls_register.unregister()
    batch_bake.unregister()
    retarget_ops.unregister()
    properties.unregister()
