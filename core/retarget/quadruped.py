"""Retarget between two quadrupeds (docs/pipeline.md#quadrupeds), or two bodies described as
chains (docs/pipeline.md#other-bodies): the geometric-frame transfer of :mod:`.geometric` carried
over to chains.

:func:`bind_quadrupeds` (once per pair) reads both bodies (:mod:`.body_chains`): body axes, chains,
the canonical standing pose, and for every target bone of a chain both rigs share, the arc
interval of the source chain it takes its direction from and the geometric frames on both sides.

:func:`retarget_quadruped` (per clip, vectorised over frames) poses the source, and for every
driven target bone carries the source bone's geometric frame (the frame turned with the bone,
re-aimed at the measured chord), turns it into the target body through the alignment of the two
bodies (``align``: the source's forward, left and up onto the target's), and converts it into a
local rotation through the target parent's *current* placement, as the humanoid transfer does.
The pelvis is a rigid base: its frame is the body's axes at rest, carried by its rotation. Its
travel is measured from the ground under it at rest and scaled by pelvis height (target over
source, each from its paws); root motion goes on the pelvis, on the bone right above it, on the
object, or is dropped, as for humanoids. Bones no shared chain covers keep their rest (coverage 0).

Authored bone axes never enter: rolled copies of either rig give the same motion.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import MappingError
from ..rig.clip import Clip
from ..rig.rotation_kernels import quats_of_matrices
from ..rig.rotations import FloatArray, make_quat_continuous, matrix_between_vectors
from ..rig.skeleton import Skeleton
from .body_chains import BodyPlan, ChainBody, arc_chord, canonical_direction, canonical_frame, read_body, rest_points
from .geometric import RetargetOptions, chosen_scales
from .geometric import pose_of as pose_of  # where the chain transfer and its callers read it

ROOT_MODES = ("HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE")


@dataclass(frozen=True)
class CarriedBone:
    """One driven target bone: the source points whose chord it takes, the source bone that carries
    its turn, and both bone-local geometric frames."""

    chain: str
    target: int
    source: int
    point_bones: tuple[int, ...]  # source bones of the chord's points
    offsets: FloatArray  # (M, 3) bone-local
    coef: FloatArray  # (M,) chord = sum coef * point
    source_local: FloatArray  # (3, 3) the geometric frame in the source bone's axes
    target_local: FloatArray  # (3, 3) the geometric frame in the target bone's axes
    interval: tuple[float, float]


@dataclass(frozen=True)
class QuadrupedBinding:
    """Everything about a quadruped pair that does not change between frames."""

    source: ChainBody
    target: ChainBody
    align: FloatArray  # 3x3: source skeleton-space directions -> target's
    carried: tuple[CarriedBone, ...]  # parents first
    pelvis_source_local: FloatArray  # (3, 3) the body axes in the source pelvis' axes at rest
    pelvis_target_local: FloatArray
    shared: tuple[str, ...]  # chains both rigs have
    #: Travel scales across the ground and up; both target pelvis height over source's unless
    #: the options give them.
    horizontal_scale: float
    vertical_scale: float
    root_motion: str = "HIPS"
    warnings: tuple[str, ...] = field(default=())
    #: The bone right above the target's pelvis that carries the travel (``ROOT_BONE``), else -1.
    root_bone: int = -1

    @property
    def driven(self) -> FloatArray:
        out = np.zeros(len(self.target.skeleton))
        out[self.target.pelvis] = 1.0
        for c in self.carried:
            out[c.target] = 1.0
        return out

    def describe(self) -> dict[str, object]:
        return {
            "body_plan": "quadruped" if self.source.kind == self.target.kind == "quadruped" else "chains",
            "chains": list(self.shared),
            "source_facing": self.source.axes.describe(),
            "target_facing": self.target.axes.describe(),
            "horizontal_scale": self.horizontal_scale,
            "vertical_scale": self.vertical_scale,
            "source_hip_height": self.source.hip_height,
            "target_hip_height": self.target.hip_height,
            "warnings": list(self.warnings),
        }


def _orient(m: FloatArray) -> FloatArray:
    r = m[..., :3, :3]
    return np.asarray(r / np.linalg.norm(r, axis=-2, keepdims=True), dtype=np.float64)


def bind_quadrupeds(
    source: Skeleton,
    source_slots: dict[str, str] | BodyPlan,
    target: Skeleton,
    target_slots: dict[str, str] | BodyPlan,
    source_ends: FloatArray | None = None,
    target_ends: FloatArray | None = None,
    root_motion: str = "HIPS",
    options: RetargetOptions | None = None,
) -> QuadrupedBinding:
    """Precompute the retarget of ``source`` clips onto ``target``: both quadruped mappings
    (slot -> bone name), or both bodies described as chains (:class:`.body_chains.BodyPlan`,
    docs/pipeline.md#other-bodies), paired by chain name. The travel scales are ``options``'
    (:func:`.geometric.chosen_scales`), by default target pelvis height over source's."""
    if root_motion not in ROOT_MODES:
        raise MappingError(f"root motion {root_motion!r} is not available for quadrupeds (use one of {', '.join(ROOT_MODES)})")
    src = read_body(source, source_slots, source_ends)
    tgt = read_body(target, target_slots, target_ends)
    align = tgt.axes.basis() @ src.axes.basis().T
    shared = tuple(c for c in tgt.points if c in src.points)
    if not shared:
        raise MappingError("the two bodies share no chain by name: nothing to carry")
    warnings = [f"the target's {c} is not driven: the source has none" for c in tgt.points if c not in src.points]
    carried: list[CarriedBone] = []
    src_rot, tgt_rot = _orient(src.rest), _orient(tgt.rest)
    for c in shared:
        sp, tp = src.points[c], tgt.points[c]
        s_rest, t_rest = rest_points(src, c), rest_points(tgt, c)
        canonical = canonical_direction(src, tgt, c)
        # Chains of one bone count pair joint with joint (elbow with elbow); others by arc length.
        along = sp.fractions if len(sp.bones) == len(tp.bones) else tp.fractions
        for k, bone in enumerate(tp.bones):
            a, b = float(along[k]), float(along[k + 1])
            coef, seg = arc_chord(sp.fractions, a, b)
            carrier = sp.point_bones[seg]
            s_frame = canonical_frame(src, c, coef @ s_rest, canonical)
            t_frame = canonical_frame(tgt, c, t_rest[k + 1] - t_rest[k], canonical)
            carried.append(CarriedBone(
                c, bone, carrier, sp.point_bones, sp.offsets, coef,
                src_rot[carrier].T @ s_frame, tgt_rot[bone].T @ t_frame, (a, b),
            ))
    carried.sort(key=lambda cb: cb.target)  # skeleton order: parents first
    auto = tgt.hip_height / src.hip_height if src.hip_height > 0 else float("nan")
    horizontal, vertical = chosen_scales(options or RetargetOptions(), auto, warnings)
    root_bone = int(target.parents[tgt.pelvis]) if root_motion == "ROOT_BONE" else -1
    if root_motion == "ROOT_BONE" and root_bone < 0:
        warnings.append("the target's pelvis has no root bone above it; travel stays on the pelvis")
    return QuadrupedBinding(
        src, tgt, align, tuple(carried),
        src_rot[src.pelvis].T @ src.axes.basis(), tgt_rot[tgt.pelvis].T @ tgt.axes.basis(),
        shared, float(horizontal), float(vertical), root_motion, tuple(warnings), root_bone,
    )


def carried_orientations(binding: QuadrupedBinding, placements: FloatArray) -> dict[int, FloatArray]:
    """Target skeleton-space orientations ``(T, 3, 3)`` of every driven bone for the source posed
    at ``placements`` ``(T, Bs, 4, 4)``; also what the measurement compares against."""
    lin, pos = _orient(placements), placements[..., :3, 3]
    out: dict[int, FloatArray] = {}
    a = binding.align
    out[binding.target.pelvis] = a @ lin[:, binding.source.pelvis] @ binding.pelvis_source_local @ binding.pelvis_target_local.T
    for cb in binding.carried:
        pts = pos[:, list(cb.point_bones)] + np.einsum("tmij,mj->tmi", lin[:, list(cb.point_bones)], cb.offsets)
        chord = np.einsum("m,tmi->ti", cb.coef, pts)
        frame = lin[:, cb.source] @ cb.source_local
        frame = matrix_between_vectors(frame[..., 0], chord) @ frame
        out[cb.target] = a @ frame @ cb.target_local.T
    return out


def travel_of(binding: QuadrupedBinding, placements: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The target pelvis head's path ``(T, 3)`` with its travel, and the travel ``(T, 3)``: the
    source pelvis measured from the ground under it at rest, turned into the target body and
    scaled by pelvis height; the travel is that path's move across the ground since the first
    frame."""
    src, tgt = binding.source, binding.target
    moved = placements[:, src.pelvis, :3, 3] - src.axes.ground
    up = tgt.axes.up
    h, v = binding.horizontal_scale, binding.vertical_scale
    if h == v:
        path = tgt.axes.ground + h * moved @ binding.align.T
    else:
        turned = moved @ binding.align.T
        rise = np.outer(turned @ up, up)
        path = tgt.axes.ground + h * (turned - rise) + v * rise
    run = path - path[:1]
    return np.asarray(path, dtype=np.float64), np.asarray(run - np.outer(run @ up, up), dtype=np.float64)


def pelvis_path(binding: QuadrupedBinding, placements: FloatArray) -> FloatArray:
    """Where the target pelvis head plays in skeleton space ``(T, 3)``: the path of
    :func:`travel_of`, less the travel where the root motion goes on the object or nowhere."""
    path, travel = travel_of(binding, placements)
    return path if binding.root_motion in ("HIPS", "ROOT_BONE") else path - travel


@dataclass(frozen=True)
class QuadrupedResult:
    clip: Clip  # target local transforms; coverage 1 on driven bones
    root_motion: FloatArray  # (T, 3) the pelvis' travel across the ground in target skeleton space
    binding: QuadrupedBinding


def retarget_quadruped(binding: QuadrupedBinding, clip: Clip) -> QuadrupedResult:
    """Carry ``clip`` (local transforms of the source rig) onto the target rig (see module doc)."""
    clip.validate()
    placements = pose_of(binding.source.skeleton, clip)
    world = carried_orientations(binding, placements)
    path, travel = travel_of(binding, placements)
    root = binding.root_bone
    if binding.root_motion in ("OBJECT", "IN_PLACE"):
        path = path - travel
    sk = binding.target.skeleton
    n, t = len(sk), clip.frame_count
    c0 = sk.parent_frames
    c1 = np.broadcast_to(np.eye(4), (n, 4, 4)) if sk.child_frames is None else sk.child_frames
    w_r = np.empty((n, t, 3, 3))
    local = np.broadcast_to(np.eye(3), (n, t, 3, 3)).copy()
    for i in range(n):
        p = int(sk.parents[i])
        a_r = np.broadcast_to(c0[i, :3, :3], (t, 3, 3)) if p < 0 else w_r[p] @ c0[i, :3, :3]
        if i in world:
            w_r[i] = world[i]
            local[i] = np.swapaxes(a_r, -1, -2) @ world[i] @ c1[i, :3, :3]
        else:
            w_r[i] = a_r @ c1[i, :3, :3].T
    quats = np.swapaxes(quats_of_matrices(local), 0, 1)
    loc = np.zeros((t, n, 3))
    pv = binding.target.pelvis
    # The pelvis' parents are not driven: they stay at rest, so its parent placement is the
    # rest's, moved by the travel where a root bone above it carries the travel.
    p = int(sk.parents[pv])
    above = np.broadcast_to(binding.target.rest[p] if p >= 0 else np.eye(4), (t, 4, 4)).copy()
    if root >= 0:
        rp = int(sk.parents[root])
        carried = above.copy()
        carried[:, :3, 3] += travel
        base = binding.target.rest[rp] if rp >= 0 else np.eye(4)
        loc_root = (np.linalg.inv(base @ c0[root]) @ carried @ c1[root])[:, :3, 3]
        above = carried
    above = above @ c0[pv]
    placed = np.zeros((t, 4, 4))
    placed[:, :3, :3] = w_r[pv]
    placed[:, :3, 3] = path
    placed[:, 3, 3] = 1.0
    loc[:, pv] = (np.linalg.inv(above) @ placed @ c1[pv])[:, :3, 3]
    coverage = binding.driven
    if root >= 0:
        loc[:, root] = loc_root
        coverage[root] = 1.0
    out = replace(
        clip,
        names=sk.names,
        rotations=make_quat_continuous(quats, axis=0, copy=False),
        translations=loc,
        scales=None,
        coverage=coverage,
    )
    return QuadrupedResult(out, travel, binding)
