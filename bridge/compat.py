"""Everything that differs between Blender versions, in one place.

* Actions. Blender 4.4 made actions *slotted* and 5.0 removed the legacy API: keys live in
  action -> layers -> keyframe strips -> channelbag (one per slot), and an object plays an action
  through the slot named in ``animation_data.action_slot``. Before 4.4 an action held its
  F-curves directly (``action.fcurves``) for whatever object used it. The helpers below take an
  action and an object (or a slot) and hide which of the two models is in use.
* Bundled importers: enabling ``io_anim_bvh``, ``io_scene_fbx`` and ``io_scene_gltf2``
  idempotently.
* Importer bugs: bpy 5.0.1's FBX importer sets ``light.cycles.cast_shadow``, a property the
  Cycles light settings of that version no longer have, so any FBX file with a light fails with
  ``AttributeError``; :func:`fbx_import_fixes` lends the importer that property for the import.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import bpy

IMPORTER_ADDONS = ("io_anim_bvh", "io_scene_fbx", "io_scene_gltf2")

#: Slotted (layered) actions exist from Blender 4.4 on; the legacy ``Action.fcurves`` is gone in 5.0.
SLOTTED_ACTIONS = hasattr(bpy.types, "ActionSlot") and bpy.app.version >= (4, 4, 0)


# --- add-ons ---------------------------------------------------------------------------------


def enable_importers(modules: tuple[str, ...] = IMPORTER_ADDONS) -> None:
    """Enable Blender's bundled importers that are not enabled yet (calling again does nothing)."""
    import addon_utils

    for module in modules:
        _default, loaded = addon_utils.check(module)
        if loaded:
            continue
        if addon_utils.enable(module, default_set=True) is None:
            raise RuntimeError(f"Blender's bundled add-on {module!r} could not be enabled")


# --- importer workarounds --------------------------------------------------------------------


def _cycles_light_settings_class() -> type | None:
    """The Python class of ``Light.cycles`` when the Cycles add-on registered one."""
    for cls in bpy.types.PropertyGroup.__subclasses__():
        if cls.__name__ == "CyclesLightSettings":
            return cls
    return None


@contextlib.contextmanager
def fbx_import_fixes() -> Iterator[None]:
    """Let the bundled FBX importer read files that contain lights.

    bpy 5.0.1's importer writes ``light.cycles.cast_shadow``, which Cycles no longer defines there
    (shadows moved to ``Light.use_shadow``). While this context is active the property exists as a
    plain boolean on the Cycles light settings; it is removed again afterwards when it was added
    here, so Blender's own types are left as they were. Nesting and repeating are harmless.
    """
    cls: Any = _cycles_light_settings_class()
    added = False
    if cls is not None and "cast_shadow" not in cls.bl_rna.properties:
        cls.cast_shadow = bpy.props.BoolProperty(
            name="Cast Shadow",
            description="Stand-in for the property bpy 5.0.1's FBX importer writes; Light.use_shadow holds the value",
            default=True,
        )
        added = True
    try:
        yield
    finally:
        if added and cls is not None:
            with contextlib.suppress(AttributeError, RuntimeError):
                del cls.cast_shadow


# --- actions, slots and channelbags ----------------------------------------------------------


def action_slot_for(action: bpy.types.Action, obj: bpy.types.Object) -> Any | None:
    """The slot through which ``obj`` plays ``action`` (``None`` before slotted actions, and when
    the action has no slot meant for an object).

    In order: the slot the object already uses for that action; the slot whose identifier names
    the object; the only object slot of the action. Several object slots and none named after
    the object is ambiguous, and ``None`` is returned rather than a guess.
    """
    if not SLOTTED_ACTIONS:
        return None
    ad = obj.animation_data
    if ad is not None and ad.action == action and ad.action_slot is not None:
        return ad.action_slot
    slots = [s for s in action.slots if s.target_id_type in {"OBJECT", "UNSPECIFIED"}]
    for s in slots:
        if s.identifier == "OB" + obj.name:
            return s
    if ad is not None and ad.last_slot_identifier:
        for s in slots:
            if s.identifier == ad.last_slot_identifier:
                return s
    if len(slots) == 1:
        return slots[0]
    return None


def new_action_slot(action: bpy.types.Action, obj: bpy.types.Object) -> Any | None:
    """A new object slot on ``action`` named after ``obj`` (``None`` before slotted actions)."""
    if not SLOTTED_ACTIONS:
        return None
    return action.slots.new(id_type="OBJECT", name=obj.name)


def channelbag(action: bpy.types.Action, action_slot: Any | None, create: bool = False) -> Any | None:
    """The channelbag holding ``action_slot``'s F-curves (the action itself before slotted actions).

    With ``create`` a layer, a keyframe strip and the channelbag are made as needed.
    """
    if not SLOTTED_ACTIONS:
        return action
    if action_slot is None:
        return None
    from bpy_extras import anim_utils

    if create:
        return anim_utils.action_ensure_channelbag_for_slot(action, action_slot)
    return anim_utils.action_get_channelbag_for_slot(action, action_slot)


def action_fcurves(action: bpy.types.Action, action_slot: Any | None) -> list[bpy.types.FCurve]:
    """Every F-curve ``action_slot`` animates in ``action`` (all of the action's before slotted actions)."""
    if not SLOTTED_ACTIONS:
        return list(action.fcurves)  # type: ignore[attr-defined]
    if action_slot is None:
        return []
    out: list[bpy.types.FCurve] = []
    # A slot may have a channelbag on several layers/strips; Blender 5.0 only makes one of each,
    # but collect them all so a layered action is read in full.
    for layer in action.layers:
        strip: Any
        for strip in layer.strips:
            bag = strip.channelbag(action_slot)
            if bag is not None:
                out.extend(bag.fcurves)
    return out


def action_is_layered(action: bpy.types.Action) -> bool:
    """True when the action has more than one layer or strip (evaluation then blends them)."""
    if not SLOTTED_ACTIONS:
        return False
    return len(action.layers) > 1 or any(len(layer.strips) > 1 for layer in action.layers)


def new_fcurve(bag: Any, data_path: str, index: int, group: str) -> bpy.types.FCurve:
    """Add an F-curve in group ``group`` to a channelbag (or, before slotted actions, an action)."""
    if SLOTTED_ACTIONS:
        return bag.fcurves.new(data_path, index=index, group_name=group)
    return bag.fcurves.new(data_path, index=index, action_group=group)


def assign_action(obj: bpy.types.Object, action: bpy.types.Action | None, action_slot: Any | None) -> None:
    """Make ``obj`` play ``action`` through ``action_slot``, both set explicitly (Blender only picks a
    slot by itself for an action's first user)."""
    ad = obj.animation_data or obj.animation_data_create()
    ad.action = action
    if SLOTTED_ACTIONS and action is not None and action_slot is not None:
        ad.action_slot = action_slot


def current_action(obj: bpy.types.Object) -> tuple[bpy.types.Action | None, Any | None]:
    """The object's active action and slot (``(None, None)`` when it has none)."""
    ad = obj.animation_data
    if ad is None or ad.action is None:
        return None, None
    return ad.action, (ad.action_slot if SLOTTED_ACTIONS else None)
