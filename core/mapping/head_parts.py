"""Eyes and jaw under the head (docs/mapping.md): named bones first; without names, the body's geometry.

The eyes are the one pair of bones in the head's subtree whose heads sit either side of the
midline, mirror images of each other, above the head joint and looking forward (sitting ahead of
the head's axis or pointing ahead); where a face rig's brows, lids and cheeks pair up as well,
the eyes are the one pair that starts ahead of the head's axis and runs straight forward. The jaw
is the shallowest bone on the midline under the head that starts below the eyes and runs forward
or down. Where the geometry still offers more than one answer, nothing is guessed.

Plain numpy on the mapper's rig; no Blender.
"""

from __future__ import annotations

import numpy as np

from ..rig.rotations import FloatArray
from .humanoid import sided
from .limb_ends import COINCIDENT, RigLike, unit


def face_slots(rig: RigLike, head: int, left_dir: FloatArray, up: FloatArray) -> list[tuple[str, int, str]]:
    """(slot, bone, reason) for ``jaw``, ``eye.L`` and ``eye.R`` under ``head``: names first, the
    geometry for what the names leave open."""
    if head < 0:
        return []
    out: list[tuple[str, int, str]] = []
    sub = rig.subtree(head)[1:]
    jaws = [b for b in sub if "jaw" in rig.hints[b].parts]
    if jaws:
        out.append(("jaw", min(jaws, key=lambda b: int(rig.depth[b])), "jaw bone named so, under the head"))
    named_eyes = False
    for b in sub:
        if "eye" not in rig.hints[b].parts:
            continue
        offset = float((rig.heads[b] - rig.heads[head]) @ left_dir)
        if abs(offset) < COINCIDENT * rig.size:
            continue
        named_eyes = True
        out.append((sided("eye", "L" if offset > 0 else "R"), b, "eye bone named so, on that side of the head"))
    forward = unit(np.cross(left_dir, up))
    slots = {slot: b for slot, b, _ in out}
    if named_eyes:
        eyes = (slots["eye.L"], slots["eye.R"]) if "eye.L" in slots and "eye.R" in slots else None
    else:
        eyes = _eye_pair(rig, head, sub, left_dir, up, forward)
        if eyes is not None:
            why = "structure: the pair of bones either side of the head's midline, looking forward"
            out += [("eye.L", eyes[0], why), ("eye.R", eyes[1], why)]
    if eyes is not None and not jaws:
        jaw = _jaw(rig, head, sub, eyes, left_dir, up, forward)
        if jaw >= 0:
            out.append(("jaw", jaw, "structure: bone on the head's midline starting below the eyes, running forward"))
    return out


def _eye_pair(
    rig: RigLike, head: int, sub: list[int], left_dir: FloatArray, up: FloatArray, forward: FloatArray
) -> tuple[int, int] | None:
    base = rig.heads[head]
    tol = COINCIDENT * rig.size
    pairs = []
    for i, a in enumerate(sub):
        for b in sub[i + 1 :]:
            da, db = rig.heads[a] - base, rig.heads[b] - base
            la, lb = float(da @ left_dir), float(db @ left_dir)
            if la * lb >= 0.0 or min(abs(la), abs(lb)) <= tol:
                continue
            apart = abs(la - lb)
            mirror = da - 2.0 * la * left_dir - db
            if float(np.linalg.norm(mirror)) > 0.1 * apart:
                continue
            if float(da @ up) <= 0.0:
                continue  # eyes sit above the neck's top
            looks = max(float(da @ forward), float((rig.ends[a] - rig.heads[a]) @ forward))
            if looks <= 0.0:
                continue
            pairs.append((a, b) if la > 0 else (b, a))
    if len(pairs) > 1:
        # A face rig's brows, lids, cheeks and nostrils pair up too; of them only the eyes look
        # straight ahead: both bones start in front of the head's axis and run forward, neither
        # turned toward nor away from the midline (a lid or brow chain curls across the face).
        pairs = [p for p in pairs if all(_looks_ahead(rig, base, k, left_dir, forward) for k in p)]
    return pairs[0] if len(pairs) == 1 else None


def _looks_ahead(rig: RigLike, base: FloatArray, bone: int, left_dir: FloatArray, forward: FloatArray) -> bool:
    v = rig.ends[bone] - rig.heads[bone]
    if float(np.linalg.norm(v)) <= COINCIDENT * rig.size or float((rig.heads[bone] - base) @ forward) <= 0.0:
        return False
    v = unit(v)
    return float(v @ forward) >= 0.9 and abs(float(v @ left_dir)) <= 0.25


def _jaw(
    rig: RigLike,
    head: int,
    sub: list[int],
    eyes: tuple[int, int],
    left_dir: FloatArray,
    up: FloatArray,
    forward: FloatArray,
) -> int:
    base = rig.heads[head]
    apart = abs(float((rig.heads[eyes[0]] - rig.heads[eyes[1]]) @ left_dir))
    eye_height = float((0.5 * (rig.heads[eyes[0]] + rig.heads[eyes[1]]) - base) @ up)
    cands = []
    for b in sub:
        if b in eyes:
            continue
        d = rig.heads[b] - base
        if abs(float(d @ left_dir)) > 0.1 * apart or float(d @ up) >= eye_height:
            continue
        v = rig.ends[b] - rig.heads[b]
        if float(np.linalg.norm(v)) <= COINCIDENT * rig.size or float(unit(v) @ forward) < 0.3:
            continue
        cands.append(b)
    if not cands:
        return -1
    shallow = min(int(rig.depth[b]) for b in cands)
    top = [b for b in cands if int(rig.depth[b]) == shallow]
    return top[0] if len(top) == 1 else -1
