"""What the sidebar says of a target before the retarget (docs/control_rigs.md): whether it is a
control rig, and which controls Retarget Clip will key.

Decided from the bones' names, custom properties, constraints and drivers only, never by
evaluating the depsgraph, and cached per object, bone count, mode and root motion, so that a
panel's ``draw()`` costs a dictionary look-up. A Rigify generated rig gets its plan's controls; a
rig whose deform bones follow other bones gets the plan found at the retarget (which reads the
constraints on the evaluated rig, and refuses what it cannot key back).
"""

from __future__ import annotations

from typing import Any

from ..core.control_rig.rigify import is_rigify, rigify_plan
from .control_rig import bone_properties
from .played_pose import overridden_bones

#: The plan named for a control rig that is not Rigify's: found when the retarget reads the rig.
FOUND_PLAN = "controls found from the constraints (checked when you retarget)"
#: The plan named with Control Rig off.
OFF_PLAN = "off (keys the mapped bones)"

_CACHE: dict[tuple[str, int, int, str, str], dict[str, Any] | None] = {}
_CACHE_SIZE = 64


def control_rig_preview(obj: Any, mode: str = "fk", root_motion: str = "HIPS") -> dict[str, Any] | None:
    """What a retarget onto ``obj`` with Control Rig ``mode`` (``"fk"``, ``"ik"``, ``"off"``, any
    case) will key, ``None`` when ``obj`` is not a control rig (its mapped bones play their own
    keys). The dict: ``kind`` (``"rigify"`` or ``"found"``), ``plan`` (its name), ``controls`` (the
    controls keyed, in order; empty when they are found at the retarget or with ``"off"``),
    ``switches`` (``{"bone", "property", "value"}`` keyed over the clip). Rigify's ``root`` control
    is keyed only when ``root_motion`` is ``"ROOT_BONE"``. The dict is shared: read it, do not change it."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE" or not len(obj.data.bones):
        return None
    mode = mode.lower()
    key = (obj.name, int(getattr(obj, "session_uid", 0)), len(obj.data.bones), mode, root_motion)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = _preview(obj, mode, root_motion)
    return _CACHE[key]


def forget_previews() -> None:
    """Drop every cached preview (after a rig's constraints or switches were edited)."""
    _CACHE.clear()


def _preview(obj: Any, mode: str, root_motion: str) -> dict[str, Any] | None:
    bones = obj.data.bones
    names = [b.name for b in bones]
    props = bone_properties(obj)
    if is_rigify(names, props):
        kind = "rigify"
    elif overridden_bones(obj, [b.name for b in bones if b.use_deform]):
        kind = "found"
    else:
        return None
    if mode == "off":
        return {"kind": kind, "plan": OFF_PLAN, "controls": [], "switches": []}
    if kind == "found":
        return {"kind": kind, "plan": FOUND_PLAN, "controls": [], "switches": []}
    plan = rigify_plan(names, props, mode)
    controls = list(plan.keyed(root_motion == "ROOT_BONE"))
    switches = [{"bone": b, "property": p, "value": v} for b, p, v in plan.switches]
    return {"kind": kind, "plan": plan.name, "controls": controls, "switches": switches}
