"""What registering the add-on leaves in Blender, and how to take it away again: the ``blender``
fixture (tests/conftest.py) compares the two after every test, and the extension test checks that
registering twice in a row leaves nothing behind."""

from __future__ import annotations

import importlib
from typing import Any


def addon_state(bpy: Any) -> tuple[set[str], set[tuple[str, str]]]:
    """What registering the add-on adds: its RNA types and its properties on common ID types."""
    types = {name for name in dir(bpy.types) if "MARIONETTE" in name.upper()}
    props = {
        (owner.__name__, p.identifier)
        for owner in (bpy.types.Scene, bpy.types.Object, bpy.types.Armature, bpy.types.WindowManager)
        for p in owner.bl_rna.properties
        if "marionette" in p.identifier
    }
    return types, props


def unregister_leftovers(bpy: Any) -> None:
    """Remove what a test left registered: the add-on's own unregister functions first (they also
    take its handlers and command away), then any property or type still there, one by one."""
    for module in ("marionette", "marionette.operators.controls_register", "marionette.operators.pmx_import"):
        try:
            importlib.import_module(module).unregister()
        except Exception:  # best effort: part of it was not registered
            pass
    for owner in (bpy.types.Scene, bpy.types.Object, bpy.types.Armature, bpy.types.WindowManager):
        for identifier in [p.identifier for p in owner.bl_rna.properties if "marionette" in p.identifier]:
            try:
                delattr(owner, identifier)
            except Exception:
                pass
    pending = [getattr(bpy.types, n) for n in dir(bpy.types) if "MARIONETTE" in n.upper()]
    while pending:  # a property group goes once nothing registered refers to it
        left = []
        for cls in pending:
            try:
                bpy.utils.unregister_class(cls)
            except Exception:
                left.append(cls)
        if len(left) == len(pending):
            break
        pending = left
