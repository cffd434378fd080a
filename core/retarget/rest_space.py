"""Rest-space retarget (docs/methods.md#rest-space): the second method, for rigs that share joint axes.

Where the geometric-frame method (:mod:`core.retarget.geometric`) rebuilds every bone's frame from positions,
this method trusts the rigs' own rest orientations. It suits rigs of one family (same exporter,
same joint axes, different rolls or proportions) and engine-style joint-frame rigs, and it is the
method that animates bones the geometric frames do not cover (toes, for one).

Conventions (those of :mod:`core.rig.rotations` and :mod:`core.rig.skeleton`): w-first Hamilton
quaternions, active rotations on column vectors, rotation matrices with bone axes as columns.
Everything is in each rig's *skeleton space*; the skeleton's own placement never enters.

Binding (:func:`bind_rest_space`, once per rig pair). For every slot both rigs map, with source
bone ``j`` and target bone ``k``:

* ``A`` -- the facing alignment, the rotation taking the source body axes (forward, left, up,
  inferred from the body, docs/pipeline.md#facing) onto the target's;
* ``Rs_j``, ``Rt_k`` -- rest orientations (skeleton space);
* ``M_k`` -- the optional rest match (:func:`rest_match`): a rotation, found from positions only,
  taking the aligned source rest bone onto the target's rest pose -- its direction exactly, its
  twist from the bones below it where they turned as one piece; identity when rest matching is off;
* the carry rotation ``C_k = Rs_j^T A^T M_k^T Rt_k``.

Sampling (:func:`retarget_rest_space`, per clip, vectorised over frames). Each source joint's
skeleton-space orientation ``Qs_j`` is rebuilt by one forward walk (parent orientation x the
joint's rest-relative frame ``C0`` x sampled local rotation x ``C1^-1``); the target joint's
orientation is ``Qt_k = A Qs_j C_k``, which turns the target by the same skeleton-space rotation
(seen through ``A``) that took the source from its rest, starting from the target's rest (or,
with rest matching, from the target's rest turned onto the source's rest directions). ``Qt_k`` is
then converted into the target's local rotation through its parent's *current* placement and its
attachment frames: ``T = (P C0)^-1 Qt C1``. Without rest matching, and where each mapped joint's
parent is mapped to the source joint's parent, this is the closed form ``T_t = G T_s G^T`` with
``G = (Pt C0t)^T A (Ps C0s)`` taken at rest: each local rotation conjugated by the rotation
between the two joints' parent-side rest frames.

Translation as in docs/pipeline.md#hips-height-and-travel: the hips' travel is rotated through ``A`` and scaled (target hip
height over source hip height, both measured from the feet), its height is measured from the
clip's own ground; disabling translation keeps the hips' local translation at zero. Other joints
rotate about their pivots (zero local translation), except bones hung from an anatomical parent
that is not their skeleton parent (IK-style feet), which are placed by their anatomical chain.

Coverage: a target joint inherits the coverage of the source joint mapped to it (0 where the
clip does not key that joint); unmapped target joints have coverage 0 and keep the identity local
transform, so another layer may drive them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from ..errors import MappingError
from ..mapping.humanoid import FINGER_SLOTS, MINIMUM_SLOTS, SLOT_PARENT, SLOTS
from ..rig.clip import Clip
from ..rig.rotations import (
    FloatArray,
    make_quat_continuous,
    matrix_between_vectors,
    matrix_from_quat,
    orthonormalize,
    quat_from_axis_angle,
    quat_from_matrix,
)
from ..rig.skeleton import Skeleton
from .canonical_pose import RigAnatomy, build_anatomy, evaluate_point
from .facing import Facing
from .geometric import RetargetOptions, RigInput, orientations, rig_facings, travel_scales
from .pelvis import hips_offset, hips_path


@dataclass(frozen=True)
class RestSpaceBinding:
    """Everything about a source/target pair that the rest-space method precomputes."""

    source: RigAnatomy
    target: RigAnatomy
    source_facing: Facing
    target_facing: Facing
    align: FloatArray  # 3x3 A: source skeleton-space directions -> target skeleton-space directions
    slots: tuple[str, ...]  # slots both rigs map, in profile (parents-first) order
    source_bones: NDArray[np.int64]  # (K,) source joint of each slot
    target_bones: NDArray[np.int64]  # (K,) target joint of each slot
    carry: FloatArray  # (K, 3, 3) C_k: target orientation = A @ source orientation @ C_k
    rest_match: FloatArray  # (K, 3, 3) M_k, identity when rest matching is off
    match_rest: bool
    translate: bool
    horizontal_scale: float
    vertical_scale: float
    source_hip_height: float
    target_hip_height: float
    target_ground: float
    root_bone: int  # target joint that carries travel in ROOT_BONE mode, -1 if none
    options: RetargetOptions
    warnings: tuple[str, ...] = field(default=())

    def describe(self) -> dict[str, object]:
        return {
            "method": "rest_space",
            "slots": list(self.slots),
            "match_rest": self.match_rest,
            "translate": self.translate,
            "source_facing": self.source_facing.describe(),
            "target_facing": self.target_facing.describe(),
            "rest_match_deg": {
                s: round(float(np.degrees(_matrix_angle(m))), 3) for s, m in zip(self.slots, self.rest_match, strict=True)
            },
            "horizontal_scale": self.horizontal_scale,
            "vertical_scale": self.vertical_scale,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class RestSpaceResult:
    clip: Clip  # target local transforms; coverage carried from the source joints
    root_motion: FloatArray  # (T, 3) horizontal travel in target skeleton space
    binding: RestSpaceBinding
    #: (T, Bs, 3, 3) skeleton-space orientation of every source joint, as sampled. Kept because the
    #: per-bone method choice (local curl for fingers) reads source orientations relative to each
    #: other and they cost nothing more here.
    source_rotations: FloatArray


def _matrix_angle(m: FloatArray) -> FloatArray:
    c = (np.trace(m, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.asarray(np.arccos(np.clip(c, -1.0, 1.0)), dtype=np.float64)


def rest_direction(anatomy: RigAnatomy, slot: str) -> FloatArray:
    """Skeleton-space rest direction of a slot's bone: its measured segment when it has one (the
    same segment the geometric frames use), else head to end point; zero when it has no length."""
    if slot in anatomy.segment_start:
        d = evaluate_point(anatomy.segment_end[slot], anatomy.rest) - evaluate_point(anatomy.segment_start[slot], anatomy.rest)
    else:
        b = anatomy.slots[slot]
        d = anatomy.ends[b] - anatomy.rest[b, :3, 3]
    return np.asarray(d, dtype=np.float64)


#: After the fitted twist, a subtree whose rest directions all agree within this angle (radians) is
#: taken to have turned as one piece between the two rests.
_RIGID_SUBTREE = np.radians(2.0)


def _max_angle(a: FloatArray, b: FloatArray) -> float:
    """Largest angle between paired vectors, ignoring pairs where either has no length."""
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    ok = (na > 1e-12) & (nb > 1e-12)
    if not np.any(ok):
        return 0.0
    c = np.sum(a[ok] * b[ok], axis=-1) / (na[ok] * nb[ok])
    return float(np.arccos(np.clip(c, -1.0, 1.0)).max())


def _segment_origin(anatomy: RigAnatomy, slot: str) -> FloatArray:
    if slot in anatomy.segment_start:
        return evaluate_point(anatomy.segment_start[slot], anatomy.rest)
    return np.asarray(anatomy.rest[anatomy.slots[slot], :3, 3], dtype=np.float64)


def rest_match(source: RigAnatomy, target: RigAnatomy, slots: tuple[str, ...], align: FloatArray) -> FloatArray:
    """Rest-matching rotations ``M_k`` ``(K, 3, 3)``: skeleton-space rotations (target space) that
    take each aligned source rest bone onto the target's rest pose, from positions only.

    Slots are matched parents first. A slot starts from its mapped parent slot's match (a chain
    lowered as one keeps its parts' relative turn), swings its own rest direction exactly onto the
    target's, then turns about that direction by the angle that best fits the rest directions of
    the slots below it -- kept only when that turn lines all of them up within 2 degrees, i.e. the
    subtree turned as one piece (a straight arm lowered into an A-pose, whose twist is fixed by
    where its hand and thumb point); otherwise the difference lies further down (an arm lowered
    below an unchanged clavicle) and the slots below match it themselves. A bone without length
    keeps its parent's match. Positions never see bone roll, so a roll difference between the rigs
    stays in the carry.
    """
    index = {s: k for k, s in enumerate(slots)}
    below: dict[str, list[str]] = {s: [] for s in slots}
    for s in slots:
        p = SLOT_PARENT[s]
        while p is not None:
            if p in below:
                below[p].append(s)
            p = SLOT_PARENT[p]
    out = np.empty((len(slots), 3, 3))
    for k, s in enumerate(slots):
        p = SLOT_PARENT[s]
        while p is not None and p not in index:
            p = SLOT_PARENT[p]
        start = np.eye(3) if p is None else out[index[p]]
        d_s = start @ align @ rest_direction(source, s)
        d_t = rest_direction(target, s)
        swing = matrix_between_vectors(d_s, d_t)
        m = swing @ start
        n_t = float(np.linalg.norm(d_t))
        if below[s] and n_t > 1e-12 and float(np.linalg.norm(d_s)) > 1e-12:
            u = d_t / n_t
            o_s, o_t = _segment_origin(source, s), _segment_origin(target, s)
            q_full = np.stack([_segment_origin(source, c) - o_s for c in below[s]]) @ (m @ align).T
            r_full = np.stack([_segment_origin(target, c) - o_t for c in below[s]])
            q = q_full - np.outer(q_full @ u, u)
            r = r_full - np.outer(r_full @ u, u)
            # The least-squares turn about u that takes the q's onto the r's; kept only when it
            # lines the whole subtree up, i.e. the subtree turned as one piece. Otherwise the
            # difference lies further down (an arm lowered below an unchanged clavicle) and the
            # slots below match it themselves.
            sin = float(np.sum(np.cross(q, r) @ u))
            cos = float(np.sum(q * r))
            if np.hypot(sin, cos) > 1e-9 * n_t * n_t:
                twist = matrix_from_quat(quat_from_axis_angle(u, np.arctan2(sin, cos)))
                if _max_angle(q_full @ twist.T, r_full) <= _RIGID_SUBTREE:
                    m = twist @ m
        elif n_t <= 1e-12 or float(np.linalg.norm(d_s)) <= 1e-12:
            m = start
        out[k] = m
    return out


def bind_rest_space(
    source: RigInput,
    target: RigInput,
    options: RetargetOptions | None = None,
    *,
    match_rest: bool = False,
    translate: bool = True,
) -> RestSpaceBinding:
    """Precompute the rest-space retarget of ``source`` clips onto ``target`` (see module doc).

    ``match_rest`` also turns each target bone's starting orientation so that its rest direction
    meets the source's (an A-pose source onto a T-pose target of one family then lines up);
    ``translate=False`` keeps the hips' local translation at zero.
    """
    opts = options or RetargetOptions()
    for name, rig in (("source", source), ("target", target)):
        missing = [s for s in MINIMUM_SLOTS if s not in rig.slots]
        if missing:
            raise MappingError(f"the {name} rig is not a usable humanoid: no bone for {', '.join(missing)}")
    common = [s for s in SLOTS if s in source.slots and s in target.slots]
    if not opts.fingers:
        common = [s for s in common if s not in FINGER_SLOTS]
    # Both anatomies see the same slots, so a segment ends at the same anatomical point on both
    # rigs (a chest segment reaches the neck on both, even if one rig also maps an upper chest).
    src = build_anatomy(source.skeleton, {s: source.slots[s] for s in common}, source.ends)
    tgt = build_anatomy(target.skeleton, {s: target.slots[s] for s in common}, target.ends)

    warnings: list[str] = []
    src_facing, tgt_facing = rig_facings(src, tgt, opts, warnings)
    body_s, body_t = src_facing.basis(), tgt_facing.basis()
    align = body_t @ body_s.T

    slots = tuple(common)
    sb = np.array([src.slots[s] for s in slots], dtype=np.int64)
    tb = np.array([tgt.slots[s] for s in slots], dtype=np.int64)
    # Nearest rotations: rests read from files are orthogonal only to single precision (4e-5 on
    # real FBX rigs), and the carry must be a rotation, not a skew.
    rs = orthonormalize(src.rest[sb, :3, :3])
    rt = orthonormalize(tgt.rest[tb, :3, :3])
    match = rest_match(src, tgt, slots, align) if match_rest else np.broadcast_to(np.eye(3), (len(slots), 3, 3)).copy()
    carry = np.swapaxes(rs, -1, -2) @ align.T @ np.swapaxes(match, -1, -2) @ rt

    scales = travel_scales(src, tgt, body_s[:, 2], body_t[:, 2], opts, warnings)

    hips_t = tgt.slots["hips"]
    parent = int(target.skeleton.parents[hips_t])
    root_bone = parent if parent >= 0 and parent not in set(tb.tolist()) else -1
    if opts.root_motion == "ROOT_BONE" and root_bone < 0:
        warnings.append("the target's hips have no root bone above them; travel stays on the hips")

    return RestSpaceBinding(
        source=src,
        target=tgt,
        source_facing=src_facing,
        target_facing=tgt_facing,
        align=align,
        slots=slots,
        source_bones=sb,
        target_bones=tb,
        carry=carry,
        rest_match=match,
        match_rest=match_rest,
        translate=translate,
        horizontal_scale=scales.horizontal,
        vertical_scale=scales.vertical,
        source_hip_height=scales.source_hip_height,
        target_hip_height=scales.target_hip_height,
        target_ground=scales.target_ground,
        root_bone=root_bone,
        options=opts,
        warnings=tuple(warnings),
    )


def clip_placements(skeleton: Skeleton, clip: Clip) -> tuple[FloatArray, FloatArray]:
    """Skeleton-space placements ``(T, B, 4, 4)`` of ``skeleton`` playing ``clip``, and the
    coverage ``(B,)`` of each joint (0 for joints the clip does not name; they stay at rest)."""
    n = len(skeleton)
    t = clip.frame_count
    rot = np.zeros((t, n, 4))
    rot[..., 0] = 1.0
    tr = np.zeros((t, n, 3))
    cols = [(i, skeleton.find(name)) for i, name in enumerate(clip.names)]
    src_cols = [i for i, j in cols if j is not None]
    dst = [j for _, j in cols if j is not None]
    if not dst:
        raise MappingError(f"clip {clip.name!r} animates none of the source rig's bones")
    rot[:, dst] = clip.rotations[:, src_cols]
    tr[:, dst] = clip.translations[:, src_cols]
    sc = None
    if clip.scales is not None:
        sc = np.ones((t, n, 3))
        sc[:, dst] = clip.scales[:, src_cols]
    coverage = np.zeros(n)
    assert clip.coverage is not None  # Clip fills it in
    coverage[dst] = clip.coverage[src_cols]
    return skeleton.forward_kinematics(rot, tr, sc), coverage


def retarget_rest_space(binding: RestSpaceBinding, clip: Clip) -> RestSpaceResult:
    """Carry ``clip`` (local transforms of the source rig) onto the target rig (see module doc)."""
    clip.validate()
    src, tgt = binding.source, binding.target
    ws, coverage_s = clip_placements(src.skeleton, clip)
    qs = orientations(ws) if clip.scales is not None else ws[..., :3, :3]
    t = clip.frame_count

    # 1. Every mapped joint at once: the source orientation, aligned and carried.
    q_target = binding.align @ qs[:, binding.source_bones] @ binding.carry  # (T, K, 3, 3)

    # 2. Root travel, measured from the ground and scaled (docs/pipeline.md#hips-height-and-travel).
    opts = binding.options
    body_s, body_t = binding.source_facing.basis(), binding.target_facing.basis()
    up_s, up_t = body_s[:, 2], body_t[:, 2]
    travel_t, grounded = hips_path(
        src, tgt, ws, up_s, up_t, binding.align, binding.horizontal_scale, binding.vertical_scale, binding.target_ground
    )
    if not binding.translate:
        travel_t = np.zeros_like(travel_t)
    mode = opts.root_motion
    root_travel = mode == "ROOT_BONE" and binding.root_bone >= 0
    hips_pos = grounded + (travel_t if mode in ("HIPS", "ROOT_BONE") else 0.0)

    # 3. One walk over the target, parents (skeleton and anatomical) first: each mapped joint's
    #    orientation is known; its local rotation needs its parent's *current* placement.
    sk = tgt.skeleton
    n = len(sk)
    c0_r, c0_t = sk.parent_frames[:, :3, :3], sk.parent_frames[:, :3, 3]
    c1_r = np.broadcast_to(np.eye(3), (n, 3, 3)) if sk.child_frames is None else sk.child_frames[:, :3, :3]
    c1_t = np.zeros((n, 3)) if sk.child_frames is None else sk.child_frames[:, :3, 3]
    slot_of = {int(b): k for k, b in enumerate(binding.target_bones)}
    hips_bone = tgt.slots["hips"]
    hips_at = hips_offset(tgt, body_t[:, 2])
    rest_rel = np.linalg.inv(tgt.rest[tgt.anatomical_parents.clip(0)]) @ tgt.rest
    w_r = np.empty((t, n, 3, 3))
    w_p = np.empty((t, n, 3))
    loc_r = np.broadcast_to(np.eye(3), (t, n, 3, 3)).copy()
    loc_t = np.zeros((t, n, 3))
    for i in tgt.order:
        p = int(sk.parents[i])
        a_r = np.broadcast_to(c0_r[i], (t, 3, 3)) if p < 0 else w_r[:, p] @ c0_r[i]
        a_p = np.broadcast_to(c0_t[i], (t, 3)) if p < 0 else w_r[:, p] @ c0_t[i] + w_p[:, p]
        k = slot_of.get(i)
        if k is None:
            # Unmapped: identity local transform, except the root bone that takes the travel.
            if i == binding.root_bone and root_travel:
                loc_t[:, i] = np.einsum("tji,tj->ti", a_r, travel_t)
            w_r[:, i] = a_r @ c1_r[i].T
            w_p[:, i] = a_p + np.einsum("tij,tj->ti", a_r, loc_t[:, i]) - w_r[:, i] @ c1_t[i]
            continue
        q = q_target[:, k]
        if i == hips_bone and binding.translate:
            pos = hips_pos - q @ hips_at  # the hips point where the path puts it
        elif i in tgt.detached:
            a = int(tgt.anatomical_parents[i])
            pos = w_r[:, a] @ rest_rel[i, :3, 3] + w_p[:, a]
        else:
            # Rotation about the joint's pivot: M = P C0 T C1^-1 with no translation in T.
            pos = a_p - q @ c1_t[i]
        loc_r[:, i] = np.swapaxes(a_r, -1, -2) @ q @ c1_r[i]
        loc_t[:, i] = np.einsum("tji,tj->ti", a_r, q @ c1_t[i] + pos - a_p)
        w_r[:, i] = q
        w_p[:, i] = pos

    coverage = np.zeros(n)
    coverage[binding.target_bones] = coverage_s[binding.source_bones]
    if root_travel:
        coverage[binding.root_bone] = coverage[hips_bone]
    out = replace(
        clip,
        names=sk.names,
        rotations=make_quat_continuous(quat_from_matrix(loc_r), axis=0),
        translations=loc_t,
        scales=None,
        coverage=coverage,
    )
    return RestSpaceResult(clip=out, root_motion=travel_t, binding=binding, source_rotations=qs)
