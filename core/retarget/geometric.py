"""Geometric-frame retarget (docs/methods.md#geometric-frames): the default method.

Never trust an authored bone axis: a bone's roll is a free choice of whoever exported the rig,
positions are what every rig agrees on. The retarget is split in two:

:func:`bind` (once per source/target pair) infers both rigs' facing, canonicalises both rests into
the same T-pose, builds the geometric frame of every slot the two rigs share, and measures the
hip heights that scale the root's travel.

:func:`retarget` (per clip, vectorised over frames, looping over bones only) evaluates the source
clip, expresses every shared slot's motion in its geometric frame -- the frame is carried by the
bone's rotation and its X axis re-aimed at the measured segment, so the segment direction is exact
even when the source has extra bones in between -- carries it into the target's geometric frame
through the alignment of the two bodies, and converts the result into target local rotations
through each target parent's *current*, already retargeted placement.

Where the source segment runs through bones of its own, the mapped bone keeps its own rotation and
the target's bones in between take the rest of the bend (:mod:`.own_motion`). Other bones between
two mapped bones (extra spine segments, twist splits, helper joints, slots only the target has)
move with the mapped bone above them (:mod:`.in_between`), so each segment keeps its measured
direction; toes, eyes and jaw mapped on both rigs carry their turn relative to the bone they move
with, toes only the target has follow the foot; bones below the last mapped bone of a chain and
bones above the hips are not driven (coverage 0) and stay free for other layers. The hips' height
and travel are measured and placed at the hips point (:mod:`.pelvis`).

All computation is in each rig's skeleton space (Blender's armature space): object placement
(a x100 parent, a -90 degree X rotation) never enters.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import MappingError, RigError
from ..mapping.humanoid import MINIMUM_SLOTS, SIDES, sided
from ..rig.clip import Clip
from ..rig.frames import CANONICAL_AXES
from ..rig.rotation_kernels import quats_of_matrices
from ..rig.rotations import FloatArray, make_quat_continuous, matrix_between_vectors
from ..rig.skeleton import Skeleton
from .canonical_pose import CanonicalPose, RigAnatomy, build_anatomy, canonical_pose, rest_facing
from .facing import Facing
from .foot_plant import Leg, PlantReport, plant_legs, planted_frames
from .in_between import spread, spread_runs, times_each, twist, twist_entry, twist_shares
from .own_motion import OwnTables, bend_carried, bend_runs, carried_bends, carried_pairs, keep_own, own_tables
from .pelvis import ground_points, heights_along, hips_offset, hips_path_from_points, hips_points
from .pose_memo import frozen, keep_pose, kept_pose

RootMotion = Literal["HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE"]
ROOT_MOTION_MODES: tuple[str, ...] = ("HIPS", "ROOT_BONE", "OBJECT", "IN_PLACE")


@dataclass(frozen=True)
class RigInput:
    """A rig as the retarget sees it: skeleton, slot -> bone name, and optional bone end points
    (skeleton-space rest tails, ``(B, 3)``; derived from children when absent)."""

    skeleton: Skeleton
    slots: dict[str, str]
    ends: ArrayLike | None = None


@dataclass(frozen=True)
class RetargetOptions:
    root_motion: str = "HIPS"
    #: Travel scale; ``None`` measures target hip height over source hip height (from the ground).
    scale: float | None = None
    horizontal_scale: float | None = None
    vertical_scale: float | None = None
    #: Fallback forward axes (skeleton space) used only when a rig's facing cannot be inferred.
    source_forward: tuple[float, float, float] | None = None
    target_forward: tuple[float, float, float] | None = None
    fingers: bool = True
    #: Hold each target foot still where the source foot is planted (see :mod:`.foot_plant`).
    plant_feet: bool = False

    def __post_init__(self) -> None:
        if self.root_motion not in ROOT_MOTION_MODES:
            raise ValueError(f"root_motion must be one of {ROOT_MOTION_MODES}, got {self.root_motion!r}")


@dataclass(frozen=True)
class Binding:
    """Everything about a source/target pair that does not change between frames."""

    source: RigAnatomy
    target: RigAnatomy
    source_facing: Facing
    target_facing: Facing
    source_canonical: CanonicalPose
    target_canonical: CanonicalPose
    align: FloatArray  # 3x3: source skeleton-space directions -> target skeleton-space directions
    framed: tuple[str, ...]  # slots carried through geometric frames, parents first
    carried: dict[str, FloatArray]  # slot -> source bone-local geometric frame (3x3)
    target_frames_inv: dict[str, FloatArray]  # slot -> inverse canonical target frame
    target_canonical_rot: FloatArray  # (Bt, 3, 3) canonical orientation of every target bone
    driven: FloatArray  # (Bt,) bool: bones the retarget writes
    horizontal_scale: float
    vertical_scale: float
    source_hip_height: float
    target_hip_height: float
    target_ground: float
    root_bone: int  # target bone that carries travel in ROOT_BONE mode, -1 if none
    options: RetargetOptions
    warnings: tuple[str, ...] = field(default=())
    #: Twist bones of the target that take a share of the distal joint's twist, as
    #: ``(bone, limb slot, distal slot, share)``: a forearm twist takes part of the wrist's.
    twists: tuple[tuple[int, str, str, float], ...] = field(default=())

    @property
    def tables(self) -> _Tables:
        cached = self.__dict__.get("_tables")
        if cached is None:
            cached = _tables(self)
            object.__setattr__(self, "_tables", cached)
        return cached

    def describe(self) -> dict[str, object]:
        return {
            "framed_slots": list(self.framed),
            "source_facing": self.source_facing.describe(),
            "target_facing": self.target_facing.describe(),
            "horizontal_scale": self.horizontal_scale,
            "vertical_scale": self.vertical_scale,
            "source_hip_height": self.source_hip_height,
            "target_hip_height": self.target_hip_height,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class RetargetResult:
    clip: Clip  # target local transforms; coverage 1 on driven bones
    root_motion: FloatArray  # (T, 3) horizontal travel in target skeleton space
    binding: Binding
    #: With planted feet, per foot slot: frames held and frames whose spot was out of the leg's reach
    #: (even with the hips lowered).
    planted: dict[str, dict[str, int]] = field(default_factory=dict)
    #: With planted feet, how far the hips came down to bring held spots within reach: the
    #: largest drop (target hip heights) and the frames lowered.
    hip_drop: float = 0.0
    lowered_frames: int = 0


def orientations(m: FloatArray) -> FloatArray:
    """Rotation part of placements that may carry scale (columns normalised)."""
    r = m[..., :3, :3]
    return np.asarray(r / np.linalg.norm(r, axis=-2, keepdims=True), dtype=np.float64)


@dataclass(frozen=True)
class TravelScales:
    """How the hips' travel is scaled from one rig to the other, and the heights behind it."""

    horizontal: float
    vertical: float
    source_hip_height: float
    target_hip_height: float
    target_ground: float


def travel_scales(
    src: RigAnatomy, tgt: RigAnatomy, up_s: FloatArray, up_t: FloatArray, opts: RetargetOptions, warnings: list[str]
) -> TravelScales:
    """Hip heights measured from the ground (the lowest foot point at rest), never from the rest
    origin (docs/pipeline.md#hips-height-and-travel), at the hips point (:mod:`.pelvis`); the scales default to their
    ratio, and an unusable scale is 1."""
    src_h = float(hips_points(src, src.rest, up_s) @ up_s - heights_along(ground_points(src), src.rest, up_s).min())
    tgt_ground = float(heights_along(ground_points(tgt), tgt.rest, up_t).min())
    tgt_h = float(hips_points(tgt, tgt.rest, up_t) @ up_t - tgt_ground)
    auto = tgt_h / src_h if src_h > 0 else float("nan")
    horizontal, vertical = chosen_scales(opts, auto, warnings)
    return TravelScales(horizontal, vertical, src_h, tgt_h, tgt_ground)


def chosen_scales(opts: RetargetOptions, auto: float, warnings: list[str]) -> tuple[float, float]:
    """The horizontal and vertical travel scales ``opts`` asks for (each its own, else ``scale``
    for both, else ``auto``, the measured ratio); an unusable scale is 1, said in ``warnings``."""

    def pick(value: float | None) -> float:
        v = opts.scale if value is None else value
        v = auto if v is None else float(v)
        if not np.isfinite(v) or v <= 0.0:
            warnings.append(f"travel scale {v!r} is unusable; used 1")
            return 1.0
        return v

    return pick(opts.horizontal_scale), pick(opts.vertical_scale)


def rig_facings(src: RigAnatomy, tgt: RigAnatomy, opts: RetargetOptions, warnings: list[str]) -> tuple[Facing, Facing]:
    """Both rigs' rest facings, inferred from their bodies (docs/pipeline.md#facing); a fallback is reported in
    ``warnings``, and a rig whose facing cannot be told at all is refused."""
    src_facing = rest_facing(src, opts.source_forward)
    tgt_facing = rest_facing(tgt, opts.target_forward)
    for name, f in (("source", src_facing), ("target", tgt_facing)):
        if not f.known:
            raise RigError(
                f"cannot tell which way the {name} rig faces (its cues cancel and it has no left/right bones); "
                "set its forward axis explicitly"
            )
        if f.source != "inferred":
            warnings.append(f"{name} facing could not be inferred from the body; used {f.source}")
    return src_facing, tgt_facing


def bind(source: RigInput, target: RigInput, options: RetargetOptions | None = None) -> Binding:
    """Precompute the retarget of ``source`` clips onto ``target`` (see module doc)."""
    opts = options or RetargetOptions()
    for name, rig in (("source", source), ("target", target)):
        missing = [s for s in MINIMUM_SLOTS if s not in rig.slots]
        if missing:
            raise MappingError(f"the {name} rig is not a usable humanoid: no bone for {', '.join(missing)}")
    common = {s for s in source.slots if s in target.slots}
    if not opts.fingers:
        common = {s for s in common if s.split("_")[0] not in ("thumb", "index", "middle", "ring", "little")}
    src = build_anatomy(source.skeleton, {s: source.slots[s] for s in common}, source.ends)
    # The target keeps every mapped slot for its anatomy (so an IK foot parented to the root still
    # hangs from its shin), but only shared slots carry frames; the rest move with their owner.
    tgt = build_anatomy(target.skeleton, {s: b for s, b in target.slots.items() if s in common or s.startswith("toes")}, target.ends)

    warnings: list[str] = []
    src_facing, tgt_facing = rig_facings(src, tgt, opts, warnings)
    src_can = canonical_pose(src, src_facing)
    tgt_can = canonical_pose(tgt, tgt_facing)
    align = tgt_can.body @ src_can.body.T

    framed = tuple(s for s in src.segment_start if s in tgt.segment_start)
    carried = {s: orientations(src_can.placements[src.slots[s]]).T @ src_can.frames[s] for s in framed}
    tgt_inv = {s: tgt_can.frames[s].T for s in framed}

    # Bones the retarget drives: framed slot bones, bones on the path between two of them, toes.
    n = len(target.skeleton)
    driven = np.zeros(n, dtype=bool)
    framed_bones = {tgt.slots[s] for s in framed}
    for b in framed_bones | {tgt.slots[s] for s in tgt.slots if s.startswith("toes")}:
        driven[b] = True
        if b in tgt.detached:
            continue
        p = int(target.skeleton.parents[b])
        path = []
        while p >= 0 and p not in framed_bones:
            path.append(p)
            p = int(target.skeleton.parents[p])
        if p >= 0:  # reached the framed bone above: everything on the way is in between
            driven[path] = True
    # Owners of driven bones must be framed bones; toes and intermediates follow them.
    owner = tgt.owner.copy()
    for i in np.flatnonzero(driven):
        if owner[i] < 0:
            driven[i] = False

    twists = twist_shares(target.skeleton, target.slots, tgt, tgt_can, framed)
    for b, _, _, _ in twists:
        driven[b] = True
    for _, _, _, _, b in carried_pairs(src, tgt, framed):  # eyes, jaw, twist bones of both rigs
        driven[b] = True
    scales = travel_scales(src, tgt, src_can.body[:, 2], tgt_can.body[:, 2], opts, warnings)

    hips_t = tgt.slots["hips"]
    parent = int(target.skeleton.parents[hips_t])
    root_bone = parent if parent >= 0 and not driven[parent] else -1
    if opts.root_motion == "ROOT_BONE" and root_bone < 0:
        warnings.append("the target's hips have no root bone above them; travel stays on the hips")

    return Binding(
        source=src,
        target=tgt,
        source_facing=src_facing,
        target_facing=tgt_facing,
        source_canonical=src_can,
        target_canonical=tgt_can,
        align=align,
        framed=framed,
        carried=carried,
        target_frames_inv=tgt_inv,
        target_canonical_rot=orientations(tgt_can.placements),
        driven=driven,
        horizontal_scale=scales.horizontal,
        vertical_scale=scales.vertical,
        source_hip_height=scales.source_hip_height,
        target_hip_height=scales.target_hip_height,
        target_ground=scales.target_ground,
        root_bone=root_bone,
        options=opts,
        twists=twists,
        warnings=tuple(warnings),
    )


def source_placements(binding: Binding, clip: Clip) -> FloatArray:
    """Skeleton-space placements ``(T, Bs, 4, 4)`` of the source rig playing ``clip``.

    Bones the clip does not carry stay at rest."""
    return pose_of(binding.source.skeleton, clip)


def pose_of(sk: Skeleton, clip: Clip) -> FloatArray:
    """Skeleton-space placements ``(T, B, 4, 4)`` of ``sk`` playing ``clip`` (bones the clip
    does not carry stay at rest)."""
    n = len(sk)
    t = clip.frame_count
    rot = np.zeros((t, n, 4))
    rot[..., 0] = 1.0
    tr = np.zeros((t, n, 3))
    sc = np.ones((t, n, 3))
    cols = [(i, sk.find(name)) for i, name in enumerate(clip.names)]
    src_cols = [i for i, j in cols if j is not None]
    dst = [j for _, j in cols if j is not None]
    if not dst:
        raise MappingError(f"clip {clip.name!r} animates none of the source rig's bones")
    rot[:, dst] = clip.rotations[:, src_cols]
    tr[:, dst] = clip.translations[:, src_cols]
    if clip.scales is not None:
        sc[:, dst] = clip.scales[:, src_cols]
    return sk.forward_kinematics(rot, tr, sc if clip.scales is not None else None)


@dataclass(frozen=True)
class _Tables:
    """Per-pair lookup tables that turn the per-slot work into a few batched products."""

    slot_bones: NDArray[np.int64]  # (K,) source bone of each framed slot
    carried: FloatArray  # (K, 3, 3) source bone-local geometric frames
    target_inv: FloatArray  # (K, 3, 3) inverse canonical target frames
    carried_to_target: FloatArray  # (K, 3, 3) carried @ target_inv, folded once
    source_segments: SegmentTable
    target_segments: SegmentTable
    source_rest_lengths: FloatArray  # (K,) each source segment's length at rest
    driven: NDArray[np.int64]  # (D,) driven target bones
    driven_owner: NDArray[np.int64]  # (D,) index into the K slots of each driven bone's owner
    walk: tuple[int, ...]  # target bones whose placement must be walked, in order
    #: Axial runs whose bend is spread over in-between bones: (slot index, parent slot index,
    #: bones from the slot's bone down, fractions, canonical head-to-head vectors).
    spread: tuple[tuple[int, int, NDArray[np.int64], FloatArray, FloatArray], ...]
    #: Twist bones as (bone, limb slot index, distal slot index, canonical limb axis, share, and
    #: the turn that takes the distal bone's canonical relation to the limb back to its rest one).
    twists: tuple[tuple[int, int, int, FloatArray, float, FloatArray], ...]
    #: Source bones whose placement the retarget reads (slot bones, segment and ground points,
    #: the hips) and their ancestors, in skeleton order; "rows" index into this subset.
    source_bones: NDArray[np.int64]
    slot_rows: NDArray[np.int64]  # (K,) row of each framed slot's source bone
    source_row_segments: SegmentTable  # source_segments with bones given as rows
    ground_rows: tuple[tuple[int, FloatArray], ...]  # ground points as (row, bone-local offset)
    hips_row: int
    source_hips_offset: FloatArray  # (3,) the source's hips point in its hips bone's axes
    target_hips_offset: FloatArray  # (3,) the target's, likewise (:mod:`.pelvis`)
    rest_hips: tuple[FloatArray, FloatArray]  # both rigs' hips points at rest (source, target)
    rest_rel: FloatArray  # (Bt, 4, 4) target rests relative to their anatomical parents
    #: Slots whose target bone keeps the source bone's own rotation, runs that take the bend, toes.
    own: OwnTables


@dataclass(frozen=True)
class SegmentTable:
    """The framed slots' segments of one rig as arrays: segment ``k`` is
    ``sum_m coef[k, m] * (placement of bones[k, m]) @ offsets[k, m]``."""

    bones: NDArray[np.int64]  # (K, M)
    offsets: FloatArray  # (K, M, 3) bone-local points
    coef: FloatArray  # (K, M) +1/n for end points, -1/n for start points, 0 padding

    def segments(self, placements: FloatArray) -> FloatArray:
        """Segment vectors ``(T, K, 3)`` for placements ``(T, B, 4, 4)``."""
        heads = placements[:, :, :3, 3]
        out = (heads[:, self.bones] * self.coef[..., None]).sum(axis=2)
        # Most points are bone heads (zero offset); only the others need the bone's rotation.
        k, m = np.nonzero(np.any(self.offsets != 0.0, axis=-1))
        if k.size:
            rot = placements[:, self.bones[k, m], :3, :3]  # (T, P, 3, 3)
            moved = (rot @ self.offsets[k, m][..., None])[..., 0] * self.coef[k, m][:, None]
            for j in range(k.size):  # a handful of tail points: a loop is clearer than add.at
                out[:, k[j]] += moved[:, j]
        return np.asarray(out, dtype=np.float64)

    def segments_of(self, positions: FloatArray, linear: FloatArray) -> FloatArray:
        """:meth:`segments` for bone-major positions ``(B, T, 3)`` and linear parts
        ``(B, T, 3, 3)`` (see :meth:`Skeleton.bone_placements`); returns ``(K, T, 3)``."""
        # Point by point (M is 1 to 4), in the order a sum over M adds them: no (K, M, T, 3) copy.
        out = positions[self.bones[:, 0]] * self.coef[:, 0, None, None]
        for col in range(1, self.bones.shape[1]):
            out += positions[self.bones[:, col]] * self.coef[:, col, None, None]
        k, m = np.nonzero(np.any(self.offsets != 0.0, axis=-1))
        for j in range(k.size):  # a handful of tail points: only they need the bone's rotation
            b, off, c = self.bones[k[j], m[j]], self.offsets[k[j], m[j]], self.coef[k[j], m[j]]
            out[k[j]] += np.einsum("tij,j->ti", linear[b], off) * c
        return np.asarray(out, dtype=np.float64)


def segment_table(anatomy: RigAnatomy, slots: tuple[str, ...]) -> SegmentTable:
    pts = [
        [(bone, off, 1.0 / len(anatomy.segment_end[s])) for bone, off in anatomy.segment_end[s]]
        + [(bone, off, -1.0 / len(anatomy.segment_start[s])) for bone, off in anatomy.segment_start[s]]
        for s in slots
    ]
    m = max((len(p) for p in pts), default=1)
    bones = np.zeros((len(slots), m), dtype=np.int64)
    offs = np.zeros((len(slots), m, 3))
    coef = np.zeros((len(slots), m))
    for i, row in enumerate(pts):
        for j, (bone, off, c) in enumerate(row):
            bones[i, j], offs[i, j], coef[i, j] = bone, off, c
    return SegmentTable(bones, offs, coef)


def _tables(binding: Binding) -> _Tables:
    src, tgt = binding.source, binding.target
    source_segments = segment_table(src, binding.framed)
    slot_of_target_bone = {tgt.slots[s]: i for i, s in enumerate(binding.framed)}
    driven = np.flatnonzero(binding.driven)
    owner = np.array([slot_of_target_bone[int(tgt.owner[i])] for i in driven], dtype=np.int64)
    # Placements are walked only where something needs them: parents of driven bones that are
    # not driven themselves (a root above the hips), and every bone a position is needed for
    # (the hips, detached bones and their anatomical parents, the root bone), with their ancestors.
    sk = tgt.skeleton
    need = np.zeros(len(sk), dtype=bool)
    seeds = [tgt.slots["hips"], *tgt.detached, *(int(tgt.anatomical_parents[i]) for i in tgt.detached)]
    if binding.root_bone >= 0:
        seeds.append(binding.root_bone)
    seeds += [int(sk.parents[i]) for i in driven if sk.parents[i] >= 0 and not binding.driven[sk.parents[i]]]
    for i in seeds:
        while i >= 0 and not need[i]:
            need[i] = True
            i = int(sk.parents[i])
    walk = tuple(i for i in tgt.order if need[i])

    # The source is evaluated only where it is read: every other bone's placement is dead work
    # (a mocap clip's extra spine, a rig's face and props).
    slot_bones = np.array([src.slots[s] for s in binding.framed], dtype=np.int64)
    ground = ground_points(src)
    src_parents = src.skeleton.parents
    read = np.zeros(len(src.skeleton), dtype=bool)
    toes = [sb for _, _, sb, _, _ in carried_pairs(src, tgt, binding.framed)]
    for i in (*slot_bones, *source_segments.bones[source_segments.coef != 0.0], *(b for b, _ in ground),
              src.slots["hips"], *toes):
        i = int(i)
        while i >= 0 and not read[i]:
            read[i] = True
            i = int(src_parents[i])
    source_bones = np.flatnonzero(read)
    row = np.zeros(len(src.skeleton), dtype=np.int64)  # unread bones only pad (coef 0): row 0
    row[source_bones] = np.arange(source_bones.size)
    own = own_tables(src, tgt, binding.framed, binding.target_canonical.placements,
                     orientations(binding.source_canonical.placements), binding.align, row)
    kept = {int(k) for k in own.own_slots}
    return _Tables(
        own=own,
        source_bones=source_bones,
        slot_rows=row[slot_bones],
        source_row_segments=replace(source_segments, bones=row[source_segments.bones]),
        ground_rows=tuple((int(row[b]), off) for b, off in ground),
        hips_row=int(row[src.slots["hips"]]),
        source_hips_offset=hips_offset(src, binding.source_canonical.body[:, 2]),
        target_hips_offset=hips_offset(tgt, binding.target_canonical.body[:, 2]),
        rest_hips=(hips_points(src, src.rest, binding.source_canonical.body[:, 2]),
                   hips_points(tgt, tgt.rest, binding.target_canonical.body[:, 2])),
        rest_rel=np.linalg.inv(tgt.rest[tgt.anatomical_parents.clip(0)]) @ tgt.rest,
        spread=tuple(r for r in spread_runs(tgt, binding.target_canonical, binding.framed, slot_of_target_bone) if r[0] not in kept),
        twists=tuple(twist_entry(tgt, binding.target_canonical, binding.target_canonical_rot, binding.framed, b, ls, ds, share)
                     for b, ls, ds, share in binding.twists),
        slot_bones=slot_bones,
        carried=np.stack([binding.carried[s] for s in binding.framed]),
        target_inv=np.stack([binding.target_frames_inv[s] for s in binding.framed]),
        carried_to_target=np.stack([binding.carried[s] @ binding.target_frames_inv[s] for s in binding.framed]),
        source_segments=source_segments,
        source_rest_lengths=np.linalg.norm(source_segments.segments(src.rest[None])[0], axis=-1),
        target_segments=segment_table(tgt, binding.framed),
        driven=driven,
        driven_owner=owner,
        walk=walk,
    )


def _source_pose(
    binding: Binding, clip: Clip, bones: NDArray[np.int64], frames: slice, turn: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Bone-major linear parts ``(S, t, 3, 3)`` and positions ``(S, t, 3)`` of the source
    ``bones`` (closed under parents) playing ``clip`` over ``frames``; bones the clip does not
    carry stay at rest. The same placements as :func:`source_placements`, for the bones asked only
    (turned by ``turn`` on the left when given)."""
    sk = binding.source.skeleton
    # A read-only clip (a source read again unchanged from Blender) is posed once: see pose_memo.
    key = None
    if frozen(clip.rotations, clip.translations, clip.scales):
        key = (sk, clip.rotations, clip.translations, clip.scales, clip.names, bones.tobytes(), frames.indices(clip.frame_count),
               None if turn is None else turn.tobytes())
        kept = kept_pose(key)
        if kept is not None:
            return kept
    col_of: dict[int, int] = {}
    for c, name in enumerate(clip.names):
        j = sk.find(name)
        if j is not None:
            col_of[j] = c  # a name given twice: the last column wins, as in source_placements
    if not col_of:
        raise MappingError(f"clip {clip.name!r} animates none of the source rig's bones")
    rows = [r for r, b in enumerate(bones) if int(b) in col_of]
    cols = [col_of[int(bones[r])] for r in rows]
    t = len(range(*frames.indices(clip.frame_count)))
    rot = np.zeros((bones.size, t, 4))
    rot[..., 0] = 1.0
    tr = np.zeros((bones.size, t, 3))
    _gather_bone_major(rot, rows, clip.rotations[frames], cols)
    _gather_bone_major(tr, rows, clip.translations[frames], cols)
    sc = None
    if clip.scales is not None:
        sc = np.ones((bones.size, t, 3))
        _gather_bone_major(sc, rows, clip.scales[frames], cols)
    pose = sk.bone_placements(bones, rot, tr, sc, turn)
    return keep_pose(key, pose) if key is not None else pose


def _gather_bone_major(out: FloatArray, rows: list[int], frame_major: FloatArray, cols: list[int]) -> None:
    """``out[rows] = frame_major[:, cols]`` with the frame and bone axes swapped. Each bone's
    vector is moved as one opaque item (a void view), not number by number: the transposing copy
    then takes half the time."""
    n = frame_major.shape[-1]
    if frame_major.dtype != np.float64 or frame_major.strides[-1] != 8 or frame_major.strides[-2] != 8 * n:
        out[rows] = np.swapaxes(frame_major[:, cols], 0, 1)
        return
    item = np.dtype((np.void, 8 * n))
    src = frame_major.view(item)[..., 0]  # (t, B)
    dst = out.view(item)[..., 0]  # (S, t)
    dst[rows] = src[:, cols].T


#: Frames retargeted together, at most: a clip goes through in blocks of even length (a 1,100-frame
#: clip in one block, not 512 + 512 + 76). A block's arrays (a few MB) are freed and reused by the
#: next block, so a long clip never holds more than one block's; blocks of a thousand frames or so
#: keep numpy's per-call overhead small. Measured in Blender, Retarget Clip of a 1,100-frame clip
#: (the click, ``bench/bench_click.py``), clicks alternated: the retarget's CPU time 26.0 ms in one
#: block against 28.5 ms in blocks of 512 (medians of 30 clicks each; page faults of the whole
#: click the same, ~2,900: the memory the blocks do not take fresh, writing the keys takes).
_BLOCK_FRAMES = 1200


def frame_blocks(t: int, most: int = _BLOCK_FRAMES) -> list[slice]:
    """``t`` frames as consecutive blocks of at most ``most`` frames, of even length."""
    count = max(1, -(-t // most))
    size = max(1, -(-t // count))
    return [slice(s, min(s + size, t)) for s in range(0, t, size)]


def _slot_motions(
    binding: Binding, tables: _Tables, clip: Clip, frames: slice, keep: list[int]
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, tuple[FloatArray, FloatArray]]:
    """Step 1 over a block of frames: every framed slot's motion ``(K, t, 3, 3)`` in target
    skeleton space, and what the root travel needs, the source hips' positions ``(t, 3)`` and the
    heights of its ground points ``(t, P)``; last, the positions ``(len(keep), t, 3)`` of the
    framed slots ``keep`` (indices into ``binding.framed``); and, for :mod:`.own_motion`, the own
    slots' motions before the re-aim ``(S, t, 3, 3)`` and the carried bones' turns ``(J, t, 3, 3)``."""
    # The source is posed already turned by ``align`` (folded into its roots): the aim between two
    # turned directions is the turned aim, ``align @ aim @ q = aim' @ (align @ q)``, so the aligned
    # motion needs no product of its own. Positions are turned back where the source's own are read.
    # (That needs ``align`` to be a rotation, as two bodies' frames make it; anything else is
    # applied as a product of its own.)
    align = binding.align
    folded = bool(np.abs(align @ align.T - np.eye(3)).max() <= 1e-12)
    back = align if folded else np.eye(3)  # turns aligned positions back (row vectors)
    src_lin, src_pos = _source_pose(binding, clip, tables.source_bones, frames, align if folded else None)
    # The frame carried by the source bone, re-aimed at the measured segment, aligned to the target
    # body and expressed against the target's frame.
    q_slots = src_lin[tables.slot_rows]  # (K, t, 3, 3)
    if clip.scales is not None:
        q_slots = orientations(q_slots)
    x_axis = np.einsum("ktij,kj->kti", q_slots, tables.carried[:, :, 0])  # the carried frame's X only
    seg = tables.source_row_segments.segments_of(src_pos, src_lin)
    # A clip that collapses a segment (translation keys pulling a joint onto its parent) leaves
    # its direction to float noise: there the bone's own rotation decides.
    collapsed = np.sqrt(np.einsum("kti,kti->kt", seg, seg)) < 0.05 * tables.source_rest_lengths[:, None]
    if collapsed.any():  # rare: most clips keep every segment, and then seg stays as it is
        seg = np.where(collapsed[..., None], x_axis, seg)
    aim = matrix_between_vectors(x_axis, seg)
    # The product goes into an array already made (the last use of q_slots).
    carried_in_target = times_each(q_slots, tables.carried_to_target)
    own = carried_in_target[tables.own.own_slots]  # a copy: the next product overwrites its source
    if not folded:
        own = align @ own
    bends = carried_bends(orientations(src_lin) if clip.scales is not None else src_lin, tables.own.carried)
    motion = np.matmul(aim, carried_in_target, out=q_slots)
    if not folded:
        motion = np.matmul(align, motion, out=aim)

    up_s = back @ binding.source_canonical.body[:, 2]  # p . up = (align p) . (align up)
    heights = np.stack([(np.einsum("tij,j->ti", src_lin[r], off) + src_pos[r]) @ up_s
                        for r, off in tables.ground_rows], axis=-1)
    hips_s = src_pos[tables.hips_row] + np.einsum("tij,j->ti", src_lin[tables.hips_row], tables.source_hips_offset)
    return motion, hips_s @ back, heights, src_pos[tables.slot_rows[keep]] @ back, (own, bends)


def _target_locals(
    binding: Binding,
    tables: _Tables,
    motion: FloatArray,
    hips_pos: FloatArray,
    travel: FloatArray,
    quats: FloatArray,
    loc_t: FloatArray,
    own: tuple[FloatArray, FloatArray],
) -> None:
    """Step 3 over a block of frames: the target's local rotations (into ``quats`` ``(t, Bt, 4)``,
    driven bones only, not yet made continuous) and translations (into ``loc_t`` ``(t, Bt, 3)``)
    for the block's slot motions ``(K, t, 3, 3)`` and hips path ``(t, 3)``.

    World orientations of driven bones come straight from their owner's motion; local rotations
    then need only each parent's *current* orientation. Rotations and positions are kept apart
    (skeleton space has no scale). Only the few bones whose placement something depends on are
    walked with positions."""
    tgt = binding.target
    sk = tgt.skeleton
    n = len(sk)
    t = motion.shape[1]
    c0_r, c0_t = sk.parent_frames[:, :3, :3], sk.parent_frames[:, :3, 3]
    c1_r = np.broadcast_to(np.eye(3), (n, 3, 3)) if sk.child_frames is None else sk.child_frames[:, :3, :3]
    c1_t = np.zeros((n, 3)) if sk.child_frames is None else sk.child_frames[:, :3, 3]
    driven = tables.driven
    canonical_rot = binding.target_canonical_rot
    w_r = np.empty((n, t, 3, 3))
    w_p = np.empty((n, t, 3))
    aimed = keep_own(motion, own[0], tables.own)
    for i, k in zip(driven, tables.driven_owner, strict=True):  # one (3t, 3) @ (3, 3) product each
        np.matmul(motion[k].reshape(3 * t, 3), canonical_rot[i], out=w_r[i].reshape(3 * t, 3))
    spread(motion, tables.spread, canonical_rot, w_r)
    twist(motion, tables.twists, canonical_rot, w_r)
    bend_runs(motion, aimed, tables.own, canonical_rot, w_r)
    bend_carried(own[1], tables.own, canonical_rot, w_r)
    rest_rel = tables.rest_rel
    hips_t = tgt.slots["hips"]
    root_travel = binding.options.root_motion == "ROOT_BONE" and binding.root_bone >= 0
    is_driven = binding.driven
    for i in tables.walk:
        p = int(sk.parents[i])
        a_r = np.broadcast_to(c0_r[i], (t, 3, 3)) if p < 0 else w_r[p] @ c0_r[i]
        a_p = np.broadcast_to(c0_t[i], (t, 3)) if p < 0 else w_r[p] @ c0_t[i] + w_p[p]
        if is_driven[i]:
            q = w_r[i]
            if i == hips_t:  # the hips point where the path puts it
                pos = hips_pos - w_r[i] @ tables.target_hips_offset
            elif i in tgt.detached:
                a = int(tgt.anatomical_parents[i])
                pos = w_r[a] @ rest_rel[i, :3, 3] + w_p[a]
            else:
                pos = a_p - q @ c1_t[i]  # follows its parent: no local translation
            loc_t[:, i] = np.einsum("tji,tj->ti", a_r, q @ c1_t[i] + pos - a_p)
            w_p[i] = pos
        else:
            if i == binding.root_bone and root_travel:
                loc_t[:, i] = np.einsum("tji,tj->ti", a_r, travel)
            w_r[i] = a_r @ c1_r[i].T
            w_p[i] = a_p + np.einsum("tij,tj->ti", a_r, loc_t[:, i]) - w_r[i] @ c1_t[i]
    # Driven bones whose placement nobody needed need only their rotation, converted through the
    # parent's current orientation, bone by bone: local = (parent @ C0r)^T @ world [@ C1r], each
    # product on one bone's contiguous block of frames, into buffers made once.
    local = np.empty((driven.size, t, 3, 3))
    a_r = np.empty((t, 3, 3))
    a_r_t = np.empty((t, 3, 3))
    for d, i in enumerate(driven):
        p = int(sk.parents[i])
        if p < 0:
            a_r[:] = c0_r[i]
        else:
            np.matmul(w_r[p].reshape(3 * t, 3), c0_r[i], out=a_r.reshape(3 * t, 3))
        a_r_t[:] = np.swapaxes(a_r, -1, -2)  # contiguous: a product with a transposed view is slower
        np.matmul(a_r_t, w_r[i], out=local[d])
        if sk.child_frames is not None:
            np.matmul(local[d].reshape(3 * t, 3), c1_r[i], out=a_r.reshape(3 * t, 3))
            local[d] = a_r
    quats[:, driven] = np.swapaxes(quats_of_matrices(local), 0, 1)


def _plant(
    binding: Binding,
    legs: list[tuple[str, Leg]],
    clip: Clip,
    ankles: FloatArray,
    heights: FloatArray,
    quats: FloatArray,
    loc_t: FloatArray,
    travel: FloatArray,
    in_place: bool = False,
) -> tuple[FloatArray, FloatArray, dict[str, dict[str, int]], PlantReport]:
    """Target locals with the feet of ``legs`` held where the source's ankles ``(feet, T, 3)``
    are planted over its ground (from the ground points' heights ``(T, P)``), per foot the
    frames held and those out of the leg's reach, and the pass's report (how far the hips came
    down). ``travel`` is the target's root travel: where the skeleton does not carry it (on the
    object, or in place), the held feet move back by it. ``in_place`` lets the pass write into
    ``quats`` and ``loc_t`` (a caller's own arrays, needed no more)."""
    up_s = binding.source_canonical.body[:, 2]
    ground_s = float(np.percentile(heights.min(axis=-1), 5))
    planted = [planted_frames(ankles[i], ground_s, up_s, binding.source_hip_height, clip.times) for i in range(len(legs))]
    carried = binding.options.root_motion in ("HIPS", "ROOT_BONE")  # the hips, or a root bone above them
    rot, loc, report = plant_legs(
        binding.target.skeleton, [leg for _, leg in legs], planted, quats, loc_t, binding.target_canonical.body[:, 2], clip.times,
        drift=None if carried else travel, pelvis=binding.target.slots.get("hips", -1), hip_height=binding.target_hip_height,
        in_place=in_place,
    )
    counts = {
        foot: {"held": report.contact_frames[leg.foot], "out_of_reach": report.unreachable_frames[leg.foot]} for foot, leg in legs
    }
    return rot, loc, counts, report


def plant_feet(binding: Binding, clip: Clip, result: RetargetResult) -> RetargetResult:
    """``result`` (of ``clip``, e.g. merged from several methods) with its feet held where the
    source plants them: the pass :func:`retarget` runs when ``options.plant_feet`` is on."""
    legs = _planted_legs(binding)
    if not legs:
        return result
    tables = binding.tables
    lin, pos = _source_pose(binding, clip, tables.source_bones, slice(None))
    up_s = binding.source_canonical.body[:, 2]
    heights = np.stack([(np.einsum("tij,j->ti", lin[r], off) + pos[r]) @ up_s for r, off in tables.ground_rows], axis=-1)
    ankles = pos[tables.slot_rows[[binding.framed.index(foot) for foot, _ in legs]]]
    rot, loc, counts, report = _plant(binding, legs, clip, ankles, heights, result.clip.rotations, result.clip.translations, result.root_motion)
    clip_out = replace(result.clip, rotations=make_quat_continuous(rot, axis=0, copy=False), translations=loc)  # rot is new
    return replace(result, clip=clip_out, planted=counts, hip_drop=report.hip_drop, lowered_frames=report.lowered_frames)


def retarget(binding: Binding, clip: Clip, *, plant: bool | None = None) -> RetargetResult:
    """Carry ``clip`` (local transforms of the source rig) onto the target rig.

    Per-bone arrays are bone-major inside (``(bones, t, ...)``): every bone's or slot's frames are
    one contiguous block, so selecting bones copies whole blocks and the walk slices. Frames go
    through in blocks (see ``_BLOCK_FRAMES``); only the root travel (whose ground is a percentile
    over the whole clip) and the quaternions' continuity look at all frames at once."""
    clip.validate()
    tables = binding.tables
    t = clip.frame_count
    blocks = frame_blocks(t)

    # 1. Every framed slot, block by block.
    legs = _planted_legs(binding) if (binding.options.plant_feet if plant is None else plant) else []
    feet = [binding.framed.index(foot) for foot, _ in legs]
    parts = [_slot_motions(binding, tables, clip, b, feet) for b in blocks]

    # 2. Root travel, measured from the ground and scaled.
    up_s = binding.source_canonical.body[:, 2]
    travel_t, grounded = hips_path_from_points(
        binding.source, binding.target, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]),
        up_s, binding.target_canonical.body[:, 2], binding.align,
        binding.horizontal_scale, binding.vertical_scale, binding.target_ground, tables.rest_hips,
    )
    mode = binding.options.root_motion
    hips_pos = grounded + (travel_t if mode in ("HIPS", "ROOT_BONE") else 0.0)

    # 3. Target locals, block by block; bones not driven keep the identity rotation.
    sk = binding.target.skeleton
    n = len(sk)
    quats = np.zeros((t, n, 4))
    quats[..., 0] = 1.0
    loc_t = np.zeros((t, n, 3))
    for b, (motion, _, _, _, own) in zip(blocks, parts, strict=True):
        _target_locals(binding, tables, motion, hips_pos[b], travel_t[b], quats[b], loc_t[b], own)

    # 4. Feet held where the source plants them.
    planted: dict[str, dict[str, int]] = {}
    lowered = PlantReport({}, {})
    if legs:
        heights = np.concatenate([p[2] for p in parts])
        ankles = np.concatenate([p[3] for p in parts], axis=1)  # (feet, T, 3)
        quats, loc_t, planted, lowered = _plant(binding, legs, clip, ankles, heights, quats, loc_t, travel_t, in_place=True)
    del parts

    coverage = binding.driven.astype(np.float64)
    if mode == "ROOT_BONE" and binding.root_bone >= 0:
        coverage[binding.root_bone] = 1.0
    out = replace(
        clip,
        names=sk.names,
        rotations=make_quat_continuous(quats, axis=0, copy=False),  # quats is this call's own
        translations=loc_t,
        scales=None,
        coverage=coverage,
    )
    return RetargetResult(
        clip=out, root_motion=travel_t, binding=binding, planted=planted, hip_drop=lowered.hip_drop, lowered_frames=lowered.lowered_frames
    )


def _planted_legs(binding: Binding) -> list[tuple[str, Leg]]:
    """The legs whose feet the plant pass holds: both rigs map the foot and the target its thigh
    and shin."""
    tgt = binding.target.slots
    out = []
    for side in SIDES:
        foot, thigh, shin = (sided(p, side) for p in ("foot", "thigh", "shin"))
        if foot in binding.framed and all(s in tgt for s in (thigh, shin, foot)):
            out.append((foot, Leg(tgt[thigh], tgt[shin], tgt[foot])))
    return out


def framed_slot_names() -> tuple[str, ...]:
    return tuple(CANONICAL_AXES)
