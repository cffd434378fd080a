"""What Blender plays on a retargeted armature (docs/pipeline.md#measurement): the summary judges the evaluated pose,
what a user sees, not the keys written.

Keys can be right and still play nothing: an armature shown in Rest Position, an action at zero
influence, a solo NLA track, a constraint or a driver on the bones. :func:`switch_to_pose_position`
puts an armature left in Rest Position back in Pose Position (a retarget does so and says so);
:func:`what_overrides` names everything else that hides or overrides the action on the bones it
keys; :func:`played_placements` reads the evaluated pose (``scene.frame_set`` per sampled frame and
``pose.bones.foreach_get('matrix')``), restoring the scene's current frame.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core.errors import RigError
from ..core.retarget.geometric import Binding
from ..core.rig.rotations import FloatArray
from . import compat
from .clip_read import clip_from_action, needs_evaluation
from .evaluated_pose import evaluated_pose_matrices

_BONE_CHANNEL = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.(location|rotation_quaternion|rotation_euler|rotation_axis_angle|scale)$')

#: At most this many bones are named in one warning (the rest are counted).
_NAMED = 6


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in items[:_NAMED])
    return shown + (f" and {len(items) - _NAMED} more" if len(items) > _NAMED else "")


def _bone_channel(path: str) -> tuple[str, str] | None:
    """``(bone, property)`` of a pose-bone transform data path, else ``None``."""
    m = _BONE_CHANNEL.match(path)
    if m is None:
        return None
    return re.sub(r"\\(.)", r"\1", m.group(1)), m.group(2)


def switch_to_pose_position(obj: Any) -> str | None:
    """Put an armature shown in Rest Position in Pose Position, so it plays its action; the
    sentence that says so, or ``None`` when it already was."""
    if obj.data.pose_position != "REST":
        return None
    obj.data.pose_position = "POSE"
    return (
        f"armature {obj.name!r} was set to Rest Position, where it plays no action: "
        "switched it to Pose Position (Armature properties > Pose Position)"
    )


def driven_bones(binding: Binding) -> list[str]:
    """Names of the target bones the retarget writes."""
    names = binding.target.skeleton.names
    return [names[i] for i in np.flatnonzero(np.asarray(binding.driven))]


def _keyed_channels(action: Any, action_slot: Any, bones: set[str]) -> set[tuple[str, str]]:
    """``(bone, property kind)`` pairs of ``bones`` that ``action`` keys through ``action_slot``
    (rotation modes count as one kind)."""
    out = set()
    for fc in compat.action_fcurves(action, action_slot):
        if fc.mute or (fc.group is not None and fc.group.mute):
            continue
        channel = _bone_channel(fc.data_path)
        if channel is not None and channel[0] in bones:
            out.add((channel[0], "rotation" if channel[1].startswith("rotation") else channel[1]))
    return out


def _live_controls(obj: Any) -> list[str]:
    """Names of the Marionette controls that run live on ``obj`` (Live Preview on)."""
    controls = getattr(obj, "marionette_controls", None)
    if controls is None or not controls.live_preview:
        return []
    return [c.name for c in controls.controls if c.enabled]


def _nla_evaluates(ad: Any) -> bool:
    """Whether Blender plays the object's animation through the NLA (a live track holding a
    strip): only then do the action's influence and blend mode apply (measured with 5.0.1)."""
    return bool(ad.use_nla and any(not t.mute and len(t.strips) for t in ad.nla_tracks))


def _nla_warnings(obj: Any, action: Any, bones: set[str]) -> list[str]:
    ad = obj.animation_data
    if ad is None or not ad.use_nla or ad.use_tweak_mode:
        return []
    tracks = [t for t in ad.nla_tracks if not t.mute]
    solo = [t for t in tracks if t.is_solo]
    if solo:
        return [f"NLA track {solo[0].name!r} is solo: only it plays, and action {action.name!r} is hidden (turn Solo off)"]
    mine = _keyed_channels(action, compat.action_slot_for(action, obj), bones)
    replaces = ad.action_influence >= 1.0 and ad.action_blend_type == "REPLACE"
    out = []
    for track in tracks:
        for strip in track.strips:
            if strip.mute or strip.action is None or (strip.use_animated_influence and strip.influence <= 0.0):
                continue
            theirs = _keyed_channels(strip.action, getattr(strip, "action_slot", None), bones)
            over = sorted({bone for bone, kind in theirs if not replaces or (bone, kind) not in mine})
            if over:
                how = "mixes with the new action" if not replaces else "sets channels the new action does not key"
                out.append(f"NLA track {track.name!r} (strip {strip.name!r}, action {strip.action.name!r}) {how} on bones {_names(over)}")
    if out and ad.action_blend_type != "REPLACE":
        out.insert(0, f"action {action.name!r} blends as {ad.action_blend_type.title()} over the NLA tracks below it instead of replacing them")
    return out


def _with_ancestors(obj: Any, bones: set[str]) -> set[str]:
    """``bones`` and every bone they hang from: a constraint or a driver above moves them too."""
    watched = set(bones)
    for name in bones:
        bone = obj.data.bones.get(name)
        while bone is not None and bone.parent is not None and bone.parent.name not in watched:
            bone = bone.parent
            watched.add(bone.name)
    return watched


def overridden_bones(obj: Any, bones: Iterable[str]) -> list[str]:
    """Those of ``bones`` and the bones they hang from that a live constraint or a driver on a
    transform channel moves, sorted: where keys on ``bones`` are not what Blender plays."""
    watched = _with_ancestors(obj, set(bones))
    out = {n for n in watched if (pb := obj.pose.bones.get(n)) is not None and any(not c.mute and c.influence > 0.0 for c in pb.constraints)}
    ad = obj.animation_data
    if ad is not None:
        channels = [_bone_channel(d.data_path) for d in ad.drivers if not d.mute]
        out |= {c[0] for c in channels if c is not None and c[0] in watched}
    return sorted(out)


def what_overrides(obj: Any, action: Any, bones: Iterable[str], constraints: bool = True) -> list[str]:
    """Warnings naming what hides or overrides ``action`` on ``obj``'s ``bones`` (the bones a
    retarget keys): Rest Position, another action playing, NLA tweak mode, an action influence
    below one, NLA tracks that solo or mix in, bone constraints and drivers (on those bones or
    the bones they hang from; not with ``constraints=False``, for a control rig whose keys were
    solved through them), live Marionette controls, muted curves. Empty when Blender plays the
    action's keys as they are."""
    bones = set(bones)
    watched = _with_ancestors(obj, bones)
    out = []
    if obj.data.pose_position == "REST":
        out.append(f"armature {obj.name!r} is set to Rest Position: it plays no action (Armature properties > Pose Position)")
    ad = obj.animation_data
    if ad is None or ad.action != action:
        playing = ad.action.name if ad is not None and ad.action is not None else None
        out.append(f"armature {obj.name!r} plays {'action ' + repr(playing) if playing else 'no action'}, not {action.name!r}")
    elif ad.use_tweak_mode:
        out.append(f"armature {obj.name!r} is in NLA tweak mode: it plays the strip being edited (leave tweak mode)")
    elif not _nla_evaluates(ad):
        pass  # without NLA strips, Blender plays the action as it is, whatever its influence
    elif ad.action_influence <= 0.0:
        out.append(f"action {action.name!r} plays at influence 0: it is hidden (Action influence in the NLA or Action editor)")
    elif ad.action_influence < 1.0:
        out.append(f"action {action.name!r} plays at influence {ad.action_influence:.2f}: it is mixed with the pose below it")
    out.extend(_nla_warnings(obj, action, bones))
    constrained = []
    for name in sorted(watched) if constraints else ():
        pb = obj.pose.bones.get(name)
        if pb is None:
            continue
        live = [c for c in pb.constraints if not c.mute and c.influence > 0.0]
        if live:
            c = live[0]
            more = f" (+{len(live) - 1} more)" if len(live) > 1 else ""
            constrained.append(f"{name!r} ({c.type.replace('_', ' ').title()} {c.name!r}, influence {c.influence:.2f}{more})")
    if constrained:
        shown = ", ".join(constrained[:_NAMED]) + (f" and {len(constrained) - _NAMED} more" if len(constrained) > _NAMED else "")
        out.append(f"bone constraints override the keys of bones {shown}")
    live = _live_controls(obj)
    if live:
        out.append(f"Marionette controls {_names(live)} run live on {obj.name!r} and change its pose after the keys (Live Preview)")
    if ad is not None:
        channels = [_bone_channel(d.data_path) for d in ad.drivers if not d.mute]
        driven = sorted({c[0] for c in channels if c is not None and c[0] in watched}) if constraints else []
        if driven:
            out.append(f"drivers set the transforms of bones {_names(driven)}")
        if ad.action == action:
            action_slot = compat.action_slot_for(action, obj)
            muted = [fc for fc in compat.action_fcurves(action, action_slot) if fc.mute or (fc.group is not None and fc.group.mute)]
            if muted:
                out.append(f"action {action.name!r} has {len(muted)} muted F-curves")
    return out


#: Frames on which the pose read from the keys is checked against Blender's evaluation.
SPOT_FRAMES = 8


def _shaped_beyond_keys(obj: Any, action: Any) -> bool:
    """Whether anything besides ``action``'s keys may shape the pose Blender plays on ``obj``."""
    ad = obj.animation_data
    return bool(
        obj.data.pose_position != "POSE"
        or ad is None
        or ad.action != action
        or ad.use_tweak_mode
        or _nla_evaluates(ad)
        or needs_evaluation(obj)
        or _live_controls(obj)
    )


def played_placements(
    obj: Any,
    action: Any,
    frames: Any,
    skeleton: Any,
    fps: float | None = None,
    predicted: tuple[FloatArray, Sequence[int], Mapping[tuple[float, ...], FloatArray]] | None = None,
) -> tuple[FloatArray, list[str]]:
    """The pose Blender plays on ``obj`` at ``frames`` as skeleton-space placements
    ``(T, B, 4, 4)`` in ``skeleton`` order, and warnings.

    Where something besides the action may shape the pose (:func:`what_overrides`'s causes,
    inheritance settings), every frame is evaluated by Blender (``scene.frame_set``). Otherwise
    the action's keys are read in bulk and checked against Blender's evaluation on
    :data:`SPOT_FRAMES` evenly spread frames: equal, they are what Blender plays; different
    (something unnamed changes the pose), every frame is evaluated and a warning names the bone
    that departs most. An armature Blender does not evaluate (not in the current view layer) is
    read from the keys, and a warning says so.

    ``predicted`` (placements ``(T, B, 4, 4)``, the skeleton rows they stand for, and poses
    Blender played already by frame numbers: a control rig's solve and its check) is checked the
    same way on those rows, their directions and heads: the same on the spot frames, it is what
    Blender plays."""
    f = np.asarray(frames, dtype=np.float64).reshape(-1)
    if predicted is not None:
        return _checked_prediction(obj, f, skeleton, predicted[0], list(predicted[1]), predicted[2])
    try:
        if _shaped_beyond_keys(obj, action):
            return evaluated_pose_matrices(obj, f, skeleton), []
        spots = np.unique(np.linspace(0, f.size - 1, min(SPOT_FRAMES, f.size)).astype(int))
        seen = evaluated_pose_matrices(obj, f[spots], skeleton)
    except RigError as exc:
        played = clip_from_action(obj, action, frames=f, fps=fps)
        return skeleton.forward_kinematics(played.rotations, played.translations, played.scales), [f"{exc}: measured on the keys written"]
    played = clip_from_action(obj, action, frames=f, fps=fps)
    keyed = skeleton.forward_kinematics(played.rotations, played.translations, played.scales)
    size = max(float(np.ptp(skeleton.rest_placements()[:, :3, 3], axis=0).max()), 1e-9)
    rot = np.abs(seen[..., :3, :3] - keyed[spots][..., :3, :3]).max(axis=(0, 2, 3))
    pos = np.abs(seen[..., :3, 3] - keyed[spots][..., :3, 3]).max(axis=(0, 2)) / size
    if rot.max() < 1e-4 and pos.max() < 1e-4:
        return keyed, []
    worst = int(np.argmax(np.maximum(rot, pos)))
    return evaluated_pose_matrices(obj, f, skeleton), [
        f"Blender plays bone {skeleton.names[worst]!r} away from the keys written (something besides the action changes the pose)"
    ]


def _checked_prediction(
    obj: Any, f: FloatArray, skeleton: Any, predicted: FloatArray, rows: list[int], played: Mapping[tuple[float, ...], FloatArray]
) -> tuple[FloatArray, list[str]]:
    spots = np.unique(np.linspace(0, f.size - 1, min(SPOT_FRAMES, f.size)).astype(int))
    seen = played.get(tuple(f[spots].tolist()))
    if seen is None:
        seen = evaluated_pose_matrices(obj, f[spots], skeleton)
    size = max(float(np.ptp(skeleton.rest_placements()[:, :3, 3], axis=0).max()), 1e-9)
    ys, yp = seen[:, rows, :3, 1], predicted[spots][:, rows, :3, 1]
    ys = ys / np.linalg.norm(ys, axis=-1, keepdims=True)
    yp = yp / np.linalg.norm(yp, axis=-1, keepdims=True)
    turn = np.abs(ys - yp).max(axis=(0, 2))
    pos = np.abs(seen[:, rows, :3, 3] - predicted[spots][:, rows, :3, 3]).max(axis=(0, 2)) / size
    if turn.max() < 1e-4 and pos.max() < 1e-4:
        out = np.array(predicted)
        out[spots] = seen
        return out, []
    return evaluated_pose_matrices(obj, f, skeleton), []


def panel_fields(report: dict[str, Any]) -> dict[str, Any]:
    """What the Quality panel shows of a retarget's report besides the figures: notes (a switch
    to Pose Position), warnings (what hides or overrides the keys) and the rotation since the
    first frame per bone group."""
    return {
        "notes": list(report.get("notes", [])),
        "warnings": list(report.get("warnings", [])),
        "rotation_since_first_frame": {g: v["off"] for g, v in report.get("rotation_since_first_frame_deg", {}).items()},
    }


def operator_lines(report: dict[str, Any]) -> list[tuple[str, str]]:
    """``(level, text)`` lines an operator reports after a retarget: each note (``INFO``) and
    each warning (``WARNING``), first letter capitalised."""
    lines = [("INFO", n) for n in report.get("notes", [])] + [("WARNING", w) for w in report.get("warnings", [])]
    return [(level, text[:1].upper() + text[1:]) for level, text in lines]
