"""Per-bone choice of retarget method (docs/methods.md#choosing-the-method-per-bone), and the one call that retargets a clip with it.

A method table maps humanoid slots to one of:

* ``GEOMETRIC`` -- geometric frames (:mod:`core.retarget.geometric`), the default for every slot;
* ``REST_SPACE`` -- rest-space carry (:mod:`core.retarget.rest_space`), for rigs that share joint axes;
* ``LOCAL_CURL`` -- fingers only: each finger segment keeps, relative to the slot above it (the
  hand for a first segment, the previous segment otherwise), the orientation the source segment
  has relative to *its* slot above, both read in the bones' geometric frames. Curl and spread
  therefore carry over whatever the hands themselves do and whatever the two rigs' finger rolls.

:func:`combine_methods` merges the two methods' results bone by bone in one walk over the target
(parents first): a bone driven by ``GEOMETRIC`` or ``REST_SPACE`` keeps the skeleton-space
orientation its method gave it, converted into a local rotation through its parent's *current*
(combined) placement, so mixing methods never bends a bone away from its method's answer; a
``LOCAL_CURL`` bone is placed relative to its combined reference bone. A bone no slot names moves
with the method of the nearest mapped bone above it (the hips' method for bones above the hips);
bones its method leaves undriven (coverage 0) keep that method's keys, the identity. The hips'
method decides root travel.

:func:`retarget_with_methods` is the runtime's entry: native binding when the clip already is the
target's (no conversion, keys unchanged), otherwise cached bindings and the table.

Conventions of :mod:`core.rig.rotations` (w-first quaternions, column vectors); skeleton space.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ClipError, MappingError
from ..mapping.humanoid import SLOT_PARENT
from ..mapping.method_names import (
    GEOMETRIC,
    LOCAL_CURL,
    REST_SPACE,
    check_method_table,
    method_name,
)
from ..rig.clip import Clip
from ..rig.rotations import FloatArray, make_quat_continuous, matrix_from_quat, quat_from_matrix
from .binding_cache import BindingCache, native_binding
from .geometric import Binding, RetargetOptions, RetargetResult, RigInput, plant_feet, retarget
from .rest_space import RestSpaceBinding, RestSpaceResult, retarget_rest_space


def needs_rest_space(methods: Mapping[str, str]) -> bool:
    return any(method_name(m) != GEOMETRIC for m in methods.values())


@dataclass(frozen=True)
class CombinedResult:
    result: RetargetResult  # the merged clip; its binding is the geometric one (for measurements)
    bone_methods: tuple[str, ...]  # (Bt,) method that placed each target bone
    warnings: tuple[str, ...]


def _reference_slot(slot: str, framed: tuple[str, ...]) -> str | None:
    p = SLOT_PARENT[slot]
    while p is not None and p not in framed:
        p = SLOT_PARENT[p]
    return p


def combine_methods(geometric: RetargetResult, rest_space: RestSpaceResult, methods: Mapping[str, str]) -> CombinedResult:
    """Merge the geometric-frame and rest-space results of one clip bone by bone (module doc)."""
    table = check_method_table(methods)
    gb, rb = geometric.binding, rest_space.binding
    tgt = gb.target
    sk = tgt.skeleton
    if sk.names != rb.target.skeleton.names or sk.signature() != rb.target.skeleton.signature():
        raise MappingError("the two results were made for different target rigs")
    if gb.source.skeleton.signature() != rb.source.skeleton.signature():
        raise MappingError("the two results were made from different source rigs")
    t = geometric.clip.frame_count
    if rest_space.clip.frame_count != t:
        raise ClipError(f"the two results have {t} and {rest_space.clip.frame_count} frames; they are not of one clip")
    n = len(sk)
    assert geometric.clip.coverage is not None and rest_space.clip.coverage is not None
    warnings: list[str] = []

    # The method of every target bone.
    bone_slot = {**rb.target.bone_slots, **tgt.bone_slots}
    hips_method = table.get("hips", GEOMETRIC)
    method = [GEOMETRIC] * n
    for i in tgt.order:
        slot = bone_slot.get(i)
        if slot is not None:
            m = table.get(slot, GEOMETRIC)
            if m == LOCAL_CURL and (slot not in gb.framed or _reference_slot(slot, gb.framed) is None):
                warnings.append(f"{slot}: no geometric frame on both rigs for local curl; used geometric frames")
                m = GEOMETRIC
        else:
            a = int(tgt.anatomical_parents[i])
            m = hips_method if a < 0 else method[a]
            # Bones under a curled finger segment follow it as the geometric result has them.
            m = GEOMETRIC if m == LOCAL_CURL else m
        method[i] = m

    results = {GEOMETRIC: geometric.clip, REST_SPACE: rest_space.clip}
    world = {m: sk.forward_kinematics(c.rotations, c.translations) for m, c in results.items()}
    local_r = {m: matrix_from_quat(c.rotations) for m, c in results.items()}

    # Local curl: each source segment's geometric frame relative to its reference slot's frame.
    curl: dict[int, tuple[int, FloatArray, FloatArray]] = {}  # target bone -> (ref bone, Gt_ref, rel @ Gt^T)
    qs = rest_space.source_rotations
    for i in range(n):
        if method[i] != LOCAL_CURL:
            continue
        slot = bone_slot[i]
        ref = _reference_slot(slot, gb.framed)
        assert ref is not None
        gs = gb.carried[slot]
        gs_ref = gb.carried[ref]
        gt = _target_frame(gb, slot)
        gt_ref = _target_frame(gb, ref)
        frame_s = qs[:, gb.source.slots[slot]] @ gs
        frame_ref = qs[:, gb.source.slots[ref]] @ gs_ref
        rel = np.swapaxes(frame_ref, -1, -2) @ frame_s
        curl[i] = (tgt.slots[ref], gt_ref, rel @ gt.T)

    c0_r, c0_t = sk.parent_frames[:, :3, :3], sk.parent_frames[:, :3, 3]
    c1_r = np.broadcast_to(np.eye(3), (n, 3, 3)) if sk.child_frames is None else sk.child_frames[:, :3, :3]
    c1_t = np.zeros((n, 3)) if sk.child_frames is None else sk.child_frames[:, :3, 3]
    rest_rel = np.linalg.inv(tgt.rest[tgt.anatomical_parents.clip(0)]) @ tgt.rest
    hips = tgt.slots["hips"]
    w_r = np.empty((t, n, 3, 3))
    w_p = np.empty((t, n, 3))
    loc_r = np.empty((t, n, 3, 3))
    loc_t = np.empty((t, n, 3))
    coverage = np.zeros(n)
    for i in tgt.order:
        m = method[i]
        src = REST_SPACE if m == LOCAL_CURL else m
        clip = results[src]
        assert clip.coverage is not None
        coverage[i] = clip.coverage[i]
        p = int(sk.parents[i])
        a_r = np.broadcast_to(c0_r[i], (t, 3, 3)) if p < 0 else w_r[:, p] @ c0_r[i]
        a_p = np.broadcast_to(c0_t[i], (t, 3)) if p < 0 else w_r[:, p] @ c0_t[i] + w_p[:, p]
        if coverage[i] <= 0.0:
            # Undriven by its method: its keys (the identity) stay, it follows its parent.
            loc_r[:, i] = local_r[src][:, i]
            loc_t[:, i] = clip.translations[:, i]
            w_r[:, i] = a_r @ loc_r[:, i] @ c1_r[i].T
            w_p[:, i] = a_p + np.einsum("tij,tj->ti", a_r, loc_t[:, i]) - w_r[:, i] @ c1_t[i]
            continue
        if m == LOCAL_CURL:
            ref_bone, gt_ref, rel_gt = curl[i]
            q = w_r[:, ref_bone] @ gt_ref @ rel_gt
        else:
            q = world[src][:, i, :3, :3]
        if i == hips:
            pos = world[src][:, i, :3, 3]
        elif i in tgt.detached:
            a = int(tgt.anatomical_parents[i])
            pos = w_r[:, a] @ rest_rel[i, :3, 3] + w_p[:, a]
        else:
            pos = a_p + np.einsum("tij,tj->ti", a_r, clip.translations[:, i]) - q @ c1_t[i]
        loc_r[:, i] = np.swapaxes(a_r, -1, -2) @ q @ c1_r[i]
        loc_t[:, i] = np.einsum("tji,tj->ti", a_r, q @ c1_t[i] + pos - a_p)
        w_r[:, i] = q
        w_p[:, i] = pos

    root_motion = rest_space.root_motion if hips_method == REST_SPACE else geometric.root_motion
    out = replace(
        geometric.clip,
        rotations=make_quat_continuous(quat_from_matrix(loc_r), axis=0),
        translations=loc_t,
        coverage=coverage,
    )
    merged = RetargetResult(clip=out, root_motion=root_motion, binding=gb)
    return CombinedResult(merged, tuple(method), tuple(warnings))


def _target_frame(binding: Binding, slot: str) -> FloatArray:
    """Bone-local geometric frame of a target slot (its canonical frame seen from the bone)."""
    bone = binding.target.slots[slot]
    frame = binding.target_frames_inv[slot].T
    return np.asarray(binding.target_canonical_rot[bone].T @ frame, dtype=np.float64)


@dataclass(frozen=True)
class MethodOutcome:
    result: RetargetResult
    native: bool
    methods: dict[str, str]  # the validated table (empty: geometric frames everywhere)
    rest_space: RestSpaceBinding | None
    warnings: tuple[str, ...]


def retarget_with_methods(
    cache: BindingCache,
    source: RigInput,
    target: RigInput,
    clip: Clip,
    methods: Mapping[str, str] | None = None,
    options: RetargetOptions | None = None,
    *,
    match_rest: bool = False,
    translate: bool = True,
    allow_native: bool = True,
) -> MethodOutcome:
    """Retarget ``clip`` (played by ``source``) onto ``target``.

    A clip native to the target is bound as it is (its keys unchanged). Otherwise the bindings
    come from ``cache``; slots the table leaves out use geometric frames, and a table that names
    no other method gives exactly the geometric-frame result.
    """
    table = check_method_table(methods)
    geometric_binding = cache.geometric(source, target, options)  # measurements always use it
    native = native_binding(clip, source.skeleton, target.skeleton, options) if allow_native else None
    if native is not None:
        keys = native.apply(clip.validate())
        result = RetargetResult(clip=keys, root_motion=np.zeros((clip.frame_count, 3)), binding=geometric_binding)
        return MethodOutcome(result, True, table, None, ())
    if not needs_rest_space(table):
        return MethodOutcome(retarget(geometric_binding, clip), False, table, None, geometric_binding.warnings)
    # Feet are planted on the merged result: the hips and legs may come from either method.
    geometric_result = retarget(geometric_binding, clip, plant=False)
    rs_binding = cache.rest_space(source, target, options, match_rest=match_rest, translate=translate)
    combined = combine_methods(geometric_result, retarget_rest_space(rs_binding, clip), table)
    result = combined.result
    if geometric_binding.options.plant_feet:
        result = plant_feet(geometric_binding, clip, result)
    warnings = tuple(dict.fromkeys(geometric_binding.warnings + rs_binding.warnings + combined.warnings))
    return MethodOutcome(result, False, table, rs_binding, warnings)
