"""Armatures as the retarget sees them, and the armature and clip a file job takes from a file.

:func:`rig_input` auto-maps an armature (or checks a given mapping against it);
:func:`character_of` is the one rule that picks the character among a file's armatures for every
command that takes one unnamed (retarget, measure, bake-pack).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..bridge.skeleton_read import rest_heads_tails, skeleton_from_armature
from ..core.errors import MappingError, MarionetteError, RigError
from ..core.mapping.bone_mapping import BoneMapping
from ..core.mapping.humanoid_check import check_humanoid_skeleton
from ..core.mapping.quadruped import check_quadruped
from ..core.mapping.quadruped_profile import is_quadruped_mapping
from ..core.retarget.geometric import RigInput

_AUTO_MAPPINGS: dict[tuple[str, bytes, str | None], BoneMapping] = {}
_QUADRUPED_MAPPINGS: dict[tuple[str, bytes, str | None], BoneMapping | None] = {}


def rig_input(obj: Any, mapping: BoneMapping | None = None) -> tuple[RigInput, BoneMapping]:
    """A Blender armature as the retarget sees it, auto-mapped unless a mapping is given."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        raise RigError(f"{getattr(obj, 'name', obj)!r} is not an armature object")
    skeleton = skeleton_from_armature(obj)
    heads, tails = rest_heads_tails(obj)
    try:
        # A given mapping (edited in the sidebar, loaded from a preset) is checked against the
        # rig too: its bones must exist and the body it names must stand upright. The outcome
        # depends only on the rig and the mapping given, so it is kept per layout, bone ends and
        # mapping (each Retarget Clip of the sidebar's rows checks the same one).
        given = None if mapping is None else json.dumps(mapping.to_dict(), sort_keys=True)
        ends = np.round(np.concatenate([heads, tails]).astype(np.float64), 6).tobytes()
        key = (skeleton.signature(), ends, given)
        if key not in _AUTO_MAPPINGS:
            if len(_AUTO_MAPPINGS) >= 32:
                _AUTO_MAPPINGS.pop(next(iter(_AUTO_MAPPINGS)))
            _AUTO_MAPPINGS[key] = check_humanoid_skeleton(skeleton, tails, mapping)
        mapping = _AUTO_MAPPINGS[key]
    except MappingError as exc:
        raise MappingError(f"armature {obj.name!r}: {exc}") from exc
    slots = {slot: mb.bone for slot, mb in mapping.slots.items()}
    return RigInput(skeleton, slots, tails), mapping


def quadruped_input(obj: Any, mapping: BoneMapping | None = None) -> tuple[RigInput, BoneMapping] | None:
    """The armature as the retarget sees a quadruped (docs/mapping.md#quadrupeds): its mapping
    given (a quadruped one, or one describing the body as chains) or found by shape; ``None``
    for a humanoid, for a rig of another shape and for a humanoid mapping given."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        return None
    if mapping is not None and mapping.body is not None:  # a body described as chains: checked when read
        skeleton = skeleton_from_armature(obj)
        return RigInput(skeleton, {}, rest_heads_tails(obj)[1]), mapping
    if mapping is not None and not is_quadruped_mapping(mapping.slots):
        return None
    skeleton = skeleton_from_armature(obj)
    heads, tails = rest_heads_tails(obj)
    given = None if mapping is None else json.dumps(mapping.to_dict(), sort_keys=True)
    key = ("quadruped " + skeleton.signature(), np.round(np.concatenate([heads, tails]).astype(np.float64), 6).tobytes(), given)
    if key not in _QUADRUPED_MAPPINGS:
        if len(_QUADRUPED_MAPPINGS) >= 32:
            _QUADRUPED_MAPPINGS.pop(next(iter(_QUADRUPED_MAPPINGS)))
        found: BoneMapping | None = None
        if mapping is not None:
            found = check_quadruped(skeleton.names, skeleton.parents, skeleton.rest_placements()[:, :3, 3], tails, mapping)
        else:
            try:
                rig_input(obj)  # a humanoid is retargeted as one
            except MappingError:
                try:
                    found = check_quadruped(skeleton.names, skeleton.parents, skeleton.rest_placements()[:, :3, 3], tails)
                except MappingError:
                    found = None
        _QUADRUPED_MAPPINGS[key] = found
    found = _QUADRUPED_MAPPINGS[key]
    if found is None:
        return None
    return RigInput(skeleton, {slot: mb.bone for slot, mb in found.slots.items()}, tails), found


def target_input(obj: Any, mapping: BoneMapping | None, control_rig: str = "fk") -> tuple[RigInput, BoneMapping, Any]:
    """A retarget's target (:func:`rig_input`) and its control-rig plan
    (:func:`..bridge.control_target.control_target`, ``None`` for a target whose mapped bones play
    their own keys): for a control rig, the rig input is on the bones the plan reads (a Rigify rig's
    ``ORG-`` bones), on the body's skeleton, with only those bones and what they hang from."""
    from ..bridge.control_target import control_target
    from ..core.control_rig.body import body_rig_input

    rig, tmap = rig_input(obj, mapping)
    control = control_target(obj, tmap, control_rig)
    if control is not None:
        if control.mapping is not tmap:
            rig, tmap = rig_input(obj, control.mapping)
        rig = body_rig_input(rig, control.anchors, keep=set(control.plan.played_bones) | set(tmap.bones().values()))
    return rig, tmap, control


def pick_armature(candidates: Any, name: str | None, label: str, purpose: str = "to retarget") -> Any:
    """The armature a file job takes among ``candidates`` (objects of a file; ``label`` names the
    file in messages): the one called ``name`` (object or armature data), else the character
    (:func:`character_of`). Refuses, naming what the file holds, a name that is not there and a
    file without armatures."""
    arms = [o for o in candidates if o is not None and o.type == "ARMATURE"]
    if name is not None:
        for a in arms:
            if a.name == name or a.data.name == name:
                return a
        listed = ", ".join(repr(a.name) for a in arms) or "none"
        raise RigError(f"{label}: no armature called {name!r} (armatures: {listed})")
    if not arms:
        raise RigError(f"{label}: the file has no armature {purpose}")
    return character_of(arms)


def character_of(arms: Any) -> Any:
    """The character among a file's armatures, for every command that takes one unnamed: the
    largest one that maps as a humanoid (a prop, a pet or a control rig with more bones is not
    it; ties go to the name), else the largest, refused by name later."""
    if len(arms) == 1:
        return arms[0]
    humanoids = []
    for a in arms:
        try:
            rig_input(a)
        except MarionetteError:
            continue
        humanoids.append(a)
    return max(humanoids or arms, key=lambda a: (len(a.data.bones), a.name))


def pick_action(loaded: Any, source: Any, name: str | None) -> Any:
    label = Path(loaded.path).name
    actions = loaded.actions
    if not actions:
        ad = source.animation_data
        if ad is not None and ad.action is not None:
            return ad.action
        raise MappingError(f"{label}: the file has no animation to retarget")
    if name is None:
        return actions[0]
    for a in actions:
        if a.name == name or a.name.split("|")[-1] == name:
            return a
    # Blender renames a clip whose name an Action loaded before it holds (``Walk.001``: measure
    # loads the retargeted file, which may hold a ``Walk``, before the source).
    for a in actions:
        base, dot, number = a.name.rpartition(".")
        if dot and len(number) == 3 and number.isdigit() and (base == name or base.split("|")[-1] == name):
            return a
    raise MappingError(f"{label}: no clip called {name!r} (clips: {', '.join(repr(a.name) for a in actions)})")

