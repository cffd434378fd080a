"""A PMX model turned into Marionette's generic rig definitions, once, when the rig is built.

:func:`build_rig` reads a :class:`~core.formats.pmx.PmxModel` and returns a :class:`PmxRig`: a
:class:`~core.rig.skeleton.Skeleton` and a :class:`~core.controls.stack.ControlStack` of IK chains with
their limits, bone inheritance ("append"/"grant") and fixed axes (docs/formats.md#pmx). Nothing
built here refers to PMX afterwards: the controls are the same ones any rig uses, and the MMD
names, indices and raw values stay in :class:`PmxRig` only for display and reports.

Axes and units. MMD model space is left-handed, +Y up, the model facing -Z, its left hand at +X,
lengths in MMD units. Blender is right-handed, +Z up, a character facing -Y with its left hand at
+X. A point converts as::

    (x, y, z)_blender = scale * (x, z, y)_mmd          (scale: metres per MMD unit, default 0.08)

Swapping Y and Z is a reflection (determinant -1): that swap *is* the change of handedness, so
the model keeps its up, its front and its left side. A rotation ``R`` of MMD space becomes
``S R S`` (``S`` the swap); for a w-first quaternion ``(w, x, y, z)`` that is
``(w, -x, -z, -y)``: the axis is swapped like a point and the angle changes sign, since a
reflection reverses the sense of turning. An Euler-angle range ``[lo, hi]`` about MMD's X, Y or Z
therefore becomes ``[-hi, -lo]`` about Blender's X, Z or Y.

Bone frames. MMD bones have no rest orientation: a bone's local rotation is expressed in model
axes. A Blender bone (and a joint here) has a rest frame whose +Y runs from head to tail. A local
rotation ``Q`` in model axes and the joint's local rotation ``R`` in a rest frame ``B`` relate by
``R = B^T Q B``, which is how limits, inherited turns and fixed axes are carried over. The frame
of each joint is chosen so that its definitions stay simple:

* an IK link with limits gets an axis-aligned frame (each axis along a model axis), so the
  model-axis Euler box is still a box in the bone's own axes, with its order rewritten to
  ``XYZ`` (see :func:`link_frame`). With one free axis (a knee) its +Y is the model axis nearest
  the bone, so the bone is drawn a few degrees off its child; with several, +Y must be the
  middle axis of MMD's order and may point well away from it (rare in MMD models).
* a bone with a fixed axis gets its +Y along that axis, so the fixed axis is the bone's own Y;
* a bone with local axes keeps +Y toward its tail and turns its Z toward the local Z axis;
* any other bone has +Y toward its tail and Blender's default roll (the smallest turn from +Y).

A bone whose tail is at its head (IK bones, helpers) points up, one MMD unit long.

Controls, in MMD's evaluation order (after-physics flag, transform level, index) as priorities:

* one IK control per IK bone: CCD (MMD's own method) over its links, which must form one parent
  chain ending just above the target bone; loops as MMD's loop count (at most 256); each limited
  link an :class:`~core.controls.joint_limits.EulerBoxLimit` in its frame, or a
  :class:`~core.controls.joint_limits.HingeLimit` when only one axis may turn (a knee), whose solver
  handling keeps one-way knees from stalling straight. The IK bone is the target: see
  :func:`ik_target_positions`. MMD's per-iteration angle limit has no generic equivalent and is
  kept only in the model data.
* one inheritance control per append bone: the rotation and/or translation ratio of its source's
  current local value. Where the source is itself an append bone, MMD runtimes pass on only the
  source's appended part; here the source's whole current rotation is read (the same for the
  usual case, a source that is not itself appended). The "local append" flag is read the same way.
* one fixed-axis control per fixed-axis bone.

Whatever cannot be converted is skipped and said in :attr:`PmxRig.notes`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike

from ..controls.chains import JointPath
from ..controls.inheritance import FixedAxes, Grant, Inheritance
from ..controls.joint_limits import free_axes, link_limit
from ..controls.stack import Control, ControlStack, FixedAxisControl, IKControl, InheritControl
from ..errors import RigError
from ..rig.rotations import FloatArray, matrix_between_vectors
from ..rig.skeleton import Skeleton
from .pmx import BoneFlag, PmxBone, PmxModel

#: Metres per MMD unit (a 20-unit-tall model becomes 1.6 m), the usual choice of MMD importers.
DEFAULT_SCALE = 0.08
#: Most IK loops a chain may ask for (MMD runtimes cap it the same way).
MAX_IK_LOOPS = 256
#: Blender keeps bone names to 63 bytes of UTF-8.
MAX_NAME_BYTES = 63

#: Point conversion MMD -> Blender without the scale (the reflection that swaps Y and Z).
AXIS_SWAP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
AXIS_SWAP.setflags(write=False)

# Below this (relative to the model's size) a tail sits on its head.
_ZERO_LENGTH = 1e-6


# --- conversions -----------------------------------------------------------------------------


def blender_points(points: ArrayLike, scale: float = DEFAULT_SCALE) -> FloatArray:
    """MMD model-space points ``(..., 3)`` in Blender space: ``scale * (x, z, y)``."""
    p = np.asarray(points, dtype=np.float64)
    return scale * p[..., [0, 2, 1]]


def blender_directions(vectors: ArrayLike) -> FloatArray:
    """MMD directions ``(..., 3)`` in Blender space (unscaled)."""
    return np.asarray(vectors, dtype=np.float64)[..., [0, 2, 1]]


def blender_quaternions(q: ArrayLike) -> FloatArray:
    """MMD rotations, w-first quaternions ``(..., 4)``, as Blender-space rotations:
    ``(w, x, y, z) -> (w, -x, -z, -y)`` (``S R S`` with ``S`` the Y/Z swap)."""
    a = np.asarray(q, dtype=np.float64)
    out = np.empty(a.shape)
    out[..., 0] = a[..., 0]
    out[..., 1] = -a[..., 1]
    out[..., 2] = -a[..., 3]
    out[..., 3] = -a[..., 2]
    return out


def mmd_euler_order(limit_min: ArrayLike, limit_max: ArrayLike) -> str:
    """The Euler order (Blender naming, first letter applied first) in which MMD runtimes read a
    link's angles: the axis whose range stays inside (-90, 90) degrees goes in the middle, where
    the decomposition is unambiguous. X if it can, then Y, else Z."""
    lo = np.minimum(limit_min, limit_max)
    hi = np.maximum(limit_min, limit_max)
    half = 0.5 * math.pi
    if -half < lo[0] and hi[0] < half:
        return "ZXY"
    if -half < lo[1] and hi[1] < half:
        return "XYZ"
    return "YZX"


def blender_euler_box(limit_min: ArrayLike, limit_max: ArrayLike) -> tuple[FloatArray, FloatArray, str]:
    """An IK link's limits (MMD model axes, X, Y, Z, radians; min and max per axis in either
    order, as MMD accepts) as ``(lo, hi, order)`` about Blender's X, Y, Z: each range negated
    and Y/Z swapped (see the module docstring), clamped to [-pi, pi] (float32 pi is a hair
    above pi)."""
    mn = np.asarray(limit_min, dtype=np.float64)
    mx = np.asarray(limit_max, dtype=np.float64)
    order = mmd_euler_order(mn, mx)
    lo_m = np.minimum(mn, mx)
    hi_m = np.maximum(mn, mx)
    lo = np.clip(-hi_m[[0, 2, 1]], -math.pi, math.pi)
    hi = np.clip(-lo_m[[0, 2, 1]], -math.pi, math.pi)
    swapped = order.translate(str.maketrans("YZ", "ZY"))
    return lo, hi, swapped


def link_frame(
    lo: ArrayLike, hi: ArrayLike, order: str, direction: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """An axis-aligned rest frame ``(3, 3)`` (columns: the bone's X, Y, Z in Blender space) for a
    link whose limits are the Blender-space box ``lo``/``hi`` applied in ``order``, and that box in
    the frame's own axes, order ``XYZ``: ``(frame, lo_bone, hi_bone)``.

    With ``B`` a signed permutation, ``B^T R_a(t) B = R_{B^T a}(t)``: each world-axis turn stays a
    turn about one bone axis, possibly with its sign flipped. With two or more free axes the order
    matters, so the world order's first, middle and last axes become the bone's X, Y and Z; with
    one (a hinge) or none any assignment is the same set of rotations, so the bone's +Y is the
    model axis nearest ``direction``. Signs keep +Y toward ``direction`` and X near Blender's
    default roll."""
    lo_w = np.asarray(lo, dtype=np.float64)
    hi_w = np.asarray(hi, dtype=np.float64)
    d = np.asarray(direction, dtype=np.float64)
    default_x = matrix_between_vectors(np.array([0.0, 1.0, 0.0]), d)[:, 0] if np.linalg.norm(d) > 0 else np.array([1.0, 0.0, 0.0])
    eye = np.eye(3)
    if len(free_axes(lo_w, hi_w)) >= 2:
        ax_x, ax_y, _ = ("XYZ".index(c) for c in order)
    else:
        ax_y = int(np.argmax(np.abs(d))) if np.linalg.norm(d) > 0 else 2
        rest = [k for k in range(3) if k != ax_y]
        ax_x = max(rest, key=lambda k: abs(default_x[k]))
    y = eye[ax_y] * (1.0 if d[ax_y] >= 0.0 else -1.0)
    x = eye[ax_x] * (1.0 if default_x[ax_x] >= 0.0 else -1.0)
    z = np.cross(x, y)
    frame = np.stack([x, y, z], axis=1)
    lo_b = np.empty(3)
    hi_b = np.empty(3)
    for i in range(3):
        k = int(np.argmax(np.abs(frame[:, i])))
        s = frame[k, i]
        lo_b[i], hi_b[i] = (lo_w[k], hi_w[k]) if s > 0 else (-hi_w[k], -lo_w[k])
    return frame, lo_b + 0.0, hi_b + 0.0


# --- the rig ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PmxRig:
    """A PMX model's skeleton and control definitions (shared and immutable, docs/controls.md#definitions-and-instances).

    Joint ``j`` of :attr:`skeleton` is PMX bone :attr:`pmx_index` ``[j]``; its name is the
    Blender bone name. :attr:`tails` are skeleton-space tail points for building the armature.
    """

    skeleton: Skeleton
    stack: ControlStack
    tails: FloatArray
    #: Per joint: the bone's Japanese and English names as the file has them.
    japanese: tuple[str, ...]
    english: tuple[str, ...]
    pmx_index: tuple[int, ...]
    #: IK control name -> the joint whose position is its target (the IK bone).
    ik_targets: Mapping[str, int]
    #: Per IK control: its links' Euler bounds in the joints' own axes, ``(lo, hi)`` per path joint
    #: (``None`` = free), the values an armature's bone IK limits store.
    link_bounds: Mapping[str, tuple[tuple[FloatArray, FloatArray] | None, ...]]
    scale: float
    #: What the model has that was not converted, and why.
    notes: tuple[str, ...] = field(default=())

    def joint_of_bone(self, pmx_bone: int) -> int:
        return self.pmx_index.index(pmx_bone)


def _unique_names(model: PmxModel, prefer: str) -> list[str]:
    """Blender bone names: Japanese (MMD's own key, what motion files name), or English where
    the model gives every bone a distinct one; never empty, at most 63 UTF-8 bytes, unique
    (later twins get ``.001``-style suffixes, as Blender would)."""
    if prefer not in ("japanese", "english"):
        raise RigError(f"bone names must be 'japanese' or 'english', got {prefer!r}")
    english = [b.name_english.strip() for b in model.bones]
    use_english = prefer == "english"
    out: list[str] = []
    taken: set[str] = set()
    for i, b in enumerate(model.bones):
        base = english[i] if use_english and english[i] and english.count(english[i]) == 1 else b.name.strip()
        base = _clip_name(base or f"bone{i}", MAX_NAME_BYTES)
        name = base
        k = 0
        while name in taken:
            k += 1
            suffix = f".{k:03d}"
            name = _clip_name(base, MAX_NAME_BYTES - len(suffix)) + suffix
        taken.add(name)
        out.append(name)
    return out


def _clip_name(name: str, max_bytes: int) -> str:
    raw = name.encode("utf-8")
    if len(raw) <= max_bytes:
        return name
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def evaluation_order(model: PmxModel) -> list[int]:
    """Bones in MMD's evaluation order: after-physics bones last, then by transform level, then
    by index."""
    bones = model.bones
    return sorted(range(len(bones)), key=lambda i: (bool(bones[i].flags & BoneFlag.AFTER_PHYSICS), bones[i].layer, i))


def _default_frame(d: FloatArray) -> FloatArray:
    """Blender's roll-0 frame for a bone along ``d``: the smallest turn from +Y."""
    return matrix_between_vectors(np.array([0.0, 1.0, 0.0]), d)


def _frame_with_y(y: FloatArray, z_hint: FloatArray | None) -> FloatArray:
    """A frame with +Y along ``y`` and Z as near ``z_hint`` as it can be (else the default roll)."""
    y = y / np.linalg.norm(y)
    if z_hint is not None:
        z = z_hint - np.dot(z_hint, y) * y
        if np.linalg.norm(z) > 1e-6 * np.linalg.norm(z_hint):
            z = z / np.linalg.norm(z)
            return np.stack([np.cross(y, z), y, z], axis=1)
    return _default_frame(y)


def build_rig(
    model: PmxModel,
    *,
    scale: float = DEFAULT_SCALE,
    names: str = "japanese",
) -> PmxRig:
    """The skeleton and control definitions of ``model`` (see the module docstring).

    ``scale`` is metres per MMD unit; ``names`` ``"japanese"`` (default: MMD's own key, the one
    motion files use) or ``"english"`` (each bone's English name where the model gives it a
    distinct one, else the Japanese)."""
    if not (math.isfinite(scale) and scale > 0.0):
        raise RigError(f"the scale must be a positive number of metres per MMD unit, got {scale}")
    if not model.bones:
        raise RigError(f"{model.path}: the model has no bones")
    bones = model.bones
    n = len(bones)
    notes: list[str] = []
    bone_names = _unique_names(model, names)
    heads = blender_points(np.array([b.position for b in bones]), scale)
    extent = float(np.linalg.norm(heads.max(axis=0) - heads.min(axis=0))) if n > 1 else 0.0
    tiny = _ZERO_LENGTH * max(extent, scale)

    # Tails: another bone's head or an offset; a tail on the head points up, one MMD unit long.
    tail_points = np.empty((n, 3))
    for i, b in enumerate(bones):
        tail_points[i] = heads[b.tail_bone] if b.tail_bone >= 0 else heads[i] + blender_points(b.tail_offset, scale)
    dirs = tail_points - heads
    lengths = np.linalg.norm(dirs, axis=1)
    flat = lengths <= tiny
    dirs[flat] = [0.0, 0.0, 1.0]
    lengths[flat] = scale
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)

    # Which links carry limits, and which limits (the first IK that names a bone wins).
    link_box: dict[int, tuple[FloatArray, FloatArray, str]] = {}
    for i, b in enumerate(bones):
        if b.ik is None:
            continue
        for link in b.ik.links:
            if link.limit_min is None or link.limit_max is None or not 0 <= link.bone < n:
                continue
            box = blender_euler_box(link.limit_min, link.limit_max)
            seen = link_box.get(link.bone)
            if seen is None:
                link_box[link.bone] = box
            elif not (np.array_equal(seen[0], box[0]) and np.array_equal(seen[1], box[1])):
                notes.append(
                    f"bone {bone_names[link.bone]!r} is limited differently by two IK chains; "
                    f"the limits of the first are used for both (IK {bone_names[i]!r} differs)"
                )

    frames = np.empty((n, 3, 3))
    bone_box: dict[int, tuple[FloatArray, FloatArray]] = {}
    for i, b in enumerate(bones):
        if i in link_box:
            lo, hi, order = link_box[i]
            frames[i], lo_b, hi_b = link_frame(lo, hi, order, dirs[i])
            bone_box[i] = (lo_b, hi_b)
        elif b.fixed_axis is not None and np.linalg.norm(b.fixed_axis) > 0.0:
            axis = blender_directions(b.fixed_axis)
            if np.dot(axis, dirs[i]) < 0.0 and not flat[i]:
                axis = -axis
            z_hint = None if b.local_z is None else blender_directions(b.local_z)
            frames[i] = _frame_with_y(axis, z_hint)
        elif b.local_z is not None:
            frames[i] = _frame_with_y(dirs[i], blender_directions(b.local_z))
        else:
            frames[i] = _default_frame(dirs[i])
    rest = np.broadcast_to(np.eye(4), (n, 4, 4)).copy()
    rest[:, :3, :3] = frames
    rest[:, :3, 3] = heads
    parents: list[int | str | None] = [None if b.parent < 0 else b.parent for b in bones]
    skeleton = Skeleton.from_rest_matrices(bone_names, parents, rest)
    joint = [skeleton.index(nm) for nm in bone_names]
    pmx_index = [0] * n
    for i, j in enumerate(joint):
        pmx_index[j] = i
    tails = np.empty((n, 3))
    tails[joint] = heads + frames[:, :, 1] * lengths[:, None]

    rank = {i: r for r, i in enumerate(evaluation_order(model))}
    controls: list[Control] = []
    ik_targets: dict[str, int] = {}
    link_bounds: dict[str, tuple[tuple[FloatArray, FloatArray] | None, ...]] = {}
    for i, b in enumerate(bones):
        if b.ik is not None:
            built = _ik_control(skeleton, model, i, joint, bone_names, bone_box, rank[i], notes)
            if built is not None:
                control, bounds = built
                controls.append(control)
                ik_targets[control.name] = joint[i]
                link_bounds[control.name] = bounds
    controls.extend(_inherit_controls(skeleton, bones, joint, bone_names, rank, notes))
    for i, b in enumerate(bones):
        if b.fixed_axis is None:
            continue
        axis = blender_directions(b.fixed_axis)
        if not np.linalg.norm(axis) > 0.0:
            notes.append(f"the fixed axis of {bone_names[i]!r} is a zero vector; it is not converted")
            continue
        local = frames[i].T @ axis
        axes = FixedAxes.build(skeleton, [joint[i]], local, frame="local")
        controls.append(FixedAxisControl(name=f"Fixed axis {bone_names[i]}", axes=axes, priority=rank[i]))
    for i, b in enumerate(bones):
        if b.flags & BoneFlag.EXTERNAL_PARENT:
            notes.append(f"{bone_names[i]!r} follows an external parent (another model); that link is not converted")
    # Priorities were MMD evaluation ranks of the bones; renumber them 0, 1, 2... in that order.
    dense = {r: k for k, r in enumerate(sorted({c.priority for c in controls}))}
    controls = [dataclasses.replace(c, priority=dense[c.priority]) for c in controls]
    stack = ControlStack(skeleton, controls)
    tails.setflags(write=False)
    return PmxRig(
        skeleton=skeleton,
        stack=stack,
        tails=tails,
        japanese=tuple(bones[k].name for k in pmx_index),
        english=tuple(bones[k].name_english for k in pmx_index),
        pmx_index=tuple(pmx_index),
        ik_targets=MappingProxyType(ik_targets),
        link_bounds=MappingProxyType(link_bounds),
        scale=float(scale),
        notes=tuple(notes),
    )


def _ik_control(
    skeleton: Skeleton,
    model: PmxModel,
    i: int,
    joint: Sequence[int],
    names: Sequence[str],
    bone_box: Mapping[int, tuple[FloatArray, FloatArray]],
    priority: int,
    notes: list[str],
) -> tuple[IKControl, tuple[tuple[FloatArray, FloatArray] | None, ...]] | None:
    ik = model.bones[i].ik
    assert ik is not None
    label = f"IK {names[i]!r}"
    if ik.target < 0 or not ik.links:
        notes.append(f"{label} has no target bone or no links; it is not converted")
        return None
    if any(link.bone < 0 for link in ik.links):
        notes.append(f"{label} has a link to no bone; it is not converted")
        return None
    top, bottom = joint[ik.links[-1].bone], joint[ik.links[0].bone]
    try:
        chain = skeleton.chain(top, bottom)
    except RigError:
        chain = []
    if chain != [joint[link.bone] for link in reversed(ik.links)]:
        notes.append(
            f"{label}: its links do not form one parent chain from {names[ik.links[-1].bone]!r} down to "
            f"{names[ik.links[0].bone]!r}; it is not converted"
        )
        return None
    target = joint[ik.target]
    controller = joint[i]
    if controller in chain or controller in skeleton.descendants(top):
        notes.append(f"{label} is moved by its own chain; it is not converted")
        return None
    if int(skeleton.parents[target]) == bottom:
        path = JointPath.between(skeleton, top, bottom, end=target)
    elif target in skeleton.descendants(bottom):
        # The end point rides on the last link at its rest offset; exact while the bones between
        # them keep their rest pose.
        rest = skeleton.rest_placements()
        offset = np.linalg.solve(rest[bottom], np.append(rest[target, :3, 3], 1.0))[:3]
        path = JointPath.between(skeleton, top, bottom, end_offset=offset)
        notes.append(f"{label}: the target {names[ik.target]!r} is not a child of the last link; it is carried at its rest offset")
    else:
        notes.append(f"{label}: the target {names[ik.target]!r} is not below the chain's last link; it is not converted")
        return None
    bounds = tuple(bone_box.get(link.bone) for link in reversed(ik.links))
    limits = tuple(None if bd is None else link_limit(bd[0], bd[1]) for bd in bounds)
    loops = min(max(int(ik.loop_count), 1), MAX_IK_LOOPS)
    if ik.loop_count > MAX_IK_LOOPS:
        notes.append(f"{label} asks for {ik.loop_count} loops; {MAX_IK_LOOPS} are used")
    control = IKControl(
        name=f"IK {names[i]}",
        path=path,
        solver="ccd",
        priority=priority,
        max_passes=loops,
        limits=limits if any(lim is not None for lim in limits) else None,
    )
    return control, bounds


def _inherit_controls(
    skeleton: Skeleton,
    bones: Sequence[PmxBone],
    joint: Sequence[int],
    names: Sequence[str],
    rank: Mapping[int, int],
    notes: list[str],
) -> list[Control]:
    """One inheritance control per append bone whose source exists; grants whose sources loop
    back to themselves are refused as a group."""
    usable: dict[int, PmxBone] = {}
    for i, b in enumerate(bones):
        if not b.is_append:
            continue
        if b.append_parent < 0:
            notes.append(f"{names[i]!r} has the append flags but no source bone; nothing to inherit")
        elif b.append_parent == i:
            notes.append(f"{names[i]!r} appends from itself; it is not converted")
        elif b.append_ratio == 0.0:
            notes.append(f"{names[i]!r} appends with ratio 0; nothing to inherit")
        else:
            usable[i] = b
    looping: set[int] = set()
    for i in usable:
        seen = [i]
        j = usable[i].append_parent
        while j in usable and j not in seen:
            seen.append(j)
            j = usable[j].append_parent
        if j == i:
            looping.update(seen)
    for i in sorted(looping):
        notes.append(f"{names[i]!r} appends from a bone that appends from it in turn; the loop is not converted")
    out: list[Control] = []
    for i, b in usable.items():
        if i in looping:
            continue
        grant = Grant.build(
            skeleton,
            joint[i],
            joint[b.append_parent],
            rotation=b.append_ratio if b.appends_rotation else 0.0,
            translation=b.append_ratio if b.appends_translation else 0.0,
        )
        out.append(InheritControl(name=f"Inherit {names[i]}", inheritance=Inheritance((grant,)), priority=rank[i]))
    return out


def ik_target_positions(rig: PmxRig, rotations: ArrayLike, translations: ArrayLike | None = None) -> dict[str, FloatArray]:
    """Skeleton-space positions ``(T, 3)`` of each IK control's target: its IK bone's head in the
    pose ``(T, B, 4)`` rotations and ``(T, B, 3)`` translations (the animation, before controls)."""
    if not rig.ik_targets:
        return {}
    world = rig.skeleton.forward_kinematics(rotations, translations)
    return {name: world[:, j, :3, 3].copy() for name, j in rig.ik_targets.items()}
