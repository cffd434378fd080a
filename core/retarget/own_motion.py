"""Mapped bones keep their own rotation; bones in between take the rest of the bend (docs/pipeline.md#transfer).

A framed slot's motion is its source bone's rotation re-aimed at the measured segment (see
:mod:`core.retarget.geometric`). Where the source segment runs through bones of its own (a hand whose
segment reaches the index finger through a finger-base bone, a neck of two bones mapped as one
slot), that re-aim is the bend of those bones, not the slot bone's: giving it to the slot bone
turns the bone away from its own rotation. Here:

* a slot whose target segment also runs through bones in between keeps the source bone's *own*
  rotation (carried through the canonical frames, so roll never enters), and the bones in between
  turn, rigidly about their first joint, just enough for the segment's end to lie exactly along
  the measured direction: the bone's rotation and the segment direction are both exact;
* a slot whose segment crosses another framed slot starting at its head, on either rig (a
  zero-length upper chest at the neck's base), keeps its own rotation: the framed slot below aims
  the segment, and the bends below it are not the slot's;
* a hand keeps its own rotation relative to its forearm, twist included, even where the target has
  no bone in between to take the bend: a palm bone only the source has (a BVH's finger base) is
  not carried, as it is not where the target maps no fingers (the hand's segment is then its own);
* toes keep their bend relative to the foot when both rigs map them, and so does every other
  mapped bone outside the frames that both rigs share (eyes, jaw, twist bones): the source bone's
  rotation relative to the framed bone it moves with, both counted from their canonical
  orientations, is carried to the target's bone relative to the target's framed bone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..rig.rotations import FloatArray, matrix_between_vectors
from .canonical_pose import RigAnatomy

#: A target run that takes the bend: (index into the own slots, bones in between, the slot bone's
#: head to the first bone in between, from there to the segment's end, the unit segment; vectors
#: in the target's canonical pose).
Run = tuple[int, NDArray[np.int64], FloatArray, FloatArray, FloatArray]
#: A bone carried relative to its framed owner: (target bone, target owner, source owner row, source
#: bone row, A_owner, A_bone) with ``A = canonical_orientation^T @ align^T`` of each source bone.
Carried = tuple[int, int, int, int, FloatArray, FloatArray]


@dataclass(frozen=True)
class OwnTables:
    own_slots: NDArray[np.int64]  # (S,) framed-slot indices whose target bone keeps its own rotation
    runs: tuple[Run, ...]
    carried: tuple[Carried, ...]  # toes, eyes, jaw, twist bones: parents first


def _path_between(anatomy: RigAnatomy, top: int, end: int) -> list[int] | None:
    """Bones strictly between ``top`` and ``end`` in the skeleton, parents first, or None when
    ``end`` does not hang below ``top``."""
    above = anatomy.skeleton.ancestors(end)
    return above[: above.index(top)][::-1] if top in above else None


def _reached_through(anatomy: RigAnatomy, slot: str) -> bool:
    """Whether a point of the slot's segment end (a hand's finger bases) hangs from the slot bone
    through bones in between."""
    points = anatomy.segment_end[slot]
    b = anatomy.slots[slot]
    return any(_path_between(anatomy, b, int(p)) for p, _ in points if p != b)


def _single_end(anatomy: RigAnatomy, slot: str) -> int | None:
    end = anatomy.segment_end.get(slot, ())
    if len(end) != 1 or end[0][1].any():
        return None
    return int(end[0][0])


def own_tables(
    source: RigAnatomy,
    target: RigAnatomy,
    framed: tuple[str, ...],
    target_placements: FloatArray,
    source_canonical_rot: FloatArray,
    align: FloatArray,
    source_row: NDArray[np.int64],
) -> OwnTables:
    """Which framed slots keep their bone's own rotation, the target runs that take the bend, and
    the toes carried (see module doc). ``target_placements`` is the target's canonical pose,
    ``source_canonical_rot`` the source bones' canonical orientations, ``source_row`` the row of
    each source bone among those the retarget reads."""
    framed_bones = {target.slots[s] for s in framed}
    source_framed = {source.slots[s] for s in framed}
    own: list[int] = []
    runs: list[Run] = []
    heads = target_placements[:, :3, 3]
    for k, slot in enumerate(framed):
        e_s, e_t = _single_end(source, slot), _single_end(target, slot)
        src_path = None if e_s is None else _path_between(source, source.slots[slot], e_s)
        bends = bool(src_path)  # the source segment runs through bones of its own
        tgt_path = None if e_t is None else _path_between(target, target.slots[slot], e_t)
        if (tgt_path and any(b in framed_bones for b in tgt_path)) or (src_path and any(b in source_framed for b in src_path)):
            # A zero-length slot bone at the head of the next framed one (CMU's Spine1 at the
            # neck's base): its segment is the next slot's, which aims it; the bone itself keeps
            # its own rotation rather than the bends of the bones below it.
            own.append(k)
            continue
        if bends and tgt_path and e_t is not None:
            b = target.slots[slot]
            first = tgt_path[0]
            a = heads[first] - heads[b]
            w = heads[e_t] - heads[first]
            seg = heads[e_t] - heads[b]
            length = float(np.linalg.norm(seg))
            if length > 0.0 and float(np.linalg.norm(w)) > 0.05 * length:
                runs.append((len(own), np.array(tgt_path, dtype=np.int64), a, w, seg / length))
                own.append(k)
                continue
        if slot.startswith("hand.") and _reached_through(source, slot):
            own.append(k)  # the wrist's own rotation, whatever palm bones either rig has
    in_runs = {int(b) for r in runs for b in r[1]}
    carried: list[Carried] = []
    for _, fs, ts, ft, tt in carried_pairs(source, target, framed):
        if tt in in_runs:
            continue  # it takes the bend of its run, which keeps the segment's direction
        a_f = source_canonical_rot[fs].T @ align.T
        a_t = source_canonical_rot[ts].T @ align.T
        carried.append((tt, ft, int(source_row[fs]), int(source_row[ts]), a_f, a_t))
    return OwnTables(np.array(own, dtype=np.int64), tuple(runs), tuple(carried))


def carried_pairs(source: RigAnatomy, target: RigAnatomy, framed: tuple[str, ...]) -> list[tuple[str, int, int, int, int]]:
    """Mapped slots of both rigs outside the frames whose bones move with the same framed slot on
    both sides, parents first: ``(slot, source owner, source bone, target owner, target bone)``."""
    framed_set = set(framed)
    src_slot = source.bone_slots
    tgt_slot = target.bone_slots
    rank = {b: k for k, b in enumerate(target.order)}
    out = []
    for slot, tb in target.slots.items():
        sb = source.slots.get(slot)
        if sb is None or slot in framed_set:
            continue
        so, to = int(source.owner[sb]), int(target.owner[tb])
        if so < 0 or to < 0 or so == sb or to == tb or src_slot.get(so) != tgt_slot.get(to) or src_slot.get(so) not in framed_set:
            continue
        out.append((slot, so, sb, to, tb))
    return sorted(out, key=lambda r: rank[r[4]])


def carried_bends(source_linear: FloatArray, carried: tuple[Carried, ...]) -> FloatArray:
    """Each carried bone's rotation relative to its framed owner ``(J, t, 3, 3)``, from the source's
    bone-major linear parts ``(S, t, 3, 3)`` (already turned by the alignment or not: a common
    turn cancels)."""
    if not carried:
        return np.zeros((0,) + source_linear.shape[1:])
    out = []
    for _, _, foot_row, toe_row, a_f, a_t in carried:
        q_f = source_linear[foot_row]
        q_t = source_linear[toe_row]
        out.append(a_f.T @ np.swapaxes(q_f, -1, -2) @ q_t @ a_t)
    return np.stack(out)


def keep_own(motion: FloatArray, own: FloatArray, tables: OwnTables) -> FloatArray:
    """Put each own slot's own motion into ``motion`` ``(K, t, 3, 3)`` (in place) and return the
    re-aimed motions it replaced ``(S, t, 3, 3)``: the directions the runs must reach."""
    aimed = motion[tables.own_slots].copy()
    motion[tables.own_slots] = own
    return aimed


def bend_runs(motion: FloatArray, aimed: FloatArray, tables: OwnTables, canonical_rot: FloatArray, w_r: FloatArray) -> None:
    """Turn each run's bones (``w_r`` ``(Bt, t, 3, 3)``, bone-major) about the run's first joint
    so the segment's end lies along the re-aimed direction, at its own distance from that joint."""
    for s, chain, a, w, x in tables.runs:
        m = motion[int(tables.own_slots[s])]
        d = aimed[s] @ x  # (t, 3) the direction the segment must take
        av = m @ a
        w0 = m @ w
        ad = np.einsum("ti,ti->t", av, d)
        disc = np.maximum(ad * ad - float(a @ a) + float(w @ w), 0.0)
        reach = ad + np.sqrt(disc)
        turn = matrix_between_vectors(w0, reach[:, None] * d - av)
        w_r[chain] = (turn @ m)[None] @ canonical_rot[chain][:, None]


def bend_carried(bends: FloatArray, tables: OwnTables, canonical_rot: FloatArray, w_r: FloatArray) -> None:
    """Give each carried bone (toes, ...) its turn relative to its framed owner (the foot, ...),
    as the owner now stands."""
    for j, (toe, foot, _, _, _, _) in enumerate(tables.carried):
        foot_motion = w_r[foot] @ canonical_rot[foot].T
        w_r[toe] = foot_motion @ bends[j] @ canonical_rot[toe]
