"""Core clips written as new Blender actions, and core skeletons built as new armatures, in bulk
(``foreach_set``). Conventions: :mod:`.skeleton_read`.

:func:`write_action` only adds a new action and assigns it: no existing action is modified.
"""

# The bpy stubs type Object.data as a union of every data type, context members as optional and
# many RNA functions as returning None; those reports say nothing about this module's code.
# mypy: disable-error-code="union-attr,func-returns-value"
from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix

from ..core.errors import ClipError, RigError
from ..core.rig.clip import Clip
from ..core.rig.rotations import (
    blender_axis_angle_from_quat,
    euler_from_quat,
    make_euler_continuous,
    make_quat_continuous,
    orthonormalize,
    parts_from_transform,
    transform_from_parts,
)
from ..core.rig.skeleton import Skeleton
from . import compat
from .clip_read import _normalized, _pose_values, _validated
from .fcurve_eval import _IPO_LINEAR, _check_frames
from .file_import import FPS_PROPERTY, scene_fps
from .skeleton_read import _armature, _matrices, _order, _skeleton

#: Data path of the curve :func:`write_action` copies the others from (no property has it).
_TEMPLATE_PATH = "marionette_key_template"


def _special_inheritance(bone: Any) -> bool:
    return (not bone.use_inherit_rotation) or bone.inherit_scale != "FULL" or (not bone.use_local_location)


def write_action(
    obj: bpy.types.Object,
    clip: Clip,
    name: str,
    frames: Any = None,
    replace: bool = False,
    fps: float | None = None,
    exact: bool = False,
) -> bpy.types.Action:
    """Key ``clip`` into a new action on ``obj`` (a new slot, assigned explicitly) and return it.

    * Only bones with ``coverage > 0`` are keyed, each in its pose bone's own rotation mode
      (quaternion keys hemisphere-continuous, Euler keys free of 2-pi jumps), with location, and
      scale when the clip has scales; one F-curve group per bone; LINEAR keys. A location that is
      zero in every frame and in the pose now, or a scale that is one throughout, gets no curve
      (the pose is the same); a connected bone gets no location curve, since Blender ignores its
      location (its head sits on the parent's tail), so its clip translation should be zero.
    * ``fps`` is the rate the new action's frame numbers count at (default: the scene's), stored
      as ``marionette_fps``; ``frames`` default to ``clip.frame_numbers(fps)`` (the clip's timing
      kept on that rate). Pass ``fps=clip.fps`` to keep the clip's own frame numbers.
    * An existing action called ``name`` is left alone and the new one gets a unique name, unless
      ``replace``: then the new action takes the name and the old one's users, and the old one is
      removed, unless another object plays it (a source's own clip): that one is kept. The object's previous action, if this leaves it without users, gets a fake user
      so it is not lost on save.
    * Bones that do not fully inherit their parent's transform get keys that put them where the
      clip's (fully inheriting) core model puts them, via ``Bone.convert_local_to_pose``;
      ``exact`` keys the clip's local transforms as they are (they were solved for Blender's own
      evaluation, as a control rig's are).

    Keys are written in bulk (``keyframe_points.add`` then ``foreach_set``).
    """
    obj = _armature(obj)
    problem = linked_problem(obj)
    if problem is not None:
        raise RigError(problem)
    skeleton = _skeleton(obj)
    _validated(clip)
    pbs = obj.pose.bones
    covered = [int(i) for i in np.flatnonzero(np.asarray(clip.coverage) > 0.0)]
    if not covered:
        raise ClipError(f"clip {clip.name!r} drives no bone (every coverage is zero)")
    missing = [clip.names[i] for i in covered if clip.names[i] not in pbs]
    if missing:
        listed = ", ".join(repr(m) for m in missing[:8]) + (" ..." if len(missing) > 8 else "")
        raise ClipError(f"clip {clip.name!r} drives bones that {obj.name!r} does not have: {listed}")
    rate = float(fps) if fps is not None else scene_fps()
    if not (math.isfinite(rate) and rate > 0.0):
        raise ClipError(f"frame rate must be positive, got {fps}")
    f = clip.frame_numbers(rate) if frames is None else np.asarray(frames, dtype=np.float64).reshape(-1)
    if f.shape != (clip.frame_count,):
        raise ClipError(f"clip {clip.name!r} has {clip.frame_count} frames but {f.shape[0]} frame numbers were given")
    f = _check_frames(f, f"writing clip {clip.name!r}")
    f32 = f.astype(np.float32)
    if f32.size > 1 and not np.all(np.diff(f32) > 0.0):
        raise ClipError(
            f"clip {clip.name!r}: frame numbers collide at single precision; use fewer or wider-spaced frames"
        )

    t = clip.frame_count
    names = [clip.names[i] for i in covered]
    every = len(covered) == len(clip.names)
    rot, zero = _normalized(clip.rotations if every else clip.rotations[:, covered])
    if zero:
        clip.validate()  # names the bone with a zero quaternion
    # Most clips are continuous already (readers and retargets keep them so); only flip signs
    # when some consecutive pair lies in opposite hemispheres.
    if t > 1 and np.any(np.einsum("tbi,tbi->tb", rot[1:], rot[:-1]) < 0.0):
        rot = make_quat_continuous(rot, axis=0)
    loc = clip.translations if every else clip.translations[:, covered]
    sca = None if clip.scales is None else (clip.scales if every else clip.scales[:, covered])
    overrides = {} if exact else _inheritance_overrides(obj, skeleton, clip, covered)
    if overrides:
        # Never write into the clip's own arrays.
        rot, loc = rot.copy(), loc.copy()
        sca = None if sca is None else sca.copy()
    for i, (q, l_, s_) in overrides.items():
        k = covered.index(i)
        rot[:, k], loc[:, k] = q, l_
        if s_ is not None:
            if sca is None:
                sca = np.ones_like(loc)
            sca[:, k] = s_

    # Which channels each bone gets.
    current = _pose_values(obj, skeleton)
    cur_loc = current["location"][[skeleton.index(n) for n in names]]
    cur_scale = current["scale"][[skeleton.index(n) for n in names]]
    arm_bones = obj.data.bones
    connected = np.array([arm_bones[n].use_connect for n in names])
    # Blender ignores a connected bone's location (its head sits on the parent's tail); a
    # location that is zero now and in every frame, or a scale that is one, needs no curve.
    # "Zero" is judged against the rig's size: importers leave pose noise (~1e-7) behind.
    heads = skeleton.rest_placements()[:, :3, 3]
    tiny = 1e-7 * max(float(np.ptp(heads, axis=0).max()), 1e-12)
    want_loc = ~connected & ~(np.all(np.abs(loc) < tiny, axis=(0, 2)) & np.all(np.abs(cur_loc) < tiny, axis=1))
    want_scale = np.zeros(len(names), dtype=bool)
    if sca is not None:
        want_scale = ~(np.all(np.abs(sca - 1.0) < 1e-9, axis=(0, 2)) & np.all(cur_scale == 1.0, axis=1))
    mode_of = {pb.name: pb.rotation_mode for pb in pbs}  # one pass: a lookup by name searches the bones
    modes = [mode_of[n] for n in names]

    # Blocks of values (T, bones, n) per channel kind, and the curve rows they fill.
    blocks: list[tuple[str, np.ndarray, np.ndarray]] = []  # (property, bone positions, values)
    sel = np.flatnonzero(want_loc)
    if sel.size:
        blocks.append(("location", sel, loc[:, sel]))
    for mode in sorted(set(modes)):
        sel = np.array([k for k, m in enumerate(modes) if m == mode])
        if mode == "QUATERNION":
            blocks.append(("rotation_quaternion", sel, rot[:, sel]))
        elif mode == "AXIS_ANGLE":
            aa = np.stack([blender_axis_angle_from_quat(rot[:, k], carry=True) for k in sel], axis=1)
            blocks.append(("rotation_axis_angle", sel, aa))
        else:
            e = make_euler_continuous(euler_from_quat(rot[:, sel], mode), mode, axis=0)
            blocks.append(("rotation_euler", sel, e))
    sel = np.flatnonzero(want_scale)
    if sel.size and sca is not None:
        blocks.append(("scale", sel, sca[:, sel]))
    # Curves bone by bone (location, rotation, scale), so each bone's group reads in order.
    order = {"location": 0, "rotation_quaternion": 1, "rotation_axis_angle": 1, "rotation_euler": 1, "scale": 2}
    specs = sorted(
        (
            (int(bk), order[prop], prop, k, bi)
            for bi, (prop, bsel, vals) in enumerate(blocks)
            for bk in bsel
            for k in range(vals.shape[2])
        ),
    )
    # Each block as contiguous float32 rows (bone, component, frame): one conversion pass, then
    # every curve copies one row into a single reused [frame, value, ...] buffer.
    rows_of = [np.ascontiguousarray(vals.transpose(1, 2, 0), dtype=np.float32) for _p, _s, vals in blocks]
    where = {(bi, int(bk)): pos for bi, (_p, bsel, _v) in enumerate(blocks) for pos, bk in enumerate(bsel)}
    co = np.empty(2 * t, dtype=np.float32)
    co[0::2] = f32

    action = _new_action(name, replace, obj)
    try:
        action[FPS_PROPERTY] = rate
        action_slot = compat.new_action_slot(action, obj)
        bag = compat.channelbag(action, action_slot, create=True)
        linear = [_IPO_LINEAR] * t
        paths = [f'pose.bones["{bpy.utils.escape_identifier(n)}"].' for n in names]
        # Where Blender copies F-curves (slotted actions), every curve is a copy of one template
        # keyed on the frames with LINEAR interpolation, its values then written over: adding the
        # keys and setting their interpolation curve by curve costs more than the copy. The
        # template is removed at the end; the curves are the same as made one by one.
        copy = getattr(bag.fcurves, "new_from_fcurve", None) if compat.SLOTTED_ACTIONS and hasattr(bag, "groups") else None
        template = None
        if copy is not None:
            template = bag.fcurves.new(_TEMPLATE_PATH, index=0)
            co[1::2] = 0.0
            template.keyframe_points.add(t)
            template.keyframe_points.foreach_set("co", co)
            template.keyframe_points.foreach_set("interpolation", linear)
        groups: dict[str, Any] = {}
        for bk, _o, prop, k, bi in specs:
            if template is None:
                fc = compat.new_fcurve(bag, paths[bk] + prop, k, names[bk])
                fc.keyframe_points.add(t)
            else:
                template.array_index = k  # the copy takes its index (and must not exist yet)
                fc = copy(template, data_path=paths[bk] + prop)
                group = groups.get(names[bk])
                if group is None:
                    group = groups[names[bk]] = bag.groups.new(names[bk])
                fc.group = group
            kp = fc.keyframe_points
            co[1::2] = rows_of[bi][where[(bi, bk)], k]
            kp.foreach_set("co", co)
            # Sorted, unique LINEAR keys need no fcurve.update() (which would double the time):
            # handles play no part in LINEAR segments.
            if template is None:
                kp.foreach_set("interpolation", linear)
        if template is not None:
            bag.fcurves.remove(template)
    except Exception:
        bpy.data.actions.remove(action)
        raise
    previous = obj.animation_data.action if obj.animation_data else None
    compat.assign_action(obj, action, action_slot)
    if previous is not None and previous != action and previous.users == 0 and not previous.use_fake_user:
        previous.use_fake_user = True
    return action


def linked_problem(obj: Any) -> str | None:
    """Why ``obj`` cannot keep a new animation, or ``None``: an object linked from a library file
    (not overridden) accepts an action in memory, and loses it when the file is saved and opened
    again."""
    if getattr(obj, "library", None) is not None and getattr(obj, "override_library", None) is None:
        return (
            f"armature {obj.name!r} is linked from {obj.library.filepath!r}, so an action given to it would be lost "
            "on save; make a library override of it (Object > Library Override > Make) and use that"
        )
    return None


def _played_elsewhere(action: bpy.types.Action, obj: bpy.types.Object) -> bool:
    """Whether an object other than ``obj`` plays ``action`` (as its action or in an NLA strip)."""
    for other in bpy.data.objects:
        ad = other.animation_data
        if other == obj or ad is None:
            continue
        if ad.action == action or any(strip.action == action for track in ad.nla_tracks for strip in track.strips):
            return True
    return False


def _new_action(name: str, replace: bool, obj: bpy.types.Object | None = None) -> bpy.types.Action:
    old = bpy.data.actions.get(name)
    # An action another object plays (the source's own clip of that name) is never replaced: the
    # new one takes a unique name instead.
    if replace and old is not None and obj is not None and _played_elsewhere(old, obj):
        replace = False
    action = bpy.data.actions.new(name)
    if replace and old is not None and old != action:
        old.user_remap(action)
        bpy.data.actions.remove(old)
        action.name = name
    return action


def _inheritance_overrides(
    obj: bpy.types.Object, skeleton: Skeleton, clip: Clip, covered: list[int]
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """For covered bones that do not fully inherit, the ``matrix_basis`` parts (quaternion,
    location, scale or ``None``) that put them where the clip's core model places them."""
    bones = obj.data.bones
    special = [i for i in covered if _special_inheritance(bones[clip.names[i]])]
    if not special:
        return {}
    t, b = clip.frame_count, len(skeleton)
    # Full local transforms for FK: the clip's where it has the bone, the current pose elsewhere.
    pbs = obj.pose.bones
    buf = np.empty(len(pbs) * 16, dtype=np.float32)
    pbs.foreach_get("matrix_basis", buf)
    current = _matrices(buf, len(pbs))[_order(skeleton, [pb.name for pb in pbs])]
    local = np.broadcast_to(current[None], (t, b, 4, 4)).copy()
    clip_local = transform_from_parts(clip.rotations, clip.translations, clip.scales)
    for i, nm in enumerate(clip.names):
        j = skeleton.find(nm)
        if j is not None:
            local[:, j] = clip_local[:, i]
    pose = skeleton.forward_kinematics_from_locals(local)
    out = {}
    for i in special:
        bone = bones[clip.names[i]]
        j = skeleton.index(bone.name)
        rest = bone.matrix_local
        parent = bone.parent
        p = skeleton.index(parent.name) if parent is not None else -1
        basis = np.empty((t, 4, 4))
        for k in range(t):
            kwargs = {}
            if parent is not None:
                kwargs = {"parent_matrix": Matrix(pose[k, p].tolist()), "parent_matrix_local": parent.matrix_local}
            m = bone.convert_local_to_pose(Matrix(pose[k, j].tolist()), rest, invert=True, **kwargs)
            basis[k] = np.array(m, dtype=np.float64)
        q, loc, sca = parts_from_transform(basis)
        q = make_quat_continuous(q, axis=0)
        has_scale = clip.scales is not None or not np.allclose(sca, 1.0, rtol=0.0, atol=1e-6)
        out[i] = (q, loc, sca if has_scale else None)
    return out


def create_armature(
    skeleton: Skeleton,
    name: str,
    tails: Any = None,
    collection: bpy.types.Collection | None = None,
) -> bpy.types.Object:
    """A new armature object whose bones have ``skeleton``'s rest placements and parents, placed
    at ``skeleton.placement``, linked to ``collection`` (default: the active collection).

    Bone lengths come from ``tails`` (``(B, 3)`` skeleton-space points; only their distance to
    the head is used, the direction is the rest's Y axis) or, by default, from the distance to
    the children's heads (a leaf takes half its parent's length). Every bone is at least 1/1000
    of the skeleton's size long, since Blender deletes zero-length bones. Local transforms of a
    clip on ``skeleton`` map one to one onto the new bones when the skeleton has no child-side
    frames (``C1 = I``), as for any skeleton read from Blender.
    """
    rest = skeleton.rest_placements()
    heads = rest[:, :3, 3]
    n = len(skeleton)
    extent = float(np.linalg.norm(heads.max(axis=0) - heads.min(axis=0))) if n > 1 else 0.0
    floor = max(1e-3 * extent, 1e-4) if extent > 0.0 else 0.1
    if tails is not None:
        tl = np.asarray(tails, dtype=np.float64)
        if tl.shape != (n, 3):
            raise RigError(f"tails must have shape ({n}, 3), got {tl.shape}")
        lengths = np.linalg.norm(tl - heads, axis=1)
    else:
        lengths = np.zeros(n)
        for i in range(n):
            kids = skeleton.children(i)
            d = [float(np.linalg.norm(heads[c] - heads[i])) for c in kids]
            d = [x for x in d if x > floor]
            if d:
                lengths[i] = float(np.mean(d))
        for i in range(n):  # leaves after their parents (parents come first)
            if lengths[i] <= floor:
                p = int(skeleton.parents[i])
                lengths[i] = 0.5 * lengths[p] if p >= 0 else 0.1 * max(extent, 1.0)
    lengths = np.maximum(lengths, floor)

    arm = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, arm)
    (collection or bpy.context.collection or bpy.context.scene.collection).objects.link(obj)
    obj.matrix_world = Matrix(np.asarray(skeleton.placement).tolist())
    view_layer = bpy.context.view_layer
    previous_active = view_layer.objects.active
    previous_mode = previous_active.mode if previous_active is not None else "OBJECT"
    if previous_mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    view_layer.objects.active = obj
    try:
        bpy.ops.object.mode_set(mode="EDIT")
        ebs = arm.edit_bones
        made = []
        rot = orthonormalize(rest[:, :3, :3])
        for i, nm in enumerate(skeleton.names):
            eb = ebs.new(nm)
            eb.head = (0.0, 0.0, 0.0)
            eb.tail = (0.0, float(lengths[i]), 0.0)
            m = np.eye(4)
            m[:3, :3] = rot[i]
            m[:3, 3] = heads[i]
            eb.matrix = Matrix(m.tolist())
            made.append(eb)
        for i, eb in enumerate(made):
            p = int(skeleton.parents[i])
            if p >= 0:
                eb.parent = made[p]
                eb.use_connect = False
        bpy.ops.object.mode_set(mode="OBJECT")
    except Exception:
        if obj.mode != "OBJECT":
            bpy.ops.object.mode_set(mode="OBJECT")
        bpy.data.objects.remove(obj)
        bpy.data.armatures.remove(arm)
        raise
    finally:
        if previous_active is not None and previous_active.name in view_layer.objects:
            view_layer.objects.active = previous_active
            if previous_mode != "OBJECT":
                bpy.ops.object.mode_set(mode=previous_mode)
    return obj


def write_object_travel(obj: Any, action: Any, travel: Any, frames: Any) -> None:
    """Key the object's location with the root travel (root motion on the object).

    ``travel`` is ``(T, 3)`` in the armature's own space; it becomes a world offset through the
    object's placement and then a location offset in the object's parent space.
    """
    world = np.asarray(obj.matrix_world, dtype=np.float64)[:3, :3]
    delta = np.asarray(travel, dtype=np.float64) @ world.T
    if obj.parent is not None:
        parent = np.asarray(obj.parent.matrix_world, dtype=np.float64) @ np.asarray(obj.matrix_parent_inverse, dtype=np.float64)
        delta = delta @ np.linalg.inv(parent[:3, :3]).T
    values = np.asarray(obj.location, dtype=np.float64) + delta
    bag = compat.channelbag(action, compat.action_slot_for(action, obj), create=True)
    f = np.asarray(frames, dtype=np.float32)
    for axis in range(3):
        curve = compat.new_fcurve(bag, "location", axis, "Object Transforms")
        curve.keyframe_points.add(len(f))
        curve.keyframe_points.foreach_set("co", np.column_stack([f, values[:, axis]]).astype(np.float32).ravel())
        curve.keyframe_points.foreach_set("interpolation", [1] * len(f))  # LINEAR
        curve.update()
